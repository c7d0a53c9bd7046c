#!/usr/bin/env python3
"""Runtime benchmark: fxcpp's LibTorch runtime against ATen, TorchScript, Static
Runtime, torch.fx and eager PyTorch, all in one run on the same inputs.

Builds its models and files in a temporary directory, runs the C++ half
(build/fxcpp_runtime_bench, bench/runtime_bench.cpp) on them, runs the
Python-side variants, and prints one line per measurement (the protocol
bench/run.py collects):

    BENCH,runtime,<case>,<size>,<value>,<reference>,<unit>

`value` is the variant's figure and `reference` the figure it is compared with,
measured in the same run (ratio = value / reference). Cases:

  chain/<variant>     1,000-op chain (add, mul, relu cycling on 1x8 float
                      tensors), us per op; reference: direct at:: calls from C++
      fxcpp_cpp          fxcpp::torch::load + Module::forward (C++)
      fxcpp_py           fxcpp.aten.load(path, runtime='cpp') called from Python
      at_direct          at::add / at::mul / at::relu in a C++ loop
      at_out             at::add_out / mul_out / clamp_min_out into two reused buffers
      torchscript_cpp    torch.jit.trace'd chain, torch::jit::load + forward (C++)
      torchscript_py     the same file, torch.jit.load, from Python
      static_runtime_py  torch._C._jit_to_static_module(torch.jit.freeze(traced)._c)
                         (skipped, with a NOTE line, on a torch without Static Runtime)
      torchfx_gm_py      torch.fx.symbolic_trace(chain) GraphModule
      eager_py           the Python loop itself
  chain/fxcpp_py_vs_torchfx_gm   fxcpp_py against torchfx_gm_py
  <model>/<variant>   torchvision <model> (resnet50; --quick: resnet18), batch 1,
                      224x224, ms per forward; reference: eager_py. fxcpp runs a
                      make_fx graph of the model in eval mode saved with
                      fxcpp.aten.save (fxcpp_py, fxcpp_cpp); torchscript_cpp and
                      torchscript_py run the traced model; static_runtime_py the
                      frozen traced model; torchfx_gm_py torch.fx.symbolic_trace
                      of the model
  <model>_threads/<runtime>_<n>t  inferences per second with n Python threads
                      calling one module (one intra-op thread each);
                      reference: the same with one thread
  <model>_load/<variant>  ms to load the file from C++ (from the page cache):
                      fxcpp::torch::load of the .fxpt, torch::jit::load of the
                      traced TorchScript file; reference: torchscript_load
  <model>_file/<variant>  file size in bytes; reference: the bytes of the
                      model's parameters and buffers
  capture_<module>/<variant>  capture from C++ (build/fxcpp_capture_bench,
                      bench/capture_bench.cpp), us per captured op, on the same
                      torch::nn module: cnn (conv-bn-relu x2, pool, conv, linear
                      on 1x3x32x32) and chain (1,000 add/mul/relu on 1x8);
                      reference: jit_tracer
      fxcpp_trace        fxcpp::torch::trace(module, inputs) (dispatcher mode)
      jit_tracer         torch::jit::tracer::trace of the module's forward
      eager              module->forward alone (what both captures also run)
      fxcpp_overhead     fxcpp_trace - eager; reference: jit_tracer - eager
  (The capture cases run under NoGradGuard, not inference mode: the JIT tracer
  does not trace inference tensors.)

What the torch running this lacks (Static Runtime, TorchScript) is skipped and
said in a line `NOTE,runtime,<text>` (bench/run.py puts it in BENCHMARKS.md).
The C++ binaries come from $FXCPP_BUILD_DIR (default build/), which must be
built against the LibTorch of the torch running this script.

Everything runs with one intra-op thread and under inference mode (fxcpp's
forward always does; the other variants get torch.inference_mode() /
c10::InferenceMode so none pays for autograd bookkeeping another skips).
Times are the best of several repetitions after a warm-up call, with the
garbage collector paused. Nothing here asserts on timings.
"""
import argparse
import gc
import os
import subprocess
import sys
import tempfile
import threading
import time
import warnings

os.environ.setdefault("GLOG_minloglevel", "2")  # Static Runtime logs its options at INFO

import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx

# torch 2.x deprecates TorchScript (torch.jit.*: FutureWarning on every call); jit_trace says so
# once in a NOTE line instead.
warnings.filterwarnings("ignore", category=FutureWarning, module=r"torch\.jit")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
try:
    import fxcpp
except ImportError:  # run from a checkout without PYTHONPATH
    sys.path.insert(0, os.path.join(REPO, "build", "pkg"))
    import fxcpp
if not os.path.exists(os.path.join(os.path.dirname(fxcpp.__file__), "aten", "_lower.py")):
    # fxcpp.aten imports lower() from _lower; this benchmark needs only save/load.
    import types
    _stub = types.ModuleType("fxcpp.aten._lower")
    for _n in ("LoweringError", "check_lowered", "lower", "register_lowering"):
        setattr(_stub, _n, None)
    sys.modules["fxcpp.aten._lower"] = _stub
import fxcpp.aten  # noqa: E402

SUITE = "runtime"
BUILD_DIR = os.environ.get("FXCPP_BUILD_DIR") or os.path.join(REPO, "build")
CPP_BENCH = os.path.join(BUILD_DIR, "fxcpp_runtime_bench")
CAPTURE_BENCH = os.path.join(BUILD_DIR, "fxcpp_capture_bench")
CHAIN_OPS = 1000

MODES = {
    #         chain calls     model            model calls     threads: calls/thread, reps   load reps
    "quick": dict(chain_iters=50, chain_reps=5, model="resnet18", model_iters=1, model_reps=4,
                  thread_calls=4, thread_reps=2, load_reps=3, capture_iters=12, capture_reps=3),
    "full": dict(chain_iters=100, chain_reps=7, model="resnet50", model_iters=1, model_reps=4,
                 thread_calls=3, thread_reps=3, load_reps=3, capture_iters=40, capture_reps=7),
}


def emit(case, size, value, ref, unit):
    def f(v):
        return "skip" if v is None else f"{v:.6g}"
    print(f"BENCH,{SUITE},{case},{size},{f(value)},{f(ref)},{unit}", flush=True)


def best_of(fn, reps, iters):
    """Best seconds per call over reps x iters calls, after one warm-up call."""
    fn()
    gc_was = gc.isenabled()
    gc.disable()
    try:
        best = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            best = min(best, (time.perf_counter() - t0) / iters)
        return best
    finally:
        if gc_was:
            gc.enable()


def under_inference(fn):
    def run():
        with torch.inference_mode():
            return fn()
    return run


def max_diff(got, expect):
    return float((got - expect).abs().max()) if got.shape == expect.shape else float("inf")


class Chain(torch.nn.Module):
    """add(x, y), mul(x, y), relu(x), cycling, CHAIN_OPS ops in all."""

    def forward(self, x, y):
        for i in range(CHAIN_OPS):
            k = i % 3
            if k == 0:
                x = torch.add(x, y)
            elif k == 1:
                x = torch.mul(x, y)
            else:
                x = torch.relu(x)
        return x


def save_fxpt(module, inputs, path):
    with torch.no_grad():
        gm = make_fx(module)(*inputs)
    fxcpp.aten.save(fxcpp.from_torch_fx(gm), path)


_NOTED = set()


def note(text):
    """A NOTE line for the report (once per text)."""
    if text not in _NOTED:
        _NOTED.add(text)
        print(f"NOTE,{SUITE},{text}", flush=True)


def static_module(traced):
    """Static Runtime on the frozen traced module (called like the module: sm(*args)), or None
    with a NOTE where this torch has no Static Runtime or it fails on the module."""
    to_static = getattr(torch._C, "_jit_to_static_module", None)
    if to_static is None or traced is None:
        note(f"torch {torch.__version__} has no Static Runtime (torch._C._jit_to_static_module): "
             "static_runtime_py skipped" if to_static is None else "static_runtime_py skipped: no traced module")
        return None
    try:
        return to_static(torch.jit.freeze(traced.eval())._c)
    except Exception as e:  # noqa: BLE001 -- a variant that cannot run is skipped, not fatal
        note(f"Static Runtime failed on torch {torch.__version__}: {type(e).__name__}: "
             f"{str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}; static_runtime_py skipped")
        return None


def jit_trace(model, inputs, path):
    """torch.jit.trace(model), saved to path; None (and a NOTE) where TorchScript is unavailable."""
    try:
        with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            traced = torch.jit.trace(model, inputs)
        torch.jit.save(traced, path)
        for w in caught:
            if issubclass(w.category, (FutureWarning, DeprecationWarning)) and "deprecated" in str(w.message):
                note(f"torch {torch.__version__} deprecates TorchScript (torch.jit.trace: "
                     f"\"{str(w.message).strip().splitlines()[0][:160]}\"); measured anyway")
                break
        return traced
    except Exception as e:  # noqa: BLE001
        note(f"TorchScript (torch.jit.trace / save) failed on torch {torch.__version__}: {type(e).__name__}: "
             f"{str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}; torchscript variants skipped")
        return None


def fx_trace(model):
    """torch.fx.symbolic_trace(model), or None (and a NOTE) where torch.fx cannot trace it."""
    try:
        return torch.fx.symbolic_trace(model)
    except Exception as e:  # noqa: BLE001
        note(f"torch.fx {torch.__version__} symbolic_trace failed on {type(model).__name__}: {type(e).__name__}; "
             "torchfx_gm_py skipped")
        return None


def measure(py, expect, checks, reps, iters, scale):
    """{variant: best seconds per call * scale} for the variants of py whose callable is not None;
    checks[variant] gets each one's max difference from expect."""
    out = {}
    for name, fn in py.items():
        if fn is None:
            continue
        fn = under_inference(fn)
        checks[name] = max_diff(fn(), expect)
        out[name] = best_of(fn, reps, iters) * scale
    return out


def run_cpp(args, timeout):
    """Runs build/fxcpp_runtime_bench; {variant: (value, unit)}, {variant: max diff}."""
    if not os.path.exists(CPP_BENCH):
        print(f"{CPP_BENCH} not found (cmake --build <build dir> --target fxcpp_runtime_bench; FXCPP_BUILD_DIR "
              "picks the build dir): C++ variants skipped", flush=True)
        return {}, {}
    proc = subprocess.run([CPP_BENCH] + args, capture_output=True, text=True, timeout=timeout)
    results, checks = {}, {}
    for line in proc.stdout.splitlines():
        parts = line.split(",")
        if parts[0] == "RESULT" and len(parts) == 4:
            results[parts[1]] = (float(parts[2]), parts[3])
        elif parts[0] == "CHECK" and len(parts) == 3:
            checks[parts[1]] = float(parts[2])
    if proc.returncode != 0:
        print(f"fxcpp_runtime_bench {args[0]} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}", flush=True)
    return results, checks


def report_checks(label, checks, tol):
    for variant, d in checks.items():
        ok = 0 <= d <= tol
        print(f"check {label}/{variant}: max |difference| from eager {d:.3g}" + ("" if ok else "  << MISMATCH"),
              flush=True)


# ------------------------------------------------------------------------------------
# 1. Overhead-bound: the op chain
# ------------------------------------------------------------------------------------

def bench_chain(tmp, cfg):
    torch.manual_seed(0)
    x, y = torch.randn(1, 8), torch.rand(1, 8)
    model = Chain()
    expect = model(x, y)
    files = {k: os.path.join(tmp, f"chain_{k}") for k in ("x.bin", "y.bin", "out.bin")}
    x.numpy().tofile(files["x.bin"])
    y.numpy().tofile(files["y.bin"])
    expect.numpy().tofile(files["out.bin"])
    fxpt, pt = os.path.join(tmp, "chain.fxpt"), os.path.join(tmp, "chain.pt")
    save_fxpt(model, (x, y), fxpt)
    traced = jit_trace(model, (x, y), pt)

    cpp, checks = run_cpp(["chain", "--fxpt", fxpt, "--ts", pt, "--inputs", f"{files['x.bin']},{files['y.bin']}",
                           "--shape", "1,8", "--expect", files["out.bin"], "--ops", str(CHAIN_OPS),
                           "--iters", str(cfg["chain_iters"]), "--reps", str(cfg["chain_reps"])], timeout=300)
    us = {k: v for k, (v, _unit) in cpp.items()}

    fx_mod = fxcpp.aten.load(fxpt, runtime="cpp", trusted=True)
    ts_mod = torch.jit.load(pt) if traced is not None else None
    sm = static_module(traced)
    gm = fx_trace(model)
    py = {"fxcpp_py": lambda: fx_mod(x, y),
          "torchscript_py": None if ts_mod is None else (lambda: ts_mod(x, y)),
          "static_runtime_py": None if sm is None else (lambda: sm(x, y)),
          "torchfx_gm_py": None if gm is None else (lambda: gm(x, y)),
          "eager_py": lambda: model(x, y)}
    us.update(measure(py, expect, checks, cfg["chain_reps"], cfg["chain_iters"], 1e6 / CHAIN_OPS))
    report_checks("chain", checks, 1e-5)

    ref = us.get("at_direct")
    for name in ("fxcpp_cpp", "fxcpp_py", "at_direct", "at_out", "torchscript_cpp", "torchscript_py",
                 "static_runtime_py", "torchfx_gm_py", "eager_py"):
        emit(f"chain/{name}", CHAIN_OPS, us.get(name), ref, "us/op")
    emit("chain/fxcpp_py_vs_torchfx_gm", CHAIN_OPS, us.get("fxcpp_py"), us.get("torchfx_gm_py"), "us/op")


# ------------------------------------------------------------------------------------
# 2-4. Compute-bound model, two threads, load time and file size
# ------------------------------------------------------------------------------------

def throughput(fn, threads, calls, reps):
    """Best inferences per second with `threads` threads each making `calls` calls
    (the threads start together; the clock stops when the last one ends)."""
    best = 0.0
    for _ in range(reps):
        barrier = threading.Barrier(threads + 1)

        def work():
            with torch.inference_mode():
                barrier.wait()
                for _ in range(calls):
                    fn()

        ts = [threading.Thread(target=work) for _ in range(threads)]
        for t in ts:
            t.start()
        barrier.wait()
        t0 = time.perf_counter()
        for t in ts:
            t.join()
        best = max(best, threads * calls / (time.perf_counter() - t0))
    return best


def bench_model(tmp, cfg):
    import torchvision
    name = cfg["model"]
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)().eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.inference_mode():
        expect = model(x)
    xin, out = os.path.join(tmp, f"{name}_x.bin"), os.path.join(tmp, f"{name}_out.bin")
    x.numpy().tofile(xin)
    expect.numpy().tofile(out)
    fxpt, pt = os.path.join(tmp, f"{name}.fxpt"), os.path.join(tmp, f"{name}.pt")
    save_fxpt(model, (x,), fxpt)
    traced = jit_trace(model, (x,), pt)

    # 2. compute-bound forward
    cpp, checks = run_cpp(["model", "--fxpt", fxpt, "--ts", pt, "--inputs", xin, "--shape", "1,3,224,224",
                           "--expect", out, "--expect-shape", "1,1000", "--iters", str(cfg["model_iters"]),
                           "--reps", str(cfg["model_reps"])], timeout=300)
    ms = {k: v for k, (v, _unit) in cpp.items()}
    fx_mod = fxcpp.aten.load(fxpt, runtime="cpp", trusted=True)
    ts_mod = torch.jit.load(pt) if traced is not None else None
    sm = static_module(traced)
    gm = fx_trace(model)
    py = {"eager_py": lambda: model(x), "fxcpp_py": lambda: fx_mod(x),
          "torchscript_py": None if ts_mod is None else (lambda: ts_mod(x)),
          "static_runtime_py": None if sm is None else (lambda: sm(x)),
          "torchfx_gm_py": None if gm is None else (lambda: gm(x))}
    ms.update(measure(py, expect, checks, cfg["model_reps"], cfg["model_iters"], 1e3))
    report_checks(name, checks, 1e-3)
    for variant in ("eager_py", "fxcpp_py", "fxcpp_cpp", "torchscript_cpp", "torchscript_py", "static_runtime_py",
                    "torchfx_gm_py"):
        emit(f"{name}/{variant}", 1, ms.get(variant), ms.get("eager_py"), "ms")
    sm = ts_mod = gm = None  # frees the other runtimes' modules before the thread runs

    # 3. two Python threads on one module (each thread: one intra-op thread).
    # One and two threads alternate, so background load on this shared
    # machine hits both alike; each keeps its best repetition.
    for runtime, fn in (("fxcpp", lambda: fx_mod(x)), ("eager", lambda: model(x))):
        one = two = 0.0
        load = os.getloadavg()[0]
        for _ in range(cfg["thread_reps"]):
            one = max(one, throughput(fn, 1, 2 * cfg["thread_calls"], 1))
            two = max(two, throughput(fn, 2, cfg["thread_calls"], 1))
        print(f"threads {name}/{runtime}: load average {load:.2f} before, {os.getloadavg()[0]:.2f} after "
              f"(nproc {os.cpu_count()})", flush=True)
        emit(f"{name}_threads/{runtime}_1t", 1, one, one, "inf/s")
        emit(f"{name}_threads/{runtime}_2t", 2, two, one, "inf/s")
    fx_mod = None

    # 4. load time from C++, file sizes
    cpp, _ = run_cpp(["load", "--fxpt", fxpt, "--ts", pt, "--reps", str(cfg["load_reps"])], timeout=300)
    ref = cpp.get("torchscript_load", (None,))[0]
    for variant in ("fxcpp_load", "torchscript_load"):
        emit(f"{name}_load/{variant}", 1, cpp.get(variant, (None,))[0], ref, "ms")
    nbytes = sum(t.numel() * t.element_size() for t in list(model.parameters()) + list(model.buffers()))
    emit(f"{name}_file/fxpt", 1, os.path.getsize(fxpt), nbytes, "B")
    emit(f"{name}_file/torchscript", 1, os.path.getsize(pt), nbytes, "B")


# ------------------------------------------------------------------------------------
# 5. Capture from C++: fxcpp::torch::trace against torch::jit::tracer
# ------------------------------------------------------------------------------------

def bench_capture(cfg):
    if not os.path.exists(CAPTURE_BENCH):
        print(f"{CAPTURE_BENCH} not found (cmake --build <build dir> --target fxcpp_capture_bench; "
              "FXCPP_BUILD_DIR picks the build dir): capture cases skipped", flush=True)
        return
    proc = subprocess.run([CAPTURE_BENCH, "--iters", str(cfg["capture_iters"]), "--reps", str(cfg["capture_reps"]),
                           "--ops", str(CHAIN_OPS)], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        print(f"fxcpp_capture_bench exited {proc.returncode}: {proc.stderr.strip()[-2000:]}", flush=True)
    us, ops, checks = {}, {}, {}
    for line in proc.stdout.splitlines():
        parts = line.split(",")
        if parts[0] == "RESULT" and len(parts) == 4:
            us[parts[1]] = float(parts[2])
        elif parts[0] == "OPS" and len(parts) == 3:
            ops[parts[1]] = int(parts[2])
        elif parts[0] == "CHECK" and len(parts) == 3:
            checks[parts[1]] = float(parts[2])
    report_checks("capture", checks, 1e-4)
    for module in ("cnn", "chain"):
        ours, jit, eager = (us.get(f"{module}/{v}") for v in ("fxcpp_trace", "jit_tracer", "eager"))
        n = ops.get(f"{module}/fxcpp_trace", 0)
        print(f"capture {module}: {n} ops recorded by fxcpp::torch::trace, "
              f"{ops.get(f'{module}/jit_tracer', 0)} aten nodes in the JIT trace", flush=True)
        case = f"capture_{module}"
        emit(f"{case}/fxcpp_trace", n, ours, jit, "us/op")
        emit(f"{case}/jit_tracer", n, jit, jit, "us/op")
        emit(f"{case}/eager", n, eager, jit, "us/op")
        over = (ours - eager, jit - eager) if None not in (ours, jit, eager) else (None, None)
        emit(f"{case}/fxcpp_overhead", n, over[0], over[1], "us/op")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="resnet18, few repetitions (< 30 s)")
    mode.add_argument("--full", action="store_true", help="resnet50 (the default)")
    ap.add_argument("--keep", metavar="DIR", help="write the models and files to DIR and keep them")
    ap.add_argument("--capture-only", action="store_true", help="run the C++ capture cases only")
    args = ap.parse_args(argv)
    cfg = MODES["quick" if args.quick else "full"]
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}; C++ binaries from {BUILD_DIR}", flush=True)
    if args.capture_only:
        bench_capture(cfg)
        return 0
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        tmp, cleanup = args.keep, None
    else:
        cleanup = tempfile.TemporaryDirectory(prefix="fxcpp_runtime_bench.")
        tmp = cleanup.name
    try:
        bench_chain(tmp, cfg)
        bench_model(tmp, cfg)
        bench_capture(cfg)
    finally:
        if cleanup is not None:
            cleanup.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())

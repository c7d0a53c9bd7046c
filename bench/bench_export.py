#!/usr/bin/env python3
"""Export benchmark (issue 25): a program exported with torch.export, run by fxcpp's C++
runtime, against what torch 2.x itself offers for the same program, in one run.

Models (batch 1, one intra-op thread, inference mode):
  chain    1,000 add/mul/relu ops on 1x8 float tensors (overhead-bound; per-op figures)
  resnet50 torchvision resnet50, 1x3x224x224 (--quick: resnet18)
  gpt2     a GPT-2-style decoder (examples/gpt2.py) (6 layers, width 256, 4 heads, 64 tokens,
           vocabulary 4096, causal attention written out, tied head), KV-cache-free

Variants (time to first result, compile time and memory are measured in a fresh process per
variant, so one's caches, compiled code and memory do not help or hurt another; latency is
measured with every variant built in one process and timed in turn, round after round, so that
the machine's drift over the run falls on all of them alike):
  eager          model(x)
  fxcpp_py       fxcpp.aten.load(<torch.export.save archive>, runtime='cpp')(x): the file torch
                 wrote, read and run by fxcpp's C++ runtime from Python (GIL released)
  fxcpp_cpp      the same archive in build/fxcpp_runtime_bench (fxcpp::torch::load, no Python)
  aoti           torch._inductor.aoti_compile_and_package of the ExportedProgram, then
                 torch._inductor.aoti_load_package
  inductor       torch.compile(model) (Inductor)
  aot_eager      torch.compile(model, backend='aot_eager'): Dynamo plus AOTAutograd alone, the
                 compile-time floor of any ATen-level backend
  fxcpp_compile  torch.compile(model, backend='fxcpp')
  nativert       PyTorch's NativeRT, when the wheel exposes a way to run it (a NOTE otherwise)

Lines (bench/run.py's protocol; value,reference):
  BENCH,export,<model>/<variant>,1,<latency>,<eager latency>,ms    (chain: us/op)
  BENCH,export,<model>_first/<variant>,1,<s>,<aoti s>,s       file (or model) to first result:
        fxcpp: load + first forward; aoti: compile + package + load + first forward;
        torch.compile variants: the first call (compilation included); eager: first call
  BENCH,export,<model>_compile/<variant>,1,<s>,<aot_eager s>,s   first call minus a steady call
        (torch.compile variants)
  BENCH,export,<model>_compile_vs_inductor/fxcpp_compile,1,<s>,<inductor s>,s
  BENCH,export,<model>_vs_aot_eager/fxcpp_compile,1,<latency>,<aot_eager latency>,ms
  BENCH,export,<model>_rss/<variant>,1,<MiB>,<weights MiB>,MiB   resident memory added by loading
        (fxcpp, aoti), against the bytes of the weights
Every variant's output is checked against eager (printed as `check` lines; a mismatch is
marked, not fatal). Inductor's on-disk caches point at a fresh folder per process, so
compile times are cold. Nothing here asserts on timings.
"""
import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CPP_BENCH = os.path.join(os.environ.get("FXCPP_BUILD_DIR") or os.path.join(REPO, "build"), "fxcpp_runtime_bench")
from bench_runtime import CHAIN_OPS  # noqa: E402 -- one definition of the chain
VARIANTS = ("eager", "fxcpp_py", "aoti", "inductor", "aot_eager", "fxcpp_compile")
COMPILED = ("inductor", "aot_eager", "fxcpp_compile")


# ------------------------------------------------------------------------------------
# Models (built the same way, from the same seed, in every process)
# ------------------------------------------------------------------------------------

def make_model(name):
    import torch
    torch.manual_seed(0)
    if name == "chain":
        from bench_runtime import Chain  # the runtime suite's chain, the same 1,000 ops
        return Chain().eval(), (torch.randn(1, 8), torch.rand(1, 8))
    if name == "gpt2":
        return GPT().eval(), (torch.randint(0, 4096, (1, 64)),)
    import torchvision
    return getattr(torchvision.models, name)().eval(), (torch.randn(1, 3, 224, 224),)


def GPT():  # noqa: N802 -- examples/gpt2.py's decoder at benchmark size
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
    from gpt2 import GPT2Decoder
    return GPT2Decoder(vocab=4096, ctx=64, dim=256, heads=4, layers=6)


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def best_of(fn, reps, iters):
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        best = min(best, (time.perf_counter() - t0) / iters)
    return best


# ------------------------------------------------------------------------------------
# One variant, in its own process: prints one JSON line
# ------------------------------------------------------------------------------------

def make_fn(model_name, variant, tmp, args, out):
    """The callable that runs `model_name` the way `variant` does (building it is what the
    variant's first-result time measures); `out["rss"]` gets the memory its loading added."""
    import torch
    pt2 = os.path.join(tmp, f"{model_name}.pt2")
    rss0 = rss_mib()
    if variant == "fxcpp_py":
        import fxcpp.aten
        mod = fxcpp.aten.load(pt2, runtime="cpp")
        out["rss"] = rss_mib() - rss0
        return lambda: mod(*args)  # noqa: E731
    if variant == "aoti":
        pkg = os.path.join(tmp, f"{model_name}_aoti.pt2")
        if not os.path.exists(pkg):
            ep = torch.export.load(pt2)
            pkg = torch._inductor.aoti_compile_and_package(ep, package_path=pkg)
            del ep
            gc.collect()
        rss1 = rss_mib()
        mod = torch._inductor.aoti_load_package(pkg)
        out["rss"] = rss_mib() - rss1
        return lambda: mod(*args)  # noqa: E731
    model, _ = make_model(model_name)
    if variant == "eager":
        return lambda: model(*args)  # noqa: E731
    backend = {"inductor": "inductor", "aot_eager": "aot_eager", "fxcpp_compile": "fxcpp"}[variant]
    if backend == "fxcpp":
        import fxcpp.aten._dynamo as dyn
        dyn.register()
    compiled = torch.compile(model, backend=backend)
    return lambda: compiled(*args)  # noqa: E731


def child(model_name, variant, tmp, reps, iters):
    """One variant in a fresh process: time to first result, the second call, memory, and the
    difference from eager (latency comes from interleaved(), where every variant is timed in
    turn in one process)."""
    import torch
    torch.set_num_threads(1)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-", dir=tmp)
    gc.disable()
    args = torch.load(os.path.join(tmp, f"{model_name}_inputs.pt"))
    expect = torch.load(os.path.join(tmp, f"{model_name}_expect.pt"))
    out = {"variant": variant}
    if variant == "fxcpp_py":
        import fxcpp.aten  # noqa: F401 -- imported before the baseline: the figure is the model's, not the library's
    t0 = time.perf_counter()
    fn = make_fn(model_name, variant, tmp, args, out)
    with torch.inference_mode():
        got = fn()
        out["first"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        fn()
        out["second"] = time.perf_counter() - t1
        out["diff"] = float((got - expect).abs().max())
        out["latency"] = best_of(fn, reps, iters)
    print("RESULT " + json.dumps(out), flush=True)


def interleaved(model_name, variants, tmp, reps, iters):
    """Latency of every variant, measured in one process in turn (round r times each variant
    once, `iters` calls): drift of the machine over the run (frequency, other load) then falls on
    all variants alike, which separate processes run minutes apart cannot promise. Best round
    per variant."""
    import torch
    torch.set_num_threads(1)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-", dir=tmp)
    args = torch.load(os.path.join(tmp, f"{model_name}_inputs.pt"))
    fns = {}
    with torch.inference_mode():
        for v in variants:
            fns[v] = make_fn(model_name, v, tmp, args, {})
            fns[v]()
            fns[v]()
        gc.collect()
        gc.disable()
        best = {v: float("inf") for v in variants}
        for _ in range(reps):
            for v in variants:
                best[v] = min(best[v], best_of(fns[v], 1, iters))
    print("RESULT " + json.dumps(best), flush=True)


def run_child(model_name, variant, tmp, reps, iters, timeout, mode="--child"):
    cmd = [sys.executable, os.path.abspath(__file__), mode, model_name, variant, tmp, str(reps), str(iters)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"{model_name}/{variant}: over {timeout} s, skipped", flush=True)
        return None
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    err = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    print(f"{model_name}/{variant}: exited {proc.returncode}: {err[:300]}", flush=True)
    return None


def run_cpp(model_name, pt2, tmp, args, expect, reps, iters):
    """fxcpp_runtime_bench on torch's archive: ms per forward (None when the binary is missing)."""
    import torch
    if not os.path.exists(CPP_BENCH):
        print(f"{CPP_BENCH} not found: fxcpp_cpp skipped", flush=True)
        return None, None
    names = {torch.float32: "float32", torch.int64: "int64"}
    if not all(a.dtype in names for a in args):
        print(f"{model_name}/fxcpp_cpp: fxcpp_runtime_bench feeds float32 and int64 inputs only; skipped", flush=True)
        return None, None
    files = []
    for i, a in enumerate(args):
        files.append(os.path.join(tmp, f"{model_name}_in{i}.bin"))
        a.numpy().tofile(files[-1])
    out = os.path.join(tmp, f"{model_name}_out.bin")
    expect.numpy().tofile(out)
    kind = "chain" if model_name == "chain" else "model"
    cmd = [CPP_BENCH, kind, "--fxpt", pt2, "--inputs", ",".join(files), "--shape",
           ",".join(map(str, args[0].shape)), "--dtypes", ",".join(names[a.dtype] for a in args), "--expect", out, "--iters", str(iters), "--reps", str(reps)]
    cmd += ["--ops", str(CHAIN_OPS)] if kind == "chain" else ["--expect-shape", ",".join(map(str, expect.shape))]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    value = diff = None
    for line in proc.stdout.splitlines():
        parts = line.split(",")
        if parts[0] == "RESULT" and parts[1] == "fxcpp_cpp":
            value = float(parts[2])
        elif parts[0] == "CHECK" and parts[1] == "fxcpp_cpp":
            diff = float(parts[2])
    if value is None:
        print(f"{model_name}/fxcpp_cpp: fxcpp_runtime_bench exited {proc.returncode}: "
              f"{proc.stderr.strip()[-300:]}", flush=True)
    return value, diff


def emit(case, value, ref, unit):
    f = lambda v: "" if v is None else f"{v:.6g}"  # noqa: E731
    print(f"BENCH,export,{case},1,{f(value)},{f(ref)},{unit}", flush=True)


def nativert_note():
    import torch
    runner = getattr(getattr(torch._C, "_nativert", None), "PyModelRunner", None)
    if runner is None:
        return "NativeRT: this torch has no torch._C._nativert; not measured"
    try:
        runner()
    except TypeError as e:
        if "No constructor" in str(e):
            return (f"NativeRT: torch {torch.__version__} ships torch._C._nativert.PyModelRunner without a "
                    "constructor, and libtorch exports no torch::nativert::ModelRunnerHandle symbols, so "
                    "NativeRT cannot be run from this wheel; not measured")
    except Exception:  # noqa: BLE001 -- a constructor that wants arguments: usable, but not wired here yet
        pass
    return "NativeRT: PyModelRunner is constructible on this torch; not yet measured here"


def bench(model_name, tmp, cfg):
    import torch
    model, args = make_model(model_name)
    with torch.inference_mode():
        expect = model(*args)
    torch.save(args, os.path.join(tmp, f"{model_name}_inputs.pt"))
    torch.save(expect, os.path.join(tmp, f"{model_name}_expect.pt"))
    pt2 = os.path.join(tmp, f"{model_name}.pt2")
    torch.export.save(torch.export.export(model, args), pt2)
    weights = sum(t.numel() * t.element_size() for t in list(model.parameters()) + list(model.buffers())) / 2 ** 20
    del model

    chain = model_name == "chain"
    reps, iters = (cfg["chain_reps"], cfg["chain_iters"]) if chain else (cfg["model_reps"], cfg["model_iters"])
    scale, unit = (1e6 / CHAIN_OPS, "us/op") if chain else (1e3, "ms")
    res = {}
    for v in VARIANTS:
        if v not in cfg["variants"]:
            continue
        r = run_child(model_name, v, tmp, reps, iters, cfg["timeout"])
        if r is not None:
            res[v] = r
            ok = r["diff"] <= (1e-4 if chain else 1e-3)
            print(f"check {model_name}/{v}: max |difference| from eager {r['diff']:.3g}" +
                  ("" if ok else "  << MISMATCH"), flush=True)
    # Latency: every variant that ran, timed in turn in one process (interleaved()), 3x the rounds.
    timed = [v for v in VARIANTS if v in res]
    lat_res = run_child(model_name, ",".join(timed), tmp, 3 * reps, iters, cfg["timeout"], "--interleaved")
    for v in timed:
        if lat_res is not None:
            res[v]["latency"] = lat_res[v]
    cpp_ms, cpp_diff = run_cpp(model_name, pt2, tmp, args, expect, reps, iters)
    if cpp_diff is not None:
        print(f"check {model_name}/fxcpp_cpp: max |difference| from eager {cpp_diff:.3g}", flush=True)

    lat = lambda v: res[v]["latency"] * scale if v in res else None  # noqa: E731
    eager = lat("eager")
    for v in VARIANTS:
        emit(f"{model_name}/{v}", lat(v), eager, unit)
    # The C++ binary reports us/op on the chain and ms per forward on models, as this suite does.
    emit(f"{model_name}/fxcpp_cpp", cpp_ms, eager, unit)
    first = lambda v: res[v]["first"] if v in res else None  # noqa: E731
    for v in VARIANTS:
        emit(f"{model_name}_first/{v}", first(v), first("aoti"), "s")
    comp = lambda v: res[v]["first"] - res[v]["second"] if v in res else None  # noqa: E731
    for v in COMPILED:
        emit(f"{model_name}_compile/{v}", comp(v), comp("aot_eager"), "s")
    emit(f"{model_name}_compile_vs_inductor/fxcpp_compile", comp("fxcpp_compile"), comp("inductor"), "s")
    emit(f"{model_name}_vs_aot_eager/fxcpp_compile", lat("fxcpp_compile"), lat("aot_eager"), unit)
    for v in ("fxcpp_py", "aoti"):
        emit(f"{model_name}_rss/{v}", res[v].get("rss") if v in res else None, weights, "MiB")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--full", action="store_true", help="the default: every model, more repetitions")
    ap.add_argument("--only", default="", help="comma-separated models (chain, resnet50, gpt2, ...)")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--child", nargs=5, metavar=("MODEL", "VARIANT", "TMP", "REPS", "ITERS"))
    ap.add_argument("--interleaved", nargs=5, metavar=("MODEL", "VARIANTS", "TMP", "REPS", "ITERS"))
    a = ap.parse_args(argv)
    if a.child:
        m, v, tmp, reps, iters = a.child
        return child(m, v, tmp, int(reps), int(iters))
    if a.interleaved:
        m, vs, tmp, reps, iters = a.interleaved
        return interleaved(m, vs.split(","), tmp, int(reps), int(iters))
    import torch
    if not hasattr(torch, "export") or not hasattr(torch._inductor, "aoti_compile_and_package"):
        print(f"NOTE,export,torch {torch.__version__} has no torch.export / AOTInductor packaging: suite skipped")
        return 0
    cfg = {"chain_reps": 3, "chain_iters": 20, "model_reps": 3, "model_iters": 3, "timeout": 900,
           "variants": a.variants.split(",")}
    models = ["chain", "resnet50", "gpt2"]
    if a.quick:
        cfg.update(chain_iters=5, model_reps=2, model_iters=1, timeout=300)
        models = ["chain", "resnet18"]
    if a.only:
        models = a.only.split(",")
    print(f"NOTE,export,{nativert_note()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="fxcpp-export-bench-") as tmp:
        for m in models:
            bench(m, tmp, cfg)
    return 0


if __name__ == "__main__":
    sys.exit(main())

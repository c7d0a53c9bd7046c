#!/usr/bin/env python3
"""fxcpp demo: the main job, end to end on a real model.

    make demo            (or, on Debian's torch after `make build`: PYTHONPATH=build/pkg /usr/bin/python3 examples/demo.py)

1. trace torchvision's resnet18 (weights=None: nothing is downloaded) with
   fxcpp.symbolic_trace;
2. print the head of its graph table and of its generated code;
3. fold every Conv2d+BatchNorm2d pair (eval mode) -- the classic torch.fx
   example pass, written against the Graph API;
4. check the folded model against the eager one with torch.allclose and time both;
5. run the very same pass with torch.fx and compare trace / transform times;
6. lower the folded model to ATen (fxcpp.aten.lower), save it as a .fxpt file, run it
   in the C++ example program (examples/cpp/classify.cpp: LibTorch, no Python), check its
   output against eager PyTorch and time it against eager Python, the Python
   GraphModule, TorchScript and the C++ runtime called from Python;
7. (torch 2.x) export resnet18 with torch.export.export, save it with torch's own
   torch.export.save as a .pt2 archive, and run that file in the same C++ example
   program, checked against eager PyTorch (docs/pt2_format.md). On torch 1.13, which
   has no torch.export, the step says so and is skipped.

`--quick` uses fewer timing repetitions (the test suite runs it that way).
"""
import argparse
import copy
import os
import statistics
import sys
import time

_REPO_PYTHON = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "pkg")
try:
    import fxcpp
except ImportError:  # running from a checkout without PYTHONPATH
    sys.path.insert(0, _REPO_PYTHON)
    import fxcpp

import torch
import torch.fx
import torch.nn as nn
import torchvision

from fxcpp.cli import graph_table


# --------------------------------------------------------------------------------------
# The transformation: Conv2d + BatchNorm2d folding (inference only).
#
# `fx` is the library module (fxcpp or torch.fx): the pass is written once against
# the torch.fx Graph API and runs unchanged on both, which is the point of fxcpp.
# --------------------------------------------------------------------------------------

def fold_conv_bn_weights(conv: nn.Conv2d, bn: nn.BatchNorm2d) -> nn.Conv2d:
    """A Conv2d computing bn(conv(x)) for an eval-mode BatchNorm2d."""
    fused = copy.copy(conv)  # same configuration; fresh parameter dict (weights are not copied)
    fused._parameters = dict(conv._parameters)
    with torch.no_grad():
        scale = bn.weight * torch.rsqrt(bn.running_var + bn.eps)
        bias = conv.bias if conv.bias is not None else torch.zeros_like(bn.running_mean)
        fused.weight = nn.Parameter(conv.weight * scale.reshape(-1, 1, 1, 1))
        fused.bias = nn.Parameter((bias - bn.running_mean) * scale + bn.bias)
    return fused


def _set_submodule(root: nn.Module, qualname: str, new: nn.Module) -> None:
    parent, _, leaf = qualname.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, leaf, new)


def fold_conv_bn(gm, stats=None, weight_cache=None):
    """Folds each BatchNorm2d whose only input is a Conv2d used nowhere else into
    that Conv2d. Edits `gm` in place (graph, submodules, code) and returns it.

    `stats` (optional dict) receives: folded, weights_s (time in tensor math).
    `weight_cache` (optional dict) memoizes the fused Conv2d per (conv, bn) pair,
    so that timing runs can measure the graph work alone.
    """
    modules = dict(gm.named_modules())
    graph = gm.graph
    folded = 0
    weights_s = 0.0
    for node in graph.nodes:  # safe to erase while iterating, as in torch.fx
        if node.op != "call_module" or not isinstance(modules.get(node.target), nn.BatchNorm2d):
            continue
        conv_node = node.args[0]
        if (not isinstance(conv_node, type(node)) or conv_node.op != "call_module"
                or not isinstance(modules.get(conv_node.target), nn.Conv2d)
                or len(conv_node.users) != 1):
            continue
        bn = modules[node.target]
        if bn.training or not bn.track_running_stats:
            continue
        conv = modules[conv_node.target]
        t0 = time.perf_counter()
        if weight_cache is None:
            fused = fold_conv_bn_weights(conv, bn)
        else:
            key = (id(conv), id(bn))
            if key not in weight_cache:
                weight_cache[key] = fold_conv_bn_weights(conv, bn)
            fused = weight_cache[key]
        weights_s += time.perf_counter() - t0
        _set_submodule(gm, conv_node.target, fused)
        modules[conv_node.target] = fused
        node.replace_all_uses_with(conv_node)  # bn's users now read the conv
        graph.erase_node(node)
        folded += 1
    graph.lint()
    gm.delete_all_unused_submodules()
    gm.recompile()
    if stats is not None:
        stats.update(folded=folded, weights_s=weights_s)
    return gm


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------

def make_model() -> nn.Module:
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None)
    # Random BatchNorm statistics, so the fold is not a near no-op on fresh weights.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.normal_(0.0, 0.1)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.1)
    return model.eval()


def median_s(fn, repeat: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def ms(s: float) -> str:
    return f"{s * 1e3:8.2f} ms"


def section(title: str) -> None:
    print(f"\n== {title}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer timing repetitions")
    args = ap.parse_args(argv)
    n_trace = 5 if args.quick else 20
    n_fold = 3 if args.quick else 10
    n_run = 3 if args.quick else 20
    t_start = time.perf_counter()

    print(f"fxcpp demo -- torch {torch.__version__}, torchvision {torchvision.__version__}, "
          f"{torch.get_num_threads()} intra-op threads")
    model = make_model()
    x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(1))

    # 1. trace ------------------------------------------------------------------------------
    section("1. fxcpp.symbolic_trace(torchvision.models.resnet18(weights=None))")
    t0 = time.perf_counter()
    gm = fxcpp.symbolic_trace(model)
    first_trace = time.perf_counter() - t0
    nodes = list(gm.graph.nodes)
    ops = {}
    for n in nodes:
        ops[n.op] = ops.get(n.op, 0) + 1
    print(f"GraphModule with {len(nodes)} nodes ({', '.join(f'{k}: {v}' for k, v in ops.items())}); "
          f"first trace {ms(first_trace).strip()} (includes one-time warm-up)")

    # 2. show -------------------------------------------------------------------------------
    section(f"2. graph table (first 12 of {len(nodes)} rows)")
    print(graph_table(gm.graph, limit=12))
    section("2b. generated code (first 14 lines)")
    code_lines = gm.code.strip("\n").splitlines()
    print("\n".join(code_lines[:14]))
    print(f"    ... ({len(code_lines)} lines)")

    # 3. transform --------------------------------------------------------------------------
    section("3. Conv2d+BatchNorm2d folding pass (Graph API: replace_all_uses_with, erase_node, recompile)")
    with torch.no_grad():
        expected = model(x)
    stats = {}
    t0 = time.perf_counter()
    folded = fold_conv_bn(fxcpp.symbolic_trace(model), stats)
    t_fold = time.perf_counter() - t0
    n_after = len(list(folded.graph.nodes))
    print(f"folded {stats['folded']} BatchNorm2d into their Conv2d: {len(nodes)} -> {n_after} nodes "
          f"(trace + fold {ms(t_fold).strip()})")
    body = [l for l in folded.code.splitlines() if "layer1_0" in l]
    print("layer1.0 after folding:\n" + "\n".join(body[:5]))

    # 4. verify + speed ---------------------------------------------------------------------
    section("4. verify against eager and time inference (batch 2, 224x224, torch.no_grad)")
    with torch.no_grad():
        got = folded(x)
    ok = torch.allclose(got, expected, rtol=1e-4, atol=1e-4)
    print(f"torch.allclose(folded(x), model(x), rtol=1e-4, atol=1e-4): {ok}  "
          f"(max abs diff {(got - expected).abs().max().item():.2e}, max |y| {expected.abs().max().item():.2f})")
    if not ok:
        print("ERROR: the folded model disagrees with the eager model", file=sys.stderr)
        return 1
    with torch.no_grad():
        # interleave so both see the same machine load
        eager_s, folded_s = [], []
        for _ in range(n_run):
            eager_s.append(median_s(lambda: model(x), 1, warmup=0))
            folded_s.append(median_s(lambda: folded(x), 1, warmup=0))
    e, f = min(eager_s), min(folded_s)  # best of n_run: least disturbed by other load
    print(f"eager resnet18   {ms(e)} / batch  (best of {n_run}, interleaved)")
    print(f"folded (fxcpp)   {ms(f)} / batch   -> {e / f:.2f}x faster ({(1 - f / e) * 100:.0f}% less time)")

    # 5. fxcpp vs torch.fx ------------------------------------------------------------------
    section(f"5. fxcpp vs torch.fx, same process, same pass (median of {n_trace} traces / {n_fold} folds)")
    libs = {"fxcpp": fxcpp, "torch.fx": torch.fx}
    trace_t = {k: [] for k in libs}
    for _ in range(n_trace):
        for k, lib in libs.items():  # interleaved
            t0 = time.perf_counter()
            lib.symbolic_trace(model)
            trace_t[k].append(time.perf_counter() - t0)
    fold_t = {k: [] for k in libs}
    both_t = {k: [] for k in libs}
    results = {}
    cache = {}
    fold_conv_bn(fxcpp.symbolic_trace(model), weight_cache=cache)  # fused weights, computed once
    for _ in range(n_fold):
        for k, lib in libs.items():
            t0 = time.perf_counter()
            g = lib.symbolic_trace(model)
            t1 = time.perf_counter()
            results[k] = fold_conv_bn(g, weight_cache=cache)
            t2 = time.perf_counter()
            fold_t[k].append(t2 - t1)
            both_t[k].append(t2 - t0)
    rows = [("symbolic_trace(resnet18)", trace_t),
            ("conv-bn fold pass*", fold_t),
            ("trace + fold", both_t)]
    print(f"{'':28}{'fxcpp':>12}{'torch.fx':>12}{'speedup':>10}")
    for label, d in rows:
        a, b = statistics.median(d["fxcpp"]), statistics.median(d["torch.fx"])
        print(f"{label:28}{ms(a):>12}{ms(b):>12}{b / a:>9.2f}x")
    print(f"* graph work: match, replace_all_uses_with, erase_node, lint, delete_all_unused_submodules, "
          f"recompile;\n  the tensor math for the fused weights (same torch code for both, "
          f"{stats['weights_s'] * 1e3:.1f} ms above) is computed once and excluded")
    same = results["fxcpp"].code == results["torch.fx"].code
    print(f"generated code of the folded model identical to torch.fx's: {'yes' if same else 'NO'}")
    with torch.no_grad():
        agree = torch.equal(results["fxcpp"](x), results["torch.fx"](x))
    print(f"fxcpp- and torch.fx-folded models give identical outputs: {'yes' if agree else 'NO'}")

    ok_cpp = run_in_cpp(model, results["fxcpp"], n_run)
    ok_pt2 = run_exported_in_cpp(model, n_run)
    print(f"\ndemo finished in {time.perf_counter() - t_start:.1f} s")
    return 0 if (same and agree and ok_cpp and ok_pt2) else 1


def _classify_binary():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for d in (os.environ.get("FXCPP_BUILD_DIR"), os.path.join(root, "build")):
        if d and os.path.isfile(os.path.join(d, "fxcpp_example_classify")):
            return os.path.join(d, "fxcpp_example_classify")
    return None


def run_exported_in_cpp(model, n_run) -> bool:
    """7. torch.export.export, torch.export.save, then the C++ example program runs the .pt2 file."""
    import subprocess
    import tempfile

    from fxcpp import _torch_compat
    section("7. torch.export: saved by torch as .pt2, run by the C++ example program")
    if not _torch_compat.HAS_EXPORT:
        print(f"(skipped: torch {torch.__version__} has no torch.export; .pt2 archives come from torch 2.5 on)")
        return True
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(3))
    t0 = time.perf_counter()
    ep = torch.export.export(model, (x,))
    t_export = time.perf_counter() - t0
    binary = _classify_binary()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "resnet18.pt2")
        torch.export.save(ep, path)
        print(f"torch.export.export(resnet18): {len(ep.graph.nodes)} nodes in {ms(t_export).strip()}; "
              f"torch.export.save wrote {os.path.getsize(path) / 1e6:.1f} MB to {os.path.basename(path)}")
        if binary is None:
            print("(build/fxcpp_example_classify not built: make build makes it; skipping the C++ program)")
            return True
        inp, out = os.path.join(tmp, "input.bin"), os.path.join(tmp, "logits.bin")
        with open(inp, "wb") as f:
            f.write(x.contiguous().numpy().tobytes())
        proc = subprocess.run([binary, path, inp, "--repeat", str(n_run), "--output", out],
                              capture_output=True, text=True)
        print("$ fxcpp_example_classify resnet18.pt2 input.bin")
        print("\n".join("  " + line for line in proc.stdout.strip().splitlines()))
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            return False
        with torch.no_grad():
            ref = model(x)
        logits = torch.frombuffer(bytearray(open(out, "rb").read()), dtype=torch.float32).reshape(ref.shape)
        ok = torch.allclose(logits, ref, rtol=1e-4, atol=1e-4)
        print(f"torch.allclose(C++ program's logits for torch's .pt2, eager model(x), rtol=1e-4, atol=1e-4): {ok}")
    return ok


def run_in_cpp(model, folded, n_run) -> bool:
    """6. lower, save, run in C++ (a separate process with no Python), compare and time."""
    import subprocess
    import tempfile

    from fxcpp import aten
    section("6. Lower to ATen, save, and run in the C++ runtime (no Python in the process)")
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(2))
    t0 = time.perf_counter()
    lowered = aten.lower(folded, x)
    t_lower = time.perf_counter() - t0
    binary = _classify_binary()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "resnet18_folded.fxpt")
        aten.save(lowered, path)
        print(f"lowered {len(folded.graph.nodes)} -> {len(lowered.graph.nodes)} ATen-level nodes "
              f"in {ms(t_lower).strip()}; saved {os.path.getsize(path) / 1e6:.1f} MB to {os.path.basename(path)}")
        with torch.no_grad():
            ref = model(x)
        ok = True
        cpp_ms = None
        if binary is None:
            print("(build/fxcpp_example_classify not built: make build makes it; skipping the C++ program)")
        else:
            inp, out = os.path.join(tmp, "input.bin"), os.path.join(tmp, "logits.bin")
            with open(inp, "wb") as f:
                f.write(x.contiguous().numpy().tobytes())
            proc = subprocess.run([binary, path, inp, "--repeat", str(n_run), "--output", out],
                                  capture_output=True, text=True)
            print("$ fxcpp_example_classify resnet18_folded.fxpt input.bin")
            print("\n".join("  " + line for line in proc.stdout.strip().splitlines()))
            if proc.returncode != 0:
                print(proc.stderr, file=sys.stderr)
                return False
            logits = torch.frombuffer(bytearray(open(out, "rb").read()), dtype=torch.float32).reshape(ref.shape)
            ok = torch.allclose(logits, ref, rtol=1e-4, atol=1e-4)
            print(f"torch.allclose(C++ program's logits, eager model(x), rtol=1e-4, atol=1e-4): {ok}")
            for line in proc.stdout.splitlines():
                if line.startswith("forward:"):
                    cpp_ms = float(line.split()[1])
        cpp = aten.load(path, runtime="cpp")
        with torch.no_grad():
            ok_py = torch.allclose(cpp(x), ref, rtol=1e-4, atol=1e-4)
            ts = torch.jit.trace(folded, x)
            timings = [("eager Python (unfolded)", lambda: model(x)),
                       ("fxcpp GraphModule (folded, Python)", lambda: folded(x)),
                       ("TorchScript (torch.jit.trace of folded)", lambda: ts(x)),
                       ("fxcpp C++ runtime, called from Python", lambda: cpp(x))]
            best = {}
            for label, fn in timings:
                fn()
                best[label] = min(median_s(fn, 1, warmup=0) for _ in range(max(3, n_run // 2)))
    print(f"torch.allclose(C++ runtime from Python, eager, rtol=1e-4, atol=1e-4): {ok_py}")
    base = best["eager Python (unfolded)"]
    n_threads = torch.get_num_threads()
    print(f"{f'batch 1, {n_threads} thread' + ('s' if n_threads > 1 else ''):44}{'best':>10}{'vs eager':>10}")
    for label, _ in timings:
        print(f"{label:44}{ms(best[label]):>10}{base / best[label]:>9.2f}x")
    if cpp_ms is not None:
        print(f"{'fxcpp C++ runtime, C++ program':44}{cpp_ms:>8.1f} ms{base / (cpp_ms / 1e3):>9.2f}x")
    return ok and ok_py


if __name__ == "__main__":
    sys.exit(main())

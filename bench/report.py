#!/usr/bin/env python3
"""Renders BENCHMARKS.md (repo root) and bench/results/*.png from
bench/results/latest.csv and latest_meta.json (written by bench/run.py).

    bench/report.py [--csv bench/results/latest.csv] [--md BENCHMARKS.md]   (re-render without re-running)

Every section (and, where a section mixes torches, every row) names the torch
its numbers were measured with: the CSV's `torch` column (bench/run.py), or the
run's torch from latest_meta.json for a CSV written before that column existed.
"""
import argparse
import csv
import json
import math
import os
import sys
from collections import OrderedDict, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")

SUITE_TITLES = OrderedDict([
    ("graph_api", "Graph API through Python (bench/bench_graph_api.py)"),
    ("trace", "symbolic_trace end to end (bench/bench_trace.py)"),
    ("transform", "Transformation toolkit (bench/bench_transform.py)"),
    ("forward", "Transform toolkit: generated forward, the floor (bench/bench_transform.py)"),
    ("interp", "Transform toolkit: Interpreter.run (bench/bench_transform.py)"),
    ("transformer", "Transform toolkit: Transformer.transform (bench/bench_transform.py)"),
    ("replace", "Transform toolkit: replace_pattern (bench/bench_transform.py)"),
    ("shape_prop", "Transform toolkit: ShapeProp (bench/bench_transform.py)"),
    ("core_cpp", "C++ core alone (build/fxcpp_core_bench, Google Benchmark)"),
    ("runtime", "LibTorch runtime against ATen, TorchScript, Static Runtime, torch.fx and eager "
                "(bench/bench_runtime.py)"),
    ("toolbox", "torch.fx toolbox: split_module, const_fold, fuse, partitioner (bench/bench_toolbox.py)"),
    ("explorer", "Graph explorer: the core's layout vs Graphviz dot, the page in Chromium (bench/bench_explorer.py)"),
    ("export", "torch.export archives in fxcpp's runtime against eager, AOTInductor and torch.compile "
               "(bench/bench_export.py; value, reference)"),
])

# The targets. kind: "speedup" (torch.fx / fxcpp >= bound),
# "ratio" (fxcpp / torch.fx <= bound), "abs" (fxcpp us/node <= bound[case]),
# "abs_bytes" (fxcpp B/node <= bound), "growth" (fxcpp at 1e6 / at 1e4 <= bound) or "fastest"
# (each case's value <= the smallest value among the reference cases named by bound), "abs_ms"
# (fxcpp ms <= bound[case]).
TARGETS = [
    ("Mutation / copy ops >= 5x faster per node at 1e4 / 1e5", "graph_api",
     ["graph_copy", "deepcopy", "rauw", "erase", "dce"], [10000, 100000], "speedup", 5.0),
    ("Attribute-read iteration <= 1.2x torch.fx's time", "graph_api",
     ["iterate", "users"], None, "ratio", 1.2),
    ("GraphModule construction + recompile >= 2x faster (as returned; forward is built on first call)",
     "graph_api", ["gm_construct", "gm_recompile"], None, "speedup", 2.0),
    ("GraphModule construction + recompile >= 2x faster (including the first call, which builds forward)",
     "graph_api", ["gm_construct_call", "gm_recompile_call"], None, "speedup", 2.0),
    ("Memory per node <= 1/3 of torch.fx's (RSS)", "graph_api", ["memory_rss"], None, "ratio", 1 / 3),
    ("Memory per node <= 1/3 of torch.fx's (tracemalloc: Python heap only)", "graph_api",
     ["memory_tracemalloc"], None, "ratio", 1 / 3),
    ("symbolic_trace of resnet50 / swin_t >= 3x faster", "trace", ["resnet50", "swin_t"], None, "speedup", 3.0),
    ("Tracing Linear+ReLU x1000, loops, residual blocks, wide cat >= 5x faster per node at 1,000", "trace",
     ["seq_linear_relu", "elementwise_loop_1k", "residual_blocks", "wide_cat_1k"], None, "speedup", 5.0),
    ("Interpreter overhead per node: int add <= 0.7 us, tiny tensors <= 1.5 us beyond the op", "interp",
     ["int_add_chain", "tiny_tensor_overhead"], None, "abs", {"int_add_chain": 0.7, "tiny_tensor_overhead": 1.5}),
    ("Transformer >= 10x faster at 1e3 / 1e4", "transformer", ["int_add_chain"], None, "speedup", 10.0),
    ("replace_pattern >= 50x faster at 1e5", "replace", ["wide_relu_add_n/10_matches"], [100000], "speedup", 50.0),
    # Issue 2, the C++ core alone (steady state; see Note [Warm-up run] in bench/core_bench.cpp).
    ("C++ core per node: build <= 0.4 us, lint <= 0.15 us, graph_copy / DCE / python_code <= 0.5 us", "core_cpp",
     ["build", "lint", "graph_copy", "dce", "python_code"], None, "abs",
     {"build": 0.4, "lint": 0.15, "graph_copy": 0.5, "dce": 0.5, "python_code": 0.5}),
    ("C++ core per-node cost growth within 1.5x from 1e4 to 1e6 (build, lint, copy, DCE, codegen, RAUW, erase)",
     "core_cpp", ["build", "lint", "graph_copy", "dce", "python_code", "rauw", "erase"], None, "growth", 1.5),
    ("C++ core per-node cost growth within 1.5x from 1e4 to 1e6 (iteration; memory_floor is a plain sequential "
     "read of the same bytes, which no pass over every node can beat)",
     "core_cpp", ["iterate", "memory_floor"], None, "growth", 1.5),
    ("C++ core memory for a plain binary-op node <= 200 bytes", "core_cpp", ["memory", "memory_two_inputs"], None,
     "abs_bytes", 200.0),
    # Issue 21: against torch.fx 2.14.1 (whose Node base, iteration and argument mapping are partly C++).
    ("At 1e4 against the run's torch.fx (2.14.1 in make bench): build, copy, DCE, python_code and GraphModule construction >= 5x faster per node",
     "graph_api", ["build", "graph_copy", "dce", "python_code", "gm_construct"], [10000], "speedup", 5.0),
    ("Iteration no slower than the run's torch.fx at 1e4 (fxcpp time / torch.fx time <= 1)", "graph_api",
     ["iterate", "users"], [10000], "ratio", 1.0),
    ("symbolic_trace of torchvision models >= 2x faster", "trace", ["resnet50", "swin_t"], None,
     "speedup", 2.0),
    ("Runtime per op on the 1,000-op chain no slower than the fastest PyTorch runtime of the same run "
     "(TorchScript from C++ and Python, Static Runtime, torch.fx GraphModule, eager)", "runtime",
     ["chain/fxcpp_cpp", "chain/fxcpp_py"], None, "fastest",
     ["chain/torchscript_cpp", "chain/torchscript_py", "chain/static_runtime_py", "chain/torchfx_gm_py",
      "chain/eager_py"]),
    # Issue 25: programs exported with torch.export (value column: the variant; reference: named per target).
    ("torch.export archives in fxcpp's runtime within 5% of eager (resnet50, GPT-2-style, batch 1)", "export",
     ["resnet50/fxcpp_py", "resnet50/fxcpp_cpp", "gpt2/fxcpp_py", "gpt2/fxcpp_cpp"], None, "ratio", 1.05),
    ("File to first result >= 20x sooner than AOTInductor's compile + load + first forward", "export",
     ["chain_first/fxcpp_py", "resnet50_first/fxcpp_py", "gpt2_first/fxcpp_py"], None, "speedup", 20.0),
    ("torch.compile(backend='fxcpp') compiles within 1.5x of aot_eager's time", "export",
     ["chain_compile/fxcpp_compile", "resnet50_compile/fxcpp_compile", "gpt2_compile/fxcpp_compile"], None,
     "ratio", 1.5),
    ("torch.compile(backend='fxcpp') compiles >= 5x faster than Inductor", "export",
     ["chain_compile_vs_inductor/fxcpp_compile", "resnet50_compile_vs_inductor/fxcpp_compile",
      "gpt2_compile_vs_inductor/fxcpp_compile"], None, "speedup", 5.0),
    ("torch.compile(backend='fxcpp') runs at least as fast as aot_eager", "export",
     ["chain_vs_aot_eager/fxcpp_compile", "resnet50_vs_aot_eager/fxcpp_compile", "gpt2_vs_aot_eager/fxcpp_compile"],
     None, "ratio", 1.0),
    # Issue 22: the explorer page in headless Chromium, 10,000-node graphs.
    ("Explorer, 10,000 nodes (chain-and-branch, lowered transformer stack) in Chromium: first drawing < 2 s, "
     "any expansion < 200 ms", "explorer",
     ["page_first_draw_chain_branch_10000", "page_first_draw_lowered_transformer_10k",
      "page_expand_max_chain_branch_10000", "page_expand_max_lowered_transformer_10k"], None, "abs_ms",
     {"page_first_draw_chain_branch_10000": 2000.0, "page_first_draw_lowered_transformer_10k": 2000.0,
      "page_expand_max_chain_branch_10000": 200.0, "page_expand_max_lowered_transformer_10k": 200.0}),
    ("Explorer: a 10,000-node graph fully expanded lays out in under a second in C++", "explorer",
     ["layout_ms_chain_branch_10000", "layout_ms_lowered_transformer_10k"], None, "abs_ms",
     {"layout_ms_chain_branch_10000": 1000.0, "layout_ms_lowered_transformer_10k": 1000.0}),
]


# ------------------------------------------------------------------------------------
# Data
# ------------------------------------------------------------------------------------

def _f(s):
    try:
        return float(s) if s not in ("", None) else None
    except ValueError:
        return None


def load_rows(csv_path, default_torch=None):
    """The CSV's rows; a row without a torch version gets default_torch (the run's, from the meta)."""
    rows = []
    with open(csv_path, newline="") as f:
        for r in csv.DictReader(f):
            rows.append({"suite": r["suite"], "case": r["case"], "size": int(r["size"]), "unit": r["unit"],
                         "fxcpp": _f(r["fxcpp"]), "torchfx": _f(r["torchfx"]),
                         "torch": r.get("torch") or default_torch or "?"})
    return rows


def torch_versions(rows):
    """The torch versions of rows, in order of first appearance."""
    return list(OrderedDict.fromkeys(r.get("torch") or "?" for r in rows))


def _torch_label(versions):
    return "torch " + " and ".join(versions) if versions else "torch ?"


def _is_torch1(version):
    return str(version).startswith("1.")


def speedup(r):
    return r["torchfx"] / r["fxcpp"] if r["fxcpp"] and r["torchfx"] else None


def check_targets(rows):
    """[(description, verdict, detail)], verdict in PASS / FAIL / n/a."""
    out = []
    for desc, suite, cases, sizes, kind, bound in TARGETS:
        cells = [r for r in rows if r["suite"] == suite and r["case"] in cases
                 and (sizes is None or r["size"] in sizes)]
        if kind == "growth":
            per = {(r["case"], r["size"]): r["fxcpp"] for r in cells if r["fxcpp"]}
            vals, ok, any_ = [], True, False
            for c in cases:
                a, b = per.get((c, 10000)), per.get((c, 1000000))
                if a and b:
                    any_ = True
                    ok &= b / a <= bound
                    vals.append(f"{c} {b / a:.2f}x")
            out.append((desc, ("PASS" if ok else "FAIL") if any_ else "n/a", "; ".join(vals) or "not measured"))
            continue
        if kind == "fastest":
            # fxcpp's value (us/op) against the smallest of the reference cases of the same suite.
            refs = {r["case"]: r["fxcpp"] for r in rows if r["suite"] == suite and r["case"] in bound and r["fxcpp"]}
            measured = [r for r in cells if r["fxcpp"]]
            if not refs or not measured:
                out.append((desc, "n/a", "not measured"))
                continue
            best_case = min(refs, key=refs.get)
            ok = all(r["fxcpp"] <= refs[best_case] for r in measured)
            out.append((desc, "PASS" if ok else "FAIL",
                        "; ".join(f"{r['case']} {r['fxcpp']:.3g} us" for r in measured) +
                        f" vs fastest {best_case} {refs[best_case]:.3g} us"))
            continue
        if kind in ("abs", "abs_bytes", "abs_ms"):
            # abs: bound per case, us/node; abs_bytes: one bound, B/node; abs_ms: bound per case, ms
            limit = (lambda r: bound[r["case"]]) if kind in ("abs", "abs_ms") else (lambda r: bound)
            fmt = {"abs": "{:.2f} us", "abs_bytes": "{:.0f} B", "abs_ms": "{:.0f} ms"}[kind]
            measured = [r for r in cells if r["fxcpp"]]
            if not measured:
                out.append((desc, "n/a", "not measured"))
                continue
            ok = all(r["fxcpp"] <= limit(r) for r in measured)
            out.append((desc, "PASS" if ok else "FAIL",
                        "; ".join(f"{r['case']}@{_size(r['size'])} " + fmt.format(r["fxcpp"]) for r in measured)))
            continue
        measured = [r for r in cells if speedup(r) is not None]
        if not measured:
            out.append((desc, "n/a", "not measured" if not cells else "torch.fx skipped"))
            continue
        vals = []
        ok = True
        for r in measured:
            sp = speedup(r)
            if kind == "speedup":
                ok &= sp >= bound
                vals.append(f"{r['case']}@{_size(r['size'])} {sp:.1f}x" if sp >= 0.95 else
                            f"{r['case']}@{_size(r['size'])} {sp:.2g}x")
            else:
                ratio = 1 / sp
                ok &= ratio <= bound
                vals.append(f"{r['case']}@{_size(r['size'])} {ratio:.2f}")
        out.append((desc, "PASS" if ok else "FAIL", "; ".join(vals)))
    return out


def headline(rows):
    t = check_targets(rows)
    if not t:
        return ""
    lines = ["targets:"]
    for desc, verdict, detail in t:
        lines.append(f"  [{verdict:4}] {desc}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------
# Formatting
# ------------------------------------------------------------------------------------

def _size(n):
    if n >= 1000 and n % 1000 == 0:
        e = int(math.log10(n))
        if 10 ** e == n:
            return f"1e{e}"
    return f"{n:,}"


def _val(v, unit):
    if v is None:
        return "skipped"
    if unit == "B/node":
        return f"{v:,.0f} B"
    if v >= 100:
        return f"{v:,.0f} µs"
    if v >= 1:
        return f"{v:.2f} µs"
    return f"{v * 1000:.0f} ns"


def _ratio(r):
    sp = speedup(r)
    if sp is None:
        return "–"
    if r["unit"] == "B/node":
        return f"{1 / sp:.2f}x the memory"
    return f"**{sp:.1f}x**" if sp >= 1 else f"{sp:.2f}x (slower)"


def suite_table(rows, suite):
    rs = [r for r in rows if r["suite"] == suite]
    if len(torch_versions(rs)) > 1:
        return _with_torch_column(_suite_table(rows, suite), rs)
    return _suite_table(rows, suite)


def _with_torch_column(table, rs):
    """Appends a torch column to every row of a markdown table whose body rows are rs, in order
    (the runtime tables: one table per case group, in the order of rs)."""
    out, i = [], 0
    for line in table.split("\n"):
        if line.startswith("|---"):
            out.append(line + "---|")
        elif line.startswith("| variant |") or line.startswith("| case |") or line.startswith("| operation |"):
            out.append(line + " torch |")
        elif line.startswith("| ") and i < len(rs):
            out.append(line + f" {rs[i].get('torch', '?')} |")
            i += 1
        else:
            out.append(line)
    return "\n".join(out)


def _suite_table(rows, suite):
    rs = [r for r in rows if r["suite"] == suite]
    if suite == "trace":
        head = "| case | nodes | fxcpp / node | torch.fx / node | fxcpp total | torch.fx total | speedup |\n" \
               "|---|---:|---:|---:|---:|---:|---:|"
        body = []
        for r in rs:
            tot = {k: (f"{r[k] * r['size'] / 1000:.1f} ms" if r[k] is not None else "skipped")
                   for k in ("fxcpp", "torchfx")}
            body.append(f"| {r['case']} | {r['size']:,} | {_val(r['fxcpp'], r['unit'])} | "
                        f"{_val(r['torchfx'], r['unit'])} | {tot['fxcpp']} | {tot['torchfx']} | {_ratio(r)} |")
        return "\n".join([head] + body)
    if suite == "core_cpp":
        api = {(r["case"], r["size"]): r for r in rows if r["suite"] == "graph_api"}
        api_torch = _torch_label(torch_versions([r for r in rows if r["suite"] == "graph_api"]))
        head = f"| operation | N | C++ core / node | via Python API / node ({api_torch}) | " \
               f"torch.fx / node ({api_torch}) |\n" \
               "|---|---:|---:|---:|---:|"
        body = []
        for r in rs:
            p = api.get((r["case"], r["size"]))
            if r["case"] == "memory":
                p = api.get(("memory_rss", r["size"]))
            body.append(f"| {r['case']} | {_size(r['size'])} | {_val(r['fxcpp'], r['unit'])} | "
                        f"{_val(p['fxcpp'], p['unit']) if p else '–'} | {_val(p['torchfx'], p['unit']) if p else '–'} |")
        return "\n".join([head] + body)
    if suite == "runtime":
        return runtime_tables(rs)
    if suite == "export":
        head = "| case | value | reference | value / reference | unit |\n|---|---:|---:|---:|---|"

        def num(v):
            return "–" if v is None else f"{v:.4g}"
        body = [f"| {r['case']} | {num(r['fxcpp'])} | {num(r['torchfx'])} | "
                f"{num(r['fxcpp'] / r['torchfx']) if r['fxcpp'] and r['torchfx'] else '–'} | {r['unit']} |"
                for r in rs]
        return "\n".join([head] + body)
    if suite == "explorer":
        head = "| case | nodes | fxcpp | Graphviz dot | unit |\n|---|---:|---:|---:|---|"

        def num(v):
            return "–" if v is None else (f"{v:,.0f}" if abs(v) >= 100 else f"{v:.2f}")
        body = [f"| {r['case']} | {r['size']:,} | {num(r['fxcpp'])} | {num(r['torchfx'])} | {r['unit']} |" for r in rs]
        return "\n".join([head] + body)
    head = "| case | N | fxcpp / node | torch.fx / node | speedup |\n|---|---:|---:|---:|---:|"
    body = [f"| {r['case']} | {_size(r['size'])} | {_val(r['fxcpp'], r['unit'])} | {_val(r['torchfx'], r['unit'])} "
            f"| {_ratio(r)} |" for r in rs]
    return "\n".join([head] + body)


# The runtime suite's rows carry (value, reference) in (fxcpp, torchfx): see
# bench/bench_runtime.py. Its tables show ratio = value / reference.
_RUNTIME_VARIANTS = {
    "fxcpp_cpp": "fxcpp runtime from C++ (`fxcpp::torch::load` + `forward`)",
    "fxcpp_py": "fxcpp runtime from Python (`fxcpp.aten.load(path, runtime='cpp')`)",
    "at_direct": "direct `at::add` / `at::mul` / `at::relu` calls from C++",
    "at_out": "`at::add_out` / `mul_out` / `clamp_min_out` into two reused buffers (C++)",
    "torchscript_cpp": "TorchScript interpreter from C++ (`torch::jit::load`, traced)",
    "torchscript_py": "TorchScript interpreter from Python (`torch.jit.load`)",
    "static_runtime_py": "Static Runtime on the frozen traced module (Python)",
    "torchfx_gm_py": "torch.fx `GraphModule` (`symbolic_trace`)",
    "eager_py": "eager PyTorch (Python)",
    "fxcpp_py_vs_torchfx_gm": "fxcpp from Python against torch.fx `GraphModule`",
    "fxcpp_load": "`fxcpp::torch::load` (.fxpt)",
    "torchscript_load": "`torch::jit::load` (traced TorchScript)",
    "fxpt": ".fxpt (`fxcpp.aten.save`)",
    "torchscript": "TorchScript (`torch.jit.save` of the traced model)",
    "fxcpp_trace": "`fxcpp::torch::trace` (dispatcher-mode capture, C++)",
    "jit_tracer": "`torch::jit::tracer::trace` (LibTorch's JIT tracer, C++)",
    "eager": "the module's forward alone, no capture (C++)",
    "fxcpp_overhead": "capture overhead: `fxcpp::torch::trace` - eager, against the tracer's",
}


def _runtime_num(v, unit):
    if v is None:
        return "skipped"
    if unit == "B":
        return f"{v / 2**20:,.1f} MiB"
    if unit == "inf/s":
        return f"{v:.2f}" if v < 10 else f"{v:.1f}"
    return f"{v:,.0f}" if v >= 100 else (f"{v:.2f}" if v >= 1 else f"{v:.3f}")


def runtime_tables(rs):
    groups = OrderedDict()
    for r in rs:
        groups.setdefault(r["case"].split("/", 1)[0], []).append(r)
    out = [f"One run on {_torch_label(torch_versions(rs))} (Python and LibTorch alike: the C++ variants link the "
           "LibTorch of that torch), same inputs for every variant; one intra-op thread; inference mode everywhere. "
           "Ratio = value / reference from the same run (for times, < 1 is faster than the reference); "
           "*skipped*: not measured (see the notes)."]
    for g, grs in groups.items():
        unit = grs[0]["unit"]
        if g == "chain":
            title = f"Overhead-bound: {grs[0]['size']:,}-op chain of add/mul/relu on 1x8 float tensors"
            cols, ref = "µs / op", "direct at:: calls"
        elif g.startswith("capture_"):
            what = {"capture_cnn": "a small torch::nn CNN (conv-bn-relu x2, pool, conv, linear; 1x3x32x32)",
                    "capture_chain": f"a {grs[0]['size']:,}-op torch::nn chain of add/mul/relu on 1x8 tensors"}
            title = f"Capture from C++: {what.get(g, g[len('capture_'):])}, per recorded op (no grad mode)"
            cols, ref = "µs / op", "the JIT tracer"
        elif g.endswith("_threads"):
            title = f"{g[:-len('_threads')]} at batch 1: Python threads calling one module"
            cols, ref = "inferences / s", "one thread"
        elif g.endswith("_load"):
            title = f"Loading {g[:-len('_load')]} from C++ (file in the page cache)"
            cols, ref = "ms", "torch::jit::load"
        elif g.endswith("_file"):
            title = f"{g[:-len('_file')]} file size"
            cols, ref = "size", "parameter + buffer bytes"
        else:
            title = f"Compute-bound: torchvision {g}, batch 1, 224x224"
            cols, ref = "ms / forward", "eager"
        out.append(f"\n**{title}**\n\n| variant | {cols} | ratio to {ref} |\n|---|---:|---:|")
        for r in grs:
            variant = r["case"].split("/", 1)[1] if "/" in r["case"] else r["case"]
            if g.endswith("_threads"):
                runtime, _, n = variant.rpartition("_")
                label = f"{runtime}, {n[:-1]} thread{'s' if n != '1t' else ''}"
            else:
                label = _RUNTIME_VARIANTS.get(variant, variant)
            ratio = (f"{r['fxcpp'] / r['torchfx']:.{3 if unit == 'B' else 2}f}x" if r["fxcpp"] and r["torchfx"]
                     else "–")
            value = _runtime_num(r["fxcpp"], unit)
            if variant == "fxcpp_py_vs_torchfx_gm":
                value = f"{value} vs {_runtime_num(r['torchfx'], unit)}"
            out.append(f"| {label} | {value} | {ratio} |")
    return "\n".join(out)


# ------------------------------------------------------------------------------------
# Plots
# ------------------------------------------------------------------------------------

def plot_scaling(rows, suite, path):
    """Per-node cost vs N for every case measured at more than one size; None if nothing to plot."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_case = defaultdict(list)
    for r in rows:
        if r["suite"] == suite and r["unit"] == "us/node":
            by_case[r["case"]].append(r)
    by_case = OrderedDict((c, sorted(v, key=lambda r: r["size"])) for c, v in by_case.items()
                          if len({r["size"] for r in v}) > 1)
    if not by_case:
        return None
    n = len(by_case)
    cols = min(4, n)
    nrows = (n + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(3.6 * cols, 2.8 * nrows), squeeze=False)
    for ax, (case, rs) in zip(axes.flat, by_case.items()):
        for key, label, style in (("fxcpp", "fxcpp", "o-"), ("torchfx", "torch.fx", "s--")):
            pts = [(r["size"], r[key]) for r in rs if r[key] is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label, markersize=4)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(case, fontsize=10)
        ax.set_xlabel("nodes", fontsize=8)
        ax.set_ylabel("µs / node", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(f"{suite}: per-node cost vs graph size (lower is better; flat = linear scaling)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_speedups(rows, suite, path):
    """Bar chart of torch.fx / fxcpp per case at the largest size measured."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    latest = OrderedDict()
    for r in rows:
        if r["suite"] == suite and speedup(r) is not None and r["unit"] == "us/node":
            if r["case"] not in latest or r["size"] >= latest[r["case"]]["size"]:
                latest[r["case"]] = r
    if len(latest) < 2:  # one bar says nothing the table does not
        return None
    cases = list(latest)
    vals = [speedup(latest[c]) for c in cases]
    fig, ax = plt.subplots(figsize=(max(5, 0.7 * len(cases) + 2), 3.4))
    bars = ax.bar(range(len(cases)), vals, color=["#4c72b0" if v >= 1 else "#c44e52" for v in vals])
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([f"{c}\n({latest[c]['size']:,})" for c in cases], fontsize=7, rotation=30, ha="right")
    ax.set_ylabel("speedup (torch.fx time / fxcpp time)", fontsize=8)
    ax.set_yscale("log")
    for b, v in zip(bars, vals):
        ax.text(b.get_x() + b.get_width() / 2, v, f"{v:.1f}x", ha="center", va="bottom", fontsize=7)
    ax.set_title(f"{suite}: fxcpp speedup over torch.fx", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


# ------------------------------------------------------------------------------------
# Markdown
# ------------------------------------------------------------------------------------

def render(csv_path, meta_path, repo=REPO, md_path=None):
    """Writes md_path (default: <repo>/BENCHMARKS.md) and the plots next to csv_path; returns md_path."""
    meta = {}
    if meta_path and os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
    mi = meta.get("machine", {})
    rows = load_rows(csv_path, mi.get("torch"))
    path = md_path or os.path.join(repo, "BENCHMARKS.md")
    versions = torch_versions(rows)
    out_dir = os.path.dirname(os.path.abspath(csv_path))
    for stale in os.listdir(out_dir):  # plots are regenerated below; drop those of vanished suites
        if stale.endswith(("_scaling.png", "_speedup.png")):
            os.unlink(os.path.join(out_dir, stale))
    md = []
    md.append("# fxcpp benchmarks\n")
    md.append(f"Generated by `{meta.get('command', 'bench/run.py')}` ({meta.get('mode', '?')} mode) on "
              f"{mi.get('date', '?')} -- do not edit by hand; re-run to refresh.\n")
    md.append("| machine | |\n|---|---|")
    md.append(f"| CPU | {mi.get('cpu', '?')} |")
    md.append(f"| nproc (usable) | {mi.get('nproc', '?')} |")
    if mi.get("mem_gib"):
        md.append(f"| memory | {mi['mem_gib']} GiB |")
    if mi.get("load_avg"):
        md.append(f"| load average at start | {' / '.join(str(x) for x in mi['load_avg'])} |")
    md.append(f"| OS | {mi.get('os', '?')} |")
    md.append(f"| Python / torch | {mi.get('python', '?')} / {mi.get('torch', '?')} "
              f"({mi.get('torch_threads', '?')} intra-op threads) |")
    if versions != [mi.get("torch")]:
        md.append(f"| torch of the rows | {', '.join(versions)} (kept from earlier runs: each section says which) |")
    md.append(f"| commit | {mi.get('commit', '?')} |")
    md.append(f"| total run time | {meta.get('seconds', '?')} s |\n")

    md.append("All figures are **per graph node** (total time of the operation / number of nodes), best of "
              "several runs with the garbage collector paused (the C++ core: best of 5 Google Benchmark "
              "repetitions); speedup = torch.fx time / fxcpp time "
              "(> 1: fxcpp is faster); torch.fx is the torch.fx of the torch named in each section's title. "
              + ("torch.fx 1.x's auto-naming is quadratic in repeated names, so its largest builds are capped "
                 "by predicted time and shown as *skipped*; " if any(_is_torch1(v) for v in versions) else
                 "A torch.fx run predicted to exceed its time cap is shown as *skipped*; ")
              + "a model torch.fx cannot trace is *skipped* too. Raw data: `bench/results/latest.csv` "
              "(its `torch` column names the torch of every row).\n")

    targets = check_targets(rows)
    if targets:
        md.append(f"## Targets ({_torch_label(versions)})\n")
        md.append("| target | result | measured |\n|---|---|---|")
        for desc, verdict, detail in targets:
            mark = {"PASS": "✅ PASS", "FAIL": "❌ FAIL"}.get(verdict, verdict)
            md.append(f"| {desc} | {mark} | {detail} |")
        md.append("")

    suites = meta.get("suites", {})
    present = [s for s in SUITE_TITLES if any(r["suite"] == s for r in rows)]
    present += sorted({r["suite"] for r in rows} - set(present))
    md_dir = os.path.dirname(os.path.abspath(path))
    for s in present:
        srows = [r for r in rows if r["suite"] == s]
        md.append(f"## {SUITE_TITLES.get(s, s)} -- {_torch_label(torch_versions(srows))}\n")
        st = suites.get(_runner_suite(s), {})
        if st.get("status") not in (None, "ok"):
            md.append(f"*Suite status: {st['status']} (results may be partial).*\n")
        for note in st.get("notes", []) if s == _runner_suite(s) or s == "forward" else []:
            md.append(f"*Note ({_torch_label([st['torch']]) if st.get('torch') else _torch_label(torch_versions(srows))}): {note}*\n")
        md.append(suite_table(rows, s) + "\n")
        for kind, fn in (("scaling", plot_scaling), ("speedup", plot_speedups)):
            if s == "core_cpp" and kind == "speedup":
                continue
            png = os.path.join(out_dir, f"{s}_{kind}.png")
            try:
                made = fn(rows, s, png)
            except Exception as e:  # noqa: BLE001 -- a plot must not sink the report
                md.append(f"*({kind} plot failed: {type(e).__name__}: {e})*\n")
                continue
            if made:
                rel = os.path.relpath(made, md_dir)
                md.append(f"![{s} {kind}]({rel})\n")
    for s, st in suites.items():
        if s not in present and s not in {_runner_suite(p) for p in present} and st.get("status") != "absent":
            md.append(f"## {SUITE_TITLES.get(s, s)}\n\n*No results: {st.get('status')}"
                      f"{' (torch ' + st['torch'] + ')' if st.get('torch') else ''}.*\n")
            for note in st.get("notes", []):
                md.append(f"*Note: {note}*\n")
    absent = [s for s, st in suites.items() if st.get("status") == "absent"]
    if absent:
        md.append(f"*Not run (not present in this checkout): {', '.join(absent)}.*\n")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(md).rstrip() + "\n")
    os.replace(path + ".tmp", path)
    return path


# The transform runner suite writes rows of several report suites.
_ROW_TO_RUNNER = {"forward": "transform", "interp": "transform", "transformer": "transform", "replace": "transform",
                  "shape_prop": "transform"}


def _runner_suite(s):
    return _ROW_TO_RUNNER.get(s, s)


def main():
    ap = argparse.ArgumentParser(description="render BENCHMARKS.md from bench/results/latest.csv")
    ap.add_argument("--csv", default=os.path.join(RESULTS, "latest.csv"))
    ap.add_argument("--meta", default=None)
    ap.add_argument("--md", default=None, help="the markdown file to write (default: BENCHMARKS.md at the repo root)")
    args = ap.parse_args()
    meta = args.meta or os.path.join(os.path.dirname(os.path.abspath(args.csv)), "latest_meta.json")
    path = render(args.csv, meta, md_path=args.md)
    print(f"wrote {path}")
    print(headline(load_rows(args.csv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

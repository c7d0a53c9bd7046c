#!/usr/bin/env python3
"""Tracer benchmark: fxcpp.symbolic_trace vs torch.fx.symbolic_trace, end to end
(Tracer.trace + GraphModule construction), on synthetic and real models.

Prints one line per case (the protocol bench/run.py collects):

    BENCH,trace,<case>,<nodes>,<fxcpp_us_per_node>,<torchfx_us_per_node>,us/node

<nodes> is the size of the traced graph; absolute time = value * nodes. A
library that fails to trace a model gets `skip` (and a `# ... failed` line):
torch.fx 1.13 on Python 3.11 cannot trace every model. torch.fx 1.x's
auto-naming is quadratic in repeated names, so its 10k loop is predicted from
the 1k one and skipped over the cap (2.x's naming is linear: bench/_torchfx_cost.py).

Cases: seq_linear_relu (nn.Sequential of 1,000 Linear+ReLU blocks),
elementwise_loop_1k / _10k (x = x * 2 + 1 style loop), residual_blocks
(x = x + relu(linear(x)) blocks), wide_cat (torch.cat of 10,000 inputs, one
placeholder each), resnet50 and swin_t (torchvision, weights=None).
"""
import argparse
import gc
import os
import sys
import time

import torch
import torch.fx
import torch.nn as nn

from _torchfx_cost import NAMING_EXPONENT, NAMING_WORDS  # noqa: E402  (bench/)

try:
    import fxcpp
except ImportError:  # run from a checkout without PYTHONPATH
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "pkg"))
    import fxcpp

SUITE = "trace"
LIBS = {"fxcpp": fxcpp, "torchfx": torch.fx}


def emit(case, size, fx, tf, unit="us/node"):
    def f(v):
        return "skip" if v is None else f"{v:.6g}"
    print(f"BENCH,{SUITE},{case},{size},{f(fx)},{f(tf)},{unit}", flush=True)


# ------------------------------------------------------------------------------------
# Models
# ------------------------------------------------------------------------------------

def seq_linear_relu(blocks=1000):
    layers = []
    for _ in range(blocks):
        layers += [nn.Linear(8, 8), nn.ReLU()]
    return nn.Sequential(*layers)


class ElementwiseLoop(nn.Module):
    def __init__(self, iters):
        super().__init__()
        self.iters = iters

    def forward(self, x):
        for i in range(self.iters):
            x = x * 2 + i
        return torch.relu(x)


class ResidualBlocks(nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.lins = nn.ModuleList(nn.Linear(8, 8) for _ in range(blocks))

    def forward(self, x):
        for lin in self.lins:
            x = x + torch.relu(lin(x))
        return x


def wide_cat(width=10000):
    """def f(x0, ..., x{width-1}): return torch.cat([x0, ...], 0)"""
    params = ", ".join(f"x{i}" for i in range(width))
    ns = {"torch": torch}
    exec(f"def wide_cat({params}):\n    return torch.cat([{params}], 0)\n", ns)
    return ns["wide_cat"]


def wide_cat_items(width):
    """def f(x): return torch.cat([x[0], x[1], ..., x[width-1]], 0) -- `width` getitem
    nodes that all want the name `getitem` (torch.fx's naming goes quadratic)."""
    def wide_cat(x):
        return torch.cat([x[i] for i in range(width)], 0)
    return wide_cat


def torchvision_model(name):
    import torchvision
    return getattr(torchvision.models, name)(weights=None).eval()


def cases(full):
    yield "seq_linear_relu", lambda: seq_linear_relu(1000)
    yield "elementwise_loop_1k", lambda: ElementwiseLoop(1000)
    yield "elementwise_loop_10k", lambda: ElementwiseLoop(10000)
    yield "residual_blocks", lambda: ResidualBlocks(1000 if full else 300)
    yield "wide_cat_1k", lambda: wide_cat_items(1000)
    yield "wide_cat_10k", lambda: wide_cat_items(10000)
    yield "wide_cat_placeholders_10k", lambda: wide_cat(10000)
    yield "resnet50", lambda: torchvision_model("resnet50")
    yield "swin_t", lambda: torchvision_model("swin_t")


# ------------------------------------------------------------------------------------
# Timing
# ------------------------------------------------------------------------------------

def time_trace(lib, model, budget, max_reps):
    """(best seconds, node count), or (None, error text)."""
    times = []
    n_nodes = None
    spent = 0.0
    while True:
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            gm = lib.symbolic_trace(model)
            dt = time.perf_counter() - t0
        except Exception as e:  # noqa: BLE001 -- record the failure, keep going
            return None, f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        finally:
            gc.enable()
        n_nodes = len(gm.graph.nodes)
        del gm
        times.append(dt)
        spent += dt
        if len(times) >= max_reps or spent + dt > budget:
            return min(times), n_nodes


def main():
    ap = argparse.ArgumentParser(description="fxcpp vs torch.fx: symbolic_trace end to end")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true")
    mode.add_argument("--full", action="store_true")
    ap.add_argument("--only", help="comma-separated case names")
    ap.add_argument("--torchfx-cap", type=float, default=None,
                    help="skip torch.fx runs predicted to take longer (seconds; quick 5, full 60)")
    args = ap.parse_args()
    budget = 2.0 if args.full else 0.6
    max_reps = 10 if args.full else 5
    only = set(args.only.split(",")) if args.only else None
    cap = args.torchfx_cap if args.torchfx_cap is not None else (60.0 if args.full else 5.0)
    seen = {}
    for lib in LIBS.values():  # warm-up: first-use costs (imports, caches) are not per-model
        lib.symbolic_trace(ResidualBlocks(2))
    for case, make in cases(args.full):
        if only and case not in only:
            continue
        t0 = time.perf_counter()
        try:
            model = make()
        except Exception as e:  # noqa: BLE001
            print(f"# {case}: building the model failed: {type(e).__name__}: {e}", flush=True)
            emit(case, 0, None, None)
            continue
        res = {}
        nodes = {}
        for name, lib in LIBS.items():
            # torch.fx 1.x's naming is quadratic in repeated names (2.x: linear): predict the
            # 10k loop from the 1k one
            pred = seen.get("elementwise_loop_1k") if case == "elementwise_loop_10k" and name == "torchfx" else None
            if pred is not None:
                pred *= 10 ** NAMING_EXPONENT
            if pred is not None and pred > cap:
                print(f"# {case}: torch.fx skipped (predicted {pred:.0f} s > cap {cap:.0f} s; "
                      f"its auto-naming is {NAMING_WORDS})", flush=True)
                res[name] = None
                continue
            t, info = time_trace(lib, model, budget, max_reps)
            if name == "torchfx" and t is not None:
                seen[case] = t
            if t is None:
                print(f"# {case}: {name} failed to trace: {info}", flush=True)
            else:
                nodes[name] = info
            res[name] = t
        size = nodes.get("torchfx") or nodes.get("fxcpp") or 0
        if len(set(nodes.values())) > 1:
            print(f"# {case}: node counts differ: {nodes}", flush=True)
        per = {k: (v / size * 1e6 if v is not None and size else None) for k, v in res.items()}
        emit(case, size, per["fxcpp"], per["torchfx"])
        ms = {k: (f"{v * 1e3:.2f} ms" if v is not None else "skipped") for k, v in res.items()}
        print(f"# {case}: {size} nodes, fxcpp {ms['fxcpp']}, torch.fx {ms['torchfx']} "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Graph API benchmark: fxcpp vs torch.fx through the Python API, at N nodes.

Prints one line per measurement (the protocol bench/run.py collects):

    BENCH,graph_api,<case>,<N>,<fxcpp>,<torchfx>[,<unit>]

Values are per graph node (total time / N, or bytes / N); unit defaults to
us/node. `skip` marks a cell that was not measured (torch.fx over its time cap).

The graph: x -> [add(., 1) -> .conjugate() -> mul(., x) -> neg(.)]* -> output,
N nodes in all. Cases:
  build              create the graph with auto-naming (torch.fx 1.x's naming is
                     quadratic in repeated names, 2.x's linear: capped by the
                     predicted time, see --torchfx-cap and bench/_torchfx_cost.py)
  build_named        the same graph with explicit names (no naming collisions)
  iterate            for n in g.nodes: n.op, n.target, n.args
  users              for n in g.nodes: for u in n.users
  graph_copy         Graph().graph_copy(g, {})
  deepcopy           copy.deepcopy(g)
  python_code        g.python_code("self")
  gm_construct       GraphModule(nn.Module(), g)   (includes one recompile)
  gm_construct_call  GraphModule(nn.Module(), g)(1.0)  (forces any lazy compilation)
  gm_recompile       gm.recompile() after an edit
  gm_recompile_call  gm.recompile(); gm(1.0)
                     (every timed GraphModule case gets a graph whose source is
                     new, so no compiled-code cache can serve it)
  rauw               conj.replace_all_uses_with(conj.args[0]) for the N/4 conjugates
  erase              g.erase_node() of those N/4 now-unused nodes
  dce                g.eliminate_dead_code() removing them
  memory_tracemalloc Python-heap bytes per node after building (tracemalloc;
                     does not see fxcpp's C++ allocations)
  memory_rss         resident-set growth per node while building, in a fresh
                     process (sees everything)
Times are the best of several runs with the garbage collector paused.
"""
import argparse
import copy
import gc
import itertools
import operator
import os
import subprocess
import sys
import time
import tracemalloc

import torch
import torch.fx

from _torchfx_cost import NAMING_EXPONENT, NAMING_WORDS  # noqa: E402  (bench/)

try:
    import fxcpp
except ImportError:  # run from a checkout without PYTHONPATH
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "pkg"))
    import fxcpp

LIBS = {"fxcpp": fxcpp, "torchfx": torch.fx}
_UNIQUE = itertools.count(1000)
SUITE = "graph_api"


def emit(case, size, fx, tf, unit="us/node"):
    def f(v):
        return "skip" if v is None else f"{v:.6g}"
    print(f"BENCH,{SUITE},{case},{size},{f(fx)},{f(tf)},{unit}", flush=True)


# ------------------------------------------------------------------------------------
# The graph
# ------------------------------------------------------------------------------------

_KINDS = [("call_function", operator.add, "add"), ("call_method", "conjugate", "conjugate"),
          ("call_function", operator.mul, "mul"), ("call_function", operator.neg, "neg")]


def build(lib, n, named=False):
    """A graph of exactly n nodes (n >= 3). With named=True every node gets the
    name auto-naming would give it, passed explicitly."""
    g = lib.Graph()
    x = g.placeholder("x")
    cur = x
    counts = {}
    for i in range(n - 2):
        op, target, base = _KINDS[i % 4]
        args = (cur, 1) if base == "add" else (cur, x) if base == "mul" else (cur,)
        if named:
            k = counts.get(base, 0)
            counts[base] = k + 1
            cur = g.create_node(op, target, args, {}, name=base if k == 0 else f"{base}_{k}")
        elif op == "call_method":
            cur = g.call_method(target, args)
        else:
            cur = g.call_function(target, args)
    g.output(cur)
    return g


# ------------------------------------------------------------------------------------
# Timing
# ------------------------------------------------------------------------------------

def best(fn, setup=None, budget=0.5, max_reps=5):
    """Best wall time of fn(state) over up to max_reps runs (at least one; more
    while the total stays under `budget` seconds); setup() (untimed) makes state."""
    times = []
    spent = 0.0
    while True:
        state = setup() if setup else None
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            fn(state)
            dt = time.perf_counter() - t0
        finally:
            gc.enable()
        times.append(dt)
        spent += dt
        if len(times) >= max_reps or spent + dt > budget:
            return min(times)


def run_size(n, args):
    budget = args.budget
    us = 1e6 / n
    results = {}
    # build (auto-naming), with a cap for torch.fx's quadratic naming
    for name, lib in LIBS.items():
        predicted = None
        prev = args._build_seen.get(name)
        if prev is not None:
            pn, pt = prev
            predicted = pt * (n / pn) ** NAMING_EXPONENT
        if name == "torchfx" and predicted is not None and predicted > args.torchfx_cap:
            results[name] = None
            print(f"# torch.fx build at N={n}: skipped (predicted {predicted:.0f} s > cap {args.torchfx_cap:.0f} s; "
                  f"its auto-naming is {NAMING_WORDS})", flush=True)
            continue
        t = best(lambda _: build(lib, n), budget=budget, max_reps=3)
        args._build_seen[name] = (n, t)
        results[name] = t * us
    emit("build", n, results["fxcpp"], results["torchfx"])

    graphs = {}
    res = {}
    for name, lib in LIBS.items():
        res[name] = best(lambda _: build(lib, n, named=True), budget=budget, max_reps=3) * us
        graphs[name] = build(lib, n, named=True)
    emit("build_named", n, res["fxcpp"], res["torchfx"])

    def case(label, fn, setup_for=None, max_reps=5):
        r = {}
        for name, lib in LIBS.items():
            g = graphs[name]
            setup = (lambda lib=lib, g=g: setup_for(lib, g)) if setup_for else (lambda g=g: g)
            r[name] = best(lambda s, lib=lib: fn(lib, s), setup, budget=budget, max_reps=max_reps) * us
        emit(label, n, r["fxcpp"], r["torchfx"])

    def iterate(lib, g):
        for node in g.nodes:
            node.op
            node.target
            node.args

    def users(lib, g):
        for node in g.nodes:
            for _ in node.users:
                pass

    case("iterate", iterate)
    case("users", users)
    case("graph_copy", lambda lib, g: lib.Graph().graph_copy(g, {}))
    case("deepcopy", lambda lib, g: copy.deepcopy(g))
    case("python_code", lambda lib, g: g.python_code("self"))

    # GraphModule. Every timed run sees a graph whose generated source is new
    # (a fresh constant in the first add), so no compile cache can serve it.
    def fresh_graph(lib, g):
        g2 = copy.deepcopy(g)
        first_add = next(nd for nd in g2.nodes if nd.target is operator.add)
        first_add.update_arg(1, next(_UNIQUE))
        return g2

    def construct_call(lib, g2):
        lib.GraphModule(torch.nn.Module(), g2)(1.0)

    case("gm_construct", lambda lib, g2: lib.GraphModule(torch.nn.Module(), g2), fresh_graph, max_reps=3)
    case("gm_construct_call", construct_call, fresh_graph, max_reps=3)

    def gm_setup(lib, g):
        gm = lib.GraphModule(torch.nn.Module(), copy.deepcopy(g))
        gm(1.0)
        first_add = next(nd for nd in gm.graph.nodes if nd.target is operator.add)
        first_add.update_arg(1, next(_UNIQUE))
        return gm

    def recompile_call(lib, gm):
        gm.recompile()
        gm(1.0)

    case("gm_recompile", lambda lib, gm: gm.recompile(), gm_setup, max_reps=3)
    case("gm_recompile_call", recompile_call, gm_setup, max_reps=3)

    # mutation: RAUW, erase, DCE on fresh copies
    def fresh(lib, g):
        g2 = copy.deepcopy(g)
        return g2, [nd for nd in g2.nodes if nd.op == "call_method"]

    def rauw(lib, s):
        for nd in s[1]:
            nd.replace_all_uses_with(nd.args[0])

    def after_rauw(lib, g):
        s = fresh(lib, g)
        rauw(lib, s)
        return s

    def erase(lib, s):
        g2, dead = s
        for nd in dead:
            g2.erase_node(nd)

    case("rauw", rauw, fresh)
    case("erase", erase, after_rauw)
    case("dce", lambda lib, s: s[0].eliminate_dead_code(), after_rauw)

    # memory: tracemalloc (Python heap) in-process
    if n in args.memory_sizes:
        mem = {}
        for name, lib in LIBS.items():
            gc.collect()
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
            g = build(lib, n, named=True)
            gc.collect()
            mem[name] = (tracemalloc.get_traced_memory()[0] - base) / n
            tracemalloc.stop()
            assert len(g.nodes) == n
            del g
        emit("memory_tracemalloc", n, mem["fxcpp"], mem["torchfx"], "B/node")
        rss = {name: rss_per_node(name, n) for name in LIBS}
        emit("memory_rss", n, rss["fxcpp"], rss["torchfx"], "B/node")


# ------------------------------------------------------------------------------------
# RSS in a child process
# ------------------------------------------------------------------------------------

def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def rss_child(lib_name, n):
    lib = LIBS[lib_name]
    build(lib, 1000, named=True)  # warm up caches, code objects, allocator pools
    gc.collect()
    before = _rss_bytes()
    g = build(lib, n, named=True)
    gc.collect()
    after = _rss_bytes()
    assert len(g.nodes) == n
    print(f"RSS,{(after - before) / n:.6g}")


def rss_per_node(lib_name, n):
    try:
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--rss-child", lib_name, str(n)],
                             capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return None
    for line in out.stdout.splitlines():
        if line.startswith("RSS,"):
            return float(line.split(",")[1])
    print(f"# RSS child for {lib_name} failed: {out.stderr.strip()[-300:]}", file=sys.stderr)
    return None


def main():
    ap = argparse.ArgumentParser(description="fxcpp vs torch.fx: Graph API per-node costs")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="N = 1e3, 1e4")
    mode.add_argument("--full", action="store_true", help="N = 1e3, 1e4, 1e5")
    ap.add_argument("--sizes", help="comma-separated node counts (overrides the mode)")
    ap.add_argument("--torchfx-cap", type=float, default=None,
                    help="skip torch.fx auto-naming builds predicted to exceed this many seconds")
    ap.add_argument("--rss-child", nargs=2, metavar=("LIB", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rss_child:
        rss_child(args.rss_child[0], int(args.rss_child[1]))
        return 0
    if args.sizes:
        sizes = [int(float(s)) for s in args.sizes.split(",")]
    else:
        sizes = [1000, 10000, 100000] if args.full else [1000, 10000]
    args.budget = 1.0 if args.full else 0.3
    if args.torchfx_cap is None:
        args.torchfx_cap = 20.0 if args.full else 5.0
    args.memory_sizes = {max(sizes)} | ({10000} & set(sizes))
    args._build_seen = {}
    print(f"# graph_api: sizes {sizes}, torch.fx build cap {args.torchfx_cap:.0f} s", flush=True)
    for n in sizes:
        t0 = time.perf_counter()
        run_size(n, args)
        print(f"# N={n} done in {time.perf_counter() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

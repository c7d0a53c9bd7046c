"""The torch.fx toolbox on fxcpp (issue 13): split_module, const_fold and fuse,
fxcpp vs torch.fx 1.13 side by side, in one run.

Prints a human-readable table with ratios and, for a runner, one line per
measurement:

    BENCH,toolbox,<case>,<size>,<fxcpp_us_per_node>,<torchfx_us_per_node>

Cases (size = nodes of the input graph; times are per input node, best of N):
  split_module_chain   add/mul chain, callback puts the ops into 10 partitions in runs
  split_module_wide    independent 10-node blocks on two inputs, 10 partitions in runs
  const_fold           half the nodes a get_attr-fed constant chain, half a live chain
  fuse_conv_bn         nn.Sequential of Conv2d(1, 1, 1) + BatchNorm2d(1) pairs (eval)
  partition_propose_chain / partition_fuse_chain
                       CapabilityBasedPartitioner on the split_module_chain graph, every 100th op
                       unsupported (n/100 partitions): propose_partitions (construction included:
                       torch.fx builds its ancestor sets there), then fuse_partitions
  partition_propose_wide / partition_fuse_wide
                       the same on the split_module_wide graph with relu unsupported (two
                       partitions per 10-node block)

partition_*: (the installed torch.fx's algorithm with its default options, which fxcpp's core follows:
1.13's, or 2.x's with its horizontal fusion; proposals are compared with ids and order)
fxcpp.passes.infra.partitioner's CapabilityBasedPartitioner (proposal in the C++ core,
``fuse_by_partitions`` building fxcpp GraphModules, its cycle check in C++) against torch.fx's on the
torch.fx conversion; both sides' proposals are checked equal. Each fuse run gets a freshly built
module and the proposed partitions (untimed). torch.fx's proposal is quadratic in time and memory on a
chain (ancestor sets: about 3 GB at 1e4), and torch.fx's fuse is quadratic on the wide graph (each
fused block's output is rewritten in the output tuple, rebuilt per block; fxcpp re-points it in place,
Note [In-place rewiring], leaving a scan of the tuple per block), so torch.fx's runs predicted to take
over a minute (the chain at 1e5, fuse at 1e5) are skipped.

fxcpp side: ``fxcpp.passes.split_module.split_module`` (or, where absent, torch.fx's
``split_module`` on the fxcpp module plus ``fxcpp.from_torch_fx``);
``fxcpp.experimental.const_fold.split_const_subgraphs``;
``fxcpp.experimental.optimization.fuse`` on the fxcpp-traced module.
torch.fx side: the same calls on the torch.fx equivalent (converted with
``fxcpp.to_torch_fx``, so node names are identical; torch.fx's fuse on the torch.fx trace).
torch.fx 1.13's naming is quadratic in repeated names, so its largest split_module /
const_fold runs are measured once, and skipped when predicted to take over a minute.

fuse_conv_bn: both sides get the traced model (a GraphModule) and return a new one
(inplace=False), with every pair folded; inputs built untimed, gc paused, the same number of
runs on both sides (best of up to N, as many as keep torch.fx within a minute a size, 6 s with
--quick: one or two at 1e5, where one torch.fx run takes 30-40 s). torch.fx deep-copies the
whole model, retraces it, deep-copies the graph, and per pair calls ``fuse_conv_bn_eval``, which
deep-copies
the conv (its weight and bias too) and then replaces its weight and bias with the Parameters of
``fuse_conv_bn_weights``. fxcpp traces without copying, deep-copies only what the result keeps
(nothing here: every module is a fused conv or a dropped bn) and builds each fused conv from a
plain copy of the conv's attributes and the Parameters of the same ``fuse_conv_bn_weights``
(bitwise the same weights). What bounds the ratio (about 8x at 1e3-1e4, 10x at 1e5) is that
per-pair arithmetic, which both sides do: ~10 small torch ops, 18-23 us a pair (~11 us a node,
40% of fxcpp's time at 1e4; building the fused convs, the trace and the graph rewrite are the
rest, 5-7 us a node each).

Usage: PYTHONPATH=python /usr/bin/python3 bench/bench_toolbox.py [--quick|--full] [--only CASE]
"""
import argparse
import gc
import operator
import os
import sys
import time
import traceback

try:
    import fxcpp  # noqa: F401  (installed, or on PYTHONPATH)
except ImportError:  # run from a checkout after `make build`: the assembled package
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'build', 'pkg'))

import torch  # noqa: E402
import torch.fx as tfx  # noqa: E402
from torch.fx.experimental.optimization import fuse as torch_fuse  # noqa: E402
from torch.fx.experimental import const_fold as torch_const_fold  # noqa: E402
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner as TorchPartitioner  # noqa: E402
from torch.fx.passes.infra.partitioner import Partition  # noqa: E402
from torch.fx.passes.operator_support import create_op_support  # noqa: E402
from torch.fx.passes.split_module import split_module as torch_split_module  # noqa: E402

import fxcpp as fx  # noqa: E402
from fxcpp.experimental import const_fold as fx_const_fold  # noqa: E402
from fxcpp.experimental.optimization import fuse as fx_fuse  # noqa: E402
from fxcpp.passes.infra.partitioner import CapabilityBasedPartitioner as FxPartitioner  # noqa: E402

try:
    from fxcpp.passes.split_module import split_module as fx_split_module  # noqa: E402
    SPLIT_IMPL = 'fxcpp.passes.split_module'
except ImportError:  # before fxcpp had its own: torch.fx's loop through interop
    def fx_split_module(m, root_m, split_callback, **kw):
        return fx.from_torch_fx(torch_split_module(m, root_m, split_callback, **kw))
    SPLIT_IMPL = 'torch.fx split_module on the fxcpp module + from_torch_fx'

ROWS = []
REF_LIMIT_S = 60.0  # skip a torch.fx run predicted to take longer
# --quick: torch.fx's proposal on the 1e4 chain (predicted ~30 s, measured about a minute on torch
# 2.14.1 and more on a loaded machine) is skipped
QUICK_PARTITION_LIMIT_S = 20.0


_NOTED = set()


def failure(what, e, where=''):
    """Prints a failed measurement (a `# ...` line, and a NOTE line for the report once per what and
    error); the run goes on."""
    text = f"{what} failed on torch {torch.__version__}: {type(e).__name__}: " \
           f"{str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}"
    print(f"# {text}{' (' + where + ')' if where else ''}", flush=True)
    if text not in _NOTED:
        _NOTED.add(text)
        print(f"NOTE,toolbox,{text} (skipped)", flush=True)


def report(case, size, ours, ref, note=''):
    ROWS.append((case, size, ours, ref))
    if ours != ours:  # fxcpp's side failed (see the NOTE line)
        print(f"BENCH,toolbox,{case},{size},skip,{'skip' if ref != ref else f'{ref:.4f}'}", flush=True)
        return
    if ref == ref:
        ratio = f"x{ref / ours:7.1f}" if ours > 0 else "x    inf"
        ref_s = f"{ref:9.3f}"
    else:
        ratio, ref_s = "       -", "  skipped"
    print(f"toolbox {case:22s} {size:>7d}  fxcpp {ours:9.3f} us/node  torch.fx {ref_s} us/node  {ratio} {note}",
          flush=True)
    print(f"BENCH,toolbox,{case},{size},{ours:.4f},{'skip' if ref != ref else f'{ref:.4f}'}", flush=True)


def best_of(make_input, run, repeat):
    """Best (min) seconds of run(make_input()) over `repeat` runs; the input is built untimed and
    the garbage collector is paused while timing."""
    samples = []
    for _ in range(repeat):
        arg = make_input()
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            run(arg)
            samples.append(time.perf_counter() - t0)
        finally:
            gc.enable()
        del arg
    return min(samples)


# ----------------------------------------------------------------------------------
# Graphs (built with fxcpp; the torch.fx equivalent is fxcpp.to_torch_fx of it)
# ----------------------------------------------------------------------------------

def chain_gm(n):
    g = fx.Graph()
    x = g.placeholder('x')
    y = g.placeholder('y')
    cur = x
    for i in range(n - 3):
        cur = g.call_function(operator.add if i % 2 else operator.mul, (cur, y))
    g.output(cur)
    return fx.GraphModule(torch.nn.Module(), g)


def wide_gm(n):
    g = fx.Graph()
    x = g.placeholder('x')
    y = g.placeholder('y')
    outs = []
    for b in range((n - 3) // 10):
        t = g.call_function(operator.mul, (x, b))
        t = g.call_function(operator.sub, (t, 1))
        a = g.call_function(operator.add, (t, y))
        r = g.call_function(torch.relu, (a,))
        u = g.call_function(operator.mul, (r, 2))
        u = g.call_function(torch.neg, (u,))
        u = g.call_function(operator.add, (u, t))
        v = g.call_function(operator.truediv, (r, 3))
        w = g.call_function(operator.add, (u, v))
        w = g.call_function(operator.sub, (w, a))
        outs.append(w)
    g.output(tuple(outs))
    return fx.GraphModule(torch.nn.Module(), g)


def const_gm(n):
    """get_attr w -> n/2 constant ops; x -> n/2 live ops; output add(live, const)."""
    root = torch.nn.Module()
    root.w = torch.nn.Parameter(torch.ones(2))
    g = fx.Graph()
    x = g.placeholder('x')
    c = g.get_attr('w')
    half = (n - 4) // 2
    for i in range(half):
        c = g.call_function(operator.add if i % 2 else operator.mul, (c, 1.5))
    cur = x
    for i in range(n - 4 - half):
        cur = g.call_function(operator.add if i % 2 else operator.mul, (cur, 2))
    g.output(g.call_function(operator.add, (cur, c)))
    return fx.GraphModule(root, g)


def conv_bn_model(n):
    layers = []
    for _ in range((n - 2) // 2):
        layers += [torch.nn.Conv2d(1, 1, 1), torch.nn.BatchNorm2d(1)]
    return torch.nn.Sequential(*layers).eval()


def runs_callback(n, k=10):
    """A split callback assigning the graph's ops to k partitions in runs of about n/k."""
    state = {'i': 0}
    run = max(1, n // k)

    def cb(node):
        p = state['i'] // run
        state['i'] += 1
        return min(p, k - 1)
    return cb


# ----------------------------------------------------------------------------------
# Cases
# ----------------------------------------------------------------------------------

def bench_split(case, build, sizes, repeat):
    prev = None  # (size, torch.fx seconds) for the quadratic prediction
    for n in sizes:
        gm = build(n)
        tgm = fx.to_torch_fx(gm)
        nodes = len(gm.graph.nodes)
        ours = best_of(lambda: runs_callback(nodes), lambda cb: fx_split_module(gm, gm, cb), repeat)
        predicted = prev[1] * (n / prev[0]) ** 2 if prev else 0.0
        if predicted > REF_LIMIT_S:
            ref = float('nan')
        else:
            reps = repeat if n <= 10000 else 1
            ref = best_of(lambda: runs_callback(nodes), lambda cb: torch_split_module(tgm, tgm, cb), reps)
            prev = (n, ref)
        report(case, n, ours / nodes * 1e6, ref / nodes * 1e6 if ref == ref else ref)


def bench_const_fold(sizes, repeat):
    prev = None
    for n in sizes:
        nodes = len(const_gm(n).graph.nodes)
        ours = best_of(lambda: const_gm(n), fx_const_fold.split_const_subgraphs, repeat)
        predicted = prev[1] * (n / prev[0]) ** 2 if prev else 0.0
        if predicted > REF_LIMIT_S:
            ref = float('nan')
        else:
            reps = repeat if n <= 10000 else 1
            ref = best_of(lambda: fx.to_torch_fx(const_gm(n)), torch_const_fold.split_const_subgraphs, reps)
            prev = (n, ref)
        report('const_fold', n, ours / nodes * 1e6, ref / nodes * 1e6 if ref == ref else ref)


def bench_fuse(sizes, repeat, budget_s):
    """fxcpp's fuse on the fxcpp trace of conv_bn_model(n), torch.fx's on the torch.fx trace: best
    of the same number of runs on both sides, as many (up to `repeat`) as keep torch.fx's runs at a
    size within `budget_s` (predicted linearly from the previous size; torch.fx's fuse is linear)."""
    prev = None  # (nodes, torch.fx seconds per run)
    for n in sizes:
        torch.manual_seed(0)
        model = conv_bn_model(n)
        ours_gm = fx.symbolic_trace(model)
        theirs_gm = tfx.symbolic_trace(model)
        nodes = len(ours_gm.graph.nodes)
        predicted = prev[1] * nodes / prev[0] if prev else 0.0
        reps = max(1, min(repeat, int(budget_s // predicted))) if predicted > 0 else repeat
        ours = best_of(lambda: ours_gm, fx_fuse, reps)
        ref = best_of(lambda: theirs_gm, torch_fuse, reps)
        prev = (nodes, ref)
        report('fuse_conv_bn', n, ours / nodes * 1e6, ref / nodes * 1e6, f'(best of {reps})')


def _partition_support(gm, kind):
    """Supported: every call_function but every 100th op (chain) / the relu nodes (wide), by name."""
    ops = [n for n in gm.graph.nodes if n.op == 'call_function']
    if kind == 'chain':
        off = {n.name for i, n in enumerate(ops) if i % 100 == 99}
    else:
        off = {n.name for n in ops if n.target is torch.relu}
    return lambda: create_op_support(lambda mods, n: n.op == 'call_function' and n.name not in off)


def _named_partitions(gm, groups):
    by_name = {n.name: n for n in gm.graph.nodes}
    return [Partition(id=pid, nodes=[by_name[n] for n in names]) for pid, names in groups]


def bench_partition(sizes, repeat, quick, limit_s=REF_LIMIT_S):
    """propose_partitions and fuse_partitions of CapabilityBasedPartitioner, fxcpp vs torch.fx. A
    torch.fx stage is skipped when predicted (quadratically from the previous size) to take over
    limit_s (REF_LIMIT_S; --quick: QUICK_PARTITION_LIMIT_S); at 1e4 and above it runs once (quick) or twice."""
    for kind, build in (('chain', chain_gm), ('wide', wide_gm)):
        prev = {}  # stage -> (size, torch.fx seconds)
        for n in sizes:
            gm = build(n)
            nodes = len(gm.graph.nodes)
            support = _partition_support(gm, kind)
            proposed = FxPartitioner(gm, support()).propose_partitions()
            groups = [(p.id, sorted(x.name for x in p.nodes)) for p in proposed]
            ours = {'propose': best_of(lambda: build(n), lambda m: FxPartitioner(m, support()).propose_partitions(),
                                       repeat)}

            def fresh_fx():
                m = build(n)
                return m, _named_partitions(m, groups)
            # fuse at 1e5 on the wide graph: every fused block's output is re-pointed in the
            # 1e4-element output tuple (a scan per block; torch.fx rebuilds the tuple per block)
            try:
                ours['fuse'] = best_of(fresh_fx, lambda a: FxPartitioner(a[0], support()).fuse_partitions(a[1]),
                                       repeat if n <= 10000 else 2)
            except Exception as e:  # noqa: BLE001 -- one failing stage must not sink the others
                failure("fxcpp fuse_partitions", e, f"{kind}, {n} nodes")
                ours['fuse'] = float('nan')
            reps = repeat if n < 10000 else (1 if quick or n > 10000 else 2)
            ref = {}
            for stage in ('propose', 'fuse'):
                p = prev.get(stage)
                if p and p[1] * (n / p[0]) ** 2 > limit_s:
                    ref[stage] = float('nan')
                    continue
                if stage == 'propose':
                    # the run that checks torch.fx's proposal is timed too (it is one of the reps:
                    # at 1e4 on the chain one run takes about a minute)
                    m = fx.to_torch_fx(build(n))
                    gc.collect()
                    gc.disable()
                    try:
                        t0 = time.perf_counter()
                        theirs = _torch_partitioner(m, support()).propose_partitions()
                        first = time.perf_counter() - t0
                    finally:
                        gc.enable()
                    assert _same_partitions([(q.id, sorted(x.name for x in q.nodes)) for q in theirs], groups), \
                        'proposals differ'
                    del theirs, m
                    ref[stage] = first if reps <= 1 else min(first, best_of(
                        lambda: fx.to_torch_fx(build(n)),
                        lambda m: _torch_partitioner(m, support()).propose_partitions(), reps - 1))
                else:
                    def fresh_torch():
                        m = fx.to_torch_fx(build(n))
                        return m, _named_partitions(m, groups)
                    ref[stage] = best_of(fresh_torch, lambda a: TorchPartitioner.fuse_partitions(
                        _bare_torch_partitioner(a[0], support()), a[1]), reps)
                prev[stage] = (n, ref[stage])
            for stage in ('propose', 'fuse'):
                r = ref[stage]
                report(f'partition_{stage}_{kind}', n, ours[stage] / nodes * 1e6, r / nodes * 1e6 if r == r else r,
                       f'({len(groups)} partitions)')


def _torch_partitioner(gm, support):
    """torch.fx's partitioner with its default options: the path users get (on 2.x, horizontal
    fusion too, which fxcpp's core follows there)."""
    return TorchPartitioner(gm, support)


def _same_partitions(a, b):
    """The same ids, members and order."""
    return a == b


def _bare_torch_partitioner(gm, support):
    """A torch.fx partitioner for fuse_partitions only (its constructor would build the ancestor sets)."""
    p = TorchPartitioner.__new__(TorchPartitioner)
    p.graph_module, p.operator_support, p.allows_single_node_partition = gm, support, False
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--quick', action='store_true', help='1e3 / 1e4, few repeats')
    ap.add_argument('--full', action='store_true', help='1e3 / 1e4 / 1e5 (the default)')
    ap.add_argument('--only', action='append', choices=['split_module', 'const_fold', 'fuse', 'partition'],
                    help='run only these cases (repeatable)')
    args = ap.parse_args()
    only = set(args.only or ['split_module', 'const_fold', 'fuse', 'partition'])
    torch.set_num_threads(1)
    repeat = 3 if args.quick else 5
    sizes = [1000, 10000] if args.quick else [1000, 10000, 100000]
    print(f"torch {torch.__version__}; sizes in nodes; ratio = torch.fx / fxcpp (higher is better)")
    print(f"fxcpp split_module: {SPLIT_IMPL}")
    cases = [('split_module', lambda: (bench_split('split_module_chain', chain_gm, sizes, repeat),
                                       bench_split('split_module_wide', wide_gm, sizes, repeat))),
             ('const_fold', lambda: bench_const_fold(sizes, repeat)),
             ('fuse', lambda: bench_fuse(sizes, repeat, 6.0 if args.quick else REF_LIMIT_S)),
             ('partition', lambda: bench_partition(sizes, repeat, args.quick,
                                                   QUICK_PARTITION_LIMIT_S if args.quick else REF_LIMIT_S))]
    failed = False
    for name, run in cases:
        if name not in only:
            continue
        try:
            run()
        except Exception as e:  # noqa: BLE001 -- report it, run the other cases, exit non-zero
            traceback.print_exc()
            failure(f"the {name} cases", e)
            failed = True
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())

"""Transformation-toolkit benchmarks: fxcpp vs torch.fx 1.13, side by side.

Prints a human-readable table with ratios and, for a runner, one line per
measurement:

    BENCH,<suite>,<case>,<size>,<fxcpp_us_per_node>,<torchfx_us_per_node>

Suites:
  forward       generated-code forward on ints (the floor)
  interp        Interpreter.run per node: int operator.add chain; tiny-tensor
                chain (absolute, and overhead beyond the generated forward)
  transformer   Transformer(gm).transform() per node
  replace       replace_pattern on wide graphs with N/10 matches
  shape_prop    ShapeProp.propagate per node beyond running the ops

Usage: PYTHONPATH=python /usr/bin/python3 bench/bench_transform.py [--quick]
"""
import argparse
import operator
import os
import statistics
import sys
import time

try:
    import fxcpp  # noqa: F401  (installed, or on PYTHONPATH)
except ImportError:  # run from a checkout after `make build`: the assembled package
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'build', 'pkg'))

import torch  # noqa: E402
import torch.fx as tfx  # noqa: E402
from torch.fx.passes.shape_prop import ShapeProp as TShapeProp  # noqa: E402

import fxcpp as fx  # noqa: E402
from fxcpp.passes.shape_prop import ShapeProp as FShapeProp  # noqa: E402

LIBS = (('fxcpp', fx), ('torch.fx', tfx))
ROWS = []


def _calls_per_sample(fn, min_time):
    """Warms fn() up, then returns how many calls make a sample of >= min_time."""
    fn()
    t0 = time.perf_counter()
    fn()
    once = time.perf_counter() - t0
    return max(1, int(min_time / max(once, 1e-9)))


def timeit(fn, repeat, min_time=0.05):
    """Best (min) seconds per call of fn() over `repeat` samples (each >= min_time when cheap).

    The minimum is the most stable statistic on a shared machine."""
    inner = _calls_per_sample(fn, min_time)
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return min(samples)


def time_beyond(base, more, repeat, min_time=0.05):
    """Seconds per call that more() costs beyond base(): the median of paired
    differences, each pair timed back to back. Subtracting two separately
    taken minimums can come out negative when base() is noisy (a model's
    forward), and a median of pairs cannot be pulled there by one lucky
    sample."""
    base()
    inner = _calls_per_sample(more, min_time)
    diffs = []
    for _ in range(max(repeat, 3) * 2 + 1):
        t0 = time.perf_counter()
        for _ in range(inner):
            base()
        t1 = time.perf_counter()
        for _ in range(inner):
            more()
        t2 = time.perf_counter()
        diffs.append(((t2 - t1) - (t1 - t0)) / inner)
    diffs.sort()
    return diffs[len(diffs) // 2]


def report(suite, case, size, ours, ref, note=''):
    ROWS.append((suite, case, size, ours, ref))
    ratio = ref / ours if ours > 0 else float('inf')
    print(f"{suite:12s} {case:28s} {size:>7d}  fxcpp {ours:9.3f} us/node  torch.fx {ref:9.3f} us/node  "
          f"x{ratio:7.1f} {note}", flush=True)
    # machine-readable row, emitted as soon as it is measured (bench/run.py collects it)
    print(f"BENCH,{suite},{case},{size},{ours:.4f},{ref:.4f}", flush=True)


def add_chain(lib, n):
    g = lib.Graph()
    x = g.placeholder('x')
    y = g.placeholder('y')
    cur = x
    for _ in range(n):
        cur = g.call_function(operator.add, (cur, y))
    g.output(cur)
    return lib.GraphModule(torch.nn.Module(), g)


def bench_interp(sizes, repeat):
    for n in sizes:
        res = {}
        for name, lib in LIBS:
            gm = add_chain(lib, n)
            interp = lib.Interpreter(gm)
            a, b = torch.ones(1), torch.ones(1)
            res[name] = dict(
                fwd_int=timeit(lambda: gm(1, 2), repeat) / n * 1e6,
                interp_int=timeit(lambda: interp.run(1, 2), repeat) / n * 1e6,
                fwd_tensor=timeit(lambda: gm(a, b), repeat) / n * 1e6,
                interp_tensor=timeit(lambda: interp.run(a, b), repeat) / n * 1e6,
            )
        o, r = res['fxcpp'], res['torch.fx']
        report('forward', 'int_add_chain', n, o['fwd_int'], r['fwd_int'], '(generated code: the floor)')
        report('interp', 'int_add_chain', n, o['interp_int'], r['interp_int'], '(target <= 0.7)')
        report('interp', 'tiny_tensor_chain', n, o['interp_tensor'], r['interp_tensor'])
        report('interp', 'tiny_tensor_overhead', n, o['interp_tensor'] - o['fwd_tensor'],
               r['interp_tensor'] - r['fwd_tensor'], '(beyond the op; target <= 1.5)')


def bench_transformer(sizes, repeat):
    for n in sizes:
        res = {}
        for name, lib in LIBS:
            gm = add_chain(lib, n)
            reps = repeat if (name == 'fxcpp' or n <= 1000) else 1
            res[name] = timeit(lambda: lib.Transformer(gm).transform(), reps, min_time=0) / n * 1e6
        report('transformer', 'int_add_chain', n, res['fxcpp'], res['torch.fx'], '(target >= 10x, linear)')


def wide_graph(lib, n):
    """n nodes in n/10 independent blocks, each holding one relu(add(a, b))."""
    g = lib.Graph()
    x = g.placeholder('x')
    y = g.placeholder('y')
    outs = []
    for b in range(n // 10):
        t = g.call_function(operator.mul, (x, b))
        t = g.call_function(operator.sub, (t, 1))
        a = g.call_function(operator.add, (t, y))
        r = g.call_function(torch.relu, (a,))
        u = g.call_function(operator.mul, (r, 2))
        u = g.call_function(torch.neg, (u,))
        u = g.call_function(operator.add, (u, t))
        v = g.call_function(operator.truediv, (r, 3))
        w = g.call_function(operator.add, (u, v))
        outs.append(w)
    g.output(tuple(outs))
    return lib.GraphModule(torch.nn.Module(), g)


def relu_add(a, b):
    return torch.relu(a + b)


def sigmoid_mul(a, b):
    return torch.sigmoid(a * b)


def bench_replace(sizes, ref_max, repeat):
    for n in sizes:
        res = {}
        for name, lib in LIBS:
            if name == 'torch.fx' and n > ref_max:
                res[name] = float('nan')
                continue
            samples = []
            for _ in range(repeat if name == 'fxcpp' else 1):
                gm = wide_graph(lib, n)
                nodes = len(gm.graph.nodes)
                t0 = time.perf_counter()
                ms = lib.replace_pattern(gm, relu_add, sigmoid_mul)
                samples.append(time.perf_counter() - t0)
                assert len(ms) == n // 10
            res[name] = min(samples) / nodes * 1e6
        report('replace', 'wide_relu_add_n/10_matches', n, res['fxcpp'], res['torch.fx'],
               '' if res['torch.fx'] == res['torch.fx'] else '(torch.fx skipped at this size)')


def bench_shape_prop(repeat, quick):
    import torchvision
    cases = [('resnet18', lambda: torchvision.models.resnet18().eval(), torch.randn(1, 3, 32, 32))]
    if not quick:
        cases.append(('mobilenet_v2', lambda: torchvision.models.mobilenet_v2().eval(), torch.randn(1, 3, 32, 32)))
    for case, make, x in cases:
        res = {}
        for (name, lib), SP in zip(LIBS, (FShapeProp, TShapeProp)):
            torch.manual_seed(0)
            gm = lib.symbolic_trace(make())
            n = len(gm.graph.nodes)
            with torch.no_grad():
                res[name] = time_beyond(lambda: gm(x), lambda: SP(gm).propagate(x), repeat) / n * 1e6
        report('shape_prop', f'{case}_beyond_ops', n, res['fxcpp'], res['torch.fx'], '(target <= 3)')
    n = 1000
    res = {}
    for (name, lib), SP in zip(LIBS, (FShapeProp, TShapeProp)):
        gm = add_chain(lib, n)
        a, b = torch.ones(2), torch.ones(2)
        res[name] = time_beyond(lambda: gm(a, b), lambda: SP(gm).propagate(a, b), repeat) / n * 1e6
    report('shape_prop', 'tiny_tensor_chain_beyond_ops', n, res['fxcpp'], res['torch.fx'], '(target <= 3)')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--quick', action='store_true', help='small sizes, few repeats')
    ap.add_argument('--full', action='store_true', help='all sizes (the default)')
    args = ap.parse_args()
    torch.set_num_threads(1)
    repeat = 3 if args.quick else 7
    print(f"torch {torch.__version__}; sizes in nodes; ratio = torch.fx / fxcpp (higher is better)")
    bench_interp([1000] if args.quick else [1000, 10000], repeat)
    bench_transformer([1000] if args.quick else [1000, 10000], repeat)
    if args.quick:
        bench_replace([10000, 100000], ref_max=10000, repeat=1)
    else:
        # torch.fx needs ~150 s per replace_pattern at 1e5: measure it once.
        bench_replace([10000, 100000], ref_max=100000, repeat=1)
    bench_shape_prop(repeat, args.quick)


if __name__ == '__main__':
    main()

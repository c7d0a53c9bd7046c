"""The memory planner never aliases wrongly (Note [Memory planning] in
src/torch/compile.cpp), and re-learns its out tensors when input types change.

Graphs are built with fxcpp.Graph, saved with fxcpp.aten.save, loaded with
runtime='cpp' (planned) and run three times against eager PyTorch (the same
GraphModule run by Python); every result is kept and compared at the end, so
a later forward that writes into an earlier result is caught too.
"""
import operator

import pytest
import torch

import fxcpp
from fxcpp import aten

A = torch.ops.aten
# The planner is under test, not the policy (some of the eight aliasing operators are
# off the allow-list for files from strangers): files load as the user's own.
_LOAD_KW = {'trusted': True}


def load_cpp(gm, tmp_path, plan_memory=True):
    path = tmp_path / 'g.fxpt'
    aten.save(gm, path)
    return aten.load(path, runtime='cpp', plan_memory=plan_memory, **_LOAD_KW)


# Ops that may return their argument, or a view of it, with no alias annotation
# in their schema: (name, function of (graph, a, y) giving the aliasing node).
ALIASING = [
    ('type_as', lambda g, a, y: g.call_function(A.type_as.default, (a, y))),
    ('atleast_1d', lambda g, a, y: g.call_function(A.atleast_1d.default, (a,))),
    ('atleast_2d', lambda g, a, y: g.call_function(A.atleast_2d.default, (a,))),
    ('einsum', lambda g, a, y: g.call_function(A.einsum.default, ('ij->ij', [a]))),
    ('broadcast_tensors', lambda g, a, y: g.call_function(
        operator.getitem, (g.call_function(A.broadcast_tensors.default, ([a, y],)), 0))),
    ('to_dense', lambda g, a, y: g.call_function(A.to_dense.default, (a,))),
    ('conj_physical', lambda g, a, y: g.call_function(A.conj_physical.default, (a,))),
    ('sum_to_size', lambda g, a, y: g.call_function(A.sum_to_size.default, (a, [3, 4]))),
]

# Ops returning a list of views (`Tensor(a)[]`: the alias set is on the list's element, not on
# the list; Note [Memory planning]): the element the graph reads must keep its base alive.
LIST_VIEWS = [
    ('split_with_sizes', lambda g, a, y: g.call_function(
        operator.getitem, (g.call_function(A.split_with_sizes.default, (a, [1, 2])), 0))),
    ('split', lambda g, a, y: g.call_function(operator.getitem, (g.call_function(A.split.Tensor, (a, 1)), 2))),
    ('unbind', lambda g, a, y: g.call_function(operator.getitem, (g.call_function(A.unbind.int, (a,)), 1))),
    ('chunk', lambda g, a, y: g.call_function(operator.getitem, (g.call_function(A.chunk.default, (a, 3)), 0))),
]


def aliasing_graph(make):
    """a = x + y (planned); r = OP(a); b = x * y (planned, after a's last
    use as the planner sees it); c = r + b; a2 = x - y; r2 = OP(a2);
    returns (c, r2): r is read after b, r2 reaches the caller."""
    g = fxcpp.Graph()
    x, y = g.placeholder('x'), g.placeholder('y')
    a = g.call_function(A.add.Tensor, (x, y))
    r = make(g, a, y)
    b = g.call_function(A.mul.Tensor, (x, y))
    c = g.call_function(A.add.Tensor, (r, b))
    a2 = g.call_function(A.sub.Tensor, (x, y))
    r2 = make(g, a2, y)
    g.output((c, r2))
    return fxcpp.GraphModule(torch.nn.Module(), g)


def run_three_times(gm, m, make_inputs):
    got, want = [], []
    for i in range(3):
        inputs = make_inputs(i)
        want.append(gm(*[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]))
        got.append(m(*inputs))
    for i, (g_, w) in enumerate(zip(got, want)):
        assert type(g_) is type(w)
        for a, b in zip(g_, w):
            assert a.dtype == b.dtype and a.shape == b.shape, f'call {i}: {a.dtype}{list(a.shape)} != ' \
                                                              f'{b.dtype}{list(b.shape)}'
            torch.testing.assert_close(a, b, equal_nan=True, msg=lambda s: f'call {i}: {s}')


@pytest.mark.parametrize('name,make', ALIASING, ids=[n for n, _ in ALIASING])
def test_ops_returning_their_argument_unannotated_are_not_misplanned(tmp_path, name, make):
    gm = aliasing_graph(make)
    m = load_cpp(gm, tmp_path)
    run_three_times(gm, m, lambda i: (torch.randn(3, 4), torch.randn(3, 4)))


@pytest.mark.parametrize('name,make', LIST_VIEWS, ids=[n for n, _ in LIST_VIEWS])
def test_views_returned_in_a_list_keep_their_base_buffer(tmp_path, name, make):
    # Found on the core-ATen form of a GPT-2-style decoder (split_with_sizes of a planned addmm):
    # a later op reused the buffer the split's views still read, from the second forward on.
    gm = aliasing_graph(make)
    m = load_cpp(gm, tmp_path)
    assert m._runtime.plan_stats()['managed'] >= 2
    run_three_times(gm, m, lambda i: (torch.randn(3, 4), torch.randn(3, 4)))


# A custom operator with a CPU kernel of its own that returns its argument
# when `same` is true: the planner assumes the result is fresh, the runtime's
# storage check must catch it (on the learning forward or a later one).
_lib = torch.library.Library('fxcpp_planner_test', 'DEF')
_lib.define('maybe_same(Tensor x, int same) -> Tensor')
_lib.impl('maybe_same', lambda x, same: x if same else x.clone(), 'CPU')
MAYBE_SAME = torch.ops.fxcpp_planner_test.maybe_same.default


@pytest.mark.parametrize('flags', [(1, 1, 1), (0, 0, 1), (0, 1, 0)])
def test_storage_check_catches_unexpected_aliases(tmp_path, flags):
    g = fxcpp.Graph()
    x, y, s = g.placeholder('x'), g.placeholder('y'), g.placeholder('s')
    a = g.call_function(A.add.Tensor, (x, y))
    r = g.call_function(MAYBE_SAME, (a, s))
    b = g.call_function(A.mul.Tensor, (x, y))
    c = g.call_function(A.add.Tensor, (r, b))
    a2 = g.call_function(A.sub.Tensor, (x, y))
    r2 = g.call_function(MAYBE_SAME, (a2, s))
    d = g.call_function(A.mul.Tensor, (x, x))  # planned after r2 was computed
    e = g.call_function(A.add.Tensor, (d, x))
    g.output((c, r2, e))
    gm = fxcpp.GraphModule(torch.nn.Module(), g)
    m = load_cpp(gm, tmp_path)
    assert m._runtime.plan_stats()['managed'] == 4
    run_three_times(gm, m, lambda i: (torch.randn(3, 4), torch.randn(3, 4), flags[i]))


def test_planned_path_keys_on_number_input_types(tmp_path):
    # r = (x + x) * n: its dtype follows n's type (int64 tensor * float -> float).
    g = fxcpp.Graph()
    x, n, t = g.placeholder('x'), g.placeholder('n'), g.placeholder('t')
    a = g.call_function(A.add.Tensor, (x, x))
    r = g.call_function(A.mul.Tensor, (a, n))
    k = g.call_function(operator.getitem, (t, 0))
    r2 = g.call_function(A.mul.Tensor, (a, k))
    out = g.call_function(A.add.Tensor, (r, 1))
    out2 = g.call_function(A.add.Tensor, (r2, 1))
    g.output((out, out2))
    gm = fxcpp.GraphModule(torch.nn.Module(), g)
    m = load_cpp(gm, tmp_path)
    assert m._runtime.plan_stats()['managed'] >= 2
    xi = torch.arange(6).reshape(2, 3)
    for n_, t_ in [(2, (3,)), (2.5, (3,)), (2, (1.5,)), (True, (False,)), (3, (2,)), (-0.5, (4,)), (2, (True,))]:
        got, want = m(xi, n_, t_), gm(xi, n_, t_)
        for a_, b_ in zip(got, want):
            assert a_.dtype == b_.dtype, (n_, t_, a_.dtype, b_.dtype)
            torch.testing.assert_close(a_, b_)


def test_aliasing_composites_do_not_stop_the_rest_of_the_plan(tmp_path):
    # The composites' results join their arguments' sets; values elsewhere
    # in the graph are still planned.
    gm = aliasing_graph(ALIASING[0][1])
    m = load_cpp(gm, tmp_path)
    unplanned = load_cpp(gm, tmp_path, plan_memory=False)
    assert m._runtime.plan_stats()['managed'] >= 1
    assert unplanned._runtime.plan_stats()['managed'] == 0


def _chain_around(op_call, *shapes):
    """p_i -> p_i * 1 (planned) -> op -> * 1: the op's result is a planned intermediate."""
    g = fxcpp.Graph()
    ins = [g.call_function(A.mul.Tensor, (g.placeholder(f'x{i}'), 1)) for i in range(len(shapes))]
    r = op_call(g, *ins)
    g.output((g.call_function(A.mul.Tensor, (r, 1)),))
    return fxcpp.GraphModule(torch.nn.Module(), g)


@pytest.mark.parametrize('name,call,shapes', [
    # rrelu_with_noise.out (training) writes numel elements into `out` without
    # resizing it; lower == upper makes the noise deterministic.
    ('rrelu_with_noise', lambda g, x, n: g.call_function(A.rrelu_with_noise.default, (x, n, 0.25, 0.25, True)),
     [(20,), (20,)]),
    # binary_cross_entropy.out gives nan for 0-dim inputs.
    ('binary_cross_entropy', lambda g, x, t: g.call_function(A.binary_cross_entropy.default, (x, t)), [(), ()]),
    # normal.Tensor_float.out fails on an empty `out` (the runtime falls back
    # to the functional call); std 0 makes the result deterministic.
    ('normal', lambda g, m: g.call_function(A.normal.Tensor_float, (m, 0.0)), [(2, 3)]),
])
def test_out_kernels_that_differ_from_their_functional_form_are_not_planned(tmp_path, name, call, shapes):
    gm = _chain_around(call, *shapes)
    m = load_cpp(gm, tmp_path)
    run_three_times(gm, m, lambda i: tuple(torch.rand(s) for s in shapes))


@pytest.mark.parametrize('name,view', [
    # PyTorch's own bounds check multiplies the offset by the element size and overflows.
    ('as_strided', lambda g, x: g.call_function(A.as_strided.default, (x, [4], [1], 2 ** 62))),
    # _reshape_alias checks nothing.
    ('_reshape_alias', lambda g, x: g.call_function(A._reshape_alias.default, (x, [6], [7]))),
])
def test_views_outside_their_storage_are_refused(tmp_path, name, view):
    # Note [Views stay inside their storage]: refused before anything reads them.
    g = fxcpp.Graph()
    x = g.placeholder('x')
    v = view(g, g.call_function(A.mul.Tensor, (x, 1)))
    g.output((g.call_function(A.add.Tensor, (v, 1)),))
    m = load_cpp(fxcpp.GraphModule(torch.nn.Module(), g), tmp_path)
    for _ in range(2):
        # torch 2.x's as_strided checks the overflow itself, before fxcpp's check.
        with pytest.raises(RuntimeError, match='reaches outside (its storage|the elements of its input)|Storage size calculation overflowed'):
            m(torch.randn(6))

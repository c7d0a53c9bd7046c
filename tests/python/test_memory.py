"""Object lifetime: refcounts, GC, and flat RSS over many graphs."""
import copy
import gc
import operator
import resource
import sys
import weakref

import torch

import fxcpp as fx


def build(n=50):
    g = fx.Graph()
    x = g.placeholder('x')
    prev = x
    for i in range(n):
        prev = g.call_function(operator.add, (prev, i))
    g.output(prev)
    return g


def test_refcounts_of_args_and_targets():
    obj = object()
    base = sys.getrefcount(obj)
    g = fx.Graph()
    x = g.placeholder('x')
    n = g.call_function(print, (x, obj))
    assert sys.getrefcount(obj) > base
    _ = n.args
    g.erase_node(n)
    del n, _
    gc.collect()
    assert sys.getrefcount(obj) == base
    del g, x
    gc.collect()
    assert sys.getrefcount(obj) == base


def test_graph_and_nodes_collected():
    g = build()
    nodes = list(g.nodes)
    refs = [weakref.ref(n) for n in nodes] + [weakref.ref(g)]
    code = g.python_code('self').src
    assert 'add_49' in code
    del g, nodes
    gc.collect()
    assert all(r() is None for r in refs)


def test_node_keeps_graph_alive():
    g = build(3)
    last = list(g.nodes)[-2]
    wg = weakref.ref(g)
    del g
    gc.collect()
    assert wg() is not None
    assert last.graph is wg()
    assert [n.name for n in last.graph.nodes][-1] == 'output'


def _rss_kib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def test_build_and_drop_1000_graphs_flat_rss():
    def churn(k):
        for _ in range(k):
            g = build(50)
            gm = fx.GraphModule(torch.nn.Module(), g)
            for n in list(g.nodes):
                _ = (n.args, n.users, n.meta)
            g.eliminate_dead_code()
            del g, gm
        gc.collect()

    churn(200)  # warm up allocator and caches
    before = _rss_kib()
    churn(1000)
    after = _rss_kib()
    # max RSS may not grow by more than a few MiB once warm
    assert after - before < 16 * 1024, (before, after)


def test_erased_node_wrappers_release_core_nodes():
    g = fx.Graph()
    x = g.placeholder('x')
    for _ in range(1000):
        n = g.call_function(torch.relu, (x,))
        g.erase_node(n)
    del n
    gc.collect()
    assert len(g.nodes) == 1
    assert len(list(g.nodes)) == 1


def test_dce_erasing_nodes_only_the_core_holds():
    # Regression: the wrapper of an erased node held only by the core died
    # inside the C++ DCE loop and freed the node under its iterator.
    g = fx.Graph()
    x = g.placeholder('x')
    a = g.call_function(operator.add, (x, 1))
    c = g.call_method('conjugate', (a,))
    d = g.call_method('neg', (c,))
    g.output(a)
    del x, a, c, d
    gc.collect()
    assert g.eliminate_dead_code()
    assert [n.name for n in g.nodes] == ['x', 'add', 'output']
    g.lint()


def test_adversarial_inputs_raise_instead_of_crashing():
    import pytest

    g = fx.Graph()
    x = g.placeholder('x')
    loop = []
    loop.append(loop)
    with pytest.raises(RecursionError):
        g.call_function(print, (loop,))
    with pytest.raises(ValueError, match='root'):
        x.prepend(g._root)

    class BadRepr:
        def __repr__(self):
            raise ValueError('no repr')

    g.call_function(print, (x, BadRepr()))
    with pytest.raises(ValueError, match='no repr'):
        g.python_code('self')
    with pytest.raises(TypeError):
        g.create_node('call_function', print, (), {1: 2})
    with pytest.raises(TypeError):
        copy.deepcopy(x)
    g.lint()

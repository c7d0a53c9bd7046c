"""Verbose generated code and print_readable against the installed torch.fx (issue 23, item 1).

torch.fx 2.x's verbose code annotates values from their metadata (`lin: "f32[2, 3]" = ...`, from
node.meta "val", "tensor_meta" or "example_value"), and python_code / print_readable take the
options include_stride, include_device, colored, expanded_def, record_func and additional_meta;
constants are written by 2.x's rules (tensors, enums, OpOverloads, NamedTuples at any depth,
complex numbers). Every test builds the same graph with both libraries and compares the text
byte for byte (Note [Verbose annotations], Note [Constants in generated code] in
src/core/codegen.cpp). torch.fx 1.13 has none of the options: there the verbose code itself is
compared.
"""
import collections
import copy
import enum
import itertools
import typing

import pytest
import torch
from hypothesis import given, settings, strategies as st
import torch.fx as tfx
from torch.fx.passes.shape_prop import ShapeProp as TShapeProp

import fxcpp
from fxcpp.passes.shape_prop import ShapeProp as FShapeProp
from torch2 import TORCH2

needs2 = pytest.mark.skipif(not TORCH2, reason='torch.fx 1.13 has no such option')
LIBS = [(tfx, TShapeProp), (fxcpp, FShapeProp)]


class Sub(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.lin(x).relu()


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.sub = Sub()

    def forward(self, x, n: int):
        y = self.lin(x)
        s = y.size()
        t = y.to(torch.float16)
        return (y.relu(), s, t[0], x.shape[0] + 1, y.max(dim=1), self.sub(x), torch.cat([y, y], dim=n))


def _decorate(gm):
    """Metadata of every kind the annotations read, put on both libraries' graphs alike."""
    for node in gm.graph.nodes:
        if node.name == 'relu':
            node.meta['val'] = torch.empty(2, 3).t()  # strided: include_stride shows it
        elif node.name == 'to':
            node.meta['custom'] = {'k': 'v' * 50, 'j': 1}  # cut at 40 characters
        elif node.name == 'getitem':
            node.meta['seq_nr'] = 7
            node.meta['example_value'] = torch.zeros(3, dtype=torch.int64)
        elif node.name == 'size':
            node.meta['val'] = torch.nn.Parameter(torch.zeros(2))  # a subclass: Parameter(f32[2])
        elif node.name == 'add':
            node.meta['val'] = None  # "val" wins even when None: no annotation
            node.meta['tensor_meta'] = 'unused'
        elif node.name == 'cat':
            node.meta['val'] = torch.zeros(4, 3).to_sparse_csr()  # sparse CSR: not annotated
    return gm


def _traced(lib, sp, stack_traces=False):
    torch.manual_seed(0)
    tracer = lib.Tracer()
    tracer.record_stack_traces = stack_traces
    root = Model()
    graph = tracer.trace(root, concrete_args={'n': 1})
    gm = lib.GraphModule(root, graph)
    sp(gm).propagate(torch.randn(2, 4), 1)
    gm.add_submodule('child', lib.symbolic_trace(Sub()))
    return _decorate(gm)


OPTIONS = [dict(zip(('include_stride', 'include_device', 'colored', 'expanded_def'), flags))
           for flags in itertools.product([False, True], repeat=4)]


def _opt_id(o):
    return '-'.join(k for k, v in o.items() if v) or 'plain'


def test_verbose_code_as_torch_fx():
    texts = [_traced(lib, sp).graph.python_code('self', verbose=True).src for lib, sp in LIBS]
    assert texts[1] == texts[0]
    if TORCH2:
        assert 'lin: "f32[2, 3]" = self.lin(x)' in texts[1]


@needs2
@pytest.mark.parametrize('options', OPTIONS, ids=_opt_id)
def test_print_readable_options_as_torch_fx(options):
    texts = [_traced(lib, sp).print_readable(print_output=False, **options) for lib, sp in LIBS]
    assert texts[1] == texts[0]


@needs2
@pytest.mark.parametrize('options', [dict(verbose=True, additional_meta=['seq_nr', 'missing']),
                                     dict(verbose=True, record_func=True), dict(verbose=False, record_func=True),
                                     dict(verbose=False, colored=True), dict(verbose=True, colored=True,
                                                                             include_stride=True)],
                         ids=['additional_meta', 'record_func_verbose', 'record_func', 'colored', 'colored_stride'])
def test_python_code_options_as_torch_fx(options):
    codes = [_traced(lib, sp).graph.python_code('self', **options) for lib, sp in LIBS]
    assert codes[1].src == codes[0].src
    assert sorted(codes[1].globals) == sorted(codes[0].globals)


def _wrapped_leaf(x):
    return x + 1


tfx.wrap('_wrapped_leaf')  # torch.fx's registry, which fxcpp's tracer patches too: a wrap() header line


def _with_wrapped_call(x, y):
    return _wrapped_leaf(x).relu() + y


@needs2
@pytest.mark.parametrize('options', [dict(zip(('verbose', 'expanded_def', 'record_func'), flags))
                                     for flags in itertools.product([False, True], repeat=3)], ids=_opt_id)
def test_line_numbers_as_torch_fx(options):
    """PythonCode._lineno_map and _prologue_start (torch.fx 2.x; Note [Line numbers of generated
    code]): the same map from each body line to a node position, for every option that adds lines."""
    def codes(lib, sp):
        yield _traced(lib, sp).graph.python_code('self', **options)
        tracer = lib.Tracer()
        yield lib.GraphModule(torch.nn.Module(), tracer.trace(_with_wrapped_call)).graph.python_code('self', **options)
        yield lib.Graph().python_code('self', **options)
    for ref, ours in zip(*(codes(lib, sp) for lib, sp in LIBS)):
        assert ours.src == ref.src
        assert ours._lineno_map == ref._lineno_map
        assert ours._prologue_start == ref._prologue_start
    # and a torch.fx GraphModule compiles an fxcpp graph through them
    gm = fxcpp.symbolic_trace(Sub())
    wrapped = tfx.GraphModule(gm, gm.graph)
    assert wrapped._lineno_map == tfx.symbolic_trace(Sub())._lineno_map and wrapped.code == gm.code


@needs2
@settings(max_examples=60, deadline=None)
@given(edits=st.lists(st.tuples(st.sampled_from(['insert', 'delete', 'duplicate', 'swap', 'blank']),
                                st.integers(0, 40)), max_size=6),
       verbose=st.booleans())
def test_line_numbers_through_a_body_transformer_as_torch_fx(edits, verbose):
    """With a body transformer (on_generate_code), torch.fx 2.x's "# COUNTER: i" marker lines go
    through it and are read back: the same source and line map for any edit of the line list
    (markers moved, dropped or duplicated included)."""
    def transform(body):
        body = list(body)
        for kind, at in edits:
            i = at % (len(body) + 1)
            if kind == 'insert':
                body.insert(i, f"print('line {at}')\n")
            elif kind == 'blank':
                body.insert(i, '\n')
            elif body and kind == 'delete':
                del body[i % len(body)]
            elif body and kind == 'duplicate':
                body.insert(i, body[i % len(body)])
            elif len(body) > 1 and kind == 'swap':
                j = i % len(body)
                body[j - 1], body[j] = body[j], body[j - 1]
        return body
    out = []
    for lib, sp in LIBS:
        gm = _traced(lib, sp)
        gm.graph.on_generate_code(lambda _: transform)
        pc = gm.graph.python_code('self', verbose=verbose)
        out.append((pc.src, pc._lineno_map, pc._prologue_start))
    assert out[1] == out[0]


@needs2
@pytest.mark.parametrize('env', ['FX_GRAPH_SHOW_STRIDE', 'FX_GRAPH_SHOW_DEVICE'])
def test_environment_switches_as_torch_fx(env, monkeypatch):
    monkeypatch.setenv(env, '1')
    texts = [_traced(lib, sp).print_readable(print_output=False) for lib, sp in LIBS]
    assert texts[1] == texts[0]
    assert ('f32[3, 2][1, 3]' if env.endswith('STRIDE') else 'f32[3, 2]cpu') in texts[1]


@needs2
def test_stack_trace_comments_point_at_user_lines():
    """With record_stack_traces torch.fx 2.14 summarizes each node by its own innermost frame,
    torch/fx/proxy.py's create_node (Note [Tracing metadata]); fxcpp by the user's line. Given the
    same stack traces, both write the same text."""
    ours = _traced(fxcpp, FShapeProp, stack_traces=True)
    text = ours.print_readable(print_output=False)
    assert f'# File: {__file__}:' in text and 'in forward, code: y = self.lin(x)' in text
    assert 'proxy.py' not in text
    ref = _traced(tfx, TShapeProp)
    for n_ref, n_ours in zip(ref.graph.nodes, ours.graph.nodes):
        if 'stack_trace' in n_ours.meta:
            n_ref.meta['stack_trace'] = n_ours.meta['stack_trace']
    assert text == ref.print_readable(print_output=False)


class Color(enum.Enum):
    RED = 1


Pair = collections.namedtuple('Pair', ['a', 'b'])


def _constants_graph(lib):
    g = lib.Graph()
    x = g.placeholder('x')
    g.call_function(torch.add, (x, torch.ones(2, 3)))
    g.call_function(torch.add, (x, [Pair(1, 2), (Pair(3, x),)]))
    g.call_function(torch.add, (x, Color.RED))
    g.call_function(torch.ops.aten.add.Tensor, (x, torch.ops.aten.mul.Tensor))
    g.call_function(torch.add, (x, complex(0, 1), complex(1, 2), complex(float('nan'), 1), complex(-0.0, -1)))
    g.call_function(torch.add, (x, {'a': x, 'b': 1.5}, slice(1, None), None, 'str', torch.float16,
                                torch.device('cpu'), ...))
    g.call_method('view', (x, -1), {'k': Pair(x, 2)})
    g.output((x, Pair(x, 1.5)))
    return g


@pytest.mark.parametrize('options', [{}, dict(verbose=True)] + [
    pytest.param(o, marks=needs2) for o in (dict(colored=True), dict(verbose=True, colored=True, expanded_def=True))],
    ids=['plain', 'verbose', 'colored', 'colored_expanded'])
def test_constants_written_as_torch_fx(options):
    codes = [_constants_graph(lib).python_code('self', **options) for lib in (tfx, fxcpp)]
    assert codes[1].src == codes[0].src
    assert sorted(codes[1].globals) == sorted(codes[0].globals)
    assert all(codes[1].globals[k] is codes[0].globals[k] for k in codes[0].globals)


@needs2
def test_colored_golden():
    g = fxcpp.Graph()
    x = g.placeholder('x')
    y = g.call_function(torch.add, (x, 2))
    g.call_method('sum', (y,), {'dim': None})
    g.output(y)
    src = g.python_code('self', verbose=True, colored=True, expanded_def=True).src
    assert src == ('\n\n\ndef forward(\n    self,\n    x,\n):\n'
                   '    \x1b[2m# No stacktrace found for following nodes\x1b[0m\n'
                   '    add = torch.add(x, \x1b[34m2\x1b[0m);  \x1b[2mx = None\x1b[0m\n'
                   '    sum_1 = add.sum(dim = \x1b[34mNone\x1b[0m);  \x1b[2msum_1 = None\x1b[0m\n'
                   '    return add\n    ')


@needs2
def test_fake_and_symbolic_values_as_torch_fx():
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    mode = FakeTensorMode(shape_env=ShapeEnv())
    with mode:
        fake = torch.empty(2, 5)
    sym = mode.shape_env.create_unbacked_symint()
    texts = []
    for lib in (tfx, fxcpp):
        g = lib.Graph()
        x = g.placeholder('x')
        x.meta['val'] = fake
        y = g.call_method('size', (x, 0))
        y.meta['val'] = sym
        g.output(y)
        texts.append(g.python_code('self', verbose=True, include_stride=True).src)
    assert texts[1] == texts[0]
    assert 'Sym(' in texts[1] and 'f32[2, 5][5, 1]' in texts[1]


@needs2
def test_codegen_override_gets_expanded_def_when_it_takes_it():
    seen = []

    def make(lib):
        class Gen(lib.CodeGen):
            def gen_fn_def(self, free_vars, maybe_return_annotation, *, expanded_def=False):
                seen.append(expanded_def)
                return super().gen_fn_def(free_vars, maybe_return_annotation, expanded_def=expanded_def)
        return Gen()

    texts = []
    for lib in (tfx, fxcpp):
        g = lib.Graph()
        g.output(g.placeholder('x'))
        g.set_codegen(make(lib))
        texts.append(g.python_code('self', expanded_def=True).src)
    assert texts[1] == texts[0] and seen == [True, True]


@pytest.mark.parametrize('annotation', [typing.Dict[str, torch.Tensor], dict[str, torch.Tensor], typing.List[int],
                                        list[int], typing.Tuple[int, ...], tuple[int, str], typing.Optional[int]],
                         ids=['typing.Dict', 'dict', 'typing.List', 'list', 'typing.Tuple', 'tuple', 'Optional'])
def test_generic_annotations_as_torch_fx(annotation):
    """torch.fx 1.13 spells every generic's origin through typing (typing_Dict[...]); 2.x only
    typing's own generics, and writes dict[...] as it is."""
    codes = []
    for lib in (tfx, fxcpp):
        g = lib.Graph()
        x = g.placeholder('x', type_expr=annotation)
        g.output(x, type_expr=annotation)
        codes.append(g.python_code('self'))
    assert codes[1].src == codes[0].src
    assert {k: v for k, v in codes[1].globals.items()} == {k: v for k, v in codes[0].globals.items()}


@needs2
@pytest.mark.parametrize('out_kind', ['tuple', 'list', 'single'])
def test_expanded_def_descriptions_as_torch_fx(out_kind):
    """node.meta["desc"] (AOTAutograd's descriptors) comments a parameter and each returned item
    in expanded_def code."""
    texts = []
    for lib in (tfx, fxcpp):
        g = lib.Graph()
        x = g.placeholder('x')
        x.meta['desc'] = 'PlainAOTInput(idx=0)'
        y = g.placeholder('y', default_value=3)
        y.meta['desc'] = ('#', 1)
        z = g.call_function(torch.add, (x, y))
        out = {'tuple': (z, x, 2), 'list': [z, x], 'single': z}[out_kind]
        g.output(out).meta['desc'] = ['out0', 'out1']
        texts.append(g.python_code('self', verbose=True, expanded_def=True, colored=True).src)
    assert texts[1] == texts[0]

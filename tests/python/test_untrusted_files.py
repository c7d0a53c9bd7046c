"""Files from strangers (issue 24): the operator allow-list and the name checks
of the C++ loader (Note [What a file may make the runtime do] in
include/fxcpp/torch/policy.h, Note [Names a file may use] in
src/torch/load.cpp), through fxcpp._C_torch and fxcpp.aten.load in both
runtimes, and the error boundary's messages."""
import json
import keyword
import os
import re
import struct
import subprocess
import sys
import tempfile

import pytest
import torch
from hypothesis import given, settings, strategies as st

from fxcpp import _C_torch, aten

FIXTURES = os.path.join(os.path.dirname(__file__), '..', 'cpp_torch', 'fixtures')
OPT_IN = re.escape('If you made this file yourself, load it with trusted=True (C++: LoadOptions::trusted = true).')


def _write(path, doc, records=()):
    text = json.dumps(doc, separators=(',', ':')).encode() if isinstance(doc, dict) else doc
    writer = torch._C.PyTorchFileWriter(str(path))
    writer.write_record('graph.json', text, len(text))
    for name, data in records:
        writer.write_record(name, data, len(data))
    writer.write_end_of_file()
    return path


def _doc(nodes, tensors=(), storages=(), class_name='GraphModule'):
    return {'format': 'fxcpp-aten', 'version': 1, 'class_name': class_name, 'storages': list(storages),
            'tensors': list(tensors), 'nodes': nodes}


def _ph(name, target=None):
    return {'op': 'placeholder', 'name': name, 'target': name if target is None else target, 'args': [], 'kwargs': {}}


def _call(name, target, *args):
    return {'op': 'call_function', 'name': name, 'target': target, 'args': list(args), 'kwargs': {}}


def _out(value):
    return {'op': 'output', 'name': 'output', 'target': 'output', 'args': [value], 'kwargs': {}}


def _ref(name):
    return {'node': name}


def _assert_refused(path, op, why):
    message = f"calls {re.escape(op)}, which a file from an untrusted source may not call \\({why}.*{OPT_IN}"
    with pytest.raises(ValueError, match=message):
        _C_torch.load(path)
    with pytest.raises(ValueError, match=message):
        _C_torch.load(path.read_bytes())
    for runtime in ('python', 'cpp'):
        with pytest.raises(ValueError, match=message):
            aten.load(path, runtime=runtime)


def test_from_file_writer_is_refused_and_writes_nothing(tmp_path):
    marker = tmp_path / 'marker'
    path = _write(tmp_path / 'writer.fxpt', _doc([
        _ph('x'),
        _call('from_file', 'aten::from_file', str(marker), True, 4),
        _call('copy', 'aten::copy_', _ref('from_file'), _ref('x')),
        _out(_ref('copy')),
    ]))
    _assert_refused(path, 'aten::from_file', 'it reads or writes files')
    assert not marker.exists()


def _as_strided_doc(path, size, stride, offset, slice_end=None):
    """x[:slice_end] (all of x when None) viewed with as_strided(size, stride, offset)."""
    nodes = [_ph('x')]
    base = _ref('x')
    if slice_end is not None:
        nodes.append(_call('sl', 'aten::slice.Tensor', _ref('x'), 0, 0, slice_end))
        base = _ref('sl')
    nodes += [_call('as_strided', 'aten::as_strided', base, {'list': size}, {'list': stride}, offset),
              _call('out', 'aten::add.Tensor', _ref('as_strided'), 1), _out(_ref('out'))]
    return _write(path, _doc(nodes))


@pytest.mark.parametrize('size, stride, offset, slice_end', [
    ([4], [1], 2 ** 62, None),        # an offset whose byte count overflows (1.13's own check wraps)
    ([4], [2 ** 61], 0, None),        # a stride that overflows
    ([7], [1], 0, None),              # one element past x
    ([2], [1], 5, None),              # past x's end from an offset inside it
    ([4], [1], 0, 2),                 # inside x's storage, past the slice's own elements
    ([2, 2], [1, 2], 1, 3),           # the same with a 2-d view
])
def test_as_strided_outside_its_input_is_refused(tmp_path, size, stride, offset, slice_end):
    """Note [Argument guards]: as_strided is allowed (core-ATen exports of convnext and swin
    call it), and its view must stay inside the elements its input spans, not merely its
    storage (a planned buffer may hold another value's bytes), in both runtimes."""
    path = _as_strided_doc(tmp_path / 'strided.fxpt', size, stride, offset, slice_end)
    for runtime in ('python', 'cpp'):
        m = aten.load(path, runtime=runtime)
        for _ in range(2):
            with pytest.raises(RuntimeError,
                               match='reaches outside the elements of its input|Storage size calculation overflowed'):
                m(torch.arange(6.0))


@pytest.mark.parametrize('size, stride, offset, slice_end', [
    ([6], [1], 0, None), ([2, 3], [3, 1], 0, None), ([3, 2], [1, 3], 0, None), ([2], [2], 1, None),
    ([2, 2], [1, 1], 0, 3), ([1], [1], 5, None), ([0], [1], 6, None), ([3], [0], 2, None),
])
def test_as_strided_inside_its_input_equals_eager(tmp_path, size, stride, offset, slice_end):
    path = _as_strided_doc(tmp_path / 'strided.fxpt', size, stride, offset, slice_end)
    x = torch.arange(6.0)
    base = x if slice_end is None else x[:slice_end]
    want = torch.as_strided(base, size, stride, offset) + 1
    for runtime in ('python', 'cpp'):
        m = aten.load(path, runtime=runtime)
        for _ in range(2):
            got = m(x.clone())
            got = got[0] if isinstance(got, (tuple, list)) else got
            torch.testing.assert_close(got, want)


def test_unchecked_sparse_tensor_is_refused(tmp_path):
    path = _write(tmp_path / 'sparse.fxpt', _doc([
        _ph('indices'), _ph('values'),
        _call('sparse', 'aten::_sparse_coo_tensor_unsafe', _ref('indices'), _ref('values'), {'list': [2]}),
        _call('dense', 'aten::to_dense', _ref('sparse')),
        _out(_ref('dense')),
    ]))
    _assert_refused(path, 'aten::_sparse_coo_tensor_unsafe', 'it takes raw storages')


@pytest.mark.parametrize('target, args, why', [
    # An out-of-range mode int makes the kernel return uninitialised memory.
    ('aten::grid_sampler_2d', [_ref('x'), _ref('grid'), 7, 9, True], 'it is not on the list'),
    # (native_batch_norm, which reads short statistics out of bounds, is allowed behind an
    # argument guard: test_argument_guards.py.)
    # An empty tensor crashes the process.
    ('aten::_local_scalar_dense', [_ref('x')], 'it is not on the list'),
    # So does an empty padding list.
    ('aten::reflection_pad2d', [_ref('x'), {'list': []}], 'it is not on the list'),
])
def test_core_operators_that_misbehave_are_refused(tmp_path, target, args, why):
    path = _write(tmp_path / 'op.fxpt', _doc([_ph('x'), _ph('grid'), _call('op', target, *args),
                                             _out(_ref('op'))]))
    _assert_refused(path, target, why)


@pytest.mark.parametrize('call, message', [
    (_call('v', 'aten::view.dtype', _ref('x'), -5), "argument 'dtype' of aten::view.dtype is -5, which is not a ScalarType"),
    ({**_call('v', 'aten::scalar_tensor', 1.0), 'kwargs': {'dtype': 200}}, 'is 200, which is not a ScalarType'),
    ({**_call('v', 'aten::zeros', {'list': [2]}), 'kwargs': {'layout': {'dtype': 'float64'}}},
     'is the float64 constant, which is not a Layout'),
])
def test_enumeration_arguments_are_checked(tmp_path, call, message):
    """Kernels index tables with dtype/layout ints unchecked (view.dtype(-5): SIGFPE)."""
    path = _write(tmp_path / 'enum.fxpt', _doc([_ph('x'), call, _out(_ref('v'))]))
    for load in (lambda: _C_torch.load(path), lambda: _C_torch.load(path, trusted=True),
                 lambda: aten.load(path, runtime='python'), lambda: aten.load(path, runtime='cpp')):
        with pytest.raises(ValueError, match=re.escape(message)):
            load()


def test_uninitialised_memory_is_refused_and_trusted_files_may_call_anything(tmp_path):
    data = tmp_path / 'data.bin'
    want = torch.tensor([1.5, -2.0, 3.25, 0.0])
    data.write_bytes(struct.pack('<4f', *want.tolist()))
    path = _write(tmp_path / 'reader.fxpt', _doc([
        _call('from_file', 'aten::from_file', str(data), False, 4),
        _call('empty', 'aten::empty.memory_format', {'list': [2, 3]}),
        _call('size', 'aten::size.int', _ref('empty'), 1),
        _out({'tuple': [_ref('from_file'), _ref('size')]}),
    ]))
    with pytest.raises(ValueError, match='calls aten::from_file'):
        _C_torch.load(path)
    for source in (path, str(path), path.read_bytes(), bytearray(path.read_bytes())):
        for plan in (True, False):
            rt = _C_torch.load(source, plan_memory=plan, trusted=True)
            for _ in range(2):
                got, size = rt.run()
                assert torch.equal(got, want) and size == 3


def test_fixture_loads_by_default_from_a_path_or_bytes():
    path = os.path.join(FIXTURES, 'small_v1.fxpt')
    with open(path, 'rb') as f:
        data = f.read()
    for source in (path, data, memoryview(data)):
        rt = _C_torch.load(source)
        assert rt.num_instructions() > 0
        assert _C_torch.graph_json(source) == _C_torch.graph_json(path)
    with pytest.raises(TypeError, match='expected a path'):
        _C_torch.load(12)
    with pytest.raises(TypeError):
        _C_torch.load(path, True)  # plan_memory and trusted are keyword-only


def test_allowed_operators():
    ops = _C_torch.allowed_operators()
    assert len(ops) == len(set(ops)) > 150
    assert {'aten::conv2d', 'aten::add.Tensor', 'aten::relu', 'aten::linear', 'aten::_softmax'} <= set(ops)
    assert 'aten::as_strided' in ops  # behind its view guard
    assert not {'aten::from_file', 'aten::as_strided_', 'aten::empty.memory_format', 'aten::copy_',
                'aten::_sparse_coo_tensor_unsafe', 'aten::set_.source_Storage'} & set(ops)
    for q in ops:
        ns, _, rest = q.partition('::')
        base, _, overload = rest.partition('.')
        assert ns == 'aten'
        assert hasattr(getattr(torch.ops.aten, base), overload or 'default'), q


def test_generator_rechecks_the_committed_list():
    """scripts/gen_allowed_ops.py --check: the committed list is what the
    generator derives (its core section as committed, on a torch without
    Tag.core), names nothing a refusal hits, and no unchecked private op."""
    script = os.path.join(os.path.dirname(__file__), '..', '..', 'scripts', 'gen_allowed_ops.py')
    r = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert 'OK' in r.stdout


# ---- names ----------------------------------------------------------------------------

def test_placeholder_target_that_is_python_source_is_refused(tmp_path):
    marker = tmp_path / 'pwned'
    target = f"x=__import__('os').system('touch {marker}')"
    path = _write(tmp_path / 'inject.fxpt', _doc([_ph('x', target), _call('relu', 'aten::relu', _ref('x')),
                                                  _out(_ref('relu'))]))
    for runtime in ('python', 'cpp'):
        with pytest.raises(ValueError, match='placeholder target .* is not a Python identifier'):
            m = aten.load(path, runtime=runtime)
            m(torch.randn(2))
    with pytest.raises(ValueError, match='placeholder target'):
        _C_torch.load(path, trusted=True)  # trusting a file does not lift the name checks
    assert not marker.exists()


@pytest.mark.parametrize('edit, field', [
    (lambda d: d['nodes'][1].update(name='relu default'), 'node name'),
    (lambda d: d['nodes'][1].update(kwargs={'inplace=True) or print(1': False}), 'kwargs key'),
    (lambda d: d.update(class_name='G(M)'), 'class_name'),
    (lambda d: (d['tensors'][0].update(name='w")+exec("1'), d['nodes'][2].update(target='w")+exec("1')),
     'is not a module path'),
])
def test_names_that_would_become_source_are_refused(tmp_path, edit, field):
    doc = _doc([_ph('x'), _call('relu', 'aten::relu', _ref('x')),
                {'op': 'get_attr', 'name': 'w', 'target': 'w', 'args': [], 'kwargs': {}},
                _call('add', 'aten::add.Tensor', _ref('relu'), _ref('w')), _out(_ref('add'))],
               tensors=[{'name': 'w', 'kind': 'buffer', 'dtype': 'float32', 'storage': 0, 'offset': 0,
                         'sizes': [2], 'strides': [1], 'requires_grad': False}],
               storages=[{'record': 'data/0', 'nbytes': 8}])
    records = [('data/0', b'\0' * 8)]
    ok = _write(tmp_path / 'ok.fxpt', doc, records)
    torch.testing.assert_close(aten.load(ok)(torch.tensor([-1.0, 2.0])), torch.tensor([0.0, 2.0]))
    edit(doc)
    path = _write(tmp_path / 'bad.fxpt', doc, records)
    for runtime in ('python', 'cpp'):
        with pytest.raises(ValueError, match=re.escape(field)):
            aten.load(path, runtime=runtime)


@settings(max_examples=int(os.environ.get('FXCPP_HYPOTHESIS_MAX_EXAMPLES', 60)), deadline=None, derandomize=True)
@given(st.one_of(st.text(max_size=12), st.sampled_from(keyword.kwlist + ['*args', '**kw', 'x_1', '_y', '1x', 'x.y',
                                                                         'ä', 'match', ''])))
def test_placeholder_targets_are_python_identifiers(target):
    """A placeholder target loads iff Python would take it as an ASCII
    parameter name (oracle: str.isidentifier and keyword.iskeyword)."""
    bare = target[2:] if target.startswith('**') else target[1:] if target.startswith('*') else target
    want = bare.isascii() and bare.isidentifier() and not keyword.iskeyword(bare)
    doc = json.dumps(_doc([_ph('x', target), _out(_ref('x'))]), separators=(',', ':')).encode()
    with tempfile.TemporaryDirectory() as d:
        path = _write(os.path.join(d, 'p.fxpt'), doc)
        data = open(path, 'rb').read()
    try:
        _C_torch.load(data)
        loaded = True
    except ValueError as e:
        assert 'placeholder target' in str(e), str(e)
        loaded = False
    assert loaded == want, target


def test_invalid_utf8_gives_a_readable_value_error(tmp_path):
    text = json.dumps(_doc([_ph('x'), _out(_ref('x'))]), separators=(',', ':')).encode()
    text = text.replace(b'"GraphModule"', b'"G\xff\xfeM"')
    path = _write(tmp_path / 'utf8.fxpt', text)
    for load in (lambda: _C_torch.load(path), lambda: aten.load(path, runtime='cpp'),
                 lambda: aten.load(path, runtime='python')):
        with pytest.raises(ValueError) as info:
            load()
        assert 'malformed graph.json' in str(info.value)


# ---- both runtimes refuse the same calls at load (Note [Python load path]) --------------------

_VALUES = st.one_of(st.just(_ref('x')), st.integers(-3, 3), st.sampled_from([2 ** 62, 0.5, True, None, 'mean', '']),
                    st.lists(st.integers(-2, 3), max_size=3).map(lambda v: {'list': v}),
                    st.just({'list': [_ref('x'), _ref('x')]}), st.just({'dtype': 'float32'}))
_TARGETS = ['aten::relu', 'aten::add.Tensor', 'aten::sum.dim_IntList', 'aten::cat', 'aten::mean.dim',
            'aten::transpose.int', 'aten::clamp', 'aten::softmax.int', 'aten::add.out']
_KWARGS = st.dictionaries(st.sampled_from(['dim', 'alpha', 'keepdim', 'out', 'other', 'dtype', 'bogus']), _VALUES,
                          max_size=2)


def _load_outcome(path, runtime):
    try:
        aten.load(path, runtime=runtime)
        return 'loads'
    except ValueError as e:
        return str(e)


@settings(max_examples=int(os.environ.get('FXCPP_HYPOTHESIS_MAX_EXAMPLES', 60)), deadline=None, derandomize=True)
@given(target=st.sampled_from(_TARGETS), args=st.lists(_VALUES, max_size=4), kwargs=_KWARGS)
def test_both_runtimes_refuse_the_same_calls_at_load(target, args, kwargs):
    """A call whose arguments do not fit its schema (too many, a missing one, a keyword it
    does not take, a value of another type) is refused when the file is loaded, by the
    Python runtime as by the C++ runtime, with the same message; what one loads the other
    loads (oracle: the C++ runtime's compiler)."""
    call = dict(_call('op', target, *args), kwargs=kwargs)
    doc = _doc([_ph('x'), call, _out(_ref('op'))])
    with tempfile.TemporaryDirectory() as d:
        path = _write(os.path.join(d, 'call.fxpt'), doc)
        outcomes = {runtime: _load_outcome(path, runtime) for runtime in ('cpp', 'python')}
    assert outcomes['cpp'] == outcomes['python'], outcomes


def test_the_python_runtime_refuses_a_call_its_schema_does_not_take_at_load(tmp_path):
    path = _write(tmp_path / 'relu2.fxpt', _doc([_ph('x'), _call('r', 'aten::relu', _ref('x'), 3), _out(_ref('r'))]))
    why = re.escape("node 'r' passes 2 positional arguments to aten::relu, which takes at most 1")
    for runtime in ('python', 'cpp'):
        with pytest.raises(ValueError, match=why):
            aten.load(path, runtime=runtime)
    # A trusted file, or one only shown, is read as it is (what it calls may be what only
    # Python runs); calling it is then the kernel's error.
    gm = aten.load(path, runtime='python', trusted=True)
    with pytest.raises(Exception):
        gm(torch.randn(2))


def _first_tensor_overloads():
    """(namespace::name.overload, base name) of every registered aten overload whose first
    argument is a Tensor."""
    out = []
    for s in torch._C._jit_get_all_schemas():
        if not s.name.startswith('aten::') or not s.arguments or str(s.arguments[0].type) != 'Tensor':
            continue
        out.append((s.name + (f'.{s.overload_name}' if s.overload_name else ''), s.name[6:]))
    return out


def test_numbers_stand_for_tensors_where_torchs_binding_takes_them(tmp_path):
    """Note [Numbers as tensors]: a number for a Tensor argument loads for exactly the
    operators torch's Python binding takes one for (oracle: the installed torch's
    _should_allow_numbers_as_tensors), over every registered aten overload."""
    wrong = []
    path = tmp_path / 'n.fxpt'
    for target, base in _first_tensor_overloads():
        _write(path, _doc([_ph('x'), _call('op', target, 1), _out(_ref('op'))]))
        try:
            _C_torch.load(str(path), trusted=True)
            refused = False
        except ValueError as e:
            if 'no such schema is registered with the dispatcher' in str(e):
                continue  # a TorchScript builtin (aten::len.Tensor, aten::Int.Tensor): no dispatcher operator
            refused = 'passes a number as ' in str(e)  # the one argument: the first, a Tensor
        if refused == torch._C._should_allow_numbers_as_tensors(base):
            wrong.append(f"{target}: {'refused' if refused else 'taken'}")
    assert not wrong, f'{len(wrong)} overloads: ' + ', '.join(wrong[:20])


def test_a_number_for_a_tensor_is_refused_at_load_where_python_refuses_it(tmp_path):
    refused = _write(tmp_path / 'ne.fxpt', _doc([_ph('x'), _call('op', 'aten::ne.Tensor', _ref('x'), -1),
                                                 _out(_ref('op'))]))
    why = re.escape("node 'op' passes a number as 'other', which has type Tensor, to aten::ne.Tensor, which takes "
                    "no number for a tensor")
    for runtime in ('cpp', 'python'):
        with pytest.raises(ValueError, match=why):
            aten.load(refused, runtime=runtime)
    with pytest.raises(Exception, match="Expected a value of type 'Tensor'"):  # what torch itself says
        torch.ops.aten.ne.Tensor(torch.randn(2), -1)
    taken = _write(tmp_path / 'add.fxpt', _doc([_ph('x'), _call('op', 'aten::add.Tensor', _ref('x'), -1),
                                                _out(_ref('op'))]))
    x = torch.randn(3)
    for runtime in ('cpp', 'python'):
        torch.testing.assert_close(aten.load(taken, runtime=runtime)(x), x - 1)


def test_both_runtimes_check_inputs_against_recorded_ranks(tmp_path):
    """A .fxpt placeholder's tensor_meta (what ShapeProp recorded) is checked by both
    runtimes: a tensor of that number of dimensions (found by the structured fuzzer: the
    Python runtime checked only .pt2 programs' inputs)."""
    meta = {'tensor_meta': {'tensor_meta': {'shape': [2, 3], 'dtype': 'float32', 'requires_grad': False,
                                            'stride': [3, 1], 'memory_format': 'contiguous_format',
                                            'is_quantized': False}}}
    path = _write(tmp_path / 'meta.fxpt', _doc([dict(_ph('x'), meta=meta), _call('r', 'aten::relu', _ref('x')),
                                                _out(_ref('r'))]))
    for runtime in ('cpp', 'python'):
        m = aten.load(path, runtime=runtime)
        with pytest.raises(TypeError, match=re.escape("input 0 ('x'): expected a 2-dimensional tensor, got one with "
                                                      "1 dimensions")):
            m(torch.randn(3))
        with pytest.raises(TypeError, match=re.escape("input 0 ('x'): expected a Tensor, got an int")):
            m(3)
        x = torch.randn(5, 4)  # sizes may differ
        torch.testing.assert_close(m(x), x.relu())

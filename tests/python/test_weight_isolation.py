"""Weights no program can write for another (issue 35, item 2; Note [Weights no
program can write for another] in src/torch/zip_reader.cpp).

Each file below is crafted as an attacker would: an allowed operator that returns
its weight argument without an alias annotation (type_as, dropout in evaluation,
einsum 'i->i', contiguous on a contiguous tensor) followed by an in-place write,
or a kernel that writes an argument its schema does not mark (batch_norm with
training=True updates running_mean and running_var). Loaded twice from one file,
mapped (the default) or not, in either runtime, the second module must see the
file's weights after the first has run, and the file must not change."""
import pytest
import torch

from fxcpp import aten
from test_untrusted_files import _call, _doc, _out, _ph, _ref, _write

W = torch.tensor([1.0, 2.0, 3.0, 4.0])


def _get(name):
    return {'op': 'get_attr', 'name': name, 'target': name, 'args': [], 'kwargs': {}}


def _tensor(name, index, n=4):
    return {'name': name, 'kind': 'buffer', 'dtype': 'float32', 'storage': index, 'offset': 0, 'sizes': [n],
            'strides': [1], 'requires_grad': False}


def _alias_then_write(alias_nodes):
    """x -> w' = alias(w); w'.add_(x); return w' + 0 (a copy: the output never views w)."""
    nodes = [_ph('x'), _get('w')] + alias_nodes + [
        _call('write', 'aten::add_.Tensor', _ref('alias'), _ref('x')),
        _call('result', 'aten::mul.Scalar', _ref('write'), 1.0), _out(_ref('result'))]
    return _doc(nodes, tensors=[_tensor('w', 0)], storages=[{'record': 'data/0', 'nbytes': 16}]), \
        [('data/0', W.numpy().tobytes())]


CASES = {
    'type_as': [_call('alias', 'aten::type_as', _ref('w'), _ref('w'))],
    'dropout_eval': [_call('alias', 'aten::dropout', _ref('w'), 0.5, False)],
    'einsum_identity': [_call('alias', 'aten::einsum', 'i->i', {'list': [_ref('w')]})],
    'contiguous': [_call('alias', 'aten::contiguous', _ref('w'))],
}


def _batch_norm_training():
    """batch_norm(x, None, None, running_mean, running_var, training=True, ...): the
    kernel updates both statistics in place, unannotated in the composite's schema."""
    nodes = [_ph('x'), _get('running_mean'), _get('running_var'),
             _call('bn', 'aten::batch_norm', _ref('x'), None, None, _ref('running_mean'), _ref('running_var'),
                   True, 0.5, 1e-5, False),
             _call('stat', 'aten::add.Tensor', _ref('running_mean'), _ref('running_var')),
             _out({'tuple': [_ref('bn'), _ref('stat')]})]
    doc = _doc(nodes, tensors=[_tensor('running_mean', 0), _tensor('running_var', 1)],
               storages=[{'record': 'data/0', 'nbytes': 16}, {'record': 'data/1', 'nbytes': 16}])
    return doc, [('data/0', torch.zeros(4).numpy().tobytes()), ('data/1', torch.ones(4).numpy().tobytes())]


def _files(tmp_path):
    for name, alias in CASES.items():
        doc, records = _alias_then_write(alias)
        yield name, _write(tmp_path / f'{name}.fxpt', doc, records), torch.ones(4) * 10
    doc, records = _batch_norm_training()
    yield 'batch_norm_training', _write(tmp_path / 'bn.fxpt', doc, records), torch.randn(3, 4) * 5 + 7


def _state(module):
    return {k: v.clone() for k, v in module.state_dict().items()}


@pytest.mark.parametrize('mmap', [True, False])
@pytest.mark.parametrize('runtime', ['cpp', 'python'])
def test_a_module_never_writes_the_weights_another_module_loads(tmp_path, runtime, mmap):
    for name, path, x in _files(tmp_path):
        before = open(path, 'rb').read()
        fresh = aten.load(path, runtime='cpp', mmap=False)
        want_state = _state(fresh)
        want_out = fresh(x)
        first = aten.load(path, runtime=runtime, mmap=mmap)
        with torch.no_grad():
            for _ in range(3):
                first(x)
        second = aten.load(path, runtime=runtime, mmap=mmap)
        for k, v in _state(second).items():
            assert torch.equal(v, want_state[k]), f'{name}: {k} of a second load changed after the first ran'
        with torch.no_grad():
            got = second(x)
        torch.testing.assert_close(got, want_out, msg=f'{name}: the second module computes with changed weights')
        assert open(path, 'rb').read() == before, f'{name}: running a module changed its file'


def test_the_write_stays_inside_the_module_that_made_it(tmp_path):
    """The program's own write is its own: as in eager, the first module's weight
    moves from call to call while a module loaded beside it keeps the file's."""
    doc, records = _alias_then_write(CASES['type_as'])
    path = _write(tmp_path / 'type_as.fxpt', doc, records)
    before = open(path, 'rb').read()
    a = aten.load(path, runtime='cpp')
    x = torch.ones(4)
    torch.testing.assert_close(a(x), W + 1)
    torch.testing.assert_close(a(x), W + 2)  # eager: w.type_as(w).add_(x) moves w too
    b = aten.load(path, runtime='cpp')
    torch.testing.assert_close(b(x), W + 1)
    torch.testing.assert_close(a(x), W + 3)
    assert open(path, 'rb').read() == before

"""Argument guards (Note [Argument guards] in include/fxcpp/torch/policy.h): the
batch-norm kernels, which core-ATen exports call, read weight, bias and the running
statistics as input.size(1) elements each without checking. A file from an untrusted
source may call them; the C++ runtime refuses every argument the kernel would read out
of bounds with an error naming it, and runs the rest as eager PyTorch does (the
hypothesis test draws shapes and compares with the eager kernel wherever the guard's
rule admits the call, which is the only place the eager kernel may safely be called)."""
import os
import re
import tempfile

import pytest
import torch
from hypothesis import event, given, settings, strategies as st

from fxcpp import _C_torch, _torch_compat, aten
from test_untrusted_files import _call, _doc, _out, _ph, _ref, _write

# (target as files name it, whether it takes running statistics, its training argument or
# None where it has none)
VARIANTS = [
    ('aten::native_batch_norm', True, False),
    ('aten::native_batch_norm', True, True),
    ('aten::_native_batch_norm_legit', True, False),
    ('aten::_native_batch_norm_legit', True, True),
    ('aten::_native_batch_norm_legit.no_stats', False, True),
    ('aten::_native_batch_norm_legit_no_training', True, None),
]
ARGS = ('weight', 'bias', 'running_mean', 'running_var')


def _overload(target):
    base, _, overload = target.split('::', 1)[1].partition('.')
    packet = getattr(torch.ops.aten, base, None)
    if packet is None or (overload or 'default') not in packet.overloads():
        return None
    return getattr(packet, overload or 'default')


def _registered(variants):
    return [pytest.param(*v, id=f'{v[0]}-{v[2]}') if _overload(v[0]) else
            pytest.param(*v, id=f'{v[0]}-{v[2]}', marks=pytest.mark.skip(
                reason=f'torch {torch.__version__} does not register {v[0]}')) for v in variants]


def _doc_for(target, stats, training, nones=()):
    """x, weight, bias[, running_mean, running_var] -> the op's first result; an argument
    named in `nones` is the literal None instead of an input."""
    names = ARGS if stats else ARGS[:2]
    args = [_ref('x')] + [None if n in nones else _ref(n) for n in names]
    args += ([] if training is None else [training]) + [0.1, 1e-5]
    nodes = [_ph('x')] + [_ph(n) for n in names if n not in nones]
    nodes += [_call('bn', target, *args), {'op': 'call_function', 'name': 'first', 'target': 'operator.getitem',
                                           'args': [_ref('bn'), 0], 'kwargs': {}}, _out(_ref('first'))]
    return _doc(nodes)


_MODULES = {}


_PYTHON_REFUSES = "checked before each call only in fxcpp's C++ runtime"


def _modules(target, stats, training, nones):
    """(C++ runtime, Python runtime) of the file, cached per variant: the C++ runtime loaded
    from an untrusted source (the default), the Python one trusted, as it refuses the guarded
    kernels from an untrusted file (it runs no guard)."""
    key = (target, stats, training, tuple(sorted(nones)))
    if key not in _MODULES:
        with tempfile.TemporaryDirectory() as d:
            path = _write(os.path.join(d, 'bn.fxpt'), _doc_for(target, stats, training, nones))
            _MODULES[key] = (aten.load(path, runtime='cpp', mmap=False),
                             aten.load(path, runtime='python', mmap=False, trusted=True))
    return _MODULES[key]


def _eager(target, stats, training, x, given):
    args = [x] + [given.get(n) for n in (ARGS if stats else ARGS[:2])]
    args += ([] if training is None else [training]) + [0.1, 1e-5]
    with torch.no_grad():
        return _overload(target)(*args)[0]


def _error(arg, shape, channels):
    return re.escape(f"batch norm: argument '{arg}' has shape {shape}; it must be a contiguous 1-D tensor of "
                     f"{channels} elements, one per channel of the input (input.size(1) = {channels})")


@pytest.mark.parametrize('target, stats, training', _registered(VARIANTS))
def test_untrusted_batch_norm_refuses_statistics_the_kernel_would_read_out_of_bounds(target, stats, training):
    with tempfile.TemporaryDirectory() as d:
        path = _write(os.path.join(d, 'bn.fxpt'), _doc_for(target, stats, training))
        assert _C_torch.load(path).num_instructions() > 0  # the default policy admits it
        cpp = aten.load(path, runtime='cpp', mmap=False)
        # The Python runtime runs no guard: from an untrusted file it refuses the kernel, saying
        # where the file runs (and a file shown, not run, still reads).
        with pytest.raises(ValueError, match=re.escape(_PYTHON_REFUSES) + ".*runtime='cpp'"):
            aten.load(path, runtime='python', mmap=False)
        from fxcpp.aten._runtime import _load_bytes
        assert 'batch_norm' in _load_bytes(path, 'show').code
    names = ARGS if stats else ARGS[:2]
    x = torch.randn(2, 4, 3, 3)
    ok = {n: torch.rand(4) + 0.5 for n in names}
    big = 1 << 16
    cases = [
        ('weight', {'weight': torch.rand(1)}, x, '[1]'),
        ('weight', {'weight': torch.rand(7)}, x, '[7]'),
        ('weight', {'weight': torch.rand(4, 1)}, x, '[4, 1]'),
        ('weight', {'weight': torch.rand(2, 4)}, x, '[2, 4]'),
        ('bias', {'bias': torch.rand(0)}, x, '[0]'),
        ('bias', {'bias': torch.tensor(1.0)}, x, '[]'),
    ]
    if stats:
        cases += [('running_mean', {'running_mean': torch.rand(3)}, x, '[3]'),
                  ('running_var', {'running_var': torch.rand(0)}, x, '[0]')]
    for arg, bad, inp, shape in cases:
        for _ in range(2):  # the second run is the memory-planned one
            with pytest.raises(RuntimeError, match=re.escape(f"({target.split('.')[0]}") + '.*' +
                               _error(arg, shape, inp.shape[1])):
                cpp(inp, *[{**ok, **bad}[n] for n in names])
    # A stride-0 or strided vector is read as contiguous by the kernel: refused too.
    wide = torch.randn(2, big, 1)
    for arg in names:
        given = {n: torch.rand(big) + 0.5 for n in names}
        given[arg] = torch.ones(1).expand(big)
        with pytest.raises(RuntimeError, match=re.escape(f"argument '{arg}' has stride 0")):
            cpp(wide, *[given[n] for n in names])
        given[arg] = (torch.rand(2 * 4) + 0.5)[::2]
        with pytest.raises(RuntimeError, match=re.escape(f"argument '{arg}' has stride 2")):
            cpp(x, *[{**ok, **given}[n] if n == arg else ok[n] for n in names])
    with pytest.raises(RuntimeError, match=re.escape("batch norm: argument 'input' has shape [4]; it needs at least "
                                                     "2 dimensions")):
        cpp(torch.randn(4), *[ok[n] for n in names])
    # Valid calls give what the eager kernel gives.
    for _ in range(2):
        given = {n: v.clone() for n, v in ok.items()}
        want = _eager(target, stats, training, x, {n: v.clone() for n, v in ok.items()})
        torch.testing.assert_close(cpp(x, *[given[n] for n in names]), want)


def test_evaluation_without_running_statistics_is_refused():
    """In evaluation the kernels read the running statistics whether given or not
    (native_batch_norm with None for them, and _native_batch_norm_legit.no_stats with
    training=False, are a SIGSEGV on torch 2.14)."""
    x, vec = torch.randn(2, 4, 3), torch.rand(4) + 0.5
    for target, nones, message in [
            ('aten::native_batch_norm', ('running_mean',), "argument 'running_mean' is None, but evaluation"),
            ('aten::native_batch_norm', ('running_var',), "argument 'running_var' is None, but evaluation"),
            ('aten::_native_batch_norm_legit.no_stats', (), "argument 'training' is False, but this overload "
                                                            "takes no running statistics")]:
        if _overload(target) is None:
            continue
        stats = 'no_stats' not in target
        cpp, _ = _modules(target, stats, False, nones)
        given = [vec for n in (ARGS if stats else ARGS[:2]) if n not in nones]
        for _ in range(2):
            with pytest.raises(RuntimeError, match=re.escape('batch norm: ' + message)):
                cpp(x, *given)


@pytest.mark.skipif(_torch_compat.TORCH_VERSION >= (2, 0), reason="torch 2's kernels return an empty result")
def test_empty_input_is_refused_on_torch_1():
    # LibTorch 1.13's kernel divides by the elements per channel: SIGFPE.
    cpp, _ = _modules('aten::native_batch_norm', True, False, ())
    for x in (torch.randn(0, 4, 3), torch.randn(2, 0, 3)):
        with pytest.raises(RuntimeError, match=re.escape("batch norm: argument 'input' has shape")):
            cpp(x, *[torch.rand(x.shape[1]) + 0.5 for _ in ARGS])


def test_the_policy_lists_the_batch_norm_kernels():
    ops = set(_C_torch.allowed_operators())
    registered = [t for t, _, _ in VARIANTS if _overload(t) is not None]
    assert registered
    for target in registered:
        assert target in ops, target


_SIZES = st.sampled_from(['none', 'ok', 'ok', 'ok', 'short', 'long', 'empty', '2d', '0d'])


@settings(max_examples=int(os.environ.get('FXCPP_HYPOTHESIS_MAX_EXAMPLES', 60)), deadline=None, derandomize=True)
@given(variant=st.sampled_from([v for v in VARIANTS if _overload(v[0]) is not None] or VARIANTS[:1]),
       batch=st.integers(0, 3), channels=st.integers(0, 5), spatial=st.lists(st.integers(1, 3), max_size=2),
       rank1=st.integers(0, 4).map(lambda i: i == 0),
       kinds=st.one_of(st.fixed_dictionaries({n: st.sampled_from(['ok', 'none']) for n in ARGS}),  # valid (mostly)
                       st.fixed_dictionaries({n: _SIZES for n in ARGS})))
def test_guarded_batch_norm_matches_eager_where_valid(variant, batch, channels, spatial, rank1, kinds):
    """Oracle: the call is valid iff the input has 2 dims or more and each argument given is
    a 1-D tensor of input.size(1) elements; then the C++ and Python runtimes give what the
    eager kernel gives, else the C++ runtime raises the guard's error naming the first bad
    argument (the Python runtime is not called with those: it runs torch's kernel as is)."""
    target, stats, training = variant
    if _overload(target) is None:
        pytest.skip(f'torch {torch.__version__} registers none of the batch-norm variants')
    names = ARGS if stats else ARGS[:2]
    optional = {n for n in names if n in ('weight', 'bias') or target == 'aten::native_batch_norm'}
    kinds = {n: ('ok' if kinds[n] == 'none' and n not in optional else kinds[n]) for n in names}
    nones = tuple(n for n in names if kinds[n] == 'none')
    torch.manual_seed(0)
    x = torch.randn(channels) if rank1 else torch.randn(batch, channels, *spatial)
    c = x.shape[1] if x.dim() >= 2 else x.shape[0]
    make = {'ok': lambda: torch.rand(c) + 0.5, 'short': lambda: torch.rand(max(c - 1, 0)) + 0.5,
            'long': lambda: torch.rand(c + 2) + 0.5, 'empty': lambda: torch.rand(0),
            '2d': lambda: torch.rand(1, c) + 0.5, '0d': lambda: torch.rand(()) + 0.5}
    given = {n: make[kinds[n]]() for n in names if kinds[n] != 'none'}
    cpp, py = _modules(target, stats, training, nones)
    inputs = [x] + [given[n] for n in names if n in given]
    # The guard's rule, in its order: the input; then each argument given must be 1-D of c
    # elements, and in evaluation the running statistics must be given.
    bad = None
    if x.dim() < 2 or (x.numel() == 0 and _torch_compat.TORCH_VERSION < (2, 0)):
        bad = 'input'
    for n in names:
        if bad is None and n in given and (given[n].dim() != 1 or given[n].shape[0] != c):
            bad = n
        if bad is None and n in ('running_mean', 'running_var') and n not in given and training is not True:
            bad = n
    if bad is not None:
        event(f'refused: {bad}')
        with pytest.raises(RuntimeError, match=re.escape(f"batch norm: argument '{bad}' ")):
            cpp(*[t.clone() for t in inputs])
        return
    try:
        want = _eager(target, stats, training, x, {n: t.clone() for n, t in given.items()})
    except (RuntimeError, ValueError) as e:  # the kernel's own refusal (one statistic in training, ...)
        event('refused by the kernel')
        with pytest.raises(RuntimeError, match=re.escape(str(e).splitlines()[0][:60])):
            cpp(*[t.clone() for t in inputs])
        return
    event('valid')
    for runtime in (cpp, cpp, py):
        got = runtime(*[t.clone() for t in inputs])
        torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-5, atol=1e-5)

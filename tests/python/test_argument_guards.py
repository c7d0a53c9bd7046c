"""Argument guards (Note [Argument guards] in include/fxcpp/torch/policy.h): the
batch-norm kernels, which core-ATen exports call, read weight, bias and the running
statistics as input.size(1) elements each without checking. A file from an untrusted
source may call them; the C++ runtime refuses every argument the kernel would read out
of bounds with an error naming it, and runs the rest as eager PyTorch does (the
hypothesis test draws shapes and compares with the eager kernel wherever the guard's
rule admits the call, which is the only place the eager kernel may safely be called)."""
import contextlib
import copy
import io
import os
import re
import subprocess
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


def _modules(target, stats, training, nones):
    """(C++ runtime, Python runtime) of the file, cached per variant, both loaded from an
    untrusted source (the default): the Python runtime runs the same guards (Note [Argument
    guards in Python] in fxcpp/aten/_guards.py)."""
    key = (target, stats, training, tuple(sorted(nones)))
    if key not in _MODULES:
        with tempfile.TemporaryDirectory() as d:
            path = _write(os.path.join(d, 'bn.fxpt'), _doc_for(target, stats, training, nones))
            _MODULES[key] = (aten.load(path, runtime='cpp', mmap=False),
                             aten.load(path, runtime='python', mmap=False))
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
        # Both runtimes run the guard (the Python one through Note [Argument guards in Python]).
        runtimes = (aten.load(path, runtime='cpp', mmap=False), aten.load(path, runtime='python', mmap=False))
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
        for cpp in runtimes + runtimes[:1]:  # the C++ runtime's second run is the memory-planned one
            with pytest.raises(RuntimeError, match=_error(arg, shape, inp.shape[1])):
                cpp(inp, *[{**ok, **bad}[n] for n in names])
    # A stride-0 or strided vector is read as contiguous by the kernel: refused too.
    wide = torch.randn(2, big, 1)
    for arg, cpp in ((a, r) for a in names for r in runtimes):
        given = {n: torch.rand(big) + 0.5 for n in names}
        given[arg] = torch.ones(1).expand(big)
        with pytest.raises(RuntimeError, match=re.escape(f"argument '{arg}' has stride 0")):
            cpp(wide, *[given[n] for n in names])
        given[arg] = (torch.rand(2 * 4) + 0.5)[::2]
        with pytest.raises(RuntimeError, match=re.escape(f"argument '{arg}' has stride 2")):
            cpp(x, *[{**ok, **given}[n] if n == arg else ok[n] for n in names])
    for cpp in runtimes:
        with pytest.raises(RuntimeError, match=re.escape("batch norm: argument 'input' has shape [4]; it needs at "
                                                         "least 2 dimensions")):
            cpp(torch.randn(4), *[ok[n] for n in names])
    # Valid calls give what the eager kernel gives.
    for cpp in runtimes + runtimes[:1]:
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
        cpp, py = _modules(target, stats, False, nones)
        given = [vec for n in (ARGS if stats else ARGS[:2]) if n not in nones]
        for runtime in (cpp, cpp, py):
            with pytest.raises(RuntimeError, match=re.escape('batch norm: ' + message)):
                runtime(x, *given)


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
    argument, and so does the Python runtime (the same guard)."""
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
        for runtime in (cpp, py):
            with pytest.raises(RuntimeError, match=re.escape(f"batch norm: argument '{bad}' ")):
                runtime(*[t.clone() for t in inputs])
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


# ---- the kernels issue 35 found: group norm, recurrent layers, col2im, max_pool1d ---------------
# Each file is one crafted node; every value the kernel would trust is an input, so one
# loaded module is driven with the bad calls and then with valid ones (same as eager).

def _guarded_module(tmp_path, name, target, args, inputs):
    doc = _doc([_ph(n) for n in inputs] + [_call('op', target, *args), _out(_ref('op'))])
    path = _write(os.path.join(str(tmp_path), f'{name}.fxpt'), doc)
    return _Both(aten.load(path, runtime='cpp', mmap=False), aten.load(path, runtime='python', mmap=False), path, doc)


# The C++-only runner (no Python in its process), built with the C++ tests.
DRIVER = os.path.join(os.environ.get('FXCPP_BUILD_DIR', os.path.join(os.path.dirname(__file__), '..', '..', 'build')),
                      'fxcpp_torch_run_model')


def _leaves(v):
    if isinstance(v, torch.Tensor):
        return [v.to(torch.float32).reshape(-1)]
    if isinstance(v, (tuple, list)):
        return [t for e in v for t in _leaves(e)]
    return []


def _drive(path, args):
    """The C++-only runner's run of file `path` on tensors `args`: ('ok', its outputs
    flattened to float32) or ('error', the message), or None where it cannot take them."""
    if not os.path.exists(DRIVER) or not args or not all(
            isinstance(a, torch.Tensor) and a.dtype in (torch.float32, torch.int64) and a.is_contiguous()
            for a in args):
        return None  # the driver reads contiguous float32 and int64 tensors only
    with tempfile.TemporaryDirectory() as d:
        files = []
        for i, a in enumerate(args):
            f = os.path.join(d, f'in{i}.bin')
            with open(f, 'wb') as fh:
                fh.write(a.contiguous().numpy().tobytes())
            files.append((f, ','.join(map(str, a.shape)) if a.dim() else '', 'int64' if a.dtype == torch.int64
                          else 'float32'))
        if any(not shape for _, shape, _ in files):
            return None  # the driver's shapes have one dimension or more
        out = os.path.join(d, 'out.bin')
        cmd = [DRIVER, str(path), files[0][0], files[0][1], out]
        cmd += ['--dtype', files[0][2]]
        for f, shape, dtype in files[1:]:
            cmd += ['--input', f, shape, dtype]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert proc.returncode in (0, 1), f'the C++ runner died ({proc.returncode}): {proc.stderr[-2000:]}'
        if proc.returncode == 1:
            return 'error', proc.stderr
        with open(out, 'rb') as fh:
            data = fh.read()
        return 'ok', torch.frombuffer(bytearray(data), dtype=torch.float32) if data else torch.empty(0)


def _substitute(value, literals):
    """`value` (a node's args or kwargs as the file has them) with each reference to a
    name in `literals` replaced by that literal."""
    if isinstance(value, dict) and set(value) == {'node'} and value['node'] in literals:
        return literals[value['node']]
    if isinstance(value, dict):
        return {k: _substitute(v, literals) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, literals) for v in value]
    return value


def _baked(doc, args):
    """The file `doc` with every input after the first stored in it: a tensor as a stored
    tensor (its sizes, strides and offset kept) that a get_attr node reads, a number as a
    literal. A file of one input is what `fxcpp run` can call: (doc, records), or None where
    an input cannot be stored so."""
    doc = copy.deepcopy(doc)
    placeholders = [n for n in doc['nodes'] if n['op'] == 'placeholder']
    literals, records = {}, []
    for node, a in zip(placeholders[1:], args[1:]):
        if isinstance(a, torch.Tensor) and a.dtype in (torch.float32, torch.int64, torch.bool):
            extent = 1 + a.storage_offset() + sum((s - 1) * st for s, st in zip(a.shape, a.stride())) \
                if a.numel() else 0
            base = torch.zeros(extent, dtype=a.dtype)
            if a.numel():  # by index: elements of a stride-0 tensor share a place
                where = torch.arange(extent).as_strided(a.shape, a.stride(), a.storage_offset()).reshape(-1)
                base[where] = a.reshape(-1)
            data = base.numpy().tobytes()
            records.append((f'data/{len(records)}', data))
            doc['storages'].append({'record': records[-1][0], 'nbytes': len(data)})
            doc['tensors'].append({'name': node['name'], 'kind': 'buffer', 'dtype': str(a.dtype)[6:],
                                   'storage': len(records) - 1, 'offset': a.storage_offset() if a.numel() else 0,
                                   'sizes': list(a.shape), 'strides': list(a.stride()), 'requires_grad': False})
            node.update(op='get_attr', target=node['name'])
        elif isinstance(a, (bool, int, float)):
            literals[node['name']] = a
        else:
            return None
    doc['nodes'] = [dict(n, args=_substitute(n['args'], literals), kwargs=_substitute(n['kwargs'], literals))
                    for n in doc['nodes'] if n['name'] not in literals]
    return doc, records


def _cli(doc, args):
    """`fxcpp run` (the CLI's entry point, in this process) on the file `doc` with the
    inputs after the first stored in it, and the first drawn by the CLI at its shape:
    ('ok', None) or ('error', what it printed), or None where the CLI cannot take the call
    (it draws one contiguous float32 input of one dimension or more, each positive)."""
    x = args[0] if args else None
    if not isinstance(x, torch.Tensor) or x.dtype != torch.float32 or not x.is_contiguous() or x.dim() == 0 \
            or 0 in x.shape:
        return None
    baked = _baked(doc, args)
    if baked is None:
        return None
    from fxcpp import cli
    threads = torch.get_num_threads()
    err = io.StringIO()
    with tempfile.TemporaryDirectory() as d:
        path = _write(os.path.join(d, 'cli.fxpt'), *baked)
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                code = cli.main(['run', path, '--input-shape', ','.join(map(str, x.shape)), '--repeat', '1'])
        finally:
            torch.set_num_threads(threads)
    assert code in (0, 1) and 'Traceback' not in err.getvalue(), (code, err.getvalue())
    return ('ok', None) if code == 0 else ('error', err.getvalue())


class _Both:
    """Calls the C++ runtime (twice: the second run is the planned one), the Python
    runtime and the C++-only runner (where it is built and takes the inputs) with the same
    inputs: all must raise the same guard error, or agree; and `fxcpp run` on the file with
    the inputs after the first stored in it (where the CLI takes the call) must refuse it
    with the same message, or run it."""

    def __init__(self, cpp, py, path=None, doc=None):
        self.cpp, self.py, self.path, self.doc = cpp, py, path, doc

    def __call__(self, *args):
        results = []
        for runtime in (self.cpp, self.cpp, self.py):
            try:
                results.append(('ok', runtime(*args)))
            except RuntimeError as e:
                results.append(('error', str(e)))
        kinds = {k for k, _ in results}
        assert len(kinds) == 1, f'the runtimes disagree: {results}'
        driven = _drive(self.path, args) if self.path is not None else None
        if driven is not None:
            assert driven[0] == results[0][0], f'the C++ runner disagrees: {driven} vs {results[0]}'
        shown = _cli(self.doc, args) if self.doc is not None else None
        if shown is not None:
            assert shown[0] == results[0][0], f'fxcpp run disagrees: {shown} vs {results[0]}'
        if kinds == {'error'}:
            # The C++ runtime names the node before the guard's own message.
            messages = [m.split(' failed: ', 1)[-1] for _, m in results]
            assert len(set(messages)) == 1, messages
            if driven is not None:
                assert messages[0] in driven[1], (messages[0], driven[1])
            if shown is not None:
                assert messages[0] in shown[1], (messages[0], shown[1])
            raise RuntimeError(messages[0])
        for _, r in results[1:]:
            torch.testing.assert_close(r, results[0][1], equal_nan=True)
        if driven is not None:
            want = _leaves(results[0][1])
            torch.testing.assert_close(driven[1], torch.cat(want) if want else torch.empty(0), equal_nan=True)
        return results[0][1]


def _group_norm_file(tmp_path, n, c, hxw, group):
    return _guarded_module(tmp_path, f'gn_{n}_{c}_{hxw}_{group}', 'aten::native_group_norm',
                           [_ref('x'), None, None, n, c, hxw, group, 1e-5], ['x'])


def test_native_group_norm_with_a_wrapping_or_wrong_size_is_refused(tmp_path):
    x = torch.randn(8)
    # 4 * (2 + 2^62) wraps to 8: the kernel's own check passes and it reads far outside x.
    for n, c, hxw, group, why in [(1, 4, 2 + 2 ** 62, 1, 'N x C x HxW must equal'),
                                  (0, 4, 2, 2, 'N x C x HxW must equal'),  # N=0: uninitialised output
                                  (2, 4, 1, 3, 'group must be positive and divide C'),
                                  (2, -4, -1, 1, 'must not be negative'),
                                  (2, 4, 1, 0, 'group must be positive')]:
        m = _group_norm_file(tmp_path, n, c, hxw, group)
        with pytest.raises(RuntimeError, match='native_group_norm: .*' + re.escape(why)):
            m(x)
    m = _group_norm_file(tmp_path, 2, 4, 1, 2)
    with pytest.raises(RuntimeError, match='the input must be contiguous'):
        m(torch.randn(4, 2).t())
    for _ in range(2):
        got = m(x.view(2, 4))
        want = torch.ops.aten.native_group_norm(x.view(2, 4), None, None, 2, 4, 1, 2, 1e-5)
        torch.testing.assert_close(tuple(got), tuple(want))


def _rnn_params(gates, layers, dirs, features, hidden, biases=True):
    out = []
    for layer in range(layers):
        for _ in range(dirs):
            inp = features if layer == 0 else dirs * hidden
            out += [torch.randn(gates * hidden, inp), torch.randn(gates * hidden, hidden)]
            if biases:
                out += [torch.randn(gates * hidden), torch.randn(gates * hidden)]
    return out


RNNS = [('aten::lstm.input', 4), ('aten::gru.input', 3), ('aten::rnn_tanh.input', 1), ('aten::rnn_relu.input', 1)]


@pytest.mark.parametrize('target, gates', RNNS)
def test_recurrent_layers_refuse_states_and_weights_of_the_wrong_shape(tmp_path, target, gates):
    layers, dirs, feat, hidden, batch, steps = 2, 2, 3, 5, 4, 6
    nparams = layers * dirs * 4
    names = [f'p{i}' for i in range(nparams)]
    lstm = gates == 4
    hx = {'list': [_ref('h0'), _ref('c0')]} if lstm else _ref('h0')
    m = _guarded_module(tmp_path, target.split('::')[1], target,
                        [_ref('x'), hx, {'list': [_ref(n) for n in names]}, True, layers, 0.0, False, True, False],
                        ['x', 'h0'] + (['c0'] if lstm else []) + names)
    x = torch.randn(steps, batch, feat)
    params = _rnn_params(gates, layers, dirs, feat, hidden)
    h0 = torch.randn(layers * dirs, batch, hidden)
    c0 = torch.randn(layers * dirs, batch, hidden)

    def call(x=x, h0=h0, c0=c0, params=params):
        return m(x, h0, *([c0] if lstm else []), *params)

    bad = [({'h0': torch.randn(layers * dirs, batch + 1, hidden)}, 'the initial hidden state has shape [4, 5, 5]'),
           ({'h0': torch.randn(layers * dirs, batch, hidden + 1)}, 'the initial hidden state has shape'),
           ({'params': [torch.randn(1)] + params[1:]}, 'the first weight has shape [1]'),
           ({'params': [torch.randn(0, feat)] + params[1:]}, 'the first weight has shape [0, 3]'),
           ({'params': params[:1] + [torch.randn(1, 1)] + params[2:]}, 'layer 0 w_hh has shape [1, 1]'),
           ({'params': params[:2] + [torch.randn(gates * hidden + 1)] + params[3:]}, 'layer 0 b_ih has shape'),
           ({'params': params[:-1] + [torch.randn(0)]}, 'layer 1 (reverse) b_hh has shape [0]'),
           ({'x': torch.randn(steps, feat)}, 'the input must have 3 dimensions'),
           ({'x': torch.randn(steps, batch, feat + 1)}, 'layer 0 w_ih has shape')]
    if lstm:
        bad.append(({'c0': torch.randn(layers * dirs, 1, hidden)}, 'the initial cell state has shape [4, 1, 5]'))
    for kwargs, why in bad:
        with pytest.raises(RuntimeError, match=re.escape(why)):
            call(**kwargs)
    op = getattr(torch.ops.aten, target.split('::')[1].split('.')[0]).input
    want = op(x, [h0, c0] if lstm else h0, params, True, layers, 0.0, False, True, False)
    for _ in range(2):
        torch.testing.assert_close(call(), want)


@pytest.mark.parametrize('base, gates', [('lstm', 4), ('gru', 3), ('rnn_tanh', 1)])
def test_packed_recurrent_layers_refuse_bad_batch_sizes(tmp_path, base, gates):
    hidden, feat = 4, 3
    names = [f'p{i}' for i in range(4)]
    lstm = gates == 4
    hx = {'list': [_ref('h0'), _ref('c0')]} if lstm else _ref('h0')
    m = _guarded_module(tmp_path, base + '_data', f'aten::{base}.data',
                        [_ref('data'), _ref('bs'), hx, {'list': [_ref(n) for n in names]}, True, 1, 0.0, False,
                         False], ['data', 'bs', 'h0'] + (['c0'] if lstm else []) + names)
    params = _rnn_params(gates, 1, 1, feat, hidden)
    bs = torch.tensor([3, 2, 2, 1])
    data = torch.randn(int(bs.sum()), feat)
    h0, c0 = torch.randn(1, 3, hidden), torch.randn(1, 3, hidden)

    def call(data=data, bs=bs):
        return m(data, bs, h0, *([c0] if lstm else []), *params)

    for bad, why in [(torch.tensor([], dtype=torch.long), 'batch_sizes must be a non-empty'),
                     (torch.tensor([3]).expand(4), 'batch_sizes must be a non-empty contiguous'),
                     (torch.tensor([3, 2, 4, 1]), 'batch_sizes must be positive and non-increasing (entry 2 is 4)'),
                     (torch.tensor([3, 0, 0, 0]), 'entry 1 is 0'),
                     (torch.tensor([3, 3, 3, 3]), 'batch_sizes add up to 12, but the data has 8 rows'),
                     (torch.tensor([4, 2, 1, 1]), 'the initial hidden state has shape [1, 3, 4], expected [1, 4, 4]'),
                     (torch.tensor([3.0, 2, 2, 1]), 'int64')]:
        with pytest.raises(RuntimeError, match=re.escape(why)):
            call(bs=bad)
    op = getattr(torch.ops.aten, base).data
    want = op(data, bs, [h0, c0] if lstm else h0, params, True, 1, 0.0, False, False)
    for _ in range(2):
        torch.testing.assert_close(call(), want)


def test_col2im_refuses_windows_past_two_to_the_31(tmp_path):
    def module(pad, kernel=2, out=4, dil=1, stride=1):
        return _guarded_module(tmp_path, f'col2im_{pad}_{kernel}_{out}_{dil}', 'aten::col2im',
                               [_ref('x'), {'list': [out, out]}, {'list': [kernel, kernel]}, {'list': [dil, dil]},
                                {'list': [pad, pad]}, {'list': [stride, stride]}], ['x'])
    x = torch.randn(1, 4, 9)
    for kwargs, why in [({'pad': 2 ** 31}, "argument 'padding' is 2147483648, outside [0, 2^31)"),
                        ({'pad': 2 ** 30}, 'makes the padded size reach 2^31'),
                        ({'pad': -1}, "argument 'padding' is -1"),
                        ({'pad': 0, 'kernel': 0}, "argument 'kernel_size' is 0, outside [1, 2^31)"),
                        ({'pad': 0, 'dil': 2 ** 20, 'kernel': 2 ** 12}, 'times kernel_size reaches 2^31'),
                        ({'pad': 0, 'out': 2 ** 62}, "argument 'output_size' is 4611686018427387904")]:
        with pytest.raises(RuntimeError, match=re.escape(f'col2im: {why}' if why.startswith('arg') else why)):
            module(**kwargs)(x)
    m = module(0)
    for _ in range(2):
        torch.testing.assert_close(m(x), torch.ops.aten.col2im(x, [4, 4], [2, 2], [1, 1], [0, 0], [1, 1]))


@pytest.mark.parametrize('target', ['aten::max_pool1d', 'aten::max_pool1d_with_indices'])
def test_max_pool1d_refuses_a_kernel_that_would_loop_for_ever(tmp_path, target):
    def module(kernel, stride=(), pad=0, dil=1):
        return _guarded_module(tmp_path, f'{target[6:]}_{kernel}_{pad}_{dil}_{len(stride)}', target,
                               [_ref('x'), {'list': [kernel]}, {'list': list(stride)}, {'list': [pad]},
                                {'list': [dil]}, False], ['x'])
    x = torch.randn(2, 3, 8)
    for args, why in [((2 ** 62 + 2,), "argument 'kernel_size' is 4611686018427387906, outside [1, 2^31)"),
                      ((2, (0,)), "argument 'stride' is 0"),
                      ((2, (), -1), "argument 'padding' is -1"),
                      ((2 ** 16, (), 0, 2 ** 16), 'times kernel_size reaches 2^31')]:
        with pytest.raises(RuntimeError, match=re.escape(why)):
            module(*args)(x)
    m = module(3, (2,), 1)
    for _ in range(2):
        got = m(x)
        want = getattr(torch.ops.aten, target[6:])(x, [3], [2], [1], [1], False)
        torch.testing.assert_close(got, want)


def test_weight_norm_refuses_a_g_it_would_read_out_of_bounds(tmp_path):
    """_weight_norm (wav2vec2's positional convolution) reads g as v.size(dim) elements
    unchecked for dim 0 or the last: a short g is read out of bounds, an empty one is a
    SIGSEGV, an empty v a SIGFPE."""
    m = _guarded_module(tmp_path, 'weight_norm', 'aten::_weight_norm', [_ref('v'), _ref('g'), _ref('dim')],
                        ['v', 'g', 'dim'])
    v = torch.randn(4, 3)
    for args, why in [((v, torch.randn(1), 0), 'g must be a contiguous tensor of v.size(dim) elements'),
                      ((v, torch.randn(0), 0), 'g must be a contiguous tensor of v.size(dim) elements'),
                      ((v, torch.randn(1), 1), 'g must be a contiguous tensor of v.size(dim) elements'),
                      ((v, torch.ones(1).expand(4, 1), 0), 'g must be a contiguous'),
                      ((torch.randn(0, 3), torch.randn(0, 1), 0), 'v must have elements'),
                      ((v, torch.randn(4, 1), 2), 'dim must name a dimension of v'),
                      ((v, torch.randn(4, 1), 2 ** 62), 'dim must name a dimension of v'),
                      ((torch.randn(()), torch.randn(()), 0), 'dim must name a dimension of v')]:
        with pytest.raises(RuntimeError, match=re.escape(why)):
            m(*args)
    for g, dim in ((torch.rand(4, 1) + 0.5, 0), (torch.rand(1, 3) + 0.5, 1), (torch.rand(1, 3) + 0.5, -1)):
        torch.testing.assert_close(m(v, g, dim), torch.ops.aten._weight_norm(v, g, dim))
    # dim left to its default (0): the Python runtime's guard reads the default as the C++
    # runtime binds it (found by the structured fuzzer: it ran the call unguarded)
    m = _guarded_module(tmp_path, 'weight_norm_default_dim', 'aten::_weight_norm', [_ref('v'), _ref('g')], ['v', 'g'])
    with pytest.raises(RuntimeError, match=re.escape('g must be a contiguous tensor of v.size(dim) elements')):
        m(v, torch.randn(1, 3))
    g = torch.rand(4, 1) + 0.5
    torch.testing.assert_close(m(v, g), torch.ops.aten._weight_norm(v, g))


# ---- Note [Guards the schema implies]: window and padding ints, written tensors ---------------
# The kernels the generated sweep (test_guard_sweep.py) found after the hand-written guards:
# each reproduction is one crafted node, refused in both runtimes with the same message, and
# the same module then runs valid calls as eager does.

def _schema_rule(target, arg, value):
    return re.escape(f"{target.split('::')[1].split('.')[0]}: argument '{arg}' is {value}, outside (-2^31, 2^31)")


@pytest.mark.parametrize('target, args, bad, arg, valid, eager', [
    # padding 2**64 // 5 + 1: the output size wraps, the kernel writes out of bounds
    ('aten::conv2d', lambda p: [_ref('x'), _ref('w'), None, {'list': [1, 1]}, {'list': [p, p]}, {'list': [1, 1]}, 1],
     2 ** 64 // 5 + 1, 'padding', 1,
     lambda x, w: torch.ops.aten.conv2d(x, w, None, [1, 1], [1, 1], [1, 1], 1)),
    ('aten::_convolution', lambda p: [_ref('x'), _ref('w'), None, {'list': [1, 1]}, {'list': [p, p]},
                                      {'list': [1, 1]}, False, {'list': [0, 0]}, 1, False, False, True, True],
     2 ** 64 // 5 + 1, 'padding', 1,
     lambda x, w: torch.ops.aten._convolution(x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, False, False,
                                              True, True)),
    # conv3d with stride 2**62: an output of uninitialised memory
    ('aten::conv3d', lambda st: [_ref('x3'), _ref('w3'), None, {'list': [st, 1, 1]}, {'list': [0, 0, 0]},
                                 {'list': [1, 1, 1]}, 1],
     2 ** 62, 'stride', 2,
     lambda x, w: torch.ops.aten.conv3d(x, w, None, [2, 1, 1], [0, 0, 0], [1, 1, 1], 1)),
])
def test_convolutions_refuse_geometry_that_wraps(tmp_path, target, args, bad, arg, valid, eager):
    three = '3d' in target
    inputs = ['x3', 'w3'] if three else ['x', 'w']
    x = torch.randn(1, 2, 4, 5, 5) if three else torch.randn(1, 2, 5, 5)
    w = torch.randn(3, 2, 1, 2, 2) if three else torch.randn(3, 2, 3, 3)
    with pytest.raises(RuntimeError, match=_schema_rule(target, arg, bad)):
        _guarded_module(tmp_path, f'{target[6:]}_bad', target, args(bad), inputs)(x, w)
    m = _guarded_module(tmp_path, f'{target[6:]}_ok', target, args(valid), inputs)
    for _ in range(2):
        torch.testing.assert_close(m(x, w), eager(x, w))


@pytest.mark.parametrize('target, rank, bad, arg', [
    ('aten::replication_pad2d', 2, 2 ** 63 - 1, 'padding'),   # reads out of bounds
    ('aten::replication_pad3d', 3, 2 ** 63 - 1, 'padding'),
    ('aten::reflection_pad3d', 3, -2 ** 63, 'padding'),       # reads out of bounds
    ('aten::constant_pad_nd', 1, 2 ** 31, 'pad'),
])
def test_padding_kernels_refuse_pads_past_two_to_the_31(tmp_path, target, rank, bad, arg):
    x = torch.randn(1, 2, *([6] * rank))
    op = getattr(torch.ops.aten, target[6:])
    if bad == 2 ** 31:
        bad_pads = [bad] + [0] * (2 * rank - 1)
    else:
        bad_pads = [bad] * (2 * rank)
    with pytest.raises(RuntimeError, match=_schema_rule(target, arg, bad)):
        _guarded_module(tmp_path, f'{target[6:]}_bad', target, [_ref('x'), {'list': bad_pads}], ['x'])(x)
    pads = [1, 2] * rank
    m = _guarded_module(tmp_path, f'{target[6:]}_ok', target, [_ref('x'), {'list': pads}], ['x'])
    for _ in range(2):
        torch.testing.assert_close(m(x), op(x, pads))


@pytest.mark.parametrize('target, rank', [('aten::adaptive_avg_pool2d.out', 2),
                                          ('aten::adaptive_avg_pool3d.out', 3)])
def test_out_kernels_refuse_an_out_tensor_that_overlaps_itself(tmp_path, target, rank):
    """adaptive_avg_pool2d.out into an expanded (stride-0) out tensor corrupted the heap."""
    x = torch.randn(1, 2, *([4] * rank))
    size = [2] * rank
    doc = _doc([_ph('x'), _ph('out'),
                {'op': 'call_function', 'name': 'op', 'target': target, 'args': [_ref('x'), {'list': size}],
                 'kwargs': {'out': _ref('out')}}, _out(_ref('op'))])
    path = _write(os.path.join(str(tmp_path), f'{target[6:]}.fxpt'), doc)
    m = _Both(aten.load(path, runtime='cpp', mmap=False), aten.load(path, runtime='python', mmap=False), path, doc)
    expanded = torch.zeros(1).expand(1, 2, *size)
    base = target[6:].split('.')[0]
    with pytest.raises(RuntimeError, match=re.escape(f"{base}: argument 'out' of shape [1, 2, {', '.join(['2'] * rank)}] "
                                                     'is written and overlaps itself')):
        m(x, expanded)
    for _ in range(2):
        out = torch.empty(1, 2, *size)
        got = m(x, out)
        got = got[0] if isinstance(got, (tuple, list)) else got
        torch.testing.assert_close(got, getattr(torch.ops.aten, base)(x, size))


def test_schema_rules_reach_every_allowed_operator_with_such_arguments():
    """The rules are derived, not listed: every allowed overload with a window or padding int
    argument, or a written tensor argument, is guarded; one without either only when it has
    a hand-written check."""
    names = ('kernel_size', 'stride', 'padding', 'dilation', 'output_padding', 'output_size', 'groups', 'pad')
    checked = 0
    for q in _C_torch.allowed_operators():
        base, _, overload = q.split('::', 1)[1].partition('.')
        schema = getattr(getattr(torch.ops.aten, base), overload or 'default')._schema
        ints = any(a.name in names and ('int' in str(a.type).lower()) for a in schema.arguments)
        written = any(a.alias_info is not None and a.alias_info.is_write and 'Tensor' in str(a.type)
                      and 'Tensor[]' not in str(a.type) for a in schema.arguments)
        if ints or written:
            assert _C_torch.argument_guarded(q), q
            checked += 1
    assert checked > 50

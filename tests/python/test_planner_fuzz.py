"""Every ATen operator that returns a tensor, through the planned C++ runtime
three times, against eager PyTorch (Note [Memory planning] in src/torch/compile.cpp).

The calls come from PyTorch's OpInfo samples (op_db, CPU, float32 and int64):
each sample runs under a TorchDispatchMode that records the ATen calls it
makes (and, for composite operators that decompose before the mode sees
them, the operator's own overload is called directly). Calls whose arguments
the file format encodes (tensors become placeholders) become graphs: inputs
pass through a planned op, the recorded call runs, its tensor results feed
planned ops and reach the output, so the planner has intermediates to place.
Each graph is saved, loaded with runtime='cpp' (planned, and unplanned as a
second reference), run three times and compared with the same GraphModule run
by Python: dtype, shape and values (nan equal); operators with random or
uninitialised results compare dtype and shape only.

OpInfo samples miss some allowed overloads (RNNs, pools, dropouts, paddings,
Scalar overloads, ...): _extra_table gives them inputs (a seeded generator;
the expected result is always eager's) and the same path runs them. A test
derives the functional, tensor-returning allowed overloads from their
schemas and fails when one has neither a recorded nor an extra call, except
those in COVERAGE_EXEMPT (named-tensor overloads, which the format cannot
encode). Every call must end 'ok' (planned == eager, three times) unless
NOT_OK lists its overload and outcome with a reason.

The hypothesis property wraps inputs and outputs in the eight operators that
return their argument without an alias annotation (type_as, atleast_1d,
atleast_2d, einsum, broadcast_tensors, to_dense, conj_physical, sum_to_size).

Budget: FXCPP_PLANNER_FUZZ_SAMPLES samples per OpInfo and dtype (1 in `make
test`, more in `make fuzz`), FXCPP_HYPOTHESIS_MAX_EXAMPLES for the property.
The operator set is the default allow-list (fxcpp._C_torch.allowed_operators())
where the build has one.
"""
import contextlib
import math
import os
import sys
import types
import unittest
import warnings

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

import fxcpp
from fxcpp import _C_torch, aten

A = torch.ops.aten
SAMPLES = int(os.environ.get('FXCPP_PLANNER_FUZZ_SAMPLES', 1))
MAX_EXAMPLES = int(os.environ.get('FXCPP_HYPOTHESIS_MAX_EXAMPLES', 60))
# The planner is under test, not the policy: the aliasing wrappers include operators
# files from strangers may not call (to_dense, ...), so files load as the user's own.
_LOAD_KW = {'trusted': True}

# Results that are random or uninitialised: dtype and shape only.
_UNDETERMINED = ('rand', 'bernoulli', 'normal', 'dropout', 'multinomial', 'uniform', 'exponential', 'geometric',
                 'ctc_loss', 'scaled_dot_product_attention',  # uninitialised or dropout outputs
                 'cauchy', 'poisson', 'rrelu', 'empty', 'log_normal')
_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64, torch.complex128,
           torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool)


def _op_db():
    try:
        import expecttest  # noqa: F401
    except ImportError:  # only common_utils' test base class needs it
        stub = types.ModuleType('expecttest')
        stub.TestCase, stub.ACCEPT = unittest.TestCase, False
        sys.modules['expecttest'] = stub
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    except Exception as e:  # pragma: no cover - depends on the torch build
        pytest.skip(f'OpInfo database unavailable: {e}')
    return op_db


def qualified(func) -> str:
    s = func._schema
    return s.name + ('.' + s.overload_name if s.overload_name else '')


def allowed(func) -> bool:
    if not hasattr(allowed, 'set'):
        allowed.set = set(_C_torch.allowed_operators())
    q = qualified(func)
    return q in allowed.set or (q.endswith('.default') and q[:-len('.default')] in allowed.set) or \
        (func._schema.overload_name == '' and q + '.default' in allowed.set)


def encodable(v, depth=0) -> bool:
    """What fxcpp.aten.save can store as a constant (tensors become placeholders)."""
    if depth > 4:
        return False
    if v is None or isinstance(v, (bool, str)):
        return True
    if isinstance(v, int):
        return -2 ** 63 <= v < 2 ** 63
    if isinstance(v, float):
        return True
    if isinstance(v, torch.Tensor):
        return v.layout == torch.strided and v.device.type == 'cpu' and v.dtype in _DTYPES and \
            not v.is_conj() and not v.is_neg()
    if isinstance(v, (list, tuple)):
        return all(encodable(x, depth + 1) for x in v)
    return isinstance(v, (torch.dtype, torch.device, torch.memory_format)) or v in (torch.strided,)


def tensor_result(v) -> bool:
    if isinstance(v, torch.Tensor):
        return v.layout == torch.strided
    return isinstance(v, (list, tuple)) and len(v) > 0 and all(isinstance(x, torch.Tensor) for x in v) and \
        all(x.layout == torch.strided for x in v)


class _Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        snapshot = torch.utils._pytree.tree_map(
            lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else v, (args, kwargs))
        out = func(*args, **kwargs)
        self.calls.append((func, snapshot[0], snapshot[1], out))
        return out


def _keep(func, args, kwargs, out) -> bool:
    s = func._schema
    if s.is_mutable or any(a.is_out for a in s.arguments) or not tensor_result(out):
        return False
    if not all(encodable(a) for a in args) or not all(encodable(v) for v in kwargs.values()):
        return False
    return allowed(func)


def _direct_call(info, sample):
    """The OpInfo's own ATen overload, for composites the dispatch mode does not see."""
    packet = getattr(A, info.aten_name or info.name.split('.')[-1], None)
    if packet is None or not isinstance(packet, torch._ops.OpOverloadPacket):
        return None
    args = (sample.input, *sample.args)
    for ov in packet.overloads():
        func = getattr(packet, ov)
        try:
            if torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), 'CPU'):
                continue  # the dispatch mode records it
        except RuntimeError:
            continue  # a TorchScript-only overload, not in the dispatcher
        try:
            snapshot = torch.utils._pytree.tree_map(
                lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else v, (args, sample.kwargs))
            out = func(*args, **sample.kwargs)
        except Exception:
            continue
        return func, snapshot[0], snapshot[1], out
    return None


_CALLS = None


def recorded_calls():
    """(func, args, kwargs, random) per distinct ATen call; cached per session."""
    global _CALLS
    if _CALLS is not None:
        return _CALLS
    calls, seen = [], set()
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        for info in _op_db():
            for dtype in (torch.float32, torch.int64):
                if dtype not in info.supported_dtypes('cpu'):
                    continue
                try:
                    samples = list(info.sample_inputs('cpu', dtype))[:SAMPLES]
                except Exception:
                    continue
                for sample in samples:
                    found = []
                    rec = _Recorder()
                    try:
                        with rec, torch.no_grad():
                            info.op(sample.input, *sample.args, **sample.kwargs)
                    except Exception:
                        pass
                    found += rec.calls
                    with torch.no_grad():
                        direct = _direct_call(info, sample)
                    if direct:
                        found.append(direct)
                    for func, args, kwargs, out in found:
                        if not _keep(func, args, kwargs, out):
                            continue
                        key = (qualified(func), str(torch.utils._pytree.tree_map(
                            lambda v: (v.dtype, tuple(v.shape)) if isinstance(v, torch.Tensor) else v,
                            (args, kwargs))))
                        if key in seen:
                            continue
                        seen.add(key)
                        random = any(w in qualified(func) for w in _UNDETERMINED) or info.name in (
                            'bernoulli', 'normal', 'nn.functional.dropout')
                        calls.append((func, args, kwargs, random))
    _CALLS = calls
    return calls


# ---- graphs ---------------------------------------------------------------------------------

def _planned_identity(g, v, t):
    """v -> v * 1 (same dtype and values; a planned candidate) where that holds."""
    if t.dtype == torch.bool or not t.dtype.is_floating_point and not t.dtype.is_complex and \
            t.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        return v
    return g.call_function(A.mul.Tensor, (v, 1))


# The eight unannotated aliasing operators, as wrappers of a node holding `t`.
def _alias_wrappers(t):
    w = [
        lambda g, v: g.call_function(A.type_as.default, (v, v)),
        lambda g, v: g.call_function(A.atleast_1d.default, (v,)),
        lambda g, v: g.call_function(A.atleast_2d.default, (v,)),
        lambda g, v: g.call_function(A.to_dense.default, (v,)),
        lambda g, v: g.call_function(A.conj_physical.default, (v,)),
        lambda g, v: g.call_function(A.sum_to_size.default, (v, list(t.shape))),
        lambda g, v: g.call_function(__import__('operator').getitem,
                                     (g.call_function(A.broadcast_tensors.default, ([v],)), 0)),
    ]
    if t.dim() == 2:
        w.append(lambda g, v: g.call_function(A.einsum.default, ('ij->ij', [v])))
    return w


def build_graph(func, args, kwargs, wrap_in=None, wrap_out=None, escape=()):
    """Placeholders for the call's tensors -> planned identities (or `wrap_in`)
    -> the call -> per tensor result a planned identity (or `wrap_out`), then
    `r + r`-like consumers; outputs: the consumers plus results listed in `escape`."""
    g = fxcpp.Graph()
    inputs = []

    def lift(v):
        if isinstance(v, torch.Tensor):
            p = g.placeholder(f'in{len(inputs)}')
            inputs.append(v)
            node = _planned_identity(g, p, v)
            if wrap_in:
                node = wrap_in(g, node, v, len(inputs) - 1)
            return node
        if isinstance(v, (list, tuple)):
            return type(v)(lift(x) for x in v)
        return v

    call = g.call_function(func, tuple(lift(a) for a in args), {k: lift(v) for k, v in kwargs.items()})
    out = func(*args, **kwargs)
    outs = out if isinstance(out, (list, tuple)) else [out]
    results = []
    for i, t in enumerate(outs):
        r = call if not isinstance(out, (list, tuple)) else g.call_function(__import__('operator').getitem, (call, i))
        if wrap_out:
            r = wrap_out(g, r, t, i)
        results.append(_planned_identity(g, r, t))
    extra = [call] if 'call' in escape else []
    g.output(tuple(results + extra))
    return fxcpp.GraphModule(torch.nn.Module(), g), inputs


def _clone(v):
    return v.clone() if isinstance(v, torch.Tensor) else v


def compare(got, want, values, what):
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), f'{what}: {type(got)}'
        assert got.dtype == want.dtype and got.shape == want.shape, \
            f'{what}: {got.dtype}{list(got.shape)} != {want.dtype}{list(want.shape)}'
        if values:
            torch.testing.assert_close(got, want, equal_nan=True, atol=1e-5, rtol=1e-4, msg=lambda s: f'{what}: {s}')
        return
    assert type(got) in (list, tuple) and len(got) == len(want), f'{what}: {got!r}'
    for i, (a, b) in enumerate(zip(got, want)):
        compare(a, b, values, f'{what}[{i}]')


def check_three_calls(tmp_path, gm, inputs, values, what):
    path = tmp_path / 'op.fxpt'
    try:
        aten.save(gm, path)
        planned = aten.load(path, runtime='cpp', plan_memory=True, **_LOAD_KW)
        unplanned = aten.load(path, runtime='cpp', plan_memory=False, **_LOAD_KW)
    except ValueError:
        return 'unsupported'  # the format or the runtime refuses an argument: not the planner's business
    try:
        with torch.no_grad():
            want = gm(*[_clone(t) for t in inputs])
    except Exception:
        return 'eager-fails'  # a wrapper changed a shape the op cannot take
    try:
        ref = unplanned(*[_clone(t) for t in inputs])
        compare(ref, want, values, what + ' (unplanned)')
    except (RuntimeError, AssertionError, TypeError):
        return 'runtime-differs'  # outside the planner: the unplanned runtime already differs
    got = [planned(*[_clone(t) for t in inputs]) for _ in range(3)]
    for i, g_ in enumerate(got):  # all compared after the third forward
        compare(g_, want, values, f'{what}, planned call {i}')
    return 'ok'


# ---- extra calls: allowed overloads the OpInfo recording misses ------------------------------
# Inputs only (a seeded generator and the arguments each overload needs); the expected
# result is always eager's. `random` follows the same rule as the recording.

def _extra_table():
    gen = torch.Generator().manual_seed(0)

    def r(*shape, dtype=torch.float32):
        t = torch.randn(shape, generator=gen)
        return t.to(dtype) if dtype.is_floating_point else (t * 4).to(dtype)

    def i(*shape, high=4):
        return torch.randint(0, high, shape, generator=gen)

    def cond(*shape):
        return torch.randn(shape, generator=gen) > 0

    x = r(3, 4)
    rnn = {}
    for name, gates in (('rnn', 1), ('gru', 3), ('lstm', 4)):
        rnn[name] = [r(4 * gates, 3), r(4 * gates, 4), r(4 * gates), r(4 * gates)]  # input 3, hidden 4
    packed, sizes = r(5, 3), torch.tensor([2, 2, 1])
    seq = r(2, 3, 3)  # batch_first: batch 2, time 3, input 3

    def rnn_calls(op, params, hx):
        return [(op.data, (packed, sizes, hx, params, True, 1, 0.0, False, False), {}),
                (op.input, (seq, hx, params, True, 1, 0.0, False, False, True), {})]

    conv_in, conv_w = r(1, 2, 5, 5), r(3, 2, 3, 3)
    t = [
        (A._convolution.default, (conv_in, conv_w, r(3), [1, 1], [1, 0], [1, 1], False, [0, 0], 1,
                                  False, False, False, False), {}),
        (A._convolution.deprecated, (conv_in, conv_w, None, [2, 1], [0, 0], [1, 1], False, [0, 0], 1,
                                     False, False, False), {}),
        (A.adaptive_avg_pool1d.default, (r(1, 2, 6), [4]), {}),
        (A.adaptive_avg_pool2d.default, (r(1, 2, 6, 5), [3, 2]), {}),
        (A.adaptive_avg_pool3d.default, (r(1, 2, 4, 4, 3), [2, 2, 2]), {}),
        (A.adaptive_max_pool1d.default, (r(1, 2, 6), [4]), {}),
        (A.all.dim, (cond(3, 4), 1), {}),
        (A.alpha_dropout.default, (r(3, 4), 0.5, True), {}),
        (A.alpha_dropout.default, (r(3, 4), 0.5, False), {}),
        (A.arange.start, (1, 7), {'dtype': torch.float32}),
        (A.batch_norm.default, (r(2, 3, 4), r(3), r(3), r(3), r(3).abs() + 0.5, False, 0.1, 1e-5, False), {}),
        (A.batch_norm.default, (r(2, 3, 4), None, None, None, None, True, 0.1, 1e-5, False), {}),
        (A.bitwise_and.Scalar, (i(3, 4, high=16), 5), {}),
        (A.bitwise_or.Scalar, (i(3, 4, high=16), 5), {}),
        (A.bitwise_xor.Scalar, (i(3, 4, high=16), 5), {}),
        (A.channel_shuffle.default, (r(1, 4, 2, 2), 2), {}),
        (A.clamp_max.default, (r(3, 4), 0.25), {}),
        (A.conv1d.padding, (r(1, 2, 6), r(3, 2, 3), r(3), [1], 'same', [1], 1), {}),
        (A.conv2d.padding, (r(1, 2, 5, 5), r(4, 1, 3, 3), None, [1, 1], 'valid', [1, 1], 2), {}),
        (A.conv3d.default, (r(1, 2, 4, 4, 4), r(3, 2, 2, 2, 2), r(3)), {}),
        (A.conv3d.padding, (r(1, 2, 4, 4, 4), r(3, 2, 3, 3, 3), None, [1, 1, 1], 'same'), {}),
        (A.copy.default, (r(3, 4), r(4)), {}),
        (A.copy.default, (r(3, 4), i(3, 4)), {}),
        (A.div.Scalar_mode, (r(3, 4), 0.7), {'rounding_mode': 'floor'}),
        (A.div.Scalar_mode, (i(3, 4), 3), {'rounding_mode': 'trunc'}),
        (A.dropout.default, (r(3, 4), 0.5, True), {}),
        (A.dropout.default, (r(3, 4), 0.5, False), {}),
        (A.einsum.default, ('ij,jk->ik', [r(2, 3), r(3, 4)]), {}),
        (A.einsum.default, ('ii->i', [r(3, 3)]), {}),
        (A.feature_alpha_dropout.default, (r(2, 3, 4), 0.5, True), {}),
        (A.feature_dropout.default, (r(2, 3, 4), 0.5, True), {}),
        (A.fill.Tensor, (r(3, 4), r()), {}),
        (A.floor_divide.Scalar, (r(3, 4), 0.3), {}),
        (A.fmod.Scalar, (r(3, 4), 0.3), {}),
        # The .names factories are not torch.ops overloads on torch 2.x (None: left out).
        (getattr(A.full, 'names', None), ([2, 3], 1.5), {'names': None}),
        (getattr(A.ones, 'names', None), ([2, 3],), {'names': None, 'dtype': torch.int64}),
        (getattr(A.zeros, 'names', None), ([2, 3],), {'names': None}),
        *rnn_calls(A.gru, rnn['gru'], r(1, 2, 4)),
        (A.gru_cell.default, (r(2, 3), r(2, 4), *rnn['gru']), {}),
        (A.gt.Scalar, (r(3, 4), 0.0), {}),
        (A.instance_norm.default, (r(2, 3, 4), r(3), r(3), None, None, True, 0.1, 1e-5, False), {}),
        *rnn_calls(A.lstm, rnn['lstm'], [r(1, 2, 4), r(1, 2, 4)]),
        (A.lstm_cell.default, (r(2, 3), [r(2, 4), r(2, 4)], *rnn['lstm']), {}),
        (A.masked_fill.Tensor, (r(3, 4), cond(3, 4), r()), {}),
        (A.max_pool1d.default, (r(1, 2, 7), [2]), {}),
        (A.max_pool1d_with_indices.default, (r(1, 2, 7), [3], [2], [1]), {}),
        (A.max_pool2d.default, (r(1, 2, 5, 5), [2, 2], [1, 2], [1, 0], [1, 1], True), {}),
        (A.max_pool3d.default, (r(1, 2, 4, 4, 4), [2, 2, 2]), {}),
        (A.movedim.int, (r(2, 3, 4), 0, 2), {}),
        (A.narrow.Tensor, (r(4, 5), 1, torch.tensor(1), 3), {}),
        (A.native_dropout.default, (r(3, 4), 0.5, True), {}),
        (A.norm.ScalarOpt_dim_dtype, (r(3, 4), 2, [1], False), {'dtype': torch.float64}),
        (A.norm.ScalarOpt_dtype, (r(3, 4), 3), {'dtype': torch.float64}),
        (A.pad.default, (r(1, 2, 4), [1, 2], 'reflect'), {}),
        (A.pad.default, (r(1, 2, 4), [1, 2, 0, 1], 'constant', 0.5), {}),
        (A.prod.dim_int, (r(3, 4), 1), {}),
        (A.randperm.default, (6,), {}),
        (A.reflection_pad3d.default, (r(1, 2, 3, 3, 3), [1, 1, 1, 0, 0, 2]), {}),
        (A.remainder.Scalar, (r(3, 4), 0.7), {}),
        (A.remainder.Scalar_Tensor, (2.5, r(3, 4)), {}),
        (A.repeat_interleave.self_Tensor, (r(3, 2), torch.tensor([1, 2, 0]), 0), {}),
        (A.replication_pad2d.default, (r(1, 2, 3, 3), [1, 2, 0, 1]), {}),
        (A.replication_pad3d.default, (r(1, 2, 3, 3, 3), [1, 1, 0, 2, 1, 0]), {}),
        *rnn_calls(A.rnn_relu, rnn['rnn'], r(1, 2, 4)),
        (A.rnn_relu_cell.default, (r(2, 3), r(2, 4), *rnn['rnn']), {}),
        *rnn_calls(A.rnn_tanh, rnn['rnn'], r(1, 2, 4)),
        (A.rnn_tanh_cell.default, (r(2, 3), r(2, 4), *rnn['rnn']), {}),
        (A.scatter.value, (r(3, 4), 1, i(3, 2), 1.5), {}),
        (A.selu.default, (r(3, 4),), {}),
        (A.sort.stable, (r(3, 4),), {'stable': True, 'dim': 0, 'descending': True}),
        (A.std.dim, (r(3, 4), [1], True, False), {}),
        (A.var.dim, (r(3, 4), [0], False, True), {}),
        (A.swapaxes.default, (r(2, 3, 4), 0, 2), {}),
        (A.to.dtype, (x, torch.float64), {}),
        (A.to.dtype, (x, torch.float32), {}),  # returns its argument
        (A.to.dtype_layout, (r(3, 4),), {'dtype': torch.int32}),
        (A.to.other, (r(3, 4), i(2)), {}),
        (A.type_as.default, (r(3, 4), i(2)), {}),
        (A.upsample_bilinear2d.default, (r(1, 2, 3, 3), [5, 6], False), {}),
        (A.upsample_nearest2d.default, (r(1, 2, 3, 3), [5, 6]), {}),
        (A.upsample_nearest2d.vec, (r(1, 2, 3, 3), None, [2.0, 1.5]), {}),
        (A.view.dtype, (r(3, 4), torch.int32), {}),
        (A.where.Scalar, (cond(3, 4), 1.0, -1.0), {}),
        (A.where.ScalarOther, (cond(3, 4), r(3, 4), 0.5), {}),
        (A.where.ScalarSelf, (cond(3, 4), 0.5, r(3, 4)), {}),
        (A.where.default, (cond(3, 4),), {}),
        # Calls that torch 2.x's OpInfo samples no longer record (or overloads it added: None on 1.13).
        (getattr(A.all, 'dims', None), (cond(3, 4), [0, 1]), {}),
        (getattr(A.any, 'dims', None), (cond(3, 4), [1], True), {}),
        (A.clamp.default, (r(3, 4), -0.5, 0.5), {}),
        (A.col2im.default, (r(1, 4, 9), [4, 4], [2, 2], [1, 1], [0, 0], [1, 1]), {}),
        (A.conv1d.default, (r(1, 2, 6), r(3, 2, 3), r(3), [2], [1]), {}),
        (A.conv2d.default, (r(1, 2, 5, 5), r(3, 2, 3, 3), None, [1, 1], [1, 1]), {}),
        (A.conv_transpose1d.default, (r(1, 2, 5), r(2, 3, 3), r(3), [2], [1], [1]), {}),
        (A.conv_transpose2d.input, (r(1, 2, 3, 3), r(2, 3, 3, 3), r(3), [2, 2], [1, 1], [1, 1]), {}),
        (A.conv_transpose3d.input, (r(1, 2, 3, 3, 3), r(2, 3, 2, 2, 2)), {}),
        (A.ge.Scalar, (r(3, 4), 0.0), {}),
        (A.pow.Scalar, (2.0, r(3, 4)), {}),
        (A.prelu.default, (r(1, 3, 4), r(3)), {}),
        (A.repeat_interleave.Tensor, (torch.tensor([1, 2, 0]),), {}),
        (A.upsample_bilinear2d.vec, (r(1, 2, 3, 3), [5, 6], False, None), {}),
        # the batch-norm kernels core-ATen exports call (allowed behind their argument guard; 2.x)
        (getattr(getattr(A, '_native_batch_norm_legit_no_training', None), 'default', None),
         (r(2, 3, 4), r(3), r(3), r(3), r(3).abs() + 0.5, 0.1, 1e-5), {}),
        (getattr(getattr(A, '_native_batch_norm_legit', None), 'no_stats', None),
         (r(2, 3, 4), r(3), r(3), True, 0.1, 1e-5), {}),
        # what torch.export emits for HF transformers (issue 35's allow-list additions)
        (A.__and__.Tensor, (cond(3, 4), cond(3, 4)), {}),
        (A.__and__.Scalar, (i(3, 4, high=8), 5), {}),
        (A.__or__.Tensor, (cond(3, 4), cond(4)), {}),
        (A.__or__.Scalar, (i(3, 4, high=8), 2), {}),
        (A.__xor__.Tensor, (i(3, 4, high=8), i(3, 4, high=8)), {}),
        (A.__xor__.Scalar, (cond(3, 4), True), {}),
        (A.lift_fresh_copy.default, (r(3, 4),), {}),
        (A._weight_norm.default, (r(4, 3), r(4, 1).abs() + 0.5, 0), {}),
        (getattr(getattr(A, 'scaled_dot_product_attention', None), 'default', None),
         (r(2, 3, 5, 8), r(2, 3, 6, 8), r(2, 3, 6, 8)), {}),
    ]
    return [(func, args, kwargs, any(w in qualified(func) for w in _UNDETERMINED)) for func, args, kwargs in t
            if func is not None]


_EXTRA = None


def extra_calls():
    global _EXTRA
    if _EXTRA is None:
        _EXTRA = _extra_table()
    return _EXTRA


def _has_schema(q):
    name, _, ov = q.partition('.')
    try:
        torch._C._get_schema(name, ov)
    except RuntimeError:
        return False
    return True


# Functional, tensor-returning allowed overloads no call exercises, with the reason (only
# those this torch has: torch 2.x registers no named-tensor overloads).
_NAMED = 'takes a Dimname (str) naming a dimension of a named tensor; the format stores no tensor names'
COVERAGE_EXEMPT = {q: _NAMED for q in (
    'aten::all.dimname', 'aten::any.dimname', 'aten::cat.names', 'aten::cumsum.dimname',
    'aten::flatten.DimnameList', 'aten::flatten.named_out_dim', 'aten::flatten.using_names',
    'aten::gather.dimname', 'aten::index_select.dimname', 'aten::log_softmax.Dimname', 'aten::logsumexp.names',
    'aten::max.names_dim', 'aten::mean.names_dim', 'aten::min.names_dim', 'aten::norm.names_ScalarOpt_dim',
    'aten::norm.names_ScalarOpt_dim_dtype', 'aten::select.Dimname', 'aten::softmax.Dimname', 'aten::sort.dimname',
    'aten::sort.dimname_stable', 'aten::squeeze.dimname', 'aten::std.correction_names', 'aten::std.names_dim',
    'aten::sum.dim_DimnameList', 'aten::transpose.Dimname', 'aten::unbind.Dimname', 'aten::unflatten.Dimname',
    'aten::var.correction_names', 'aten::var.names_dim') if _has_schema(q)}

# Overloads with a schema but no CPU kernel (torch 2.x's out_dtype matmuls are CUDA only);
# only those this torch has.
_NO_CPU = "has no CPU kernel (CUDA only), so no call can run here"
for _q in ('aten::addmm.dtype', 'aten::baddbmm.dtype', 'aten::bmm.dtype', 'aten::mm.dtype'):
    if _has_schema(_q) and not torch._C._dispatch_has_kernel_for_dispatch_key(_q, 'CPU'):
        COVERAGE_EXEMPT[_q] = _NO_CPU

# Covered overloads whose calls may end other than 'ok': {overload: {outcome: reason}}.
NOT_OK = {
    'aten::_to_copy': {'unsupported': "OpInfo's to/type samples cast to torch.complex32 (chalf), a dtype the file "
                                      'format does not encode; every other _to_copy call ends ok'},
}


def _norm(q):
    return q[:-len('.default')] if q.endswith('.default') else q


def functional_tensor_overloads():
    """Allowed overloads that mutate nothing, take no out= and return Tensor or Tensor[]."""
    result = set()
    for q in _C_torch.allowed_operators():
        name, _, ov = q.partition('.')
        s = torch._C._get_schema(name, '' if ov in ('', 'default') else ov)
        if s.is_mutable or any(a.is_out for a in s.arguments):
            continue
        rets = [str(r.type) for r in s.returns]
        if rets and all(r in ('Tensor', 'Tensor[]', 'List[Tensor]') for r in rets):
            result.add(_norm(q))
    return result


@pytest.fixture(scope='module')
def calls():
    return recorded_calls()


def test_every_functional_tensor_overload_has_a_sample(calls):
    if not hasattr(_C_torch, 'allowed_operators'):
        pytest.skip('no allow-list in this build')
    if not SAMPLES:
        pytest.skip('FXCPP_PLANNER_FUZZ_SAMPLES=0 records no calls')
    wanted = functional_tensor_overloads()
    covered = {_norm(qualified(f)) for f, *_ in list(calls) + extra_calls()}
    missing = sorted(wanted - covered - set(COVERAGE_EXEMPT))
    assert not missing, f'allowed overloads with no recorded or extra sample (add one to _extra_table): {missing}'
    stale = sorted(q for q in COVERAGE_EXEMPT if q not in wanted)
    assert not stale, f'exemptions for overloads no longer allowed: {stale}'
    print(f'\nplanner fuzz coverage: {len(wanted & covered)}/{len(wanted)} overloads, '
          f'{len({q.split(".")[0] for q in wanted & covered})}/{len({q.split(".")[0] for q in wanted})} names, '
          f'{len(COVERAGE_EXEMPT)} exempt')


def test_extra_calls_through_the_planned_runtime(tmp_path):
    _run_calls(tmp_path, extra_calls(), 'extra')


def _run_calls(tmp_path, calls, what):
    """Each call three times through the planned runtime; an outcome other than 'ok'
    must be listed, with its reason, in NOT_OK."""
    outcomes, unlisted = {}, []
    for func, args, kwargs, random in calls:
        q = qualified(func)
        gm, inputs = build_graph(func, args, kwargs)
        outcome = check_three_calls(tmp_path, gm, inputs, not random, q)
        outcomes.setdefault(outcome, []).append(q)
        if outcome != 'ok' and outcome not in NOT_OK.get(_norm(q), {}):
            unlisted.append((q, outcome))
    print(f'\nplanner fuzz ({what}): {len(calls)} calls; ' + ', '.join(f'{k}: {len(v)}' for k, v in outcomes.items()))
    assert not unlisted, f'calls that did not end ok, not listed in NOT_OK: {unlisted}'
    return outcomes


def test_every_recorded_operator_through_the_planned_runtime(tmp_path, calls):
    outcomes = _run_calls(tmp_path, calls, 'recorded')
    assert len(set(outcomes.get('ok', []))) >= (50 if SAMPLES else 0), outcomes.keys()


@settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.data())
def test_aliasing_operators_around_recorded_calls(tmp_path, calls, data):
    func, args, kwargs, random = data.draw(st.sampled_from(list(calls) + extra_calls()))
    choices = {}

    def wrap_in(g, v, t, i):
        k = data.draw(st.integers(-1, len(_alias_wrappers(t)) - 1))
        return v if k < 0 else _alias_wrappers(t)[k](g, v)

    def wrap_out(g, v, t, i):
        k = data.draw(st.integers(-1, len(_alias_wrappers(t)) - 1))
        return v if k < 0 else _alias_wrappers(t)[k](g, v)

    escape = ('call',) if data.draw(st.booleans()) else ()
    gm, inputs = build_graph(func, args, kwargs, wrap_in, wrap_out, escape)
    check_three_calls(tmp_path, gm, inputs, not random, qualified(func))

"""Argument guards for every allowed operator, derived, not hand-picked (issue 35;
Note [Argument guards] in include/fxcpp/torch/policy.h).

For every overload a file from an untrusted source may call
(fxcpp._C_torch.allowed_operators()), valid calls come from test_planner_fuzz
(OpInfo samples recorded under a TorchDispatchMode, and its _extra_table),
plus, derived from those, the out= and in-place variants (the functional
sibling's call, with out tensors shaped like its eager result) and a few
calls of our own (_own_calls: the operators that return no tensor, ...). Each
call is then mutated one argument at a time, from the schema's declared types:

* int, SymInt, int? and Scalar: 0, -1, INT64_MIN, INT64_MAX, 2^31, 2^31 - 1,
  -2^31 - 1, 2^32 + 1, 2^62, 2^62 + 2, and values whose products with the
  call's tensor sizes wrap int64 (2^63 // n + 1, ...); None where optional;
* int[] and float[]: each value in every element at once and in one element at
  a time, and the list empty, one shorter, one longer;
* float: 0, -0, -1, nan, +-inf, +-1e308, 2^31, 2^63, the smallest subnormal;
* bool: flipped (and None where optional);
* tensors (inputs, out= tensors, list elements): empty in each dimension, one
  element, 0-d, stride 0 (expanded), strided at an offset, a dimension one
  larger or smaller (an RNN state of the wrong batch), a rank more or less,
  boundary values in integer tensors and nan/inf in floating ones; an absent
  optional tensor given; a tensor list empty, shorter and longer.

Each case is a one-node graph saved with fxcpp.aten.save (a mutated constant
is the file's constant, a mutated tensor the runtime's input), loaded with
fxcpp.aten.load(path, runtime='cpp') as a file from an untrusted source, and
called twice, in a child process (this file run as a script), many cases per
child. Every case runs in two children whose heaps are filled differently
(MALLOC_PERTURB_ 0x55 and 0xaa; ASan's malloc_fill_byte under the sanitizer
build), with one intra-op thread and the generator reseeded before each call.
Outcomes:

  ok       the four results (two calls, two heaps) agree bitwise (dtype, shape,
           strides and bytes, the first and last 64 MiB of a larger result;
           dtype and shape only for operators with random or uninitialised
           results, test_planner_fuzz._UNDETERMINED);
  refused  a RuntimeError or ValueError with a message, the same in every run;
  crash    the child died of a signal, or a sanitizer reported (AddressSanitizer,
           UBSan's 'runtime error:');
  hang     the case ran past FXCPP_GUARD_SWEEP_TIMEOUT seconds (10; 60 under the sanitizer);
  uninit   the results differ between the calls or the heaps;
  bad-error an exception of another type, or without a message.

The test fails on crash, hang, uninit and bad-error, one line each with the
reproduction (the operator and its arguments, and the case key for
FXCPP_GUARD_SWEEP_ONLY). A child that dies names the case it was running (the
first without a result); the rest of its batch runs in a new child, and the
case is rerun alone to confirm it; a case that only dies after others ran in
the same process is narrowed to the latest earlier case that still makes it
die (heap corruption shows later), and both are reported.
Every child's address space is bounded (RLIMIT_DATA, FXCPP_GUARD_SWEEP_MEM_MB,
4096; ASan's max_allocation_size_mb under the sanitizer build), so a result too
large to allocate is a clean error.

Budget: FXCPP_GUARD_SWEEP_CASES mutated cases per overload (default 32, about
16,000 cases and two minutes on two cores; 2 under the sanitizer build, every
valid call included; `make
fuzz` runs all of them, about 48,000 and four minutes), picked with a generator
seeded from FXCPP_GUARD_SWEEP_SEED and the overload's name (the same cases
every run), round-robin over the overload's arguments so each argument gets its
share; every unmutated call runs too. FXCPP_GUARD_SWEEP_JOBS child processes at
once (2). FXCPP_GUARD_SWEEP_ONLY=KEY[,KEY...] runs only the cases whose key
contains one of them, whatever the budget. The report (printed with -s, in pytest's summary, and
written to the path FXCPP_GUARD_SWEEP_REPORT names) gives the overloads,
arguments and cases swept and the outcomes by kind.
"""
import hashlib
import json
import math
import os
import pickle
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# ---- the child: runs cases, one JSON line per case --------------------------------------------

_MARK = '@@guard-sweep case '
# A sanitizer's report (not its 'WARNING: AddressSanitizer failed to allocate', which is the
# allocator returning null under allocator_may_return_null=1: torch raises a clean error then).
_SANITIZER = ('ERROR: AddressSanitizer', 'runtime error:', 'ERROR: LeakSanitizer', 'UndefinedBehaviorSanitizer:')


def _digest(v, values):
    """What two runs must agree on: dtype, shape, strides and bytes of each tensor
    (dtype and shape only when `values` is False)."""
    import torch
    if isinstance(v, torch.Tensor):
        if not values or v.layout != torch.strided:
            return ['T', str(v.dtype), list(v.shape)]
        t = v.detach().resolve_conj().resolve_neg().contiguous().reshape(-1)
        try:
            raw = t.view(torch.uint8)
        except RuntimeError:
            raw = None
        h = hashlib.sha1()
        if raw is None:
            h.update(repr(t.tolist()).encode())
        else:
            n = raw.numel()
            cap = 1 << 26
            for part in ((raw,) if n <= 2 * cap else (raw[:cap], raw[-cap:])):
                h.update(part.numpy().tobytes())
        return ['T', str(v.dtype), list(v.shape), list(v.stride()), h.hexdigest()]
    if isinstance(v, (list, tuple)):
        return [_digest(x, values) for x in v]
    if isinstance(v, float) and math.isnan(v):
        return 'nan'
    if v is None or isinstance(v, (bool, int, float, complex, str)):
        return repr(v) if values else type(v).__name__
    return repr(type(v))


def _probe(kind):
    """The harness's own failures, for its self-test."""
    import torch
    if kind == 'segv':
        import ctypes
        ctypes.string_at(0)
    if kind == 'hang':
        while True:
            time.sleep(1)
    if kind == 'uninit':
        return torch.empty(512)
    if kind == 'flip':  # a result that differs between heaps in a way no fill byte hides
        return torch.tensor([int(os.environ.get('MALLOC_PERTURB_', '0'))])
    raise ValueError(kind)


def _run_case(case, aten, torch):
    calls = []
    module = None
    for _ in range(2):
        try:
            if case.get('probe'):
                out = _probe(case['probe'])
            else:
                if module is None:
                    module = aten.load(case['path'], runtime='cpp', mmap=False)
                inputs = pickle.loads(case['inputs'])
                torch.manual_seed(0)
                out = module(*inputs)
            calls.append(['ok', _digest(out, not case['random'])])
            del out
        except Exception as e:  # noqa: BLE001 - every exception is an outcome
            # the message without LibTorch's C++ backtrace (addresses differ between processes)
            msg = re.sub(r'0x[0-9a-fA-F]+', '0x?', str(e).split('\nException raised from')[0])
            calls.append(['err', type(e).__name__, isinstance(e, (RuntimeError, ValueError)), msg[:600]])
    return calls


def _worker(spec_path, results_path):
    import faulthandler
    root = os.environ.get('FXCPP_PACKAGE_ROOT')
    if root and root not in sys.path:
        sys.path.insert(0, root)
    import torch
    from fxcpp import aten
    torch.set_num_threads(1)
    faulthandler.enable()
    with open(spec_path, 'rb') as f:
        spec = pickle.load(f)
    os.write(2, f'\n{_MARK}ready\n'.encode())  # started: a death from here on is a case's
    if spec['mem_bytes'] and not _sanitized(os.environ):
        import resource
        with open('/proc/self/status') as f:
            data = next((int(line.split()[1]) * 1024 for line in f if line.startswith('VmData:')), 0)
        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        want = data + spec['mem_bytes']
        if hard == resource.RLIM_INFINITY or want < hard:
            resource.setrlimit(resource.RLIMIT_DATA, (want, hard))
    with open(results_path, 'a', buffering=1) as out:
        for case in spec['cases']:
            os.write(2, f'\n{_MARK}{case["id"]}\n'.encode())
            faulthandler.dump_traceback_later(spec['timeout'], exit=True)
            t0 = time.monotonic()
            calls = _run_case(case, aten, torch)
            seconds = time.monotonic() - t0
            faulthandler.cancel_dump_traceback_later()
            out.write(json.dumps({'id': case['id'], 'calls': calls, 's': round(seconds, 4)}) + '\n')
            out.flush()
    os.write(2, f'\n{_MARK}done\n'.encode())
    sys.stdout.flush()
    os._exit(0)  # no interpreter teardown: a crash there is no case's


def _sanitized(env):
    return 'asan' in env.get('LD_PRELOAD', '') or 'ASAN_OPTIONS' in env


if __name__ == '__main__':
    if len(sys.argv) == 4 and sys.argv[1] == '--worker':
        _worker(sys.argv[2], sys.argv[3])
    sys.exit('usage: test_guard_sweep.py --worker SPEC RESULTS (run by the test, not by hand)')


# ---- the parent: calls, mutations, batches, outcomes ------------------------------------------

import pytest  # noqa: E402
import torch  # noqa: E402

A = torch.ops.aten
HERE = os.path.abspath(__file__)
# (the sanitizer build runs everything several times slower: a smaller default sample there)
# make test runs the default sample on every leg (plain, ASan+UBSan, torch 1.13); make fuzz
# all of it. The last findings (adaptive_avg_pool2d/3d.out into a stride-0 out tensor,
# conv2d/_convolution with wrapping padding, conv3d with stride 2**62, replication_pad2d/3d and
# reflection_pad3d with INT64 pads) are guarded by Note [Guards the schema implies].
CASES = int(os.environ.get('FXCPP_GUARD_SWEEP_CASES', 2 if _sanitized(os.environ) else 32))
SEED = os.environ.get('FXCPP_GUARD_SWEEP_SEED', '0')
JOBS = max(1, int(os.environ.get('FXCPP_GUARD_SWEEP_JOBS', 2)))
# Under the sanitizer the bound is 60 s: the full budget's largest valid cases (arange to 2^31 in
# float32, new_ones.out of 2^31 bools: 2 to 4 GiB) take 12 to 19 s a child there on a loaded machine.
TIMEOUT = float(os.environ.get('FXCPP_GUARD_SWEEP_TIMEOUT', 60 if _sanitized(os.environ) else 10))
MEM_BYTES = int(os.environ.get('FXCPP_GUARD_SWEEP_MEM_MB', 4096)) << 20
ONLY = [k for k in os.environ.get('FXCPP_GUARD_SWEEP_ONLY', '').split(',') if k]
BASES = int(os.environ.get('FXCPP_GUARD_SWEEP_BASES', 3))  # valid calls per overload to mutate
BATCH = int(os.environ.get('FXCPP_GUARD_SWEEP_BATCH', 20000))  # most cases per child
PERTURB = (0x55, 0xaa)
FAILING = ('crash', 'hang', 'uninit', 'bad-error')

I64_MIN, I64_MAX = -2 ** 63, 2 ** 63 - 1
INTS = (0, -1, I64_MIN, I64_MAX, 2 ** 31, 2 ** 31 - 1, -2 ** 31 - 1, 2 ** 32 + 1, 2 ** 62, 2 ** 62 + 2)
FLOATS = (0.0, -0.0, -1.0, math.nan, math.inf, -math.inf, 1e308, -1e308, 2.0 ** 31, 2.0 ** 63, 5e-324)
SCALAR_FLOATS = (math.nan, math.inf, -math.inf, 1e308)


def _planner_fuzz():
    try:
        import test_planner_fuzz
    except ImportError as e:  # hypothesis or the dispatch mode missing on this torch
        pytest.skip(f'test_planner_fuzz (the calls) cannot be imported: {e}')
    return test_planner_fuzz


def _overload(name, ov='default'):
    try:
        packet = getattr(A, name)
        return getattr(packet, ov) if ov in packet.overloads() else None
    except (AttributeError, RuntimeError):  # not registered with this torch
        return None


# ---- schemas ---------------------------------------------------------------------------------

def _declared_types(schema):
    """Each argument's type as the schema declares it ('SymInt[2]', 'Tensor?', 'ScalarType?'):
    Argument.type says int for SymInt, ScalarType, Layout and MemoryFormat alike."""
    s = str(schema)
    inner = s[s.index('(') + 1:s.rindex(') ->')]
    parts, depth, cur, quoted = [], 0, '', False
    for ch in inner:
        if ch == '"':
            quoted = not quoted
        if not quoted:
            if ch in '([':
                depth += 1
            elif ch in ')]':
                depth -= 1
            elif ch == ',' and depth == 0:
                parts.append(cur)
                cur = ''
                continue
        cur += ch
    parts.append(cur)
    types = []
    for p in parts:
        p, depth, end = p.strip(), 0, None
        if p in ('', '*'):
            continue
        for j, ch in enumerate(p):  # the type ends at the first space outside parentheses
            depth += (ch == '(') - (ch == ')')
            if ch == ' ' and depth == 0:
                end = j
                break
        types.append(re.sub(r'\([^()]*\)', '', p[:end]))  # alias annotations: Tensor(a -> *)[]
    assert len(types) == len(schema.arguments), (s, types)
    return types


_KINDS = {'int': 'int', 'SymInt': 'int', 'float': 'float', 'bool': 'bool', 'Scalar': 'scalar', 'Tensor': 'tensor'}


def _kind(declared):
    """('int' | 'float' | 'bool' | 'scalar' | 'tensor' | None, is_list, optional, list length N)."""
    m = re.match(r'^(\w+)(\?)?(?:\[(\d*)\](\?)?)?$', declared)
    if not m:
        return None, False, False, None
    base, opt_elem, n, opt_list = m.group(1), m.group(2), m.group(3), m.group(4)
    is_list = n is not None
    optional = bool(opt_list) if is_list else bool(opt_elem)
    return _KINDS.get(base), is_list, optional, (int(n) if n else None)


def qualified(func):
    s = func._schema
    q = s.name + ('.' + s.overload_name if s.overload_name else '')
    return q[:-len('.default')] if q.endswith('.default') else q


# ---- valid calls per allowed overload ----------------------------------------------------------

def _own_calls():
    """Allowed overloads that neither test_planner_fuzz's calls nor the out= and in-place
    derivations reach: those returning no tensor, the mutating batch-norm kernel, zero_, and
    what torch.export emits for transformers."""
    gen = torch.Generator().manual_seed(1)

    def r(*shape):
        return torch.randn(shape, generator=gen)

    def i(*shape):
        return torch.randint(0, 16, shape, generator=gen)

    t = [
        (_overload('size', 'int'), (r(3, 4), 1), {}),
        (_overload('sym_size', 'int'), (r(3, 4), 1), {}),
        (_overload('sym_stride', 'int'), (r(3, 4), 0), {}),
        (_overload('numel'), (r(3, 4),), {}),
        (_overload('sym_numel'), (r(3, 4),), {}),
        (_overload('dim'), (r(3, 4),), {}),
        (_overload('item'), (r(1),), {}),
        (_overload('zero_'), (r(3, 4),), {}),
        (_overload('_native_batch_norm_legit'), (r(2, 3, 4), r(3), r(3), r(3), r(3).abs() + 0.5, False, 0.1, 1e-5), {}),
        (_overload('_native_batch_norm_legit'), (r(2, 3, 4), r(3), r(3), r(3), r(3).abs() + 0.5, True, 0.1, 1e-5), {}),
        # what torch.export emits for transformers (allowed since issue 35's model work)
        (_overload('__and__', 'Tensor'), (i(3, 4), i(4)), {}),
        (_overload('__and__', 'Scalar'), (i(3, 4), 5), {}),
        (_overload('__or__', 'Tensor'), (r(3, 4) > 0, r(3, 4) > 0), {}),
        (_overload('__or__', 'Scalar'), (i(3, 4), 5), {}),
        (_overload('__xor__', 'Tensor'), (i(3, 4), i(3, 4)), {}),
        (_overload('__xor__', 'Scalar'), (i(3, 4), 5), {}),
        (_overload('scaled_dot_product_attention'), (r(1, 2, 3, 4), r(1, 2, 5, 4), r(1, 2, 5, 4)), {}),
        (_overload('scaled_dot_product_attention'), (r(1, 2, 3, 4), r(1, 2, 3, 4), r(1, 2, 3, 4), r(3, 3)),
         {'is_causal': False, 'scale': 0.5}),
        (_overload('lift_fresh_copy'), (r(3, 4),), {}),
        (_overload('_weight_norm'), (r(3, 2, 4), r(3, 1, 1), 0), {}),
        (_overload('_weight_norm'), (r(3, 2, 4), r(1, 1, 4), 2), {}),
    ]
    return [(f, a, k) for f, a, k in t if f is not None]


_OPTIONS = ('dtype', 'layout', 'device', 'pin_memory')


def _arg_names(func):
    return [a.name for a in func._schema.arguments if not a.is_out]


def _clone_tree(v):
    if isinstance(v, torch.Tensor):
        return v.clone()
    if isinstance(v, (list, tuple)):
        return type(v)(_clone_tree(x) for x in v)
    return v


def _outs_like(result, n):
    outs = list(result) if isinstance(result, (list, tuple)) else [result]
    outs = [o for o in outs if isinstance(o, torch.Tensor)]
    return [torch.zeros_like(outs[i]) if i < len(outs) else torch.zeros(0) for i in range(n)]


def base_calls():
    """{overload: [(func, args, kwargs, random)]} for every allowed overload with a call,
    at most BASES each: test_planner_fuzz's recorded and extra calls, ours, and the
    out= and in-place variants derived from their functional siblings."""
    P = _planner_fuzz()
    from fxcpp import _C_torch
    if not hasattr(_C_torch, 'allowed_operators'):
        pytest.skip('no allow-list in this build')
    allowed = {P._norm(q) for q in _C_torch.allowed_operators()}
    undetermined = P._UNDETERMINED
    found = {}
    for func, args, kwargs, rnd in list(P.recorded_calls()) + P.extra_calls() + \
            [(f, a, k, any(w in qualified(f) for w in undetermined)) for f, a, k in _own_calls()]:
        q = qualified(func)
        if q in allowed:
            found.setdefault(q, []).append((func, args, kwargs, rnd))
    by_name = {}
    for q, calls in found.items():
        by_name.setdefault(q.split('.')[0], []).extend(calls)
    for q in sorted(allowed - set(found)):
        name, _, ov = q.partition('.')
        func = _overload(name.split('::')[1], ov or 'default')
        if func is None:
            continue
        s = func._schema
        rnd = any(w in q for w in undetermined)
        if any(a.is_out for a in s.arguments):
            want = _arg_names(func)
            outs = [a.name for a in s.arguments if a.is_out]
            for f, args, kwargs, r_ in by_name.get(name, []):
                # a factory's out= variant takes none of its TensorOptions
                options = [a.name for a in f._schema.arguments if a.kwarg_only and a.name in _OPTIONS and
                           a.name not in want]
                if [n for n in _arg_names(f) if n not in options] != want or len(found.get(q, [])) >= BASES:
                    continue
                kwargs = {k: v for k, v in kwargs.items() if k not in options}
                try:
                    with torch.no_grad():
                        result = f(*_clone_tree(args), **_clone_tree(kwargs))
                except Exception:  # noqa: BLE001 - a valid call on one torch, not another
                    continue
                found.setdefault(q, []).append(
                    (func, args, {**kwargs, **dict(zip(outs, _outs_like(result, len(outs))))}, r_ or rnd))
        elif name.endswith('_') and not name.endswith('__'):
            sibling = name[:-1] + ('.' + ov if ov else '')
            for f, args, kwargs, r_ in found.get(sibling, [])[:BASES]:
                if _arg_names(f)[1:] == _arg_names(func)[1:]:  # input / self
                    found.setdefault(q, []).append((func, args, kwargs, r_ or rnd))
    return {q: calls[:BASES] for q, calls in found.items()}, allowed


# ---- mutations -------------------------------------------------------------------------------

def _wrap_values(tensors):
    """int64 values whose products with the call's sizes (and element counts) wrap."""
    ns = sorted({n for t in tensors for n in list(t.shape) + [t.numel()] if n > 1}, reverse=True)[:3]
    out = []
    for n in ns:
        for v in (I64_MAX // n + 1, -(I64_MAX // n) - 1, 2 ** 64 // n + 1):
            if I64_MIN <= v <= I64_MAX and v not in INTS and v not in out:
                out.append(v)
    return out


def _int_fill_values(dtype):
    info = torch.iinfo(dtype)
    return [v for v in (-1, I64_MIN, I64_MAX, 2 ** 31, info.min, info.max) if info.min <= v <= info.max]


def _tensor_mutations(t):
    """(label, tensor) variants of `t`, each with values taken from `t` where it has any."""
    out = []
    rank, shape, n = t.dim(), list(t.shape), t.numel()
    flat = t.reshape(-1)
    first = flat[:1].clone() if n else torch.zeros(1, dtype=t.dtype)
    if rank == 0:
        out += [('shape[1]', t.reshape(1)), ('shape[0]', t.reshape(1)[:0]), ('shape[2]', t.reshape(1).repeat(2))]
    else:
        for d in range(rank):
            out.append((f'empty@{d}', t.narrow(d, 0, 0)))
            if shape[d] > 0:
                out.append((f'size+1@{d}', torch.cat([t, t.narrow(d, 0, 1)], d)))
            else:
                out.append((f'size+1@{d}', first.reshape([1] * rank).expand(
                    [1 if i == d else s for i, s in enumerate(shape)]).contiguous()))
            if shape[d] >= 2:
                out.append((f'size-1@{d}', t.narrow(d, 0, shape[d] - 1).contiguous()))
        if shape != [1] * rank:
            out.append(('one', first.reshape([1] * rank)))
        out.append(('0-d', first.reshape(())))
        if n > 1:
            out.append(('stride0', first.reshape([1] * rank).expand(shape)))
        if n > 0:
            out.append(('strided', t.unsqueeze(-1).expand(*shape, 2).contiguous()[..., 1]))
        out.append(('rank+1', t.unsqueeze(0)))
        if rank >= 2:
            out.append(('rank-1', t.flatten(0, 1)))
    if t.dtype.is_floating_point:
        out += [('fill=nan', torch.full_like(t, math.nan)), ('fill=inf', torch.full_like(t, math.inf))]
    elif not t.dtype.is_complex and t.dtype != torch.bool:
        out += [(f'fill={v}', torch.full_like(t, v)) for v in _int_fill_values(t.dtype)]
    return out


def _number_mutations(kind, value, optional, wraps):
    if kind == 'bool':
        vals = [not value] if isinstance(value, bool) else [True, False]
    elif kind == 'float':
        vals = list(FLOATS)
    elif kind == 'int':
        vals = list(INTS) + wraps
    else:  # Scalar
        vals = list(INTS) + wraps + list(SCALAR_FLOATS)
    vals = [v for v in vals if not (type(v) is type(value) and (v == value or v != v and value != value))]
    if optional and value is not None:
        vals.append(None)
    return [(repr(v), v) for v in vals]


def _list_mutations(kind, value, optional, n, wraps):
    if value is None or not isinstance(value, (list, tuple)):
        seed = [1] * (n or 2) if kind == 'int' else [1.0] * (n or 2)
        value, given = seed, False
    else:
        value, given = list(value), True
    elem = _number_mutations(kind, None if not value else value[0], False, wraps)
    elems = [v for _, v in elem if v is not None]
    out = []
    for v in elems:
        out.append((f'all={v!r}', [v] * max(len(value), 1)))
        if len(value) > 1:
            for i in range(len(value)):
                out.append((f'[{i}]={v!r}', value[:i] + [v] + value[i + 1:]))
    if given:
        out += [('[]', []), ('len-1', value[:-1]), ('len+1', value + value[-1:] if value else [1])]
        if optional:
            out.append(('None', None))
    return out


def mutations(func, args, kwargs):
    """(argument, label, args, kwargs) for each one-argument mutation of a valid call."""
    schema = func._schema
    declared = _declared_types(schema)
    tensors = [v for v in list(args) + list(kwargs.values()) for v in (v if isinstance(v, (list, tuple)) else [v])
               if isinstance(v, torch.Tensor)]
    wraps = _wrap_values(tensors)
    like = tensors[0] if tensors else torch.zeros(1)
    out = []
    for i, a in enumerate(schema.arguments):
        kind, is_list, optional, n = _kind(declared[i])
        if kind is None:
            continue
        if i < len(args):
            value = args[i]
        elif a.name in kwargs:
            value = kwargs[a.name]
        elif a.has_default_value():
            value = a.default_value
        else:
            continue  # required and absent: not a call of this schema

        def put(v, i=i, a=a):
            if i < len(args):
                return args[:i] + (v,) + args[i + 1:], kwargs
            return args, {**kwargs, a.name: v}

        if kind == 'tensor' and not is_list:
            if isinstance(value, torch.Tensor):
                muts = _tensor_mutations(value)
            elif value is None and optional:
                muts = [('given[1]', torch.ones(1, dtype=like.dtype)), ('given[0]', torch.ones(0, dtype=like.dtype))]
            else:
                continue
            out += [(a.name, label, *put(v)) for label, v in muts]
        elif kind == 'tensor':
            if not isinstance(value, (list, tuple)):
                continue
            value = list(value)
            for j, t in enumerate(value):
                if isinstance(t, torch.Tensor):
                    out += [(a.name, f'[{j}]{label}', *put(type(args[i] if i < len(args) else value)(
                        value[:j] + [v] + value[j + 1:]))) for label, v in _tensor_mutations(t)]
            out += [(a.name, lab, *put(v)) for lab, v in (('[]', []), ('len-1', value[:-1]),
                                                          ('len+1', value + value[-1:]))]
        elif is_list:
            if kind in ('int', 'float'):
                out += [(a.name, label, *put(v)) for label, v in _list_mutations(kind, value, optional, n, wraps)]
        else:
            out += [(a.name, label, *put(v)) for label, v in _number_mutations(kind, value, optional, wraps)]
    return out


def _show(v):
    if isinstance(v, torch.Tensor):
        s = f'T({str(v.dtype).replace("torch.", "")}{list(v.shape)}'
        if v.dim() and v.numel() > 1 and not v.is_contiguous():
            s += f' stride={list(v.stride())}'
        if v.storage_offset():
            s += f' offset={v.storage_offset()}'
        return s + ')'
    if isinstance(v, (list, tuple)):
        inner = ', '.join(_show(x) for x in v)
        return f'[{inner}]' if isinstance(v, list) else f'({inner})'
    return repr(v)


def show_call(q, args, kwargs):
    return f'{q}(' + ', '.join([_show(a) for a in args] + [f'{k}={_show(v)}' for k, v in kwargs.items()]) + ')'


STATS = {'arguments': 0, 'mutations': 0}  # what the budget picks from


def plan_cases():
    """The cases to run, in a fixed order: per overload its valid calls ('base') and
    CASES of their mutations, round-robin over the arguments, shuffled per argument by a
    generator seeded from FXCPP_GUARD_SWEEP_SEED and the overload."""
    bases, allowed = base_calls()
    cases = []
    for q in sorted(bases):
        pool = {}
        for b, (func, args, kwargs, rnd) in enumerate(bases[q]):
            cases.append(dict(key=f'{q}#{b}#base', q=q, func=func, args=args, kwargs=kwargs, arg=None,
                              label='base', random=rnd))
            types = dict(zip([a.name for a in func._schema.arguments], _declared_types(func._schema)))
            for arg, label, margs, mkwargs in mutations(func, args, kwargs):
                pool.setdefault(arg, []).append(dict(key=f'{q}#{b}#{arg}#{label}', q=q, func=func, args=margs,
                                                     kwargs=mkwargs, arg=arg, label=label, random=rnd,
                                                     type=types[arg]))
        STATS['arguments'] += len(pool)
        STATS['mutations'] += sum(map(len, pool.values()))
        rng = random.Random(f'{SEED}:{q}')
        groups = [pool[a] for a in sorted(pool)]
        for g in groups:
            rng.shuffle(g)
        rng.shuffle(groups)
        picked = []
        budget = sum(map(len, groups)) if ONLY else CASES
        while groups and len(picked) < budget:
            for g in list(groups):
                if len(picked) >= budget:
                    break
                picked.append(g.pop())
                if not g:
                    groups.remove(g)
        cases += picked
    if ONLY:
        cases = [c for c in cases if any(k in c['key'] for k in ONLY)]
    return cases, bases, allowed


# ---- files and children ----------------------------------------------------------------------

def build_graph(func, args, kwargs):
    """Tensors (also inside lists) become placeholders, the call its only node; the output
    is its result (each element of a tuple of results)."""
    import operator
    import fxcpp
    g = fxcpp.Graph()
    inputs = []

    def lift(v):
        if isinstance(v, torch.Tensor):
            inputs.append(v)
            return g.placeholder(f'in{len(inputs) - 1}')
        if isinstance(v, (list, tuple)):
            return type(v)(lift(x) for x in v)
        return v

    call = g.call_function(func, tuple(lift(a) for a in args), {k: lift(v) for k, v in kwargs.items()})
    rets = func._schema.returns
    if len(rets) == 1:
        g.output(call)
    else:
        g.output(tuple(g.call_function(operator.getitem, (call, i)) for i in range(len(rets))))
    return fxcpp.GraphModule(torch.nn.Module(), g), inputs


def write_cases(cases, folder):
    """Saves each case's file; returns the runnable ones (a constant the format cannot hold
    is 'unencodable', counted but not run)."""
    from fxcpp import aten
    # What aten.save writes, without its fsync and rename per file (thousands of files
    # of a temporary folder; aten.save where this fxcpp has no _to_bytes).
    to_bytes = getattr(getattr(aten, '_format', None), '_to_bytes', None)
    runnable = []
    for i, c in enumerate(cases):
        c['id'] = i
        try:
            gm, inputs = build_graph(c['func'], c['args'], c['kwargs'])
            path = os.path.join(folder, f'{i}.fxpt')
            if to_bytes is None:
                aten.save(gm, path)
            else:
                data = to_bytes(gm, 'fxpt')
                with open(path, 'wb') as f:
                    f.write(data)
        except Exception as e:  # noqa: BLE001 - what the format cannot hold, whatever raises
            c['outcome'], c['detail'] = 'unencodable', f'{type(e).__name__}: {str(e)[:200]}'
            continue
        c['path'], c['inputs'] = path, pickle.dumps(inputs)
        runnable.append(c)
    return runnable


def _child_env(perturb):
    env = dict(os.environ)
    env['MALLOC_PERTURB_'] = str(perturb)
    env['OMP_NUM_THREADS'] = env['MKL_NUM_THREADS'] = '1'
    env['LIBC_FATAL_STDERR_'] = '1'  # glibc's heap-corruption messages to stderr, not the terminal
    if _sanitized(env):
        env['ASAN_OPTIONS'] = env.get('ASAN_OPTIONS', '') + \
            f':allocator_may_return_null=1:max_allocation_size_mb={MEM_BYTES >> 20}' \
            f':malloc_fill_byte={perturb}:max_malloc_fill_size={1 << 24}'
    return env


_SECONDS = {}  # the longest a case took in any child, for the report


START_TRIES = 4  # a child that cannot import fxcpp (the extension being rebuilt) waits and retries


def _spawn(cases, perturb, folder, timeout):
    """One child over `cases` (in order). Returns ({id: calls}, died): died is None, or
    (id, outcome, detail) for the case the child was running when it died, or a
    sanitizer report it wrote while running that case. A child that dies before it
    started running cases is started again, at most START_TRIES times, a minute apart."""
    for attempt in range(START_TRIES):
        result = _spawn_once(cases, perturb, folder, timeout)
        if result is not None:
            return result
        if attempt + 1 < START_TRIES:
            time.sleep(60)
    raise RuntimeError(f'guard sweep: the worker process did not start {START_TRIES} times: {_LAST_START_ERROR[0]}')


_LAST_START_ERROR = ['']


def _spawn_once(cases, perturb, folder, timeout):
    fd, spec_path = tempfile.mkstemp(dir=folder, suffix='.spec')
    with os.fdopen(fd, 'wb') as f:
        pickle.dump({'cases': [{k: c.get(k) for k in ('id', 'path', 'inputs', 'random', 'probe')} for c in cases],
                     'timeout': timeout, 'mem_bytes': MEM_BYTES}, f)
    results_path = spec_path[:-5] + '.jsonl'
    proc = subprocess.Popen([sys.executable, HERE, '--worker', spec_path, results_path], env=_child_env(perturb),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, err = proc.communicate(timeout=60 + (timeout + 2) * len(cases))
        killed = False
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        killed = True
    err = err.decode(errors='replace')
    if f'{_MARK}ready' not in err:
        _LAST_START_ERROR[0] = f'exit status {proc.returncode}: ' + err[-2000:]
        return None
    done = {}
    if os.path.exists(results_path):
        with open(results_path) as f:
            for line in f:
                if line.endswith('\n'):
                    rec = json.loads(line)
                    done[rec['id']] = rec['calls']
                    _SECONDS[rec['id']] = max(_SECONDS.get(rec['id'], 0), rec['s'])
    for p in (spec_path, results_path):
        if os.path.exists(p):
            os.unlink(p)
    # stderr per case: what follows its marker
    segments, current = {}, None
    for line in err.splitlines():
        if line.startswith(_MARK):
            tag = line[len(_MARK):].strip()
            current = int(tag) if tag.isdigit() else None
            continue
        if current is not None:
            segments.setdefault(current, []).append(line)
    for c in cases:  # a sanitizer report from a case the process survived
        text = '\n'.join(segments.get(c['id'], []))
        if c['id'] in done and any(s in text for s in _SANITIZER):
            return done, (c['id'], 'crash', _excerpt(text))
    rc = proc.returncode
    if rc == 0 and not killed and len(done) == len(cases):
        return done, None
    pending = [c['id'] for c in cases if c['id'] not in done]
    victim = pending[0] if pending else cases[-1]['id']
    text = '\n'.join(segments.get(victim, []))
    if killed or 'Timeout (' in text:
        return done, (victim, 'hang', f'ran past {timeout:g} s')
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f'signal {-rc}'
        return done, (victim, 'crash', f'{name}{": " + _excerpt(text) if _excerpt(text) else ""}')
    if any(s in text for s in _SANITIZER):
        return done, (victim, 'crash', _excerpt(text))
    if rc == 0 and not pending:
        return done, None
    return done, (victim, 'crash', f'exit status {rc}: {_excerpt(text) or _excerpt(err)}')


_TELLING = _SANITIZER + ('Fatal Python error', 'SUMMARY', 'Error', 'error', 'corrupt', 'free(', 'malloc', 'terminate',
                        'what()', 'Abort')


def _excerpt(text):
    """The lines of a child's stderr that say why it died (sanitizer, glibc, C++ runtime)."""
    keep = [ln for ln in text.splitlines() if any(s in ln for s in _TELLING) and 'Warning' not in ln]
    return ' | '.join(ln.strip() for ln in keep[:4])[:500]


def _reproduces(cases, perturb, folder, timeout):
    _, died = _spawn(cases, perturb, folder, timeout)
    return died is not None and died[0] == cases[-1]['id'] and died[1] in ('crash', 'hang')


def run_batch(cases, perturb, folder, timeout=TIMEOUT):
    """{id: calls or ('died', outcome, detail)} over `cases` in one heap fill, as few
    children as it takes."""
    results, start = {}, 0
    while start < len(cases):
        rest = cases[start:]
        done, died = _spawn(rest, perturb, folder, timeout)
        results.update(done)
        if died is None:
            break
        idx = next(i for i, c in enumerate(cases) if c['id'] == died[0])
        outcome, detail = died[1], died[2]
        if died[0] not in done and idx > start:  # died after other cases ran in the process: alone?
            if not _reproduces([cases[idx]], perturb, folder, timeout):
                lo = _narrow(cases, start, idx, perturb, folder, timeout)
                if lo is None and outcome == 'hang':
                    # Past the bound only behind other cases (a loaded machine filling 2 GiB):
                    # alone it finishes, so its result is the one a fresh process gives.
                    alone, again = _spawn([cases[idx]], perturb, folder, timeout)
                    if again is None and died[0] in alone:
                        results.update(alone)
                        start = idx + 1
                        continue
                if lo is None:
                    detail += ' (not reproduced in a fresh process)'
                else:
                    culprit = cases[lo]
                    detail += f' (only after {culprit["key"]} ran first in the process)'
                    results[culprit['id']] = ('died', outcome,
                                              f'{detail}; makes {cases[idx]["key"]} die after it')
        results[died[0]] = ('died', outcome, detail)
        start = idx + 1
    return results


def _narrow(cases, start, idx, perturb, folder, timeout):
    """The latest case s in [start, idx) such that cases s..idx in one process still die
    at idx: the one whose effects kill the process later (heap corruption)."""
    if not _reproduces(cases[start:idx + 1], perturb, folder, timeout):
        return None
    lo, hi = start, idx - 1  # invariant: [lo..idx] dies
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _reproduces(cases[mid:idx + 1], perturb, folder, timeout):
            lo = mid
        else:
            hi = mid - 1
    return lo


def run_all(cases, folder, timeout=TIMEOUT):
    """Every case in two heaps; returns {id: [calls or died, per heap]}."""
    from concurrent.futures import ThreadPoolExecutor
    # one child per heap and JOBS // 2 batches: a child's start (importing torch) costs more
    # than a thousand cases
    per = max(1, min(BATCH, -(-len(cases) // max(1, JOBS // len(PERTURB)))))
    batches = [cases[i:i + per] for i in range(0, len(cases), per)]
    jobs = [(b, p) for b in batches for p in PERTURB]
    with ThreadPoolExecutor(JOBS) as pool:
        futures = [(p, pool.submit(run_batch, b, p, folder, timeout)) for b, p in jobs]
        by_heap = {p: {} for p in PERTURB}
        for p, fut in futures:
            by_heap[p].update(fut.result())
    return {c['id']: [by_heap[p].get(c['id'], ('died', 'crash', 'no result')) for p in PERTURB] for c in cases}


def classify(c, runs):
    """The case's outcome and a detail, from its runs (one per heap)."""
    died = [r for r in runs if isinstance(r, (tuple, list)) and r and r[0] == 'died']
    if died:
        kinds = [r[1] for r in died]
        kind = 'crash' if 'crash' in kinds else 'hang'
        heaps = ', '.join(f'MALLOC_PERTURB_={p}' for p, r in zip(PERTURB, runs) if r in died)
        return kind, f'{died[0][2]} [{heaps}]'
    calls = [call for r in runs for call in r]
    errs = [call for call in calls if call[0] == 'err']
    if errs and len(errs) < len(calls):
        which = ['ok' if call[0] == 'ok' else f'{call[1]}: {call[3][:120]}' for call in calls]
        return 'uninit', 'raised in some runs only: ' + ' / '.join(which)
    if errs:
        if any(not e[2] or not e[3].strip() for e in errs):
            e = next(e for e in errs if not e[2] or not e[3].strip())
            return 'bad-error', f'{e[1]}: {e[3][:200]!r}'
        msgs = {e[3] for e in errs}
        if len(msgs) > 1:
            return 'uninit', 'different errors: ' + ' / '.join(sorted(m[:120] for m in msgs))
        return 'refused', f'{errs[0][1]}: {errs[0][3][:200]}'
    digests = [json.dumps(call[1]) for call in calls]
    if len(set(digests)) > 1:
        return 'uninit', 'results differ between ' + ', '.join(
            f'{"heap " + str(PERTURB[i // 2])} call {i % 2 + 1}' for i in range(len(digests))
            if digests[i] != digests[0]) + ' and the first'
    return 'ok', ''


def confirm_uninit(cases, folder):
    """Heap-dependent results run again, by themselves, in fresh children: a result that
    only differed after other cases ran in the process (an earlier case that corrupted the
    heap without dying) says so."""
    again = [c for c in cases if c['outcome'] == 'uninit']
    if not again:
        return
    results = run_all(again, folder)
    for c in again:
        outcome, _ = classify(c, results[c['id']])
        c['detail'] += ' (the same in fresh processes)' if outcome == 'uninit' else \
            f' (in fresh processes by itself: {outcome}; an earlier case in the process may have corrupted the heap)'


# ---- the report ------------------------------------------------------------------------------

class _Summary:
    def __init__(self, lines):
        self.lines = lines

    def pytest_terminal_summary(self, terminalreporter):
        terminalreporter.section('guard sweep')
        for line in self.lines:
            terminalreporter.write_line(line)


def report(cases, bases, allowed, seconds):
    outcomes = {}
    for c in cases:
        outcomes[c['outcome']] = outcomes.get(c['outcome'], 0) + 1
    ran = [c for c in cases if c['outcome'] != 'unencodable']
    args = {(c['q'], c['arg']) for c in ran if c['arg'] is not None}
    refused_by_guard = sum(1 for c in ran if c['outcome'] == 'refused' and 'Note [Argument guards]' in c['detail'])
    by_type = {}
    for q, arg, t in {(c['q'], c['arg'], re.sub(r'\[\d+\]', '[]', c['type'].replace('SymInt', 'int')))
                      for c in ran if c['arg'] is not None}:
        by_type[t] = by_type.get(t, 0) + 1
    head = (f'guard sweep: {len({c["q"] for c in ran})} of {len(allowed)} allowed overloads, '
            f'{len(args)} of {STATS["arguments"]} arguments, {len(ran)} cases ({sum(c["label"] == "base" for c in ran)}'
            f' valid calls and {sum(c["label"] != "base" for c in ran)} of {STATS["mutations"]} mutations: '
            f'FXCPP_GUARD_SWEEP_CASES={CASES} per overload, seed {SEED}; {len(PERTURB)} heaps x 2 calls each); ' +
            ', '.join(f'{k}: {outcomes.get(k, 0)}' for k in ('ok', 'refused', *FAILING, 'unencodable')) +
            f' ({refused_by_guard} refused by an argument guard); {seconds:.0f} s')
    kinds = 'arguments by type: ' + ', '.join(f'{t} {n}' for t, n in sorted(by_type.items(), key=lambda kv: (-kv[1], kv[0])))
    failures = [f'{c["outcome"]}: {show_call(c["q"], c["args"], c["kwargs"])}  [{c["key"]}] ' +
                c['detail'].replace('\n', ' ') for c in cases if c['outcome'] in FAILING]
    per_op = []
    for q in sorted(bases):
        mine = [c for c in cases if c['q'] == q]
        counts = {}
        for c in mine:
            counts[c['outcome']] = counts.get(c['outcome'], 0) + 1
        per_op.append(f'  {q}: {len(mine)} cases; ' + ', '.join(f'{k} {v}' for k, v in sorted(counts.items())))
    return head, kinds, failures, per_op


# ---- tests -----------------------------------------------------------------------------------

def _exempt(P, allowed):
    """Allowed overloads no call can exercise: test_planner_fuzz's exemptions (named
    tensors, CUDA-only kernels) and their out= variants."""
    out = {}
    for q in allowed:
        if q == 'aten::size.Dimname':  # a named-tensor overload (1.13 allows it; not a planner overload)
            out[q] = P._NAMED
            continue
        name, _, ov = q.partition('.')
        for e, why in P.COVERAGE_EXEMPT.items():
            if e == q or (e.partition('.')[0] == name and ov.endswith('_out') and
                          ov[:-len('_out')] == e.partition('.')[2]):
                out[q] = why
    return out


@pytest.fixture(scope='module')
def plan():
    return plan_cases()


def test_every_allowed_overload_has_a_call_to_mutate(plan):
    P = _planner_fuzz()
    _, bases, allowed = plan
    exempt = _exempt(P, allowed)
    missing = sorted(allowed - set(bases) - set(exempt))
    assert not missing, f'allowed overloads with no valid call to mutate (add one to _own_calls): {missing}'


def test_every_allowed_operator_survives_boundary_arguments(plan, tmp_path, request):
    """Each case: a clean error or the same result in every run; never a crash, a
    sanitizer report, a hang or a result that depends on the heap."""
    cases, bases, allowed = plan
    if not cases:
        pytest.skip('no case selected (FXCPP_GUARD_SWEEP_ONLY matches none)')
    t0 = time.time()
    for c in cases:
        c.pop('outcome', None)
    folder = tmp_path / 'cases'
    folder.mkdir()
    runnable = write_cases(cases, str(folder))
    results = run_all(runnable, str(tmp_path))
    for c in runnable:
        c['outcome'], c['detail'] = classify(c, results[c['id']])
    confirm_uninit(runnable, str(tmp_path))
    shutil.rmtree(folder)  # thousands of files; pytest keeps the last runs' temporary folders
    head, kinds, failures, per_op = report(cases, bases, allowed, time.time() - t0)
    lines = [head, kinds] + failures
    print('\n' + '\n'.join(lines))
    request.config.pluginmanager.register(_Summary(lines[:40] + ([f'... {len(lines) - 40} more'] if len(lines) > 40
                                                                 else [])), f'guard-sweep-{id(cases)}')
    path = os.environ.get('FXCPP_GUARD_SWEEP_REPORT')
    if path:
        with open(path, 'w') as f:
            f.write('\n'.join(lines + ['', 'per overload:'] + per_op) + '\n')
    assert not failures, f'{len(failures)} cases crashed, hung, or returned heap-dependent results (rerun one ' \
        'with FXCPP_GUARD_SWEEP_ONLY=KEY, the key in brackets):\n' + '\n'.join(failures[:60])


def test_the_harness_names_crashes_hangs_and_heap_dependent_results(tmp_path):
    """The child's own failures, as probes between real cases: each is named, the cases
    around it still run, and filling the heap differently shows in torch.empty."""
    relu = [dict(key=f'relu{i}', q='aten::relu', func=A.relu.default, args=(torch.randn(3, 4),), kwargs={},
                 arg=None, label='base', random=False) for i in range(4)]
    probes = [dict(key=f'probe-{k}', q='probe', probe=k, random=False, path=None, inputs=None)
              for k in ('segv', 'uninit', 'hang', 'flip')]
    cases = [relu[0], probes[0], relu[1], probes[1], probes[2], relu[2], probes[3], relu[3]]
    runnable = write_cases(relu, str(tmp_path))
    assert len(runnable) == 4
    for i, c in enumerate(cases):
        c['id'] = i
    results = run_all(cases, str(tmp_path), timeout=2)
    got = {c['key']: classify(c, results[c['id']]) for c in cases}
    assert {k: v[0] for k, v in got.items()} == {
        'relu0': 'ok', 'probe-segv': 'crash', 'relu1': 'ok', 'probe-uninit': 'uninit', 'probe-hang': 'hang',
        'relu2': 'ok', 'probe-flip': 'uninit', 'relu3': 'ok'}, got
    assert 'SIGSEGV' in got['probe-segv'][1] or 'AddressSanitizer: SEGV' in got['probe-segv'][1], got['probe-segv']

"""Structure-aware fuzzing of the loaders with the attacker's model (issue 35, item 5).

The loader fuzz (Load.FuzzedFilesFailCleanly, the libFuzzer target) mutates bytes; an
attacker instead edits a VALID program: the container stays valid, the JSON parses, the
names resolve, and only what the program asks the runtime to do changes. This test starts
from valid programs it makes itself and edits them that way:

Seeds (SEEDS): small nets covering what real models use: conv / batch norm / relu / max,
average and adaptive pooling / padding / grouped strided conv / linear / log_softmax; an
attention block (layer norm, split, view / transpose with sizes read from the input,
matmul, softmax); a two-layer LSTM; a program of primitives (getattr shape, getitem,
integer arithmetic, chunk, cat, slices with computed ends, int outputs); an embedding with
int64 tokens (cumsum, gelu, argmax, std); a module with a buffer it mutates and a tensor
constant. Each is saved as .fxpt (fxcpp.aten.save of fxcpp.aten.lower's graph) and, on
torch 2.x, as .pt2 (torch.export.save; the conv, primitives and state seeds also in their
core-ATen form, ep.run_decompositions(); attention and primitives with a symbolic batch).

Mutations (MUTATORS_FXPT, MUTATORS_PT2), one to three per file, each drawn with a
generator seeded from FXCPP_STRUCT_FUZZ_SEED, the seed file's name and the case's number
(the same files every run):
* op-swap: a node's operator swapped for another allowed operator
  (fxcpp._C_torch.allowed_operators()) whose schema takes the node's arguments (as many
  positional ones, its keywords, none missing); .pt2 inputs renamed to the new schema's
  names (or, loose, kept); out-variant / inplace: the .out or in-place sibling, writing
  into another value (a weight, the input, a planned intermediate); prim-swap: the
  arithmetic primitives among themselves, getattr's attribute;
* int / int-list / float / bool: arguments set to boundary values (0, -1, INT64_MIN,
  INT64_MAX, 2^31, 2^32 + 1, 2^62, values whose products with the program's sizes wrap;
  lists emptied, shortened, lengthened, all or one element; nan, +-inf, +-1e308, 5e-324);
* rewire: an argument pointed at another node (earlier, later, itself, a missing name)
  or replaced by a constant; arg-kind (.pt2): an argument's serialized kind changed
  (as_int -> as_tensor, as_none, as_string, ...) or its positional/keyword kind;
* drop (also rewiring the users to the dropped node's input), dup (new or same name),
  move: nodes removed, duplicated and reordered; kwarg / args-len: keywords added and
  removed, arguments appended and cut; output: the output rewired or restructured;
* tensor metadata: the file's tensors (.fxpt `tensors` and `storages`, .pt2 weight and
  constant configs: sizes, strides, storage offsets, dtypes, records, kinds), the
  recorded metadata of values (.fxpt node meta, .pt2 graph.tensor_values), the records'
  bytes (cut short, emptied, dropped: the container rewritten valid);
* the .pt2 schema: signature input and output specs (kinds, targets, names, order), the
  symbols' expressions and ranges, the module call graph's pytree specs, node output
  kinds, the schema version; json: any value of the document replaced (rarely).
Every file is written as a valid zip (stored, CRCs computed, records 64-byte aligned with
a padding extra field as PyTorch's writer does).

Runs: each file is loaded as a file from an untrusted source with fxcpp.aten.load(path,
runtime='cpp') and runtime='python' (mapped or read, alternately) and called with the
seed's inputs: load, call, call (the second call runs the memory-planned path), a fresh
load, call; in child processes (_child_runner, test_guard_sweep's machinery) on two heap
fills (MALLOC_PERTURB_ 0x55 and 0xaa; ASan's malloc_fill_byte under the sanitizer build),
one thread, the generator reseeded before each call; and every FXCPP_STRUCT_FUZZ_DRIVER_EVERY-th
file by the C++-only runner (FXCPP_BUILD_DIR/fxcpp_torch_run_model, no Python in its
process) on both heap fills. Outcomes (test_guard_sweep's):

  ok        the runs agree bitwise (dtype, shape, strides and bytes; dtype and shape only
            for programs with random operators); a program that writes a tensor (an
            in-place or out= operator, a buffer mutation) may differ between its first and
            second call, never between heaps or fresh loads;
  refused   a ValueError, RuntimeError, IndexError or TypeError with a message (TypeError for the runtime's
            documented input checks, 'fxcpp...'), the same in every run;
  crash     a signal or a sanitizer report; hang: past FXCPP_STRUCT_FUZZ_TIMEOUT (10 s);
  uninit    runs differ (between heaps, calls or loads, or an error in some runs only);
  bad-error an exception of another type, or without a message;
  differ    the C++ runtime, the Python runtime and the C++-only runner all ran the file
            but computed different values (bitwise, flattened to float32 as the runner
            writes them).
The test fails on crash, hang, uninit, bad-error, differ and disagree, one line each with the
reproduction: the case key (FXCPP_STRUCT_FUZZ_ONLY=KEY[,KEY...] reruns it), the runtime, and
every mutation applied, in order; FXCPP_STRUCT_FUZZ_KEEP=DIR keeps the failing files there.
  disagree  one runtime (or the C++-only runner) refused the file and another ran it: both
            runtimes make the same checks (the Python runtime's load runs the C++ compiler's
            checks, its forward the same argument guards and input checks), so this fails too.

Budget: FXCPP_STRUCT_FUZZ_CASES mutated files (default 160, about a minute on two cores;
16 under the sanitizer build), round-robin over the seed files; `make fuzz` runs more.
FXCPP_STRUCT_FUZZ_JOBS children at once (2). The report: printed with -s, in pytest's
summary, and written to the path FXCPP_STRUCT_FUZZ_REPORT names.
"""
import hashlib
import math
import os
import pickle
import re
import sys
import time

HERE = os.path.abspath(__file__)
if os.path.dirname(HERE) not in sys.path:
    sys.path.insert(0, os.path.dirname(HERE))


# ---- the child: loads and calls each file -------------------------------------------------------

def _tree_digest(v, values):
    """test_guard_sweep's digest, through dicts too (a .pt2 program's dict outputs)."""
    from test_guard_sweep import _digest
    if isinstance(v, dict):
        return ['dict', [[repr(k), _tree_digest(x, values)] for k, x in v.items()]]
    if isinstance(v, (list, tuple)):
        return [type(v).__name__, [_tree_digest(x, values) for x in v]]
    return _digest(v, values)


def _flat_digest(v):
    """The outputs' tensors flattened to float32 and concatenated, as the C++-only runner
    writes them (tuples, lists and dict values in order): the sha1 of the bytes."""
    import torch
    leaves = []

    def walk(x):
        if isinstance(x, torch.Tensor):
            leaves.append(x.detach().to(torch.float32).contiguous().reshape(-1))
        elif isinstance(x, (list, tuple)):
            for e in x:
                walk(e)
        elif isinstance(x, dict):
            for e in x.values():
                walk(e)
    walk(v)
    if sum(t.numel() for t in leaves) > 1 << 26:
        return None
    data = torch.cat(leaves).numpy().tobytes() if leaves else b''
    return hashlib.sha1(data).hexdigest()


def _clean(e):
    """A clean error: ValueError / RuntimeError with a message, or an IndexError / TypeError
    with a message (the Python runtime's generated code raises what eager torch and Python
    raise for such a program: 'Dimension out of range', "'int' object is not subscriptable";
    the C++ runtime's input check's TypeErrors start with 'fxcpp')."""
    return isinstance(e, (RuntimeError, ValueError, IndexError, TypeError)) and bool(str(e).strip())


def _run_case(case):
    """load, call, call, load, call: ['ok', digest, flat digest] or ['err', type, clean, message]
    per call (a load that fails is the error of every call it was for)."""
    import torch
    from fxcpp import aten
    if case.get('probe'):
        from test_guard_sweep import _probe
        calls = []
        for _ in range(2):
            try:
                calls.append(['ok', _tree_digest(_probe(case['probe']), True), None])
            except Exception as e:  # noqa: BLE001
                calls.append(['err', type(e).__name__, True, str(e)])
        return calls
    calls, module = [], None
    for fresh in (True, False, True):
        try:
            if fresh or module is None:
                module = None
                module = aten.load(case['path'], runtime=case['runtime'], mmap=case['mmap'])
            inputs = pickle.loads(case['inputs'])
            torch.manual_seed(0)
            with torch.no_grad():
                out = module(*inputs)
            calls.append(['ok', _tree_digest(out, not case['random']),
                          None if case['random'] else _flat_digest(out)])
            del out
        except Exception as e:  # noqa: BLE001 - every exception is an outcome
            msg = re.sub(r'0x[0-9a-fA-F]+', '0x?', str(e).split('\nException raised from')[0])
            calls.append(['err', type(e).__name__, _clean(e), msg[:600]])
    return calls


if __name__ == '__main__':
    import _child_runner
    _child_runner.worker_main(sys.argv, _run_case)


# ---- the parent ----------------------------------------------------------------------------------

import copy  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import struct  # noqa: E402
import subprocess  # noqa: E402
import zipfile  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

import _child_runner  # noqa: E402
from test_guard_sweep import PERTURB, _excerpt, _sanitized, classify  # noqa: E402

from fxcpp import _C_torch, _torch_compat, aten  # noqa: E402

nn = torch.nn
CASES = int(os.environ.get('FXCPP_STRUCT_FUZZ_CASES', 16 if _sanitized(os.environ) else 160))
SEED = os.environ.get('FXCPP_STRUCT_FUZZ_SEED', '0')
JOBS = max(1, int(os.environ.get('FXCPP_STRUCT_FUZZ_JOBS', 2)))
TIMEOUT = float(os.environ.get('FXCPP_STRUCT_FUZZ_TIMEOUT', 10))
MEM_BYTES = int(os.environ.get('FXCPP_STRUCT_FUZZ_MEM_MB', 4096)) << 20
DRIVER_EVERY = max(0, int(os.environ.get('FXCPP_STRUCT_FUZZ_DRIVER_EVERY', 8)))  # 0: never
ONLY = [k for k in os.environ.get('FXCPP_STRUCT_FUZZ_ONLY', '').split(',') if k]
KEEP = os.environ.get('FXCPP_STRUCT_FUZZ_KEEP')
FAILING = ('crash', 'hang', 'uninit', 'bad-error', 'differ')
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
DRIVER = os.path.join(os.environ.get('FXCPP_BUILD_DIR', os.path.join(ROOT, 'build')), 'fxcpp_torch_run_model')
HAS_PT2 = _torch_compat.EXPORT_SAVE is not None and hasattr(torch, 'export')

I64_MIN, I64_MAX = -2 ** 63, 2 ** 63 - 1
INTS = (0, -1, 1, I64_MIN, I64_MAX, 2 ** 31, 2 ** 31 - 1, -2 ** 31 - 1, 2 ** 32 + 1, 2 ** 62, -2 ** 62, 2 ** 62 + 2)
FLOATS = (0.0, -0.0, -1.0, math.nan, math.inf, -math.inf, 1e308, -1e308, 2.0 ** 31, 2.0 ** 63, 5e-324)
DTYPES = ('float32', 'float64', 'float16', 'bfloat16', 'complex64', 'complex128', 'uint8', 'int8', 'int16',
          'int32', 'int64', 'bool')
# test_planner_fuzz._UNDETERMINED: operators whose values two runs need not agree on
UNDETERMINED = ('rand', 'bernoulli', 'normal', 'dropout', 'multinomial', 'uniform', 'exponential', 'geometric',
                'ctc_loss', 'scaled_dot_product_attention', 'cauchy', 'poisson', 'rrelu', 'empty', 'log_normal')
PRIMS = ('operator.add', 'operator.sub', 'operator.mul', 'operator.floordiv', 'operator.truediv', 'operator.mod')
PT2_PRIMS = ('_operator.add', '_operator.sub', '_operator.mul', '_operator.floordiv', '_operator.truediv',
             '_operator.mod')


# ---- seeds ----------------------------------------------------------------------------------------

class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 4, 3, stride=2, groups=2)
        self.lin = nn.Linear(4, 5)

    def forward(self, x):
        y = nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        y = nn.functional.avg_pool2d(self.conv2(nn.functional.pad(y, (1, 1, 1, 1))), 2, ceil_mode=True)
        return self.lin(nn.functional.adaptive_avg_pool2d(y, 1).flatten(1)).log_softmax(-1)


class Attention(nn.Module):
    def __init__(self, d=8, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = torch.softmax(q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5, dim=-1)
        return x + self.proj((a @ v).transpose(1, 2).reshape(b, t, d))


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(4, 6, num_layers=2, batch_first=True)
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        y, (h, _) = self.rnn(x)
        return self.head(y[:, -1]), h


class Primitives(nn.Module):
    def forward(self, x, y):
        n, m = x.shape[0], x.shape[1]
        a, b = x.reshape(n * m // 2, -1).chunk(2, dim=1)
        w = torch.cat([a, b * 2], 0)[1:n * 2:2]
        return w.sum(-1) + y[:, 0].mean(), (m - n) % 3, -n


class Embedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.e = nn.Embedding(20, 8)
        self.lin = nn.Linear(8, 20)

    def forward(self, t):
        h = self.e(t).cumsum(1)
        return self.lin(nn.functional.gelu(h)).argmax(-1), h.std(1)


class State(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer('count', torch.zeros(()))
        self.c = torch.tensor([[1.0, -2.0, 3.0]])  # a plain attribute: a lifted tensor constant
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        self.count.add_(1)
        return self.lin(x) * self.c + self.count


def _seed_specs():
    """name -> (model, inputs, dynamic batch dims or None, also in core-ATen form)."""
    g = torch.Generator().manual_seed(0)
    return {
        'conv': (ConvNet, (torch.randn(2, 3, 10, 10, generator=g),), None, True),
        'attn': (Attention, (torch.randn(2, 5, 8, generator=g),), ({0: 'b'},), False),
        'lstm': (Recurrent, (torch.randn(2, 5, 4, generator=g),), None, False),
        'prims': (Primitives, (torch.randn(4, 6, generator=g), torch.randn(3, 2, generator=g)), ({0: 'b'}, None), True),
        'emb': (Embedding, (torch.randint(0, 20, (2, 7), generator=g),), None, False),
        'state': (State, (torch.randn(2, 3, generator=g),), None, True),
    }


def _read_zip(path):
    with zipfile.ZipFile(path) as z:
        return [[i.filename, z.read(i.filename)] for i in z.infolist()]


def write_zip(path, records):
    """A valid archive of `records` ([name, bytes]): stored, CRCs computed, each record's
    data 64-byte aligned by a padding extra field (as PyTorch's writer aligns them)."""
    with open(path, 'wb') as f, zipfile.ZipFile(f, 'w', zipfile.ZIP_STORED) as z:
        for name, data in records:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            pad = (-(f.tell() + 30 + len(name.encode()) + 4)) % 64
            info.extra = struct.pack('<2sH', b'FB', pad) + b'Z' * pad
            z.writestr(info, data)


def make_seeds(folder):
    """{seed file name: dict(path, fmt, records, inputs (pickled), stateful)} for every seed
    in every format this torch writes."""
    torch.manual_seed(0)
    out = {}
    for name, (cls, inputs, dynamic, core) in _seed_specs().items():
        model = cls().eval()
        path = os.path.join(folder, f'{name}.fxpt')
        model_l = cls().eval()
        model_l.load_state_dict(model.state_dict())
        aten.save(aten.lower(model_l, *inputs), path)
        out[f'{name}.fxpt'] = dict(path=path, fmt='fxpt', inputs=pickle.dumps(inputs), stateful=False)
        if not HAS_PT2:
            continue
        shapes = None
        if dynamic:
            dims = {}
            shapes = tuple(None if d is None else {k: dims.setdefault(v, torch.export.Dim(v, min=2, max=64))
                                                   for k, v in d.items()} for d in dynamic)
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            model_e = cls().eval()
            model_e.load_state_dict(model.state_dict())
            ep = torch.export.export(model_e, inputs, dynamic_shapes=shapes)
            eps = [('pt2', ep)] + ([('core.pt2', ep.run_decompositions())] if core else [])
            for suffix, program in eps:
                path = os.path.join(folder, f'{name}.{suffix}')
                torch.export.save(program, path)
                out[f'{name}.{suffix}'] = dict(path=path, fmt='pt2', inputs=pickle.dumps(inputs),
                                               stateful=name == 'state')
    for s in out.values():
        s['records'] = _read_zip(s['path'])
    return out


# ---- schemas of the allowed operators -------------------------------------------------------------

class Op:
    """What a swap needs of an overload's schema."""

    def __init__(self, q, func):
        s = func._schema
        self.q, self.func = q, func
        self.positional = [a for a in s.arguments if not a.kwarg_only]
        self.kwonly = [a for a in s.arguments if a.kwarg_only]
        self.names = [a.name for a in s.arguments]
        self.required_pos = sum(1 for a in self.positional if not a.has_default_value() and
                                not str(a.type).startswith('Optional'))
        self.required_kw = [a.name for a in self.kwonly if not a.has_default_value() and
                            not str(a.type).startswith('Optional')]
        self.outs = [a.name for a in s.arguments if a.is_out]
        self.mutable = s.is_mutable
        self.base, _, self.overload = q.split('::')[1].partition('.')

    def kinds(self, n):
        """The coarse types of the first n positional arguments (Tensor, int, float, ...)."""
        return tuple(_coarse(str(a.type)) for a in self.positional[:n])

    def takes(self, npos, kwnames):
        return (self.required_pos <= npos <= len(self.positional) and all(k in self.names for k in kwnames) and
                all(k in kwnames for k in self.required_kw))


_OPS = {}


def _coarse(t):
    t = t.replace('Optional[', '').replace('SymInt', 'int').rstrip(']?')
    for k in ('List[Tensor]', 'List[int]', 'List[float]', 'Tensor', 'int', 'float', 'Scalar', 'bool'):
        if t.startswith(k):
            return k
    return t


def _swap_candidates(rng, old, npos, kw, exclude):
    """Allowed overloads that take npos positional arguments and keywords kw: most often
    one whose argument types match the old operator's (the swap then reaches the kernel),
    sometimes one of the same name, else any."""
    same = [o for o in ops().values() if o.takes(npos, kw) and o.q != exclude]
    r = rng.random()
    if old is not None and r < 0.5:
        typed = [o for o in same if o.kinds(npos) == old.kinds(npos)]
        return typed or same
    if old is not None and r < 0.7:
        return [o for o in same if o.base == old.base] or same
    return same


def ops():
    if not _OPS:
        for q in sorted(_C_torch.allowed_operators()):
            base, _, ov = q.split('::')[1].partition('.')
            try:
                func = getattr(getattr(torch.ops.aten, base), ov or 'default')
            except (AttributeError, RuntimeError):
                continue
            _OPS[q] = Op(q, func)
    return _OPS


def op_of(target):
    """The Op of a .fxpt ('aten::add.Tensor', 'aten::relu') or .pt2
    ('torch.ops.aten.add.Tensor') target, None for others and for operators off the list."""
    if not isinstance(target, str):
        return None
    if target.startswith('torch.ops.aten.'):
        name, _, ov = target[len('torch.ops.aten.'):].partition('.')
        target = f'aten::{name}' + ('' if ov in ('default', '') else f'.{ov}')
    return ops().get(target)


def pt2_target(op):
    return f'torch.ops.aten.{op.base}.{op.overload or "default"}'


# ---- the program being edited ---------------------------------------------------------------------

class Program:
    """A seed's records, with its JSON records parsed (those mutations edit)."""

    def __init__(self, seed):
        self.fmt = seed['fmt']
        self.records = [[n, d] for n, d in seed['records']]
        self.json = {}
        for n, d in self.records:
            if n.endswith('graph.json') or n.endswith('models/model.json') or n.endswith('_config.json'):
                self.json[n] = json.loads(d)
        self.graph = next(v for k, v in self.json.items() if k.endswith(('graph.json', 'models/model.json')))
        self.sizes = sorted({int(n) for n in _ints_in(self.graph) if 1 < n < 1 << 20})

    def find(self, suffix):
        return next((v for k, v in self.json.items() if k.endswith(suffix)), None)

    @property
    def nodes(self):
        return self.graph['nodes'] if self.fmt == 'fxpt' else self.graph['graph_module']['graph']['nodes']

    def data(self):
        return [[n, json.dumps(self.json[n]).encode() if n in self.json else d] for n, d in self.records]


def _ints_in(v):
    if isinstance(v, bool):
        return
    if isinstance(v, int):
        yield v
    elif isinstance(v, dict):
        for x in v.values():
            yield from _ints_in(x)
    elif isinstance(v, list):
        for x in v:
            yield from _ints_in(x)


def _int_values(p, rng):
    wraps = []
    for n in p.sizes[-3:]:
        wraps += [I64_MAX // n + 1, -(I64_MAX // n) - 1, 2 ** 64 // n + 1]
    wraps = [w for w in wraps if I64_MIN <= w <= I64_MAX]
    return rng.choice(list(INTS) + wraps + [rng.choice(p.sizes or [2]) + 1])


def _walk(v, path=()):
    """(container, key, value, path) for every value inside v, depth first."""
    if isinstance(v, dict):
        for k in list(v):
            yield v, k, v[k], path + (k,)
            yield from _walk(v[k], path + (k,))
    elif isinstance(v, list):
        for i in range(len(v)):
            yield v, i, v[i], path + (i,)
            yield from _walk(v[i], path + (i,))


def _pick(rng, items):
    return rng.choice(items) if items else None


# ---- .fxpt mutations (graph.json: docs/fxpt_format.md) ---------------------------------------------

def _fx_calls(p, prim=None):
    return [(i, n) for i, n in enumerate(p.nodes) if n.get('op') == 'call_function' and
            (prim is None or (isinstance(n.get('target'), str) and n['target'].startswith('aten::') != prim))]


def _fx_tensor_nodes(p, before=None):
    out = []
    for i, n in enumerate(p.nodes[:before]):
        meta = (n.get('meta') or {}).get('tensor_meta')
        if n.get('op') in ('placeholder', 'get_attr') or (isinstance(meta, dict) and 'tensor_meta' in meta):
            out.append(n['name'])
    return out


def _fx_sites(p, pred):
    """(container, key, value, node) of values in call_function and output arguments."""
    out = []
    for n in p.nodes:
        if n.get('op') in ('call_function', 'output'):
            for c, k, v, path in _walk(n):
                if path[0] in ('args', 'kwargs') and len(path) >= 2 and pred(v, path):
                    out.append((c, k, v, n))
    return out


def _fx_float(v):
    return {'float': 'nan' if v != v else 'inf' if v == math.inf else '-inf' if v == -math.inf else v}


def fx_op_swap(p, rng):
    calls = [(i, n) for i, n in _fx_calls(p, prim=False) if isinstance(n.get('args'), list)]
    i, n = _pick(rng, calls) or (None, None)
    if n is None:
        return None
    old = op_of(n['target'])
    kw = list((n.get('kwargs') or {}).keys())
    new = _pick(rng, _swap_candidates(rng, old, len(n['args']), kw, n['target']))
    if new is None:
        return None
    old_t, n['target'] = n['target'], new.q
    return f"op-swap {n['name']}: {old_t} -> {new.q}"


def _fx_variant(p, rng, kind):
    cands = []
    for i, n in _fx_calls(p, prim=False):
        old = op_of(n['target'])
        if old is None:
            continue
        for o in ops().values():
            if kind == 'out' and o.base == old.base and o.outs and o.q != old.q:
                cands.append((i, n, o))
            if kind == 'inplace' and o.base == old.base + '_' and o.overload == old.overload:
                cands.append((i, n, o))
    i, n, o = _pick(rng, cands) or (None, None, None)
    if n is None:
        return None
    old = n['target']
    n['target'] = o.q
    tensors = _fx_tensor_nodes(p, before=i) or [n['name']]
    detail = f'{kind}-variant {n["name"]}: {old} -> {o.q}'
    if kind == 'out':
        n.setdefault('kwargs', {})
        for name in o.outs:
            t = rng.choice(tensors)
            n['kwargs'][name] = {'node': t}
            detail += f', {name}={t}'
    elif rng.random() < 0.5 and n['args']:
        t = rng.choice(tensors)
        n['args'][0] = {'node': t}
        detail += f', self={t}'
    return detail


def fx_out_variant(p, rng):
    return _fx_variant(p, rng, 'out')


def fx_inplace(p, rng):
    return _fx_variant(p, rng, 'inplace')


def fx_prim_swap(p, rng):
    calls = _fx_calls(p, prim=True)
    i, n = _pick(rng, calls) or (None, None)
    if n is None:
        return None
    old = n['target']
    if old == 'getattr' and len(n['args']) > 1:
        n['args'][1] = rng.choice(['shape', 'dtype', 'device', 'ndim', 'data', 'T', '__class__', 'x'])
        return f"prim-swap {n['name']}: getattr(.., {n['args'][1]!r})"
    n['target'] = rng.choice([t for t in PRIMS + ('operator.neg', 'operator.getitem', 'getattr', 'aten::add.Tensor',
                                                 'aten::size.int') if t != old])
    return f"prim-swap {n['name']}: {old} -> {n['target']}"


def fx_int(p, rng):
    sites = _fx_sites(p, lambda v, path: isinstance(v, int) and not isinstance(v, bool))
    c, k, v, n = _pick(rng, sites) or (None,) * 4
    if c is None:
        return None
    c[k] = _int_values(p, rng)
    return f"int {n['name']}: {v} -> {c[k]}"


def _list_edit(values, rng, elem):
    mode = rng.choice(['all', 'one', 'one', 'empty', 'shorter', 'longer', 'wrap'])
    if mode == 'all':
        v = elem()
        return [v] * max(1, len(values)), f'all={v}'
    if mode == 'one' and values:
        i, v = rng.randrange(len(values)), elem()
        return values[:i] + [v] + values[i + 1:], f'[{i}]={v}'
    if mode == 'empty':
        return [], '[]'
    if mode == 'shorter' and values:
        return values[:-1], 'len-1'
    if mode == 'wrap':
        return [2 ** 32 + 1] * max(2, len(values)), 'all=2**32+1 (product wraps)'
    return values + (values[-1:] or [1]), 'len+1'


def fx_int_list(p, rng):
    sites = _fx_sites(p, lambda v, path: isinstance(v, dict) and list(v) in (['list'], ['tuple']) and
                      all(isinstance(x, int) and not isinstance(x, bool) for x in v[list(v)[0]]))
    c, k, v, n = _pick(rng, sites) or (None,) * 4
    if c is None:
        return None
    key = list(v)[0]
    new, how = _list_edit(list(v[key]), rng, lambda: _int_values(p, rng))
    c[k] = {key: new}
    return f"int-list {n['name']}: {v[key]} {how}"


def fx_float(p, rng):
    sites = _fx_sites(p, lambda v, path: isinstance(v, dict) and list(v) == ['float'])
    c, k, v, n = _pick(rng, sites) or (None,) * 4
    if c is None:
        return None
    f = rng.choice(FLOATS)
    c[k] = _fx_float(f)
    return f"float {n['name']}: {v['float']} -> {f}"


def fx_bool(p, rng):
    sites = _fx_sites(p, lambda v, path: isinstance(v, bool))
    c, k, v, n = _pick(rng, sites) or (None,) * 4
    if c is None:
        return None
    c[k] = rng.choice([not v, None, 2, 0])
    return f"bool {n['name']}: {v} -> {c[k]}"


def fx_enum(p, rng):
    sites = _fx_sites(p, lambda v, path: isinstance(v, dict) and len(v) == 1 and
                      list(v)[0] in ('dtype', 'device', 'layout', 'memory_format'))
    c, k, v, n = _pick(rng, sites) or (None,) * 4
    if c is None:
        return None
    c[k] = rng.choice([{'dtype': rng.choice(DTYPES)}, {'device': rng.choice(['cuda', 'meta', 'cpu:1', 'bogus'])},
                       {'layout': rng.choice(['strided', 'sparse_coo', 'bogus'])},
                       {'memory_format': rng.choice(['channels_last', 'preserve_format', 'bogus'])},
                       {'dtype': 'float8'}, rng.choice(INTS)])
    return f"enum {n['name']}: {v} -> {c[k]}"


def _fx_constant(p, rng):
    return rng.choice([0, -1, _int_values(p, rng), _fx_float(rng.choice(FLOATS)), None, True, 'x', {'list': []},
                       {'list': [1, 2]}, {'tuple': [{'node': p.nodes[0]['name']}]}, {'dtype': 'int64'},
                       {'slice': [None, None, None]}])


def fx_rewire(p, rng):
    sites = _fx_sites(p, lambda v, path: isinstance(v, dict) and list(v) == ['node'])
    c, k, v, n = _pick(rng, sites) or (None,) * 4
    if c is None:
        return None
    idx = p.nodes.index(n)
    r = rng.random()
    if r < 0.55:
        target = {'node': rng.choice([x['name'] for x in p.nodes[:idx]] or [v['node']])}
    elif r < 0.7:
        target = {'node': rng.choice([x['name'] for x in p.nodes[idx:]])}  # itself or later
    elif r < 0.75:
        target = {'node': 'no_such_node'}
    else:
        target = _fx_constant(p, rng)
    c[k] = target
    return f"rewire {n['name']}: {v} -> {target}"


def fx_drop(p, rng):
    i = rng.randrange(len(p.nodes))
    n = p.nodes.pop(i)
    detail = f"drop {n['name']} ({n.get('op')} {n.get('target')})"
    if rng.random() < 0.6:  # bypass: its users read its first node argument instead
        src = next((v['node'] for _, _, v, _ in _walk(n.get('args') or []) if isinstance(v, dict) and
                    list(v) == ['node']), None)
        if src is not None:
            for m in p.nodes[i:]:
                for c, k, v, _ in list(_walk({'a': m.get('args'), 'k': m.get('kwargs')})):
                    if isinstance(v, dict) and v.get('node') == n['name']:
                        c[k] = {'node': src}
            detail += f', users read {src}'
    return detail


def fx_dup(p, rng):
    i = rng.randrange(len(p.nodes))
    n = copy.deepcopy(p.nodes[i])
    same = rng.random() < 0.2
    if not same:
        n['name'] = n['name'] + '_dup'
    p.nodes.insert(i + 1, n)
    detail = f"dup {p.nodes[i]['name']}" + (' (same name)' if same else f' as {n["name"]}')
    users = [m for m in p.nodes[i + 2:] if any(isinstance(v, dict) and v.get('node') == p.nodes[i]['name']
                                               for _, _, v, _ in _walk([m.get('args'), m.get('kwargs')]))]
    if users and not same and rng.random() < 0.7:
        m = rng.choice(users)
        for c, k, v, _ in list(_walk([m.get('args'), m.get('kwargs')])):
            if isinstance(v, dict) and v.get('node') == p.nodes[i]['name']:
                c[k] = {'node': n['name']}
        detail += f', {m["name"]} reads it'
    return detail


def _move(nodes, rng):
    i = rng.randrange(len(nodes))
    j = rng.choice([max(0, i - 1), min(len(nodes) - 1, i + 1), rng.randrange(len(nodes))])
    n = nodes.pop(i)
    nodes.insert(j, n)
    return f"move {n.get('name')}: {i} -> {j}"


def fx_move(p, rng):
    return _move(p.nodes, rng)


def fx_kwarg(p, rng):
    calls = [(i, n) for i, n in _fx_calls(p, prim=False) if op_of(n['target'])]
    i, n = _pick(rng, calls) or (None, None)
    if n is None:
        return None
    op = op_of(n['target'])
    kwargs = n.setdefault('kwargs', {})
    given = len(n['args'])
    free = [a for a in op.positional[given:] + op.kwonly if a.name not in kwargs]
    if kwargs and rng.random() < 0.3:
        k = rng.choice(list(kwargs))
        del kwargs[k]
        return f"kwarg {n['name']}: removed {k}"
    if not free or rng.random() < 0.1:
        name = rng.choice(['bogus', op.positional[0].name if op.positional else 'self'])
        kwargs[name] = 1
        return f"kwarg {n['name']}: {name}=1"
    a = rng.choice(free)
    t = str(a.type)
    if 'Tensor' in t:
        v = {'node': rng.choice(_fx_tensor_nodes(p, before=i) or [p.nodes[0]['name']])}
    elif 'int' in t.lower():
        v = _int_values(p, rng) if '[' not in t else {'list': [_int_values(p, rng)]}
    elif 'float' in t or 'Scalar' in t:
        v = _fx_float(rng.choice(FLOATS))
    elif 'bool' in t:
        v = rng.choice([True, False])
    else:
        v = _fx_constant(p, rng)
    kwargs[a.name] = v
    return f"kwarg {n['name']}: {a.name}={v}"


def fx_args_len(p, rng):
    calls = _fx_calls(p)
    i, n = _pick(rng, calls) or (None, None)
    if n is None or not isinstance(n.get('args'), list):
        return None
    if n['args'] and rng.random() < 0.5:
        n['args'].pop()
        return f"args-len {n['name']}: last argument dropped"
    v = _fx_constant(p, rng)
    n['args'].append(v)
    return f"args-len {n['name']}: {v} appended"


def fx_getitem(p, rng):
    gets = [(i, n) for i, n in _fx_calls(p, prim=True) if n['target'] == 'operator.getitem' and len(n['args']) > 1]
    i, n = _pick(rng, gets) or (None, None)
    if n is None:
        return None
    old = n['args'][1]
    n['args'][1] = rng.choice([_int_values(p, rng), -1, {'slice': [rng.choice([None, 0, -1, I64_MIN]),
                                                                    rng.choice([None, I64_MAX, 2 ** 62]),
                                                                    rng.choice([None, -1, 0, I64_MIN])]},
                               {'tuple': [0, 0]}, 'shape'])
    return f"getitem {n['name']}: index {old} -> {n['args'][1]}"


def fx_output(p, rng):
    out = next((n for n in p.nodes if n.get('op') == 'output'), None)
    if out is None:
        return None
    names = [n['name'] for n in p.nodes if n.get('op') != 'output']
    old = out['args']
    new = rng.choice([{'node': rng.choice(names)}, {'tuple': [{'node': rng.choice(names)}, {'node': rng.choice(names)}]},
                      {'list': [old[0] if old else None]}, {'dict': [['a', old[0] if old else None], [1, 2]]},
                      _fx_constant(p, rng), {'tuple': []}])
    out['args'] = [new] if rng.random() < 0.9 else [new, new]
    return f'output: {old} -> {out["args"]}'


def _size_edit(sizes, rng, p):
    sizes = list(sizes)
    mode = rng.choice(['elem', 'elem', 'rank+1', 'rank-1', 'zero'])
    if mode == 'elem' and sizes:
        i = rng.randrange(len(sizes))
        sizes[i] = rng.choice([0, -1, sizes[i] + 1, max(0, sizes[i] - 1), 2 ** 31, 2 ** 62, I64_MAX,
                               _int_values(p, rng)]) if isinstance(sizes[i], int) else 0
        return sizes, f'[{i}]={sizes[i]}'
    if mode == 'rank+1':
        return sizes + [1], 'rank+1'
    if mode == 'rank-1' and sizes:
        return sizes[:-1], 'rank-1'
    return [0] * len(sizes), 'all 0'


def fx_tensor_entry(p, rng):
    tensors = p.graph.get('tensors') or []
    if not tensors:
        return None
    t = rng.choice(tensors)
    field = rng.choice(['sizes', 'sizes', 'strides', 'strides', 'offset', 'offset', 'dtype', 'storage', 'kind',
                        'name', 'requires_grad'])
    old = t.get(field)
    if field in ('sizes', 'strides'):
        t[field], how = _size_edit(t.get(field) or [], rng, p)
        if field == 'sizes' and rng.random() < 0.3:
            t['strides'] = [0] * len(t[field])
            how += ', strides 0'
        return f"tensor {t['name']}: {field} {old} {how}"
    if field == 'offset':
        nbytes = max((s.get('nbytes', 0) for s in p.graph.get('storages', [])), default=0)
        t[field] = rng.choice([-1, 1, nbytes // 4, nbytes // 4 - 1, 2 ** 62, I64_MAX, 2 ** 61 + 1])
    elif field == 'dtype':
        t[field] = rng.choice(list(DTYPES) + ['float8_e4m3fn', 'uint16', 'bogus', 7])
    elif field == 'storage':
        t[field] = rng.choice([-1, len(p.graph.get('storages', [])), rng.randrange(max(1, len(p.graph.get('storages',
                                                                                                          [])))),
                               I64_MAX, '0'])
    elif field == 'kind':
        t[field] = rng.choice(['parameter', 'buffer', 'constant', 'bogus'])
    elif field == 'name':
        t[field] = rng.choice([x['name'] for x in tensors])
    else:
        t[field] = rng.choice([not t.get(field), 1, None])
    return f"tensor {t['name']}: {field} {old} -> {t[field]}"


def fx_storage(p, rng):
    storages = p.graph.get('storages') or []
    if not storages:
        return None
    i = rng.randrange(len(storages))
    s = storages[i]
    r = rng.random()
    if r < 0.4:
        old, s['nbytes'] = s.get('nbytes'), rng.choice([0, -1, s.get('nbytes', 0) - 1, s.get('nbytes', 0) + 1,
                                                        2 ** 48, I64_MAX])
        return f'storage {i}: nbytes {old} -> {s["nbytes"]}'
    if r < 0.6:
        old, s['record'] = s.get('record'), rng.choice([x['record'] for x in storages] + ['data/99', 'graph.json',
                                                                                       '../data/0', ''])
        return f'storage {i}: record {old} -> {s["record"]}'
    return _record_edit(p, rng, s.get('record', ''))


def _record_edit(p, rng, suffix):
    idx = [j for j, (n, _) in enumerate(p.records) if suffix and n.endswith('/' + suffix)]
    if not idx:
        return None
    j = idx[0]
    name, data = p.records[j]
    mode = rng.choice(['cut', 'cut', 'empty', 'drop', 'grow'])
    if mode == 'cut':
        k = rng.choice([1, 4, max(1, len(data) // 2)])
        p.records[j][1] = data[:-k]
        return f'record {name}: {k} bytes cut'
    if mode == 'empty':
        p.records[j][1] = b''
        return f'record {name}: emptied'
    if mode == 'drop':
        p.records.pop(j)
        return f'record {name}: dropped'
    p.records[j][1] = data + b'\0' * 8
    return f'record {name}: 8 bytes added'


def fx_meta(p, rng):
    metas = [n for n in p.nodes if isinstance((n.get('meta') or {}).get('tensor_meta'), dict) and
             'tensor_meta' in n['meta']['tensor_meta']]
    if not metas:
        return None
    phs = [n for n in metas if n['op'] == 'placeholder']
    n = rng.choice(phs) if phs and rng.random() < 0.5 else rng.choice(metas)
    tm = n['meta']['tensor_meta']['tensor_meta']
    field = rng.choice(['shape', 'shape', 'stride', 'dtype', 'whole'])
    old = tm.get(field)
    if field in ('shape', 'stride'):
        tm[field], how = _size_edit(tm.get(field) or [], rng, p)
        return f"meta {n['name']}: {field} {old} {how}"
    if field == 'dtype':
        tm[field] = rng.choice(list(DTYPES) + ['bogus'])
        return f"meta {n['name']}: dtype {old} -> {tm[field]}"
    n['meta']['tensor_meta'] = rng.choice([None, 1, {'list': []}, {'tensor_meta': {}}])
    return f"meta {n['name']}: tensor_meta -> {n['meta']['tensor_meta']}"


def _json_damage(doc, rng):
    sites = list(_walk(doc))
    c, k, v, path = rng.choice(sites)
    c[k] = rng.choice([None, 0, -1, I64_MAX, I64_MIN, 1.5, '', 'x', [], {}, [v], {'x': v}, True])
    return f'json {"/".join(map(str, path))}: {json.dumps(v)[:60]} -> {json.dumps(c[k])[:60]}'


def fx_json(p, rng):
    return _json_damage(p.graph, rng)


MUTATORS_FXPT = [
    (fx_op_swap, 4), (fx_out_variant, 1), (fx_inplace, 1), (fx_prim_swap, 1), (fx_int, 3), (fx_int_list, 2),
    (fx_float, 1), (fx_bool, 1), (fx_enum, 1), (fx_rewire, 3), (fx_drop, 1), (fx_dup, 1), (fx_move, 1),
    (fx_kwarg, 1), (fx_args_len, 1), (fx_getitem, 1), (fx_output, 1), (fx_tensor_entry, 2), (fx_storage, 1),
    (fx_meta, 2), (fx_json, 0.3),
]


# ---- .pt2 mutations (models/model.json and the configs: docs/pt2_format.md) ------------------------

def _pt2_graph(p):
    return p.graph['graph_module']['graph']


def _pt2_values(p):
    g = _pt2_graph(p)
    return list(g.get('tensor_values', {})), list(g.get('sym_int_values', {}))


def _pt2_args(p, pred):
    """(container, key, value, node, input) of values inside node inputs."""
    out = []
    for n in p.nodes:
        for inp in n.get('inputs', []):
            for c, k, v, path in _walk(inp.get('arg')):
                if pred(c, k, v, path):
                    out.append((c, k, v, n, inp))
    return out


def pt2_op_swap(p, rng):
    calls = [n for n in p.nodes if op_of(n.get('target')) or n.get('target', '').startswith('torch.ops.aten.')]
    n = _pick(rng, calls)
    if n is None:
        return None
    inputs = n.get('inputs', [])
    pos = [i for i in inputs if i.get('kind') == 1]
    kw = [i['name'] for i in inputs if i.get('kind') != 1]
    old = op_of(n['target'])
    new = _pick(rng, _swap_candidates(rng, old, len(pos), kw, old.q if old else None))
    if new is None:
        return None
    loose = rng.random() < 0.25
    if not loose:
        for i, a in zip(pos, new.positional):
            i['name'] = a.name
    old_t, n['target'] = n['target'], pt2_target(new)
    return f"op-swap {n.get('name')}: {old_t} -> {n['target']}" + (' (input names kept)' if loose else '')


def _pt2_tensor_names(p, before=None):
    g = _pt2_graph(p)
    names = [i['as_tensor']['name'] for i in g.get('inputs', []) if 'as_tensor' in i]
    for n in p.nodes[:before]:
        for o in n.get('outputs', []):
            if 'as_tensor' in o:
                names.append(o['as_tensor']['name'])
    return names or list(g.get('tensor_values', {}))


def _pt2_variant(p, rng, kind):
    cands = []
    for i, n in enumerate(p.nodes):
        old = op_of(n.get('target'))
        if old is None:
            continue
        for o in ops().values():
            if (kind == 'out' and o.base == old.base and o.outs and o.q != old.q) or \
                    (kind == 'inplace' and o.base == old.base + '_' and o.overload == old.overload):
                cands.append((i, n, o))
    i, n, o = _pick(rng, cands) or (None,) * 3
    if n is None:
        return None
    old_t, n['target'] = n['target'], pt2_target(o)
    names = _pt2_tensor_names(p, before=i)
    detail = f"{kind}-variant {n.get('name')}: {old_t} -> {n['target']}"
    if kind == 'out':
        for name in o.outs:
            t = rng.choice(names)
            n['inputs'].append({'name': name, 'arg': {'as_tensor': {'name': t}}, 'kind': 2})
            detail += f', {name}={t}'
    elif rng.random() < 0.5:
        first = next((x for x in n['inputs'] if 'as_tensor' in x.get('arg', {})), None)
        if first is not None:
            first['arg'] = {'as_tensor': {'name': rng.choice(names)}}
            detail += f", self={first['arg']['as_tensor']['name']}"
    return detail


def pt2_out_variant(p, rng):
    return _pt2_variant(p, rng, 'out')


def pt2_inplace(p, rng):
    return _pt2_variant(p, rng, 'inplace')


def pt2_prim_swap(p, rng):
    prims = [n for n in p.nodes if n.get('target', '').startswith('_operator.') or 'sym_size' in n.get('target', '')]
    n = _pick(rng, prims)
    if n is None:
        return None
    old = n['target']
    n['target'] = rng.choice([t for t in PT2_PRIMS + ('_operator.neg', 'torch.ops.aten.sym_size.int',
                                                      'torch.ops.aten.sym_numel.default', 'math.floor',
                                                      'torch.sym_max', 'builtins.getattr') if t != old])
    return f"prim-swap {n.get('name')}: {old} -> {n['target']}"


def pt2_int(p, rng):
    sites = _pt2_args(p, lambda c, k, v, path: k == 'as_int' and isinstance(v, int) and not isinstance(v, bool))
    sites += [(c, k, v, n, i) for c, k, v, n, i in _pt2_args(p, lambda c, k, v, path: isinstance(v, int) and
                                                             not isinstance(v, bool) and len(path) >= 2 and
                                                             path[-2] == 'as_ints')]
    c, k, v, n, i = _pick(rng, sites) or (None,) * 5
    if c is None:
        return None
    c[k] = _int_values(p, rng)
    return f"int {n.get('name')}.{i.get('name')}: {v} -> {c[k]}"


def pt2_int_list(p, rng):
    sites = _pt2_args(p, lambda c, k, v, path: k in ('as_ints', 'as_sym_ints', 'as_floats', 'as_bools') and
                      isinstance(v, list))
    c, k, v, n, i = _pick(rng, sites) or (None,) * 5
    if c is None:
        return None
    if k == 'as_ints':
        elem = lambda: _int_values(p, rng)  # noqa: E731
    elif k == 'as_sym_ints':
        elem = lambda: {'as_int': _int_values(p, rng)}  # noqa: E731
    elif k == 'as_floats':
        elem = lambda: rng.choice(FLOATS)  # noqa: E731
    else:
        elem = lambda: rng.choice([True, False, 2])  # noqa: E731
    c[k], how = _list_edit(list(v), rng, elem)
    return f"int-list {n.get('name')}.{i.get('name')}: {json.dumps(v)[:60]} {how}"


def pt2_float(p, rng):
    sites = _pt2_args(p, lambda c, k, v, path: k == 'as_float')
    c, k, v, n, i = _pick(rng, sites) or (None,) * 5
    if c is None:
        return None
    f = rng.choice(FLOATS)
    c[k] = f if rng.random() < 0.7 else {math.inf: 'Infinity', -math.inf: '-Infinity'}.get(f, 'NaN' if f != f else f)
    return f"float {n.get('name')}.{i.get('name')}: {v} -> {c[k]}"


def pt2_bool(p, rng):
    sites = _pt2_args(p, lambda c, k, v, path: k == 'as_bool')
    c, k, v, n, i = _pick(rng, sites) or (None,) * 5
    if c is None:
        return None
    c[k] = rng.choice([not v, 2, None, 'true'])
    return f"bool {n.get('name')}.{i.get('name')}: {v} -> {c[k]}"


def _pt2_arg_value(p, rng, before=None):
    tensors, syms = _pt2_values(p)
    names = _pt2_tensor_names(p, before) or tensors
    return rng.choice([
        {'as_none': True}, {'as_int': _int_values(p, rng)}, {'as_float': rng.choice(FLOATS)},
        {'as_tensor': {'name': rng.choice(names)}}, {'as_tensors': [{'name': rng.choice(names)}] * rng.randrange(3)},
        {'as_string': rng.choice(['', 'x', 'mean', 'cpu'])}, {'as_bool': True}, {'as_ints': [_int_values(p, rng)]},
        {'as_scalar_type': rng.choice([-1, 0, 7, 16, 44, 255])}, {'as_memory_format': rng.choice([-1, 0, 3, 9])},
        {'as_layout': rng.choice([-1, 0, 7, 12])}, {'as_device': {'type': rng.choice(['cuda', 'meta', 'cpu']),
                                                                  'index': rng.choice([None, 0, -1, 2 ** 40])}},
        {'as_sym_int': {'as_name': rng.choice(syms or ['s0'])}}, {'as_sym_int': {'as_int': _int_values(p, rng)}},
        {'as_optional_tensors': [{'as_none': True}, {'as_tensor': {'name': rng.choice(names)}}]},
        {'as_sym_ints': [{'as_name': rng.choice(syms or ['s0'])}]}, {'as_graph': {'name': 'g', 'graph': {}}},
        {'as_custom_obj': {'name': 'obj', 'class_fqn': 'x'}}, {'as_bogus': 1}, {},
        {'as_int': 1, 'as_float': 1.0}])


def pt2_arg_kind(p, rng):
    cands = [(j, n, i) for j, n in enumerate(p.nodes) for i in n.get('inputs', [])]
    j, n, i = _pick(rng, cands) or (None,) * 3
    if n is None:
        return None
    if rng.random() < 0.25:
        old, i['kind'] = i.get('kind'), rng.choice([0, 2, 3, -1, None, '1'])
        return f"arg-kind {n.get('name')}.{i.get('name')}: kind {old} -> {i['kind']}"
    old, i['arg'] = i.get('arg'), _pt2_arg_value(p, rng, before=j)
    return f"arg-kind {n.get('name')}.{i.get('name')}: {json.dumps(old)[:60]} -> {json.dumps(i['arg'])[:80]}"


def pt2_rewire(p, rng):
    sites = _pt2_args(p, lambda c, k, v, path: k in ('name', 'as_name') and isinstance(v, str))
    g = _pt2_graph(p)
    for o in g.get('outputs', []):  # the graph's outputs too
        for c, k, v, path in _walk(o):
            if k in ('name', 'as_name') and isinstance(v, str):
                sites.append((c, k, v, {'name': 'graph.outputs'}, {'name': ''}))
    c, k, v, n, i = _pick(rng, sites) or (None,) * 5
    if c is None:
        return None
    tensors, syms = _pt2_values(p)
    idx = p.nodes.index(n) if n in p.nodes else len(p.nodes)
    r = rng.random()
    if r < 0.6:
        c[k] = rng.choice((_pt2_tensor_names(p, before=idx) if k == 'name' else syms) or [v])
    elif r < 0.8:
        c[k] = rng.choice(tensors + syms)
    else:
        c[k] = rng.choice(['no_such_value', '', n.get('name', 'x')])
    return f"rewire {n.get('name')}.{i.get('name')}: {v} -> {c[k]}"


def pt2_drop(p, rng):
    if not p.nodes:
        return None
    n = p.nodes.pop(rng.randrange(len(p.nodes)))
    return f"drop {n.get('name')} ({n.get('target')})"


def pt2_dup(p, rng):
    if not p.nodes:
        return None
    i = rng.randrange(len(p.nodes))
    n = copy.deepcopy(p.nodes[i])
    same = rng.random() < 0.3
    if not same:
        n['name'] = f"{n.get('name')}_dup"
        for c, k, v, path in list(_walk(n.get('outputs', []))):
            if k in ('name', 'as_name') and isinstance(v, str):
                c[k] = v + '_dup'
    p.nodes.insert(i + 1, n)
    return f"dup {p.nodes[i].get('name')}" + (' (same outputs)' if same else ' (outputs renamed)')


def pt2_move(p, rng):
    return _move(p.nodes, rng) if p.nodes else None


def _pt2_meta_edit(tm, rng, p, label):
    field = rng.choice(['sizes', 'sizes', 'strides', 'strides', 'storage_offset', 'dtype', 'layout', 'device',
                        'requires_grad'])
    old = copy.deepcopy(tm.get(field))
    if field in ('sizes', 'strides'):
        vals = list(tm.get(field) or [])
        mode = rng.choice(['elem', 'elem', 'rank+1', 'rank-1', 'expr'])
        if mode == 'elem' and vals:
            j = rng.randrange(len(vals))
            vals[j] = {'as_int': rng.choice([0, -1, 2 ** 31, 2 ** 62, I64_MAX, _int_values(p, rng)])}
        elif mode == 'rank+1':
            vals.append({'as_int': 1})
        elif mode == 'rank-1' and vals:
            vals.pop()
        elif vals:
            j = rng.randrange(len(vals))
            vals[j] = {'as_expr': {'expr_str': rng.choice(["Symbol('s99', positive=True, integer=True)",
                                                           'Integer(-5)', 'Mul(Integer(9223372036854775807), '
                                                           "Symbol('s77', positive=True, integer=True))", '((',
                                                           "__import__('os')"]),
                                   'hint': rng.choice([None, {'as_int': 4}])}}
        tm[field] = vals
    elif field == 'storage_offset':
        tm[field] = {'as_int': rng.choice([-1, 1, 2 ** 62, I64_MAX, 2 ** 31])}
    elif field == 'dtype':
        tm[field] = rng.choice([-1, 0, 1, 4, 5, 6, 8, 11, 12, 16, 27, 44, 99])
    elif field == 'layout':
        tm[field] = rng.choice([-1, 0, 1, 2, 8, 99])
    elif field == 'device':
        tm[field] = {'type': rng.choice(['cuda', 'meta', 'cpu', '']), 'index': rng.choice([None, 0, 7])}
    else:
        tm[field] = rng.choice([not tm.get(field), None])
    return f'{label}: {field} {json.dumps(old)[:60]} -> {json.dumps(tm[field])[:80]}'


def pt2_tensor_values(p, rng):
    tv = _pt2_graph(p).get('tensor_values', {})
    if not tv:
        return None
    users = [i['as_tensor']['name'] for i in _pt2_graph(p).get('inputs', []) if 'as_tensor' in i]
    name = rng.choice(users) if users and rng.random() < 0.5 else rng.choice(list(tv))
    if name not in tv:
        return None
    return _pt2_meta_edit(tv[name], rng, p, f'tensor_values {name}')


def pt2_weights(p, rng):
    configs = [(k, v) for k, v in p.json.items() if k.endswith('_config.json') and v.get('config')]
    k, cfg = _pick(rng, configs) or (None, None)
    if cfg is None:
        return None
    name = rng.choice(list(cfg['config']))
    entry = cfg['config'][name]
    r = rng.random()
    label = f"{k.rsplit('/', 1)[-1]} {name}"
    if r < 0.55:
        return _pt2_meta_edit(entry['tensor_meta'], rng, p, label)
    if r < 0.75:
        old = entry.get('path_name')
        others = [e.get('path_name') for e in cfg['config'].values()]
        entry['path_name'] = rng.choice(others + ['weight_99', '', '../models/model.json', 'model_weights_config.json'])
        return f'{label}: path_name {old} -> {entry["path_name"]}'
    if r < 0.85:
        return _record_edit(p, rng, ('weights/' if 'weights' in k else 'constants/') + entry.get('path_name', ''))
    if r < 0.92:
        del cfg['config'][name]
        return f'{label}: entry dropped'
    old = entry.get('is_param')
    entry['is_param'] = not old
    return f'{label}: is_param {old} -> {entry["is_param"]}'


_SPEC_KINDS = ('parameter', 'buffer', 'tensor_constant', 'user_input', 'constant_input', 'custom_obj', 'token')


def pt2_signature(p, rng):
    sig = p.graph['graph_module']['signature']
    ins, outs = sig.get('input_specs', []), sig.get('output_specs', [])
    names = []
    for k in ('model_weights_config.json', 'model_constants_config.json'):
        cfg = p.find(k)
        names += list((cfg or {}).get('config', {}))
    r = rng.random()
    if r < 0.35 and ins:
        j = rng.randrange(len(ins))
        (kind, body), = ins[j].items()
        arg = body.get('arg', {})
        tname = arg.get('name') or arg.get('as_tensor', {}).get('name') or 'x'
        new = rng.choice([k for k in _SPEC_KINDS if k != kind])
        target = rng.choice(names + ['no.such', '']) if names else 'no.such'
        ins[j] = {'parameter': {'arg': {'name': tname}, 'parameter_name': target},
                  'buffer': {'arg': {'name': tname}, 'buffer_name': target, 'persistent': rng.random() < 0.5},
                  'tensor_constant': {'arg': {'name': tname}, 'tensor_constant_name': target},
                  'user_input': {'arg': {'as_tensor': {'name': tname}}},
                  'constant_input': {'name': tname, 'value': {'as_int': 3}},
                  'custom_obj': {'arg': {'name': tname, 'class_fqn': 'x'}, 'custom_obj_name': target},
                  'token': {'arg': {'name': tname}}}[new]
        ins[j] = {new: ins[j]}
        return f'signature input {j}: {kind} -> {new} ({target})'
    if r < 0.55 and ins:
        j = rng.randrange(len(ins))
        for c, k, v, path in _walk(ins[j]):
            if k.endswith('_name') and isinstance(v, str):
                c[k] = rng.choice(names + ['no.such', 'x' * 300, 'a..b', 'lin.weight.T']) if names else 'no.such'
                return f'signature input {j}: {k} {v} -> {c[k]}'
        return None
    if r < 0.7 and ins:
        mode = rng.choice(['swap', 'drop', 'dup'])
        j = rng.randrange(len(ins))
        if mode == 'swap' and len(ins) > 1:
            k = rng.randrange(len(ins))
            ins[j], ins[k] = ins[k], ins[j]
            return f'signature inputs {j} and {k} swapped'
        if mode == 'drop':
            ins.pop(j)
            return f'signature input {j} dropped'
        ins.insert(j, copy.deepcopy(ins[j]))
        return f'signature input {j} duplicated'
    if outs:
        j = rng.randrange(len(outs))
        (kind, body), = outs[j].items()
        arg = body.get('arg', {})
        tname = arg.get('name') or arg.get('as_tensor', {}).get('name') or 'x'
        buffers = [list(s.values())[0].get('buffer_name') for s in ins if 'buffer' in s] or ['no.such']
        params = [list(s.values())[0].get('parameter_name') for s in ins if 'parameter' in s] or ['no.such']
        users = [list(s.values())[0].get('arg', {}).get('as_tensor', {}).get('name') for s in ins
                 if 'user_input' in s] or ['x']
        new = rng.choice([
            {'user_output': {'arg': {'as_tensor': {'name': tname}}}},
            {'user_output': {'arg': {'as_int': _int_values(p, rng)}}},
            {'buffer_mutation': {'arg': {'name': tname}, 'buffer_name': rng.choice(buffers + params)}},
            {'parameter_mutation': {'arg': {'name': tname}, 'parameter_name': rng.choice(params)}},
            {'user_input_mutation': {'arg': {'name': tname}, 'user_input_name': rng.choice(users)}},
            {'loss_output': {'arg': {'name': tname}}},
            {'gradient_to_parameter': {'arg': {'name': tname}, 'parameter_name': rng.choice(params)}},
            {'token': {'arg': {'name': tname}}}])
        outs[j] = new
        return f'signature output {j}: {kind} -> {json.dumps(new)[:100]}'
    return None


def pt2_symbols(p, rng):
    m = p.graph
    rc = m.get('range_constraints') or {}
    syms = _pt2_graph(p).get('sym_int_values') or {}
    if rc and (not syms or rng.random() < 0.5):
        s = rng.choice(list(rc))
        field = rng.choice(['min_val', 'max_val'])
        old, rc[s][field] = rc[s].get(field), rng.choice([0, -1, 1, I64_MIN, I64_MAX, 2 ** 62, None, 'inf', 1.5, 3])
        return f'range {s}: {field} {old} -> {rc[s][field]}'
    if syms:
        s = rng.choice(list(syms))
        old = syms[s]
        syms[s] = rng.choice([{'as_int': _int_values(p, rng)},
                              {'as_expr': {'expr_str': rng.choice(["Symbol('zz', integer=True)", 'Integer(0)',
                                                                   'FloorDiv(Integer(1), Integer(0))', 'Pow(s77, 99)',
                                                                   'x' * 5000]), 'hint': None}}])
        return f'sym_int_values {s}: {json.dumps(old)[:60]} -> {json.dumps(syms[s])[:80]}'
    return None


def pt2_call_graph(p, rng):
    mcg = p.graph.get('module_call_graph') or []
    if not mcg or 'signature' not in (mcg[0] or {}) or not mcg[0]['signature']:
        return None
    sig = mcg[0]['signature']
    field = rng.choice(['in_spec', 'out_spec', 'forward_arg_names'])
    old = sig.get(field)
    if field == 'forward_arg_names':
        sig[field] = rng.choice([[], ['x', 'x'], (old or []) + ['extra'], ['1bad']])
    else:
        text = old or ''
        sig[field] = rng.choice([
            text.replace('builtins.tuple', 'builtins.list', 1), text.replace('builtins.tuple', 'collections.OrderedDict'),
            text.replace('"children_spec": []', '"children_spec": [{"type": null, "context": null, "children_spec": []}]',
                         1),
            text.replace('[1, ', '[99, ', 1), '', '[1, {}]', text.replace('builtins.dict', 'builtins.tuple')])
    return f'module_call_graph: {field} edited'


def pt2_node_outputs(p, rng):
    n = _pick(rng, [n for n in p.nodes if n.get('outputs')])
    if n is None:
        return None
    old = copy.deepcopy(n['outputs'])
    first = json.dumps(old)
    name = next((v for _, k, v, _ in _walk(old) if k in ('name', 'as_name') and isinstance(v, str)), 'x')
    n['outputs'] = rng.choice([
        [], old + old, [{'as_none': True}], [{'as_tensors': [{'name': name}, {'name': name + '_b'}]}],
        [{'as_tensor': {'name': name}}], [{'as_sym_int': {'as_name': name}}], [{'as_int': 3}]])
    return f"node-outputs {n.get('name')}: {first[:60]} -> {json.dumps(n['outputs'])[:80]}"


def pt2_schema_version(p, rng):
    sv = p.graph.get('schema_version') or {}
    field = rng.choice(['major', 'minor'])
    old, sv[field] = sv.get(field), rng.choice([0, 7, 9, -1, I64_MAX, None, '8'])
    p.graph['schema_version'] = sv
    return f'schema_version {field}: {old} -> {sv[field]}'


def pt2_graph_io(p, rng):
    g = _pt2_graph(p)
    which = rng.choice(['inputs', 'outputs'])
    lst = g.get(which) or []
    if not lst:
        return None
    mode = rng.choice(['drop', 'dup', 'swap'])
    j = rng.randrange(len(lst))
    if mode == 'drop':
        lst.pop(j)
    elif mode == 'dup':
        lst.insert(j, copy.deepcopy(lst[j]))
    elif len(lst) > 1:
        k = rng.randrange(len(lst))
        lst[j], lst[k] = lst[k], lst[j]
    return f'graph.{which} {j}: {mode}'


def pt2_json(p, rng):
    return _json_damage(rng.choice(list(p.json.values())), rng)


MUTATORS_PT2 = [
    (pt2_op_swap, 4), (pt2_out_variant, 1), (pt2_inplace, 1), (pt2_prim_swap, 1), (pt2_int, 3), (pt2_int_list, 2),
    (pt2_float, 1), (pt2_bool, 1), (pt2_arg_kind, 2), (pt2_rewire, 3), (pt2_drop, 1), (pt2_dup, 1), (pt2_move, 1),
    (pt2_tensor_values, 2), (pt2_weights, 2), (pt2_signature, 2), (pt2_symbols, 1), (pt2_call_graph, 0.5),
    (pt2_node_outputs, 1), (pt2_schema_version, 0.3), (pt2_graph_io, 1), (pt2_json, 0.3),
]


def mutate(seed, rng):
    """(records, [mutation descriptions]) of one mutated copy of `seed`."""
    p = Program(seed)
    table = MUTATORS_FXPT if p.fmt == 'fxpt' else MUTATORS_PT2
    fns, weights = [f for f, _ in table], [w for _, w in table]
    want = rng.choices([1, 2, 3], weights=[6, 2.5, 1.5])[0]
    done = []
    for _ in range(want * 8):
        if len(done) >= want:
            break
        fn = rng.choices(fns, weights=weights)[0]
        saved = copy.deepcopy(p.json), [list(r) for r in p.records]
        try:
            detail = fn(p, rng)
        except (TypeError, KeyError, AttributeError, IndexError, ValueError):  # an earlier edit broke what it edits
            detail = None
        if not detail:
            p.json, p.records = saved
            p.graph = next(v for k, v in p.json.items() if k.endswith(('graph.json', 'models/model.json')))
        else:
            done.append(detail)
    return p, done


def _targets(p):
    try:
        nodes = list(p.nodes)
    except (TypeError, KeyError, AttributeError):  # the json mutation replaced the graph
        return []
    return [n.get('target') for n in nodes if isinstance(n, dict) and isinstance(n.get('target'), str)]


def _flags(p, seed):
    """(random, stateful) of a mutated program: random operators (values not compared), or
    ones that write a tensor (the first and second call may differ)."""
    targets = _targets(p)
    rnd = any(w in t for t in targets for w in UNDETERMINED)

    def writes(t):
        op = op_of(t)
        if op is not None:
            return op.mutable
        base = t[len('torch.ops.aten.'):] if t.startswith('torch.ops.aten.') else t.split('::')[-1]
        return base.split('.')[0].endswith('_') or '_out' in base or base.endswith('.out')
    stateful = seed['stateful'] or any(writes(t) for t in targets)
    if p.fmt == 'pt2':
        try:
            outs = list(p.graph['graph_module']['signature']['output_specs'])
        except (TypeError, KeyError):
            outs = []
        stateful = stateful or any(isinstance(o, dict) and any(k.endswith('mutation') for k in o) for o in outs)
    return rnd, stateful


# ---- the corpus: what earlier runs found, run every time ------------------------------------------

def _node(p, name):
    return next(n for n in p.nodes if n.get('name') == name)


def _fx_linear_out_into_bias(p):
    n = _node(p, 'linear_default')
    n['target'], n.setdefault('kwargs', {})['out'] = 'aten::linear.out', {'node': 'lin_bias'}
    return 'out-variant linear_default: aten::linear -> aten::linear.out, out=lin_bias'


def _pt2_linear_out_into_bias(p):
    n = next(n for n in p.nodes if n.get('target') == 'torch.ops.aten.addmm.default' or
             n.get('target') == 'torch.ops.aten.linear.default')
    t = n['target'].replace('.default', '.out')
    bias = next(s['parameter']['arg']['name'] for s in p.graph['graph_module']['signature']['input_specs']
                if 'parameter' in s and s['parameter']['parameter_name'] == 'lin.bias')
    n['target'] = t
    n['inputs'].append({'name': 'out', 'arg': {'as_tensor': {'name': bias}}, 'kind': 2})
    return f'out-variant {n["name"]}: -> {t}, out={bias}'


def _fx_dim_out_of_range(p):
    n = _node(p, 'cumsum_default')
    n['args'][1] = 2 ** 31 - 1
    return 'int cumsum_default: 1 -> 2147483647'


def _fx_getitem_of_an_int(p):
    n = _node(p, 'mul')
    n['target'] = 'operator.getitem'
    return 'prim-swap mul: operator.mul -> operator.getitem'


# (name, seed file, edit): issue 35 item 5's first findings (docs in the report / findings file)
CORPUS = [
    # a failed resize of an out= tensor leaves a loaded weight with the result's sizes over its
    # old storage: the next call reads and writes past it (heap corruption), in both runtimes
    ('linear-out-into-bias', 'conv.fxpt', _fx_linear_out_into_bias),
    ('linear-out-into-bias', 'conv.pt2', _pt2_linear_out_into_bias),
    ('addmm-out-into-bias', 'conv.core.pt2', _pt2_linear_out_into_bias),
    # the Python runtime lets torch's IndexError and Python's TypeError through
    ('dim-out-of-range', 'emb.fxpt', _fx_dim_out_of_range),
    ('getitem-of-an-int', 'prims.fxpt', _fx_getitem_of_an_int),
]


# ---- the plan -------------------------------------------------------------------------------------

def plan_cases(seeds, folder):
    """The mutated files, in a fixed order, round-robin over the seed files; each file is
    two cases (runtime 'cpp' and 'python')."""
    names = sorted(seeds)
    files = []
    for i in range(CASES):
        name = names[i % len(names)]
        j = i // len(names)
        key = f'{name}#{j}'
        rng = random.Random(f'{SEED}:{key}')
        p, muts = mutate(seeds[name], rng)
        if ONLY and not any(k in key for k in ONLY):
            continue
        path = os.path.join(folder, f'{len(files)}.{p.fmt}')
        write_zip(path, p.data())
        rnd, stateful = _flags(p, seeds[name])
        files.append(dict(key=key, seed=name, path=path, muts=muts, random=rnd, stateful=stateful,
                          inputs=seeds[name]['inputs'], mmap=j % 2 == 0))
    for j, (label, name, edit) in enumerate(CORPUS):
        key = f'corpus:{label}:{name}'
        if name not in seeds or (ONLY and not any(k in key for k in ONLY)):
            continue
        p = Program(seeds[name])
        muts = [edit(p)]
        path = os.path.join(folder, f'{len(files)}.{p.fmt}')
        write_zip(path, p.data())
        rnd, stateful = _flags(p, seeds[name])
        files.append(dict(key=key, seed=name, path=path, muts=muts, random=rnd, stateful=stateful,
                          inputs=seeds[name]['inputs'], mmap=j % 2 == 0, corpus=True))
    cases = []
    for f in files:
        for runtime in ('cpp', 'python'):
            cases.append(dict(id=len(cases), key=f'{f["key"]}:{runtime}', file=f, runtime=runtime, path=f['path'],
                              inputs=f['inputs'], mmap=f['mmap'], random=f['random']))
    return files, cases


FIELDS = ('path', 'inputs', 'runtime', 'mmap', 'random', 'probe')


def judge(runs, stateful):
    """classify (test_guard_sweep) of a case's runs, one per heap, each [call 1, call 2,
    call 1 of a fresh load]; for a program that writes tensors, call 2 is compared only
    with call 2 of the other heap."""
    def strip(r):  # classify compares ['ok', digest]: the flat digest is compared elsewhere
        return r if isinstance(r, tuple) or (r and r[0] == 'died') else [c[:2] if c[0] == 'ok' else c for c in r]
    runs = [strip(r) for r in runs]
    if any(isinstance(r, tuple) or (r and r[0] == 'died') for r in runs) or not stateful:
        return classify(None, runs)
    first = classify(None, [[r[0], r[2]] for r in runs])
    second = classify(None, [[r[1]] for r in runs])
    order = ('uninit', 'bad-error', 'refused', 'ok')
    return min(first, second, key=lambda o: order.index(o[0]))


def _driver_run(f, perturb, folder):
    """The C++-only runner on file f, heap fill `perturb`: ('ok', sha1 of its output) or
    ('err', message) or ('died', 'crash' | 'hang', detail)."""
    import resource
    inputs = pickle.loads(f['inputs'])
    d = os.path.join(folder, f'drv{os.getpid()}_{id(f)}_{perturb}')
    os.makedirs(d, exist_ok=True)
    args = []
    for i, t in enumerate(inputs):
        p = os.path.join(d, f'in{i}.bin')
        t.contiguous().numpy().tofile(p)
        args.append((p, ','.join(map(str, t.shape)), 'int64' if t.dtype == torch.int64 else 'float32'))
    out = os.path.join(d, 'out.bin')
    cmd = [DRIVER, f['path'], args[0][0], args[0][1], out, '--dtype', args[0][2]]
    for a in args[1:]:
        cmd += ['--input', *a]
    env = _child_runner.child_env(perturb, MEM_BYTES)
    env.pop('LD_PRELOAD', None)  # the runner is the plain build
    env.pop('ASAN_OPTIONS', None)

    def limit():
        resource.setrlimit(resource.RLIMIT_DATA, (MEM_BYTES + (1 << 30), resource.RLIM_INFINITY))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT + 20, env=env, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        shutil.rmtree(d, ignore_errors=True)
        return ('died', 'hang', f'ran past {TIMEOUT + 20:g} s')
    try:
        if proc.returncode < 0 or any(s in proc.stderr for s in _child_runner._SANITIZER):
            return ('died', 'crash', f'exit {proc.returncode}: {_excerpt(proc.stderr) or proc.stderr[-300:]}')
        if proc.returncode == 1:  # its message: the 'error: ' line on (LibTorch's warnings carry timestamps)
            msg = proc.stderr[proc.stderr.find('error: '):] if 'error: ' in proc.stderr else proc.stderr.strip()
            return ('err', re.sub(r'0x[0-9a-fA-F]+', '0x?', msg.split('\nException raised from')[0])[:300])
        if proc.returncode != 0:
            return ('died', 'crash', f'exit status {proc.returncode}: {proc.stderr[-300:]}')
        with open(out, 'rb') as fh:
            return ('ok', hashlib.sha1(fh.read()).hexdigest())
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run_driver(files, folder):
    """{file key: outcome, detail, sha1 or None} for every DRIVER_EVERY-th file."""
    if not DRIVER_EVERY or not os.path.exists(DRIVER):
        return {}
    picked = [f for i, f in enumerate(files) if i % DRIVER_EVERY == 0 or f.get('corpus')] if not ONLY else files
    with ThreadPoolExecutor(JOBS) as pool:
        futs = {(f['key'], pp): pool.submit(_driver_run, f, pp, folder) for f in picked for pp in PERTURB}
        runs = {k: fut.result() for k, fut in futs.items()}
    out = {}
    for f in picked:
        rs = [runs[(f['key'], pp)] for pp in PERTURB]
        died = [r for r in rs if r[0] == 'died']
        if died:
            out[f['key']] = ('crash' if any(r[1] == 'crash' for r in died) else 'hang', died[0][2], None)
        elif len({r[0] for r in rs}) > 1:
            out[f['key']] = ('uninit', 'raised on one heap only: ' + ' / '.join(str(r[1])[:100] for r in rs), None)
        elif rs[0][0] == 'err':
            out[f['key']] = ('refused', rs[0][1], None) if len({r[1] for r in rs}) == 1 else \
                ('uninit', 'different errors: ' + ' / '.join(r[1][:100] for r in rs), None)
        elif f['random']:
            out[f['key']] = ('ok', '', None)
        elif len({r[1] for r in rs}) > 1:
            out[f['key']] = ('uninit', 'results differ between heaps', None)
        else:
            out[f['key']] = ('ok', '', rs[0][1])
    return out


def cross_check(files, by_case, driver):
    """'differ' where runtimes all ran a file and computed different values; 'disagree'
    where one refused it and another ran it."""
    differ, disagree = [], []
    for f in files:
        cpp, py = by_case[f['key'], 'cpp'], by_case[f['key'], 'python']
        drv = driver.get(f['key'])
        outcomes = {'cpp': cpp['outcome'], 'python': py['outcome']}
        if drv:
            outcomes['driver'] = drv[0]
        if any(o not in ('ok', 'refused') for o in outcomes.values()):
            continue
        if len(set(outcomes.values())) > 1:
            disagree.append((f, outcomes, {'cpp': cpp['detail'], 'python': py['detail'],
                                           'driver': drv[1] if drv else ''}))
            continue
        if 'ok' not in outcomes.values() or f['random']:
            continue
        a, b = _first_flat(cpp), _first_flat(py)
        if a and b and a[0] != b[0]:
            differ.append((f, 'the C++ and Python runtimes computed different values (first call)'))
        # (a program that writes a tensor may have written its input in the first call; the
        # runner and the child feed the second call differently, so only the first compares)
        if drv and drv[2] and a and a[1] and drv[2] != a[1] and not f['stateful']:
            differ.append((f, 'the C++-only runner and the C++ runtime computed different values (second call)'))
    return differ, disagree


def _first_flat(c):
    run = c['runs'][0]
    if not isinstance(run, list) or len(run) < 2 or run[0][0] != 'ok' or run[1][0] != 'ok':
        return None
    return run[0][2], run[1][2]


# ---- report ---------------------------------------------------------------------------------------

class _Summary:
    def __init__(self, lines):
        self.lines = lines

    def pytest_terminal_summary(self, terminalreporter):
        terminalreporter.section('structured fuzz')
        for line in self.lines:
            terminalreporter.write_line(line)


def _repro(f):
    return f"[{f['key']}] {f['seed']}: " + '; '.join(f['muts'])


@pytest.fixture(scope='module')
def seeds(tmp_path_factory):
    return make_seeds(str(tmp_path_factory.mktemp('seeds')))


def test_seeds_are_valid_programs(seeds):
    """Every seed loads untrusted in both runtimes and gives what eager PyTorch gives (a
    fuzzer of broken seeds would test only the refusals)."""
    for name, s in seeds.items():
        got = []
        for runtime in ('cpp', 'python'):
            m = aten.load(s['path'], runtime=runtime)
            with torch.no_grad():
                got.append(m(*pickle.loads(s['inputs'])))
        torch.testing.assert_close(got[0], got[1], rtol=1e-5, atol=1e-5, msg=name)
        assert Program(s).nodes, name


def test_mutated_programs_fail_cleanly_or_agree(seeds, tmp_path, request):
    """Each mutated file: a clean error or the same results in every run, every heap and
    every runtime; never a crash, a sanitizer report, a hang or heap-dependent results."""
    t0 = time.time()
    folder = tmp_path / 'files'
    folder.mkdir()
    files, cases = plan_cases(seeds, str(folder))
    t_plan = time.time() - t0
    if not cases:
        pytest.skip('no case selected (FXCPP_STRUCT_FUZZ_ONLY matches none)')
    runner = _child_runner.Runner(HERE, FIELDS, timeout=TIMEOUT, mem_bytes=MEM_BYTES, jobs=JOBS,
                                  folder=str(tmp_path))
    results = runner.run_all(cases)
    by_case = {}
    for c in cases:
        c['runs'] = results[c['id']]
        c['outcome'], c['detail'] = judge(c['runs'], c['file']['stateful'])
        by_case[c['file']['key'], c['runtime']] = c
    again = [c for c in cases if c['outcome'] == 'uninit']
    if again:  # heap-dependent: by itself, in fresh children
        rerun = runner.run_all([dict(c) for c in again])
        for c in again:
            outcome, _ = judge(rerun[c['id']], c['file']['stateful'])
            c['detail'] += ' (the same in fresh processes)' if outcome == 'uninit' else \
                f' (by itself in fresh processes: {outcome}; an earlier case may have corrupted the heap)'
    t_children = time.time() - t0 - t_plan
    t1 = time.time()
    driver = run_driver(files, str(tmp_path))
    t_driver = time.time() - t1
    differ, disagree = cross_check(files, by_case, driver)

    counts = {}
    for c in cases:
        counts[c['outcome']] = counts.get(c['outcome'], 0) + 1
    dcounts = {}
    for o, _, _ in driver.values():
        dcounts[o] = dcounts.get(o, 0) + 1
    failures = [f"{c['outcome']} [{c['runtime']}] {_repro(c['file'])} -- {c['detail']}".replace('\n', ' ')
                for c in cases if c['outcome'] in FAILING]
    failures += [f"{o} [driver] {_repro(f)} -- {d}".replace('\n', ' ') for f in files
                 for o, d, _ in [driver.get(f['key'], ('', '', None))] if o in FAILING]
    failures += [f"differ {_repro(f)} -- {why}" for f, why in differ]
    failures += [f"disagree {_repro(f)} -- " + ', '.join(f'{k}: {v}' for k, v in o.items()) + ' | ' +
                 ' | '.join(f'{k}: {v[:160]}' for k, v in d.items() if v) for f, o, d in disagree]
    kinds = {}
    for f in files:
        for m in f['muts']:
            k = m.split(' ', 1)[0].rstrip(':')
            kinds[k] = kinds.get(k, 0) + 1
    seconds = time.time() - t0
    head = (f'structured fuzz: {len(files)} mutated files from {len(seeds)} seed files '
            f'(FXCPP_STRUCT_FUZZ_CASES={CASES}, seed {SEED}), {len(cases)} runtime cases (cpp, python; '
            f'{len(PERTURB)} heaps x 3 calls): ' + ', '.join(f'{k}: {counts.get(k, 0)}' for k in
                                                             ('ok', 'refused') + FAILING[:-1]) +
            f'; C++-only runner on {len(driver)} files: ' +
            (', '.join(f'{k}: {v}' for k, v in sorted(dcounts.items())) or 'not run') +
            f'; differ: {len(differ)}, disagree: {len(disagree)}; {seconds:.0f} s ({t_plan:.0f} s writing files, '
            f'{t_children:.0f} s in children, {t_driver:.0f} s in the C++-only runner)')
    lines = [head, 'mutations: ' + ', '.join(f'{k} {v}' for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]))]
    classes = {}
    for line in failures:  # outcome, runtime and exception type: one line per kind of finding
        m = re.match(r'(\S+) \[(\w+)\] .* -- (?:(\w+): )?', line)
        k = ' '.join(x for x in (m.groups() if m else (line[:20],)) if x)
        classes[k] = classes.get(k, 0) + 1
    if classes:
        lines.append('failures by kind: ' + ', '.join(f'{k} {v}' for k, v in sorted(classes.items(),
                                                                                   key=lambda kv: -kv[1])))
    lines += failures
    print('\n' + '\n'.join(lines))
    request.config.pluginmanager.register(_Summary(lines[:60] + ([f'... {len(lines) - 60} more'] if len(lines) > 60
                                                                 else [])), f'struct-fuzz-{id(cases)}')
    path = os.environ.get('FXCPP_STRUCT_FUZZ_REPORT')
    if path:
        with open(path, 'w') as fh:
            fh.write('\n'.join(lines) + '\n')
    if KEEP and failures:
        os.makedirs(KEEP, exist_ok=True)
        for f in files:
            if any(f"[{f['key']}]" in line for line in failures):
                shutil.copy(f['path'], os.path.join(KEEP, f['key'].replace('#', '_') + '.' + f['path'].rsplit('.')[-1]))
    shutil.rmtree(folder, ignore_errors=True)
    assert not failures, f'{len(failures)} mutated files crashed, hung, gave heap-dependent or differing results, ' \
        'or were refused by one runtime and run by another (rerun one with FXCPP_STRUCT_FUZZ_ONLY=KEY, the key in brackets):\n' + '\n'.join(failures[:60])


def test_the_harness_names_crashes_hangs_and_heap_dependent_results(tmp_path):
    """This file's child (_child_runner with its case runner) names the probes of
    test_guard_sweep, and the cases around them still run."""
    cases = [dict(id=i, key=f'probe-{k}', probe=k, path=None, inputs=None, runtime=None, mmap=None, random=False)
             for i, k in enumerate(('flip', 'segv', 'uninit', 'hang'))]
    runner = _child_runner.Runner(HERE, FIELDS, timeout=2, mem_bytes=MEM_BYTES, jobs=JOBS, folder=str(tmp_path))
    results = runner.run_all(cases)
    got = {c['key']: judge(results[c['id']], False)[0] for c in cases}
    assert got == {'probe-flip': 'uninit', 'probe-segv': 'crash', 'probe-uninit': 'uninit', 'probe-hang': 'hang'}, got

"""The .fxpt file format: save a lowered GraphModule, load it back.

The format is written down in docs/fxpt_format.md. A file is PyTorch's zip
container (what ``torch.save`` and ``torch.jit.save`` write; ``unzip -l``
lists it) with a ``graph.json`` record and one raw record per tensor storage,
stored uncompressed and 64-byte aligned. Loading runs no code from the file:
the graph is JSON, operators are looked up by name among registered schemas,
and the C++ loader (which checks every record, see Note [Loading untrusted
files] in src/torch/load.cpp) reads the tensors for both runtimes.
"""
import errno
import json
import keyword
import math
import os
import re
from typing import Any, Dict, List, Tuple

import torch

from .. import _C_torch, _torch_compat
from ..graph import Graph
from ..graph_module import GraphModule
from ..node import Node
from ..passes.shape_prop import TensorMetadata
from ._lower import PRIMITIVES

__all__ = ['save', 'load', 'FORMAT_VERSION']

FORMAT_NAME = 'fxcpp-aten'
#: The version this build writes; the loader reads every version up to it.
FORMAT_VERSION = 1

# The closed set of primitives (docs/fxpt_format.md), by their name in files.
_PRIMITIVES = {('getattr' if f is getattr else f'operator.{f.__name__}'): f for f in PRIMITIVES}
_PRIMITIVE_NAMES = {id(f): name for name, f in _PRIMITIVES.items()}

_DTYPES = {
    'float32': torch.float32, 'float64': torch.float64, 'float16': torch.float16, 'bfloat16': torch.bfloat16,
    'complex64': torch.complex64, 'complex128': torch.complex128, 'uint8': torch.uint8, 'int8': torch.int8,
    'int16': torch.int16, 'int32': torch.int32, 'int64': torch.int64, 'bool': torch.bool,
}
_DTYPE_NAMES = {v: k for k, v in _DTYPES.items()}
_LAYOUTS = {'strided': torch.strided, 'sparse_coo': torch.sparse_coo}
_LAYOUT_NAMES = {v: k for k, v in _LAYOUTS.items()}
_MEMORY_FORMATS = {'contiguous_format': torch.contiguous_format, 'preserve_format': torch.preserve_format,
                   'channels_last': torch.channels_last, 'channels_last_3d': torch.channels_last_3d}
_MEMORY_FORMAT_NAMES = {v: k for k, v in _MEMORY_FORMATS.items()}


class _Refused(ValueError):
    pass


# ---- saving ---------------------------------------------------------------------------

def _target_name(node: Node) -> str:
    t = node.target
    if isinstance(t, torch._ops.OpOverload):
        schema = t._schema
        return schema.name + ('.' + schema.overload_name if schema.overload_name else '')
    name = _PRIMITIVE_NAMES.get(id(t))
    if name is None:
        raise _Refused(
            f"cannot save node '{node.name}': its target {getattr(t, '__qualname__', t)!r} is neither an ATen "
            f"operator overload nor a runtime primitive. Lower the model first (fxcpp.aten.lower(model, *inputs)).")
    return name


def _encode(value: Any, node: Node) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if not -2**63 <= value < 2**63:
            raise _Refused(f"cannot save node '{node.name}': the int {value} does not fit in 64 bits")
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return {'float': 'nan'}
        if math.isinf(value):
            return {'float': 'inf' if value > 0 else '-inf'}
        return {'float': value}
    if isinstance(value, Node):
        return {'node': value.name}
    if isinstance(value, tuple) and not hasattr(value, '_fields'):
        return {'tuple': [_encode(v, node) for v in value]}
    if isinstance(value, list):
        return {'list': [_encode(v, node) for v in value]}
    if isinstance(value, dict):
        return {'dict': [[_encode(k, node), _encode(v, node)] for k, v in value.items()]}
    if isinstance(value, slice):
        return {'slice': [_encode(value.start, node), _encode(value.stop, node), _encode(value.step, node)]}
    if isinstance(value, torch.dtype) and value in _DTYPE_NAMES:
        return {'dtype': _DTYPE_NAMES[value]}
    if isinstance(value, torch.device):
        return {'device': str(value)}
    if isinstance(value, torch.layout) and value in _LAYOUT_NAMES:
        return {'layout': _LAYOUT_NAMES[value]}
    if isinstance(value, torch.memory_format) and value in _MEMORY_FORMAT_NAMES:
        return {'memory_format': _MEMORY_FORMAT_NAMES[value]}
    raise _Refused(f"cannot save node '{node.name}': the argument {value!r} ({type(value).__name__}) has no "
                   f"encoding in the file format (tensors must be get_attr nodes)")


def _encode_meta(tm: Any, node: Node) -> Any:
    if isinstance(tm, TensorMetadata) or type(tm).__name__ == 'TensorMetadata':
        if tm.dtype not in _DTYPE_NAMES:
            return None
        return {'tensor_meta': {
            'shape': list(tm.shape), 'dtype': _DTYPE_NAMES[tm.dtype], 'requires_grad': bool(tm.requires_grad),
            'stride': list(tm.stride),
            'memory_format': _MEMORY_FORMAT_NAMES.get(tm.memory_format) if tm.memory_format is not None else None,
            'is_quantized': bool(tm.is_quantized)}}
    if isinstance(tm, (list, tuple)):
        items = [_encode_meta(v, node) for v in tm]
        return {'list' if isinstance(tm, list) else 'tuple': items}
    if isinstance(tm, dict):
        return {'dict': [[_encode(k, node), _encode_meta(v, node)] for k, v in tm.items()]}
    return None


def _attr(root: torch.nn.Module, qualified: str) -> Any:
    obj = root
    for part in qualified.split('.'):
        obj = getattr(obj, part)
    return obj


def _class_name(gm: GraphModule) -> str:
    """The class name a file records: the module's, when loaders accept it
    (an identifier, not a keyword: Note [Names a file may use]); a module
    traced from a function or lambda (``'<lambda>'``) is recorded as
    ``'GraphModule'``."""
    name = type(gm).__name__ if type(gm).__name__ != 'GraphModule' else gm._get_name()
    return name if isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name) else 'GraphModule'


def _producer(gm: GraphModule):
    """Encodes ``gm`` (checking everything :func:`save` refuses) and returns the function
    that writes the archive to a sink."""
    from ..interop import from_torch_fx
    gm = from_torch_fx(gm)
    params = {id(p): n for n, p in gm.named_parameters()}
    buffers = {id(b): n for n, b in gm.named_buffers()}
    storages: List[Dict[str, Any]] = []
    storage_index: Dict[Tuple[int, torch.dtype], int] = {}
    payloads: List[Tuple[str, Any]] = []
    tensors: List[Dict[str, Any]] = []
    nodes: List[Dict[str, Any]] = []
    saved = set()

    for node in gm.graph.nodes:
        entry: Dict[str, Any] = {'op': node.op, 'name': node.name}
        if node.op == 'call_function':
            entry['target'] = _target_name(node)
        elif node.op in ('placeholder', 'get_attr'):
            entry['target'] = node.target
        elif node.op == 'output':
            entry['target'] = 'output'
        else:
            raise _Refused(f"cannot save node '{node.name}': it is a {node.op} node; lower the model first "
                           f"(fxcpp.aten.lower(model, *inputs))")
        entry['args'] = [_encode(a, node) for a in node.args]
        entry['kwargs'] = {k: _encode(v, node) for k, v in node.kwargs.items()}
        if 'tensor_meta' in node.meta:
            tm = _encode_meta(node.meta['tensor_meta'], node)
            if tm is not None:
                entry['meta'] = {'tensor_meta': tm}
        nodes.append(entry)

        if node.op == 'get_attr' and node.target not in saved:
            saved.add(node.target)
            t = _attr(gm, node.target)
            if not isinstance(t, torch.Tensor):
                raise _Refused(f"cannot save node '{node.name}': get_attr of '{node.target}' is a "
                               f"{type(t).__name__}, not a tensor")
            kind = 'parameter' if id(t) in params else 'buffer' if id(t) in buffers else 'constant'
            if t.dtype not in _DTYPE_NAMES:
                raise _Refused(f"cannot save '{node.target}': dtype {t.dtype} is not supported by the format")
            data = t.detach()
            if data.device.type != 'cpu' or data.is_conj() or data.is_neg() or data.layout != torch.strided:
                data = data.cpu().resolve_conj().resolve_neg().contiguous()
            storage = _torch_compat.untyped_storage(data)
            key = (storage.data_ptr(), data.dtype)
            if key not in storage_index:
                storage_index[key] = len(storages)
                record = f'data/{len(storages)}'
                storages.append({'record': record, 'nbytes': storage.nbytes()})
                payloads.append((record, storage))
            tensors.append({'name': node.target, 'kind': kind, 'dtype': _DTYPE_NAMES[data.dtype],
                            'storage': storage_index[key], 'offset': data.storage_offset(),
                            'sizes': list(data.shape), 'strides': list(data.stride()),
                            'requires_grad': bool(t.requires_grad)})

    doc = {'format': FORMAT_NAME, 'version': FORMAT_VERSION,
           'producer': {'fxcpp': '0.1.0', 'torch': torch.__version__},
           'class_name': _class_name(gm),
           'storages': storages, 'tensors': tensors, 'nodes': nodes}
    text = json.dumps(doc, separators=(',', ':'), allow_nan=False).encode()

    def produce(sink):
        writer = torch._C.PyTorchFileWriter(sink)
        writer.write_record('graph.json', text, len(text))
        for record, storage in payloads:
            _torch_compat.write_storage_record(writer, record, storage)
        writer.write_end_of_file()

    return produce


def save(gm: GraphModule, path) -> None:
    """Writes a lowered ``gm`` to ``path`` (docs/fxpt_format.md).

    Every call_function node must be an ATen overload or a primitive (see
    ``fxcpp.aten.lower``); get_attr nodes must name tensors. Tensors are moved
    to CPU and stored as PyTorch stores them: one record per storage, shared
    storages written once.
    """
    _write_file(path, _producer(gm))


class _BytesSink:
    """An in-memory sink for the archive writer (what :func:`_to_bytes` writes through)."""

    def __init__(self):
        self.chunks: List[bytes] = []

    def write(self, data) -> int:
        self.chunks.append(bytes(data))
        return len(data)


def _to_bytes(gm: GraphModule) -> bytes:
    """The file :func:`save` would write, in memory: what ``aten.compile`` hands the C++
    loader (no temporary file)."""
    sink = _BytesSink()
    _producer(gm)(sink)
    return b''.join(sink.chunks)


class _FdSink:
    """What PyTorch's archive writer writes through: it never raises (an
    exception inside the writer ends the process when the writer's destructor
    writes again), it remembers the first error instead (Note [Atomic saving]
    in src/torch/save.cpp)."""

    def __init__(self, fd: int):
        self.fd = fd
        self.error: Any = None

    def write(self, data) -> int:
        n = len(data)
        if self.error is None:
            try:
                view = memoryview(data)
                while len(view):
                    view = view[os.write(self.fd, view):]
            except BaseException as e:  # noqa: BLE001 -- KeyboardInterrupt too, raised after the writer is done
                self.error = e
        return n


def _umask() -> int:
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith('Umask:'):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _write_file(path, produce) -> None:
    """Calls ``produce(sink)`` to write the file at ``path`` atomically: the
    target holds its old content or the complete new one (Note [Atomic saving]
    in src/torch/save.cpp: a temporary file in the same directory, fsync'ed
    and renamed; a device or fifo is written directly). Raises OSError saying
    what failed; leaves no partial file."""
    import stat
    import tempfile
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not path:
        raise FileNotFoundError(errno.ENOENT, 'fxcpp.aten.save: the path is empty')
    target = os.path.realpath(path) if os.path.islink(path) else path
    try:
        st = os.stat(target)
    except (FileNotFoundError, NotADirectoryError):
        st = None

    def fail(err: BaseException, what: str):
        if isinstance(err, OSError):
            raise OSError(err.errno, f'fxcpp.aten.save: cannot {what} {path!r}: {err.strerror or err}') from err
        raise err

    if st is not None and stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, f'fxcpp.aten.save: cannot write {path!r}: it is a directory')
    if st is not None and not stat.S_ISREG(st.st_mode):
        try:
            fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError as e:
            fail(e, 'open')
        sink = _FdSink(fd)
        try:
            os.set_blocking(fd, True)
            produce(sink)
        except OSError as e:
            sink.error = sink.error or e
        finally:
            try:
                os.close(fd)
            except OSError as e:
                sink.error = sink.error or e
        if sink.error is not None:
            fail(sink.error, 'write')
        return

    directory, base = os.path.split(target)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f'.{base}.tmp-', dir=directory or '.')
    except OSError as e:
        fail(e, 'create a temporary file for')
    err: Any = None
    try:
        os.fchmod(fd, stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask())
        sink = _FdSink(fd)
        produce(sink)
        err = sink.error
        if err is None:
            os.fsync(fd)
    except OSError as e:
        err = e
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    try:
        os.close(fd)
    except OSError as e:
        err = err or e
    if err is None:
        try:
            os.replace(tmp, target)
        except OSError as e:
            err = e
    if err is not None:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        fail(err, 'write')
    try:  # the rename is durable once the directory is: best effort
        dfd = os.open(directory or '.', os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


# ---- loading --------------------------------------------------------------------------

def _operator(name: str):
    # Only registered schemas: looking up a name runs no code.
    base, _, overload = name.partition('.')
    if not torch._C._jit_get_schemas_for_operator(base):
        raise ValueError(f"fxcpp.aten.load: unknown operator '{name}'")
    ns, _, op = base.partition('::')
    return getattr(getattr(getattr(torch.ops, ns), op), overload or 'default')


def _decode(value: Any, nodes: Dict[str, Node]) -> Any:
    if not isinstance(value, dict):
        return value
    (tag, v), = value.items()
    if tag == 'node':
        return nodes[v]
    if tag == 'float':
        return float(v)
    if tag == 'list':
        return [_decode(x, nodes) for x in v]
    if tag == 'tuple':
        return tuple(_decode(x, nodes) for x in v)
    if tag == 'dict':
        return {_decode(k, nodes): _decode(x, nodes) for k, x in v}
    if tag == 'slice':
        return slice(*(_decode(x, nodes) for x in v))
    if tag == 'dtype':
        return _DTYPES[v]
    if tag == 'device':
        return torch.device(v)
    if tag == 'layout':
        return _LAYOUTS[v]
    if tag == 'memory_format':
        return _MEMORY_FORMATS[v]
    if tag == 'tensor_meta':
        return TensorMetadata(torch.Size(v['shape']), _DTYPES[v['dtype']], v['requires_grad'], tuple(v['stride']),
                              _MEMORY_FORMATS.get(v['memory_format']), v['is_quantized'], {})
    raise ValueError(f'fxcpp.aten.load: unknown value tag {tag!r}')


# Attribute names a file's tensor may not take: they would replace what the
# module itself needs (``forward``, ``graph``, ``code``, ``_runtime``, ...).
def _reserved_names(cls) -> frozenset:
    return frozenset(dir(cls)) | {'_runtime', '_parameters', '_buffers', '_modules', 'training'}


_MODULE_NAME = re.compile(r'[A-Za-z0-9_-]+')


def _check_tensor_name(name: Any, reserved: frozenset) -> List[str]:
    if not isinstance(name, str):
        raise ValueError(f'fxcpp.aten.load: malformed graph.json: a tensor name is a {type(name).__name__}, '
                         'not a string')
    parts = name.split('.')
    for part in parts:
        # identifiers, or indices (nn.Sequential's submodules are named '0', '1', ...), or, from .pt2
        # archives, module names with '-' (torchvision's regnets: 'block1-0'; code spells them
        # getattr(m, 'block1-0'))
        ok = part.isidentifier() or (part.isascii() and part.isdigit()) or _MODULE_NAME.fullmatch(part) is not None
        if not ok or part in reserved or (part.startswith('__') and part.endswith('__')):
            raise ValueError(f'fxcpp.aten.load: the tensor name {name!r} cannot be an attribute of the loaded '
                             f'module ({part!r} is neither an identifier nor an index, or is a name the module '
                             f'itself uses)')
    return parts


def _set_attr(root: torch.nn.Module, qualified: str, value: torch.Tensor, kind: str,
              reserved: frozenset = frozenset()) -> None:
    *path, leaf = _check_tensor_name(qualified, reserved)
    mod = root
    for part in path:
        sub = mod._modules.get(part)
        if sub is None:
            if hasattr(mod, part):
                raise ValueError(f'fxcpp.aten.load: the tensor name {qualified!r} needs {part!r} to be a '
                                 'submodule, but it is a tensor')
            sub = torch.nn.Module()
            mod.add_module(part, sub)
        mod = sub
    if hasattr(mod, leaf):
        raise ValueError(f'fxcpp.aten.load: the tensor name {qualified!r} clashes with an attribute the loaded '
                         'module already has (a tensor named twice, or also used as a submodule)')
    if kind == 'parameter':
        mod.register_parameter(leaf, torch.nn.Parameter(value, requires_grad=value.requires_grad))
    elif kind == 'buffer':
        mod.register_buffer(leaf, value)
    else:
        setattr(mod, leaf, value)


def _graph_module(runtime, doc: Dict[str, Any]) -> GraphModule:
    requires_grad = {t['name']: t.get('requires_grad', False) for t in doc['tensors']}
    root = torch.nn.Module()
    reserved = _reserved_names(GraphModule)
    for name, kind, tensor in runtime.tensors():
        if requires_grad.get(name) and tensor.is_floating_point():
            tensor.requires_grad_(True)
        _set_attr(root, name, tensor, kind, reserved)
    graph = Graph()
    nodes: Dict[str, Node] = {}
    for entry in doc['nodes']:
        op = entry['op']
        target = entry['target']
        if op == 'call_function':
            target = _operator(target) if '::' in target else _PRIMITIVES[target]
        args = tuple(_decode(a, nodes) for a in entry['args'])
        kwargs = {k: _decode(v, nodes) for k, v in entry.get('kwargs', {}).items()}
        node = graph.create_node(op, target, args, kwargs, name=entry['name'])
        if node.name != entry['name']:
            node.name = entry['name']
        meta = entry.get('meta', {})
        if 'tensor_meta' in meta:
            node.meta['tensor_meta'] = _decode(meta['tensor_meta'], nodes)
        nodes[entry['name']] = node
    class_name = doc.get('class_name', 'GraphModule')
    if not isinstance(class_name, str) or not class_name.isidentifier():
        raise ValueError(f'fxcpp.aten.load: malformed graph.json: class_name {class_name!r} is not an identifier')
    return GraphModule(root, graph, class_name)


# Note [Python load path]
# ~~~~~~~~~~~~~~~~~~~~~~~
# The file is read once, into memory; the C++ loader checks those bytes and
# reads the tensors from them, and the graph document the Python runtime
# rebuilds its graph from comes from the same bytes
# (``_C_torch.load(data, *, plan_memory, trusted)``, ``_C_torch.graph_json(data)``),
# so what is checked is what runs (no second read that a changed file could
# answer differently). Whatever the file holds, load raises ValueError (or
# OSError when the file cannot be read): errors of the Python side that the
# C++ checks let through are turned into ValueError too.


def _graph_doc(data: bytes) -> Dict[str, Any]:
    doc = json.loads(_C_torch.graph_json(data))
    if not isinstance(doc, dict):
        raise ValueError('fxcpp.aten.load: malformed graph.json: not an object')
    return doc


def _read(path) -> bytes:
    with open(path, 'rb') as f:
        return f.read()


_MALFORMED = (KeyError, TypeError, AttributeError, IndexError, RuntimeError, SyntaxError, OverflowError,
              RecursionError, UnicodeError, LookupError, EOFError)


def load(path, runtime: str = 'python', plan_memory: bool = True, trusted: bool = False):
    """Reads a file written by :func:`save`, or a ``.pt2`` archive written by
    ``torch.export.save`` (told apart by content; docs/pt2_format.md).

    ``runtime='python'`` returns a GraphModule (same ``code`` as the saved
    one); ``runtime='cpp'`` returns a :class:`fxcpp.aten.CppModule` whose
    forward runs the whole graph in the C++ runtime with the GIL released.
    Either way the file is read once and the C++ loader checks it whole and
    reads the tensors; no code from the file runs. A malformed or newer file
    raises ValueError saying what is wrong; a file that cannot be read raises
    OSError. ``plan_memory=False`` makes the C++ runtime allocate every result
    as eager PyTorch does (Note [Memory planning] in src/torch/plan.cpp).
    ``trusted=True`` lifts the restrictions on what a file may ask the
    runtime to do: only for files you made yourself (docs/fxpt_format.md).
    """
    if runtime not in ('python', 'cpp'):
        raise ValueError(f"fxcpp.aten.load: runtime must be 'python' or 'cpp', not {runtime!r}")
    return _load_bytes(_read(path), runtime, plan_memory, trusted)


def _load_bytes(data: bytes, runtime: str = 'python', plan_memory: bool = True, trusted: bool = False):
    """:func:`load` of a file's bytes already in memory."""
    from ._runtime import CppModule
    try:
        rt = _C_torch.load(data, plan_memory=plan_memory, trusted=trusted)
        if runtime == 'cpp':
            return CppModule(rt)
        return _graph_module(rt, _graph_doc(data))
    except ValueError:
        raise
    except _MALFORMED as e:
        raise ValueError(f'fxcpp.aten.load: malformed file: {type(e).__name__}: {e}') from e

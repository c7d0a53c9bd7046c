"""fxcpp.aten._schema: ATen overload resolution by schema (Note [Overload resolution]).

Note [Overload resolution]
~~~~~~~~~~~~~~~~~~~~~~~~~~
``resolve(name, args, kwargs)`` picks the ``torch.ops.aten.<name>.<overload>``
whose schema accepts the actual arguments, the way PyTorch's Python argument
parser picks a signature, but at lowering time and from the schemas torch
exposes (``OpOverloadPacket.overloads()`` and ``OpOverload._schema``):

* positional arguments bind to the schema's positional parameters in order,
  keywords by name (``input=`` also names a first parameter called ``self``);
* an unsized ``int[]`` that is the last positional parameter takes varargs
  (``x.view(a, b)``, ``x.permute(0, 2, 1)``) and a single int;
* a single int (or float/bool) given for a sized list ``int[2]`` is repeated
  to the list's size (the C++ runtime calls ops boxed, which does not
  broadcast);
* every argument must match its declared type: a tensor for ``Tensor``, a
  Python number for ``Scalar``, an int (not a tensor) for ``int``, a
  ``torch.dtype`` for ``ScalarType``, ... The score of a binding is
  (worst argument score, sum of scores); the best binding wins, the first
  overload on ties. A Python number given for a ``Tensor`` parameter only
  binds when no overload takes it as a scalar; it then becomes an
  ``aten.scalar_tensor`` node.

The declared types come from ``str(schema)``: the JIT's own ``Argument.type``
spells ``ScalarType``, ``Layout`` and ``MemoryFormat`` as ``int``.
The result of a binding is the positional argument list (trailing arguments
equal to the schema's default dropped) and the keyword-only arguments that
differ from their defaults.
"""
import re
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import torch

__all__ = ['Param', 'Signature', 'signatures', 'bind', 'NoMatch', 'ScalarAsTensor']


class NoMatch(Exception):
    """The arguments do not bind to a signature (internal)."""


class ScalarAsTensor:
    """A Python number bound to a ``Tensor`` parameter (becomes scalar_tensor)."""
    __slots__ = ('value',)

    def __init__(self, value):
        self.value = value


class Param(NamedTuple):
    name: str
    ty: tuple          # ('base', name) | ('opt', ty) | ('list', ty, N or None)
    kwarg_only: bool
    has_default: bool
    default: Any


class Signature(NamedTuple):
    op: Any            # torch._ops.OpOverload
    params: Tuple[Param, ...]
    by_name: Dict[str, int]
    n_positional: int
    mutable: bool


def _parse_type(s: str) -> tuple:
    s = re.sub(r'\([^)]*\)', '', s).strip()   # alias annotations: Tensor(a!) -> Tensor
    if s.endswith('?'):
        return ('opt', _parse_type(s[:-1]))
    if s.endswith(']'):
        lb = s.rfind('[')
        n = s[lb + 1:-1]
        return ('list', _parse_type(s[:lb]), int(n) if n else None)
    return ('base', s)


def _split_decls(s: str) -> List[str]:
    out, depth, cur = [], 0, ''
    for ch in s:
        if ch in '([':
            depth += 1
        elif ch in ')]':
            depth -= 1
        if ch == ',' and depth == 0:
            out.append(cur.strip())
            cur = ''
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _declared_types(schema) -> Optional[List[tuple]]:
    text = str(schema)
    start = text.index('(')
    depth = 0
    for i in range(start, len(text)):
        if text[i] == '(':
            depth += 1
        elif text[i] == ')':
            depth -= 1
            if depth == 0:
                end = i
                break
    else:
        return None
    decls = [d for d in _split_decls(text[start + 1:end]) if d != '*']
    types = []
    for d in decls:
        d = d.split('=', 1)[0].strip()
        # "TYPE NAME": the type may contain spaces inside alias sets ("Tensor(a -> *)")
        depth, cut = 0, -1
        for i, ch in enumerate(d):
            if ch in '([':
                depth += 1
            elif ch in ')]':
                depth -= 1
            elif ch == ' ' and depth == 0:
                cut = i
        if cut < 0:
            return None
        types.append(_parse_type(d[:cut]))
    return types


_SIG_CACHE: Dict[str, List[Signature]] = {}


def signatures(name: str, namespace: str = 'aten') -> List[Signature]:
    """The signatures of every overload of ``torch.ops.<namespace>.<name>``
    (``[]`` when there is no such operator)."""
    key = namespace + '::' + name
    sigs = _SIG_CACHE.get(key)
    if sigs is not None:
        return sigs
    sigs = []
    try:
        packet = getattr(getattr(torch.ops, namespace), name)
        overloads = packet.overloads()
    except (AttributeError, RuntimeError):
        overloads = []
        packet = None
    for ov in overloads:
        try:
            op = getattr(packet, ov)
            schema = op._schema
        except (AttributeError, RuntimeError):
            continue
        sigs.append(signature_of(op))
    sigs = [s for s in sigs if s is not None]
    _SIG_CACHE[key] = sigs
    return sigs


_OP_SIG_CACHE: Dict[Any, Optional[Signature]] = {}


def signature_of(op) -> Optional[Signature]:
    """The Signature of one OpOverload (None when its schema is not understood)."""
    if op in _OP_SIG_CACHE:
        return _OP_SIG_CACHE[op]
    schema = op._schema
    types = _declared_types(schema)
    sig = None
    if types is not None and len(types) == len(schema.arguments):
        params = []
        for a, ty in zip(schema.arguments, types):
            hd = a.has_default_value()
            params.append(Param(a.name, ty, a.kwarg_only, hd, a.default_value if hd else None))
        # an op that writes to an out= argument is never what a call means
        if not any(p.name == 'out' for p in params) and not schema.name.startswith('aten::_foreach'):
            sig = Signature(op, tuple(params), {p.name: i for i, p in enumerate(params)},
                            sum(1 for p in params if not p.kwarg_only), bool(schema.is_mutable))
    _OP_SIG_CACHE[op] = sig
    return sig


# --- matching values against declared types -------------------------------

def _kind(v) -> str:
    """The abstract type of an argument value (proxies answer through `_fx_kind`)."""
    k = getattr(type(v), '_fx_kind', None)
    if k is not None:
        return v._fx_kind_of()
    if isinstance(v, torch.Tensor):
        return 'Tensor'
    if v is None:
        return 'None'
    if isinstance(v, bool):
        return 'bool'
    if isinstance(v, int):
        return 'int'
    if isinstance(v, float):
        return 'float'
    if isinstance(v, complex):
        return 'complex'
    if isinstance(v, str):
        return 'str'
    if isinstance(v, torch.dtype):
        return 'ScalarType'
    if isinstance(v, torch.layout):
        return 'Layout'
    if isinstance(v, torch.device):
        return 'Device'
    if isinstance(v, torch.memory_format):
        return 'MemoryFormat'
    if isinstance(v, (list, tuple)):
        return 'list'
    return 'other'


_NUMBER = ('int', 'float', 'bool', 'complex')


def match(ty: tuple, v) -> Tuple[int, Any]:
    """(score, normalized value) for ``v`` given to a parameter of type ``ty``."""
    tag = ty[0]
    k = _kind(v)
    if tag == 'opt':
        if k == 'None':
            return 3, None
        return match(ty[1], v)
    if tag == 'list':
        elem, n = ty[1], ty[2]
        if k == 'list':
            if not v:
                return 3, []
            scores, vals = [], []
            for e in v:
                s, nv = match(elem, e)
                scores.append(s)
                vals.append(nv)
            return min(scores), vals
        if n and k in _NUMBER and elem[0] == 'base' and elem[1] in ('int', 'SymInt', 'float', 'bool'):
            s, nv = match(elem, v)
            return s - 1, [nv] * n
        raise NoMatch
    base = ty[1]
    if base == 'Tensor':
        if k == 'Tensor':
            return 3, v
        if k in ('int', 'float', 'bool'):
            return -10, ScalarAsTensor(v)
        raise NoMatch
    if base in ('int', 'SymInt'):
        if k == 'int':
            return 3, v
        if k == 'bool':
            return 1, v
        raise NoMatch
    if base in ('float', 'SymFloat'):
        if k == 'float':
            return 3, v
        if k == 'int':
            return 2, v
        raise NoMatch
    if base == 'bool':
        if k == 'bool':
            return 3, v
        raise NoMatch
    if base == 'Scalar':
        if k in ('int', 'float', 'complex'):
            return 2, v
        if k == 'bool':
            return 1, v
        raise NoMatch
    if base == 'complex':
        if k == 'complex':
            return 3, v
        if k in ('int', 'float'):
            return 1, v
        raise NoMatch
    if base == 'str':
        if k == 'str':
            return 3, v
        raise NoMatch
    if base == 'Device':
        if k == 'Device':
            return 3, v
        if k == 'str':
            return 2, torch.device(v)
        raise NoMatch
    if base in ('ScalarType', 'Layout', 'MemoryFormat'):
        if k == base:
            return 3, v
        raise NoMatch
    raise NoMatch  # Generator (only None), Dimname, t, Any, Storage, ...


def _is_int_like(v) -> bool:
    return _kind(v) == 'int'


def _same_default(p: Param, v) -> bool:
    if not p.has_default:
        return False
    d = p.default
    if d is None:
        return v is None
    if v is None or getattr(type(v), '_fx_kind', None) is not None:
        return False
    base = p.ty
    while base[0] == 'opt':
        base = base[1]
    if base[0] == 'base' and base[1] in ('ScalarType', 'Layout', 'MemoryFormat', 'Device', 'Tensor'):
        return False
    if isinstance(v, list):
        if not isinstance(d, list) or len(d) != len(v):
            return False
        for a, b in zip(v, d):
            if getattr(type(a), '_fx_kind', None) is not None or isinstance(a, bool) != isinstance(b, bool) \
                    or not isinstance(a, (int, float)) or a != b:
                return False
        return True
    if isinstance(v, (bool, int, float, str)) and isinstance(d, (bool, int, float, str)):
        if isinstance(v, bool) != isinstance(d, bool):
            return False
        return v == d
    return False


def bind(sig: Signature, args, kwargs) -> Tuple[Tuple[int, int], list, dict]:
    """Bind ``args``/``kwargs`` to ``sig``: (score, positional list, keyword dict).
    Raises NoMatch."""
    params = sig.params
    npos = sig.n_positional
    given: Dict[str, Any] = {}
    i = 0
    args = list(args)
    while i < len(args):
        if i >= npos:
            raise NoMatch
        p = params[i]
        ty = p.ty
        if (ty[0] == 'list' and ty[2] is None and ty[1] == ('base', 'int') or ty == ('list', ('base', 'SymInt'), None)) \
                and i == npos - 1 and _is_int_like(args[i]) and all(_is_int_like(a) for a in args[i:]):
            given[p.name] = list(args[i:])
            i = len(args)
            break
        given[p.name] = args[i]
        i += 1
    for k, v in kwargs.items():
        name = k
        if name not in sig.by_name:
            if name == 'input' and params and params[0].name == 'self' and 'self' not in given:
                name = 'self'
            else:
                raise NoMatch
        if name in given:
            raise NoMatch
        given[name] = v
    scores = []
    norm: Dict[str, Any] = {}
    for p in params:
        if p.name in given:
            s, nv = match(p.ty, given[p.name])
            scores.append(s)
            norm[p.name] = nv
        elif not p.has_default:
            raise NoMatch
    # positional: up to the last one given whose value differs from the default
    last = -1
    for j in range(npos):
        p = params[j]
        if p.name in norm and not _same_default(p, norm[p.name]):
            last = j
    pos = []
    for j in range(last + 1):
        p = params[j]
        pos.append(norm[p.name] if p.name in norm else p.default)
    kw = {}
    for p in params[npos:]:
        if p.name in norm and not _same_default(p, norm[p.name]):
            kw[p.name] = norm[p.name]
    score = (min(scores) if scores else 3, sum(scores))
    return score, pos, kw


def resolve(name: str, args, kwargs, namespace: str = 'aten'):
    """The best (signature, positional args, keyword args) for calling aten
    ``name`` with these arguments, or raise NoMatch (no overload binds)."""
    best = None
    for sig in signatures(name, namespace):
        try:
            score, pos, kw = bind(sig, args, kwargs)
        except NoMatch:
            continue
        if best is None or score > best[0]:
            best = (score, sig, pos, kw)
    if best is None:
        raise NoMatch
    return best[1], best[2], best[3]

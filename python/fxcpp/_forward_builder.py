"""Building a GraphModule's generated ``forward`` from its source text.

``GraphModule.recompile`` hands the generated source here; this module turns
it into the ``forward`` function, keeping the source retrievable:

* Sources are registered under unique pseudo file names
  (``<eval_with_key>.N``) as lazy :mod:`linecache` entries, so tracebacks,
  ``inspect.getsource`` and TorchScript can all see them.
* Built code objects are memoised by source text: rebuilding / copying /
  unpickling a GraphModule whose code did not change skips the work.
* When the source is in the straight-line subset codegen writes (Note
  [Direct bytecode] in ``src/backends/cpython311/assembler.h``), the C++
  backend assembles the very code object CPython 3.11's compiler would
  produce, and ``compile()`` is not called.  ``_DIRECT_BYTECODE = False``
  turns this off; ``_VERIFY_BYTECODE = True`` compares every assembled code
  object with ``compile()``'s (the test suite runs that way).  Both switches
  are also settable as ``fxcpp.graph_module._DIRECT_BYTECODE`` /
  ``_VERIFY_BYTECODE``, where the README documents them.
* The first use in each process assembles a probe program and compares it
  with ``compile()``; a difference turns the fast path off with a warning.
* ``_LazyForward`` stands in for a ``forward`` that is built on first lookup.

Names torch.fx has in ``torch.fx.graph_module`` (``_EvalCacheLoader``,
``_loader``, ``_exec_with_source``, ``_forward_from_src``) are re-exported
there.
"""
import builtins
import enum
import functools
import linecache
import warnings
from types import CodeType, FunctionType
from typing import Any, Dict, Optional, Tuple

from . import _C

# Note [Direct bytecode]: switches (see the module docstring).
_DIRECT_BYTECODE = True
_VERIFY_BYTECODE = False
_direct_bytecode_state: Optional[bool] = None   # the one-time probe's verdict

# Why the assembler handed a source back to compile(): the backend's
# cpython311::Refusal codes (NONE = 0 means assembled).  Dispatch on these,
# never on the accompanying text.
Refusal = enum.IntEnum('Refusal', [(name.upper(), code) for code, name in enumerate(_C._assembler_refusals())])


def _assemble(src: str, key: str) -> Tuple['Refusal', Any]:
    """``(Refusal.NONE, (code, params, return_annotation, prologue))`` for a
    source in the subset, else ``(refusal, detail text)``."""
    code, result = _C._assemble_function(src, key)
    return Refusal(code), result


# ---------------------------------------------------------------------------
# Executing generated source while keeping it retrievable
# ---------------------------------------------------------------------------

class _EvalCacheLoader(object):
    """A PEP 302 style loader that serves generated sources to linecache.

    ``eval_cache`` maps the pseudo file name to its source text.
    """

    # maximum number of memoised code objects (sources stay in eval_cache)
    _MAX_COMPILED = 2048

    def __init__(self):
        self.eval_cache: Dict[str, str] = {}
        self.next_id = 0
        self._compiled: Dict[str, Tuple[str, CodeType]] = {}
        # source -> (key, (code, params, return annotation, prologue)) of assembled functions
        self._assembled: Dict[str, Tuple[str, tuple]] = {}

    def cache(self, src: str, globals: Optional[Dict[str, Any]] = None,
              co_fields: Optional[Dict[str, Any]] = None) -> str:
        """Remember ``src`` under a fresh pseudo file name and register a lazy
        linecache entry for it.  ``globals`` is accepted for API compatibility
        and never mutated.  Returns the pseudo file name (Note [Code object file names])."""
        key = _with_co_fields(self._get_key(), co_fields)
        self.eval_cache[key] = src
        self._register(key)
        return key

    def _register(self, key: str) -> None:
        # The same shape ``linecache.lazycache`` produces: a 1-tuple holding a
        # no-argument callable returning the source.  It is realised on the
        # first ``linecache.getlines(key)``.
        linecache.cache[key] = (functools.partial(self.get_source, key),)

    # linecache asks loaders for source through get_source (PEP 302 protocol).
    def get_source(self, module_name: str) -> Optional[str]:
        return self.eval_cache.get(module_name)

    # Note [Shared eval keys]: torch.fx registers its generated sources under
    # the same ``<eval_with_key>.N`` names, so one counter numbers both
    # libraries' keys: with two counters a process that builds modules with
    # both gets colliding keys, and linecache (hence tracebacks and
    # inspect.getsource) serves one library's source for the other's code.
    @staticmethod
    def _shared_counter():
        try:
            from torch.fx.graph_module import _loader
            return _loader if isinstance(getattr(_loader, 'next_id', None), int) else None
        except ImportError:
            return None

    def _peek_key(self) -> str:
        shared = self._shared_counter()
        return f'<eval_with_key>.{(shared or self).next_id}'

    def _get_key(self) -> str:
        owner = self._shared_counter() or self
        key = f'<eval_with_key>.{owner.next_id}'
        owner.next_id += 1
        return key

    def _hit(self, memo: Dict[str, Tuple[str, Any]], src: str) -> Optional[Any]:
        """The memoised value for ``src``, re-registering its source with
        linecache if that was cleared (e.g. ``linecache.clearcache()``)."""
        hit = memo.get(src)
        if hit is None:
            return None
        if hit[0] not in linecache.cache:
            self._register(hit[0])
        return hit[1]

    def _remember(self, memo: Dict[str, Tuple[str, Any]], src: str, key: str, value: Any) -> None:
        if len(memo) >= self._MAX_COMPILED:
            memo.pop(next(iter(memo)), None)
        memo[src] = (key, value)

    def compile(self, src: str, co_fields: Optional[Dict[str, Any]] = None) -> CodeType:
        """Compile ``src`` (memoised on the source text and ``co_fields``)."""
        memo_key = _memo_key(src, co_fields)
        code = self._hit(self._compiled, memo_key)
        if code is None:
            key = self.cache(src, None, co_fields)
            code = compile(src, key, 'exec')
            self._remember(self._compiled, memo_key, key, code)
        return code

    def function(self, src: str, namespace: Dict[str, Any],
                 co_fields: Optional[Dict[str, Any]] = None) -> Optional[FunctionType]:
        """The function ``src`` defines, built from directly assembled bytecode
        with ``namespace`` as its globals; None when ``src`` needs ``compile()``
        (Note [Direct bytecode])."""
        if not _direct_bytecode_enabled():
            return None
        memo_key = _memo_key(src, co_fields)
        assembled = self._hit(self._assembled, memo_key)
        if assembled is None:
            if memo_key in self._compiled:
                return None
            key = _with_co_fields(self._peek_key(), co_fields)   # what cache() will hand out
            refusal, assembled = _assemble(src, key)
            if refusal is not Refusal.NONE:     # outside the subset: compile()
                return None
            if _VERIFY_BYTECODE:
                _check_assembled(src, key, assembled[0])
            self._remember(self._assembled, memo_key, self.cache(src, None, co_fields), assembled)
        return _make_function(assembled, namespace)


# Note [Code object file names]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Generated code is registered with linecache under "<eval_with_key>.N". torch.fx
# 2.x lets the graph say where its program came from (Graph._co_fields, which
# Tracer.trace fills from the traced function's code object): with co_filename,
# co_firstlineno and co_name the name becomes "<eval_with_key>.N from
# <file>:<line> in <name>", so tracebacks and profilers name the user's file;
# with co_filename alone it is that file name. The memo of compiled and
# assembled code is keyed on the source and those fields together.
def _with_co_fields(key: str, co_fields: Optional[Dict[str, Any]]) -> str:
    if co_fields and 'co_filename' in co_fields:
        if 'co_firstlineno' not in co_fields or 'co_name' not in co_fields:
            return co_fields['co_filename']
        return f"{key} from {co_fields['co_filename']}:{co_fields['co_firstlineno']} in {co_fields['co_name']}"
    return key


def _memo_key(src: str, co_fields: Optional[Dict[str, Any]]):
    if not co_fields:
        return src
    return (src, co_fields.get('co_filename'), co_fields.get('co_firstlineno'), co_fields.get('co_name'))


_loader = _EvalCacheLoader()


# ---------------------------------------------------------------------------
# The first-use probe
# ---------------------------------------------------------------------------

def _probe_source() -> str:
    """A program covering every instruction and location-table shape the
    assembler emits: LOAD_METHOD and plain calls with keywords, PUSH_NULL
    folded into LOAD_GLOBAL, constant and built lists (LIST_EXTEND),
    BUILD_CONST_KEY_MAP and BUILD_MAP, folded constants, every operator kind,
    COMPARE_OP / IS_OP / CONTAINS_OP, an expression statement, a 31-item tuple (LIST_APPEND and
    LIST_TO_TUPLE), a chained store to 257 locals (COPY, and EXTENDED_ARG for
    the locals past 255) on a line long enough for long location entries, and
    gaps of two and three lines (a one-line entry with line delta 2, a long
    entry by line delta).  Cost, once per process: about 0.3 ms warm, 0.55 ms
    cold, mostly compile() of the probe."""
    many = ' = '.join(f'v{i}' for i in range(257))   # locals 14..270: past 255
    wide = ', '.join(['view'] * 30 + ['y'])
    return (
        '\n\n\n'
        'def forward(self, x, y : torch.Tensor = None):\n'
        '    add = x + 1;  x = None\n'
        '    relu = torch.relu(add, inplace = False);  add = None\n'
        '    view = relu.view(1, -1, k = (2, 3));  relu = None\n'
        '    getattr_1 = getattr(self.layer1, "0")(view, [1, 2, 3], [view, 2], (view, 1.5), {\'a\': view}, '
        '{\'a\': 1, \'b\': view})\n'
        '    getitem = getattr_1[(slice(None, 2, None), 0)];  getattr_1 = None\n'
        '\n'
        '    neg = -getitem ** 2 // ~view @ +y;  getitem = None\n'
        '    eq = neg == 1.0;  lt = neg <= view;  is_ = neg is not None;  in_ = y not in (1, 2);  print(eq)\n'
        f'    wide = ({wide})\n'
        '\n\n'
        f'    {many} = eq\n'
        '    return (eq, lt, is_, in_, wide, v256, v0, None, \'tail\\u00e9\')\n'
        '    ')


_PROBE_SRC = _probe_source()


def _check_assembled(src: str, key: str, code: CodeType) -> None:
    module = compile(src, key, 'exec')
    ref = next(c for c in module.co_consts if isinstance(c, CodeType))
    fields = ('co_stacksize', 'co_nlocals', 'co_qualname', 'co_filename', 'co_linetable', 'co_code', 'co_consts')
    if code != ref or any(getattr(code, f) != getattr(ref, f) for f in fields):
        raise AssertionError('fxcpp: directly assembled bytecode differs from compile() for this source '
                             '(Note [Direct bytecode]); please report it:\n' + src)


def _direct_bytecode_enabled() -> bool:
    global _direct_bytecode_state
    if not _DIRECT_BYTECODE:
        return False
    if _direct_bytecode_state is None:
        refusal, probe = _assemble(_PROBE_SRC, '<fxcpp probe>')
        if refusal is Refusal.UNSUPPORTED_INTERPRETER:   # not CPython 3.11: quietly compile()
            _direct_bytecode_state = False
            return False
        try:
            if refusal is not Refusal.NONE:
                raise AssertionError(f'the probe was refused ({refusal.name.lower()}: {probe})')
            _check_assembled(_PROBE_SRC, '<fxcpp probe>', probe[0])
            _direct_bytecode_state = True
        except AssertionError as e:
            _direct_bytecode_state = False
            warnings.warn(f'fxcpp: direct bytecode disabled, compile() is used instead ({e})')
    return _direct_bytecode_state


# ---------------------------------------------------------------------------
# Functions from sources
# ---------------------------------------------------------------------------

def _make_function(assembled: tuple, namespace: Dict[str, Any]) -> FunctionType:
    """Executing the ``def``: the function object, its defaults and its
    annotations, evaluated in ``namespace`` (defaults first, as CPython does)."""
    code, params, return_annotation, prologue = assembled
    # exec() would insert the builtins the function resolves names through
    namespace.setdefault('__builtins__', builtins.__dict__)
    if prologue is not None:   # module-level statements before the def
        exec(compile(prologue, code.co_filename, 'exec'), namespace)
    fn = FunctionType(code, namespace)
    defaults = [d for _, _, d in params if d is not None]
    annotated = [(name, a) for name, a, _ in params if a is not None]
    if return_annotation is not None:
        annotated.append(('return', return_annotation))
    if defaults or annotated:
        text = '(({}), ({}))'.format(''.join(f'({d}),' for d in defaults),
                                     ''.join(f'({a}),' for _, a in annotated))
        default_values, annotation_values = eval(text, namespace)
        if defaults:
            fn.__defaults__ = default_values
        if annotated:
            fn.__annotations__ = {name: v for (name, _), v in zip(annotated, annotation_values)}
    return fn


def _exec_with_source(src: str, globals: Dict[str, Any], co_fields: Optional[Dict[str, Any]] = None):
    exec(_loader.compile(src, co_fields), globals)


def _forward_from_src(src: str, globals: Dict[str, Any], co_fields: Optional[Dict[str, Any]] = None):
    # work on a copy: the caller's globals stay untouched
    namespace = dict(globals)
    fn = _loader.function(src, namespace, co_fields)
    if fn is not None:
        return fn
    _exec_with_source(src, namespace, co_fields)
    return namespace.pop('forward')


class _LazyForward:
    """Class attribute standing in for a not yet built ``forward``.

    On first lookup it builds the function from the source and replaces
    itself on the owning class with it, so later lookups cost nothing extra."""
    __slots__ = ('src', 'globals', 'owner', 'co_fields')

    def __init__(self, src: str, globals: Dict[str, Any], owner: type, co_fields: Optional[Dict[str, Any]] = None):
        self.src = src
        self.globals = globals
        self.owner = owner
        self.co_fields = co_fields

    def materialize(self):
        fn = _forward_from_src(self.src, self.globals, self.co_fields)
        owner = self.owner
        if owner.__dict__.get('forward') is self:
            owner.forward = fn
        return fn

    def __get__(self, obj, objtype=None):
        fn = self.materialize()
        return fn if obj is None else fn.__get__(obj, objtype)

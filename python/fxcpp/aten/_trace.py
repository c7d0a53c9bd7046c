"""fxcpp.aten._trace: value-carrying proxies and the lowering context.

Note [Value-carrying proxies]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Lowering runs the model once on its example inputs, with every value that
depends on an input wrapped in a proxy that holds both the graph node that
computes it and the real value (computed by running each emitted ATen
overload on the real example values as it is emitted, so the value is
exactly what the lowered graph computes).

* ``TensorProxy`` stands for a tensor. It says it is a ``torch.Tensor``
  (``isinstance`` works) and has ``__torch_function__``, so C builtins
  (``torch.conv2d``, ``torch._C._nn.linear``, ``Tensor.view``) reach
  ``LoweringContext.torch_function``, which resolves them to an ATen
  overload by schema (Note [Overload resolution]). Methods and operators on
  the proxy go to ``LoweringContext.method``.
* ``ScalarProxy`` stands for a Python int/float/bool computed in the graph:
  sizes (``x.shape[0]``, ``x.size(1)``) and arithmetic on them, recorded
  with ``operator.add/sub/mul/floordiv/truediv/mod/neg``. Comparisons,
  ``bool()``, ``int()``, ``float()`` and indexing answer with the concrete
  value: Python control flow specializes, shape arithmetic stays symbolic.
  Scalars read from tensor data (``x.item()``) refuse to specialize.
* Number inputs (an int, float or bool example input) are ScalarProxies of
  their placeholder: what the model computes with them stays symbolic, so
  the lowered graph takes them at call time like any input. Python control
  flow on them (``if flag:``, ``range(n)``, ``math.sqrt(s)``) cannot be
  kept and refuses with a LoweringError naming the input (baking in the
  example value would silently ignore every later value).

``torch.nn.functional`` and ``torch.functional`` are Python; their bodies run
with the proxies because, while lowering, the ``has_torch_function*`` names
those modules imported answer False (``patched()``), so the inner builtins
are what reaches ``__torch_function__``. Factory functions (``torch.zeros``,
``torch.arange``, ...) have no tensor argument to dispatch on; ``patched()``
wraps them so symbolic sizes given to them are recorded too.
"""
import builtins
import contextlib
import functools
import operator
import types
from typing import Any, Dict, List, Optional

import torch

from .. import _C_torch
from . import _schema
from ._schema import NoMatch, ScalarAsTensor

__all__ = ['LoweringError', 'LoweringContext', 'TensorProxy', 'ScalarProxy']


class LoweringError(RuntimeError):
    """A part of the model cannot be lowered to ATen. ``node`` and ``target``
    name the graph node and its target when known."""

    def __init__(self, msg, node=None, target=None):
        super().__init__(msg)
        self.node = node
        self.target = target
        self.reason = msg


def _target_repr(t) -> str:
    if isinstance(t, str):
        return repr(t)
    if isinstance(t, type):
        return f'{t.__module__}.{t.__qualname__}'
    mod = getattr(t, '__module__', None)
    name = getattr(t, '__qualname__', None) or getattr(t, '__name__', None)
    if name is not None:
        return f'{mod}.{name}' if mod else name
    return repr(t)


# ---------------------------------------------------------------------------
# proxies

class _Proxy(_C_torch.ProxyBase):
    # The base is a THPVariable layout with an undefined tensor: LibTorch's C code takes a
    # TensorProxy for a tensor (its __class__) and reads it as one (Note [Proxies that say
    # they are tensors] in src/bindings/torch/runtime_bindings.cpp).
    __slots__ = ('ctx', 'node', 'value')
    _fx_kind = True

    def __init__(self, ctx, node, value):
        self.ctx = ctx
        self.node = node
        self.value = value


def _tensor_op(name):
    def f(self, *args):
        return self.ctx.method(name, self, *args)
    f.__name__ = name
    return f


class TensorProxy(_Proxy):
    """A tensor computed by the lowered graph (Note [Value-carrying proxies])."""
    __slots__ = ()

    def _fx_kind_of(self):
        return 'Tensor'

    @property
    def __class__(self):  # isinstance(p, torch.Tensor) is True
        return torch.Tensor

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        ctx = _active()
        return ctx.torch_function(func, args, kwargs or {})

    def __repr__(self):
        return f'TensorProxy({self.node.name}, shape={tuple(self.value.shape)}, dtype={self.value.dtype})'

    def __getattr__(self, name):
        if name.startswith('__') and name.endswith('__'):
            raise AttributeError(name)
        return self.ctx.tensor_attr(self, name)

    @property
    def shape(self):
        return self.ctx.shape_of(self)

    def size(self, dim=None):
        shape = self.ctx.shape_of(self)
        if dim is None:
            return shape
        return shape[self.ctx.concrete(dim)]

    def dim(self):
        return self.value.dim()

    ndimension = dim

    @property
    def ndim(self):
        return self.value.dim()

    def __bool__(self):
        raise LoweringError('the truth value of a tensor depends on its data (data-dependent control flow); '
                            'rewrite it with torch.where or keep this part in Python')

    def __index__(self):
        raise LoweringError('a tensor used as a Python int depends on its data; keep this part in Python')

    __int__ = __index__

    def __float__(self):
        raise LoweringError('a tensor used as a Python float depends on its data; keep this part in Python')

    def __len__(self):
        return self.value.shape[0]

    def __iter__(self):
        return iter(self.ctx.method('unbind', self, 0))

    __hash__ = object.__hash__

    def __setitem__(self, idx, value):
        self.ctx.method('__setitem__', self, idx, value)


for _n in ('add', 'sub', 'mul', 'truediv', 'floordiv', 'mod', 'pow', 'matmul', 'and', 'or', 'xor',
           'lshift', 'rshift', 'eq', 'ne', 'lt', 'le', 'gt', 'ge',
           'radd', 'rsub', 'rmul', 'rtruediv', 'rfloordiv', 'rmod', 'rpow', 'rmatmul', 'rand', 'ror', 'rxor',
           'iadd', 'isub', 'imul', 'itruediv', 'ifloordiv', 'imod', 'ipow', 'iand', 'ior', 'ixor',
           'neg', 'pos', 'abs', 'invert', 'getitem'):
    setattr(TensorProxy, f'__{_n}__', _tensor_op(f'__{_n}__'))


class ScalarProxy(_Proxy):
    """An int/float/bool computed in the graph (sizes and their arithmetic)."""
    __slots__ = ('data_dependent',)

    def __init__(self, ctx, node, value, data_dependent=False):
        super().__init__(ctx, node, value)
        self.data_dependent = data_dependent

    def _fx_kind_of(self):
        v = self.value
        if isinstance(v, bool):
            return 'bool'
        if isinstance(v, int):
            return 'int'
        if isinstance(v, float):
            return 'float'
        return 'other'

    @property
    def __class__(self):
        return type(self.value)

    def __repr__(self):
        return f'ScalarProxy({self.node.name}, {self.value!r})'

    def _concrete(self, what):
        if isinstance(self.data_dependent, str):  # a number input's name (Note [Value-carrying proxies])
            raise LoweringError(
                f'{what} of the number input `{self.data_dependent}` would specialize the lowered graph to its '
                f'example value {self.value!r} (Python control flow on an input), and every later value would be '
                f'ignored; compute with it only through torch ops and arithmetic, pass it as a tensor, or make '
                f'it a constant of the model (functools.partial, a module attribute)')
        if self.data_dependent:
            raise LoweringError(f'{what} of a value read from tensor data ({self.node.name}) would specialize on '
                                'the example inputs (data-dependent control flow); keep this part in Python')
        return self.value

    def __bool__(self):
        return bool(self._concrete('bool()'))

    def __index__(self):
        return operator.index(self._concrete('int()'))

    def __int__(self):
        return int(self._concrete('int()'))

    def __float__(self):
        return float(self._concrete('float()'))

    def __hash__(self):
        return hash(self.value)

    def __getattr__(self, name):
        if name.startswith('__') and name.endswith('__'):
            raise AttributeError(name)
        return getattr(self._concrete(f'.{name}'), name)

    def _cmp(op):  # noqa: N805
        def f(self, other):
            o = other.value if isinstance(other, ScalarProxy) else other
            if isinstance(other, TensorProxy) or isinstance(o, torch.Tensor):
                return NotImplemented
            self._concrete('comparison')
            if isinstance(other, ScalarProxy):
                other._concrete('comparison')
            return op(self.value, o)
        return f

    __eq__ = _cmp(operator.eq)
    __ne__ = _cmp(operator.ne)
    __lt__ = _cmp(operator.lt)
    __le__ = _cmp(operator.le)
    __gt__ = _cmp(operator.gt)
    __ge__ = _cmp(operator.ge)

    def _arith(op, reverse=False):  # noqa: N805
        def f(self, other):
            if not (isinstance(other, ScalarProxy) or type(other) in (int, float, bool)):
                return NotImplemented
            a, b = (other, self) if reverse else (self, other)
            return self.ctx.scalar_op(op, a, b)
        return f

    __add__ = _arith(operator.add)
    __sub__ = _arith(operator.sub)
    __mul__ = _arith(operator.mul)
    __floordiv__ = _arith(operator.floordiv)
    __truediv__ = _arith(operator.truediv)
    __mod__ = _arith(operator.mod)
    __radd__ = _arith(operator.add, True)
    __rsub__ = _arith(operator.sub, True)
    __rmul__ = _arith(operator.mul, True)
    __rfloordiv__ = _arith(operator.floordiv, True)
    __rtruediv__ = _arith(operator.truediv, True)
    __rmod__ = _arith(operator.mod, True)
    del _arith, _cmp

    def __neg__(self):
        return self.ctx.scalar_op(operator.neg, self)

    def __pos__(self):
        return self

    # not in the primitive set: these specialize on the example value
    def __pow__(self, other):
        return self._concrete('**') ** (other.value if isinstance(other, ScalarProxy) else other)

    def __rpow__(self, other):
        return other ** self._concrete('**')

    def __abs__(self):
        return abs(self._concrete('abs()'))

    def __round__(self, n=None):
        return round(self._concrete('round()'), n)

    def __trunc__(self):
        return int(self._concrete('trunc'))

    def __floor__(self):
        import math
        return math.floor(self._concrete('floor'))

    def __ceil__(self):
        import math
        return math.ceil(self._concrete('ceil'))


# ---------------------------------------------------------------------------
# the lowering context

_ACTIVE: List['LoweringContext'] = []


def _active() -> 'LoweringContext':
    if not _ACTIVE:
        raise LoweringError('a lowering proxy was used outside fxcpp.aten.lower')
    return _ACTIVE[-1]


def _is_proxy(v):
    return isinstance(v, _Proxy)


def _contains_proxy(v) -> bool:
    if isinstance(v, _Proxy):
        return True
    if isinstance(v, (list, tuple)):
        return any(_contains_proxy(e) for e in v)
    if isinstance(v, dict):
        return any(_contains_proxy(e) for e in v.values())
    return False


# Tensor dunders -> (aten name, swap operands)
_DUNDERS = {
    '__add__': ('add', False), '__sub__': ('sub', False), '__mul__': ('mul', False),
    '__truediv__': ('div', False), '__div__': ('div', False), '__floordiv__': ('floor_divide', False),
    '__mod__': ('remainder', False), '__pow__': ('pow', False), '__matmul__': ('matmul', False),
    '__and__': ('__and__', False), '__or__': ('__or__', False), '__xor__': ('__xor__', False),
    '__lshift__': ('__lshift__', False), '__rshift__': ('__rshift__', False),
    '__eq__': ('eq', False), '__ne__': ('ne', False), '__lt__': ('lt', False), '__le__': ('le', False),
    '__gt__': ('gt', False), '__ge__': ('ge', False),
    '__radd__': ('add', False), '__rmul__': ('mul', False), '__rsub__': ('rsub', False),
    '__rand__': ('__and__', False), '__ror__': ('__or__', False), '__rxor__': ('__xor__', False),
    '__rpow__': ('pow', True), '__rmatmul__': ('matmul', True), '__rfloordiv__': ('floor_divide', True),
    '__rmod__': ('remainder', True),
    '__iadd__': ('add_', False), '__isub__': ('sub_', False), '__imul__': ('mul_', False),
    '__itruediv__': ('div_', False), '__ifloordiv__': ('floor_divide_', False), '__imod__': ('remainder_', False),
    '__ipow__': ('pow_', False), '__iand__': ('__iand__', False), '__ior__': ('__ior__', False),
    '__ixor__': ('__ixor__', False),
    '__neg__': ('neg', False), '__pos__': ('positive', False), '__abs__': ('abs', False),
    '__invert__': ('bitwise_not', False),
}

_DTYPE_METHODS = {
    'float': torch.float32, 'double': torch.float64, 'half': torch.float16, 'bfloat16': torch.bfloat16,
    'int': torch.int32, 'long': torch.int64, 'short': torch.int16, 'bool': torch.bool,
    'char': torch.int8, 'byte': torch.uint8,
}

# tensor attributes that are plain constants of the example value
_CONST_ATTRS = {
    'dtype', 'device', 'layout', 'is_cuda', 'is_sparse', 'is_quantized', 'is_nested', 'is_mkldnn',
    'is_meta', 'is_complex', 'requires_grad', 'is_leaf', 'names', 'grad', 'grad_fn', 'is_floating_point',
    'is_contiguous', 'element_size', 'get_device', 'stride', 'storage_offset', 'is_signed',
    'is_inference', 'is_vulkan', 'is_xpu', 'is_mps', 'is_ort', 'is_ipu', 'output_nr', '_version',
}

_NO_ATEN = {'numpy', 'tolist', 'data_ptr', 'backward', 'register_hook', 'storage', 'untyped_storage',
            'apply_', 'map_', 'map2_', 'share_memory_', 'pin_memory', 'retain_grad'}

_SIZE_OPS = {'size', 'sym_size', 'numel', 'sym_numel', 'dim', 'stride', 'sym_stride'}

_FACTORIES = ('zeros', 'ones', 'empty', 'full', 'arange', 'rand', 'randn', 'randint', 'eye', 'linspace',
              'logspace', 'scalar_tensor')

_HTF_NAMES = ('has_torch_function', 'has_torch_function_unary', 'has_torch_function_variadic')


def _no_torch_function(*args):
    return False


class LoweringContext:
    """State of one lowering: the graph being built, the tensors it refers to,
    and the emitters. Registered lowerings receive it as their first argument;
    ``ctx.call(torch.ops.aten.<op>.<overload>, *args, **kwargs)`` emits one
    overload explicitly; plain torch code on the proxies is lowered too."""

    def __init__(self, graph, root: Optional[torch.nn.Module], registry: Dict[Any, Any]):
        self.graph = graph
        self.registry = registry
        self.attrs: Dict[str, torch.Tensor] = {}          # qualified name -> tensor
        self._attr_nodes: Dict[int, Any] = {}             # id(tensor) -> get_attr node
        self._known: Dict[int, str] = {}                  # id(tensor) -> qualified name in root
        self._keep: List[Any] = []
        self._shapes: Dict[Any, tuple] = {}
        self._const_count = 0
        if root is not None:
            for name, t in root.named_parameters():
                self._known.setdefault(id(t), name)
            for name, t in root.named_buffers():
                self._known.setdefault(id(t), name)

    # --- values and arguments ------------------------------------------

    def val(self, v):
        """The example value behind an argument (proxies replaced by values)."""
        if isinstance(v, _Proxy):
            return v.value
        if isinstance(v, ScalarAsTensor):
            return self._scalar_tensor_value(v.value)
        if isinstance(v, list):
            return [self.val(e) for e in v]
        if isinstance(v, tuple) and not hasattr(v, '_fields'):
            return tuple(self.val(e) for e in v)
        if isinstance(v, slice):
            return slice(self.val(v.start), self.val(v.stop), self.val(v.step))
        if isinstance(v, dict):
            return {k: self.val(e) for k, e in v.items()}
        return v

    def arg(self, v):
        """The graph argument for a value: nodes for proxies, get_attr for tensors."""
        if isinstance(v, _Proxy):
            return v.node
        if isinstance(v, torch.Tensor):
            return self.tensor_node(v)
        if isinstance(v, ScalarAsTensor):
            return self.scalar_tensor(v.value).node
        if v is None or type(v) in (bool, int, float, str) or isinstance(
                v, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
            return v
        if isinstance(v, bool):
            return bool(v)
        if isinstance(v, int):       # IntEnum and friends
            return int(v)
        if isinstance(v, float):
            return float(v)
        if isinstance(v, torch.Size):
            return [self.arg(e) for e in v]
        if isinstance(v, list):
            return [self.arg(e) for e in v]
        if isinstance(v, tuple):
            return tuple(self.arg(e) for e in v)
        if isinstance(v, slice):
            return slice(self.arg(v.start), self.arg(v.stop), self.arg(v.step))
        if isinstance(v, dict):
            return {k: self.arg(e) for k, e in v.items()}
        raise LoweringError(f'cannot pass a {type(v).__name__} ({v!r:.60}) to a lowered op: only tensors, '
                            'Python scalars, strings, dtypes, devices, layouts, memory formats, None and '
                            'lists of these are allowed')

    def concrete(self, v):
        """A Python value with any ScalarProxy specialized to its example value."""
        if isinstance(v, ScalarProxy):
            return v._concrete('use')
        return v

    def tensor_node(self, t: torch.Tensor):
        """The get_attr node for a tensor that is not computed by the graph
        (a parameter, buffer or constant)."""
        node = self._attr_nodes.get(id(t))
        if node is not None:
            return node
        name = self._known.get(id(t))
        if name is None or name in self.attrs:
            taken = set(self._known.values())
            while True:
                name = f'_tensor_constant{self._const_count}'
                self._const_count += 1
                if name not in self.attrs and name not in taken:
                    break
            if isinstance(t, torch.nn.Parameter):
                t = t.detach()
        return self.get_attr(name, t).node

    def get_attr(self, name: str, t: torch.Tensor) -> 'TensorProxy':
        node = self._attr_nodes.get(id(t))
        if node is None:
            node = self.graph.get_attr(name)
            self.attrs[name] = t
            self._attr_nodes[id(t)] = node
            self._keep.append(t)
        return TensorProxy(self, node, t)

    def _scalar_tensor_value(self, s):
        dtype = torch.bool if isinstance(s, bool) else torch.int64 if isinstance(s, int) \
            else torch.get_default_dtype()
        return torch.scalar_tensor(self.val(s), dtype=dtype)

    def scalar_tensor(self, s):
        dtype = torch.bool if isinstance(self.val(s), bool) else torch.int64 if isinstance(self.val(s), int) \
            else torch.get_default_dtype()
        return self.call(torch.ops.aten.scalar_tensor.default, s, dtype=dtype)

    def input_value(self, placeholder, name: str, value):
        """What the lowering computes with for an example input: a tensor's
        TensorProxy, a number's ScalarProxy (Note [Value-carrying proxies]),
        other values as they are."""
        if isinstance(value, torch.Tensor):
            return TensorProxy(self, placeholder, value.clone())
        if type(value) in (bool, int, float):
            return ScalarProxy(self, placeholder, value, data_dependent=name)
        return value

    def wrap(self, node, value, data_dependent=True):
        """The proxy (or structure of proxies) for ``node`` producing ``value``."""
        if isinstance(value, torch.Tensor):
            return TensorProxy(self, node, value)
        if isinstance(value, (tuple, list)):
            items = [self.wrap(self.graph.call_function(operator.getitem, (node, i)), v, data_dependent)
                     for i, v in enumerate(value)]
            if isinstance(value, list):
                return items
            if hasattr(type(value), 'n_fields') or hasattr(value, '_fields'):  # structseq / namedtuple
                try:
                    return type(value)(items)
                except TypeError:
                    return type(value)(*items)
            return tuple(items)
        if isinstance(value, (bool, int, float)):
            return ScalarProxy(self, node, value, data_dependent)
        if value is None:
            return None
        raise LoweringError(f'{node.target} returned a {type(value).__name__}, which a lowered graph cannot carry')

    # --- emitting --------------------------------------------------------

    def call(self, op, *args, **kwargs):
        """Emit ``op`` (a ``torch.ops.aten.<name>.<overload>``) on these arguments
        (proxies, tensors, Python values) and return the proxy of its result."""
        sig = _schema.signature_of(op)
        if sig is None:
            raise LoweringError(f'{op} has a schema fxcpp.aten cannot bind')
        try:
            _, pos, kw = _schema.bind(sig, args, kwargs)
        except NoMatch:
            raise LoweringError(f'the arguments {self._describe(args, kwargs)} do not match {op._schema}') from None
        return self._emit(sig, pos, kw)

    def _emit(self, sig, pos, kw):
        vals = [self.val(a) for a in pos]
        kvals = {k: self.val(v) for k, v in kw.items()}
        try:
            value = sig.op(*vals, **kvals)
        except Exception as e:
            raise LoweringError(f'{sig.op} failed on the example values: {type(e).__name__}: {e}') from e
        node = self.graph.call_function(sig.op, tuple(self.arg(a) for a in pos),
                                        {k: self.arg(v) for k, v in kw.items()})
        name = sig.op._schema.name.split('::')[-1]
        result = self.wrap(node, value, data_dependent=name not in _SIZE_OPS)
        if type(result) is tuple and len(result) > 1:
            # torch returns named tuples (torch.return_types.max) where the schema names the results
            rt = getattr(torch.return_types, name, None)
            rets = sig.op._schema.returns
            if rt is not None and len(rets) == len(result) and all(r.name for r in rets):
                try:
                    result = rt(result)
                except TypeError:
                    pass
        return result

    def call_named(self, name: str, args, kwargs, what=None):
        """Resolve aten ``name`` for these arguments (Note [Overload resolution]) and emit it."""
        sigs = _schema.signatures(name)
        if not sigs:
            raise LoweringError(f'{what or name} has no ATen operator (no torch.ops.aten.{name})', target=what)
        try:
            sig, pos, kw = _schema.resolve(name, args, kwargs)
        except NoMatch:
            schemas = '\n    '.join(str(s.op._schema) for s in sigs)
            raise LoweringError(f'no overload of aten::{name} accepts the arguments {self._describe(args, kwargs)}; '
                                f'the overloads are:\n    {schemas}', target=what) from None
        return self._emit(sig, pos, kw)

    def _describe(self, args, kwargs):
        def d(v):
            if isinstance(v, TensorProxy) or isinstance(v, torch.Tensor):
                t = self.val(v)
                return f'Tensor{list(t.shape)}:{str(t.dtype)[6:]}'
            if isinstance(v, ScalarProxy):
                return f'{type(v.value).__name__}(symbolic)'
            if isinstance(v, (list, tuple)):
                return '[' + ', '.join(d(e) for e in v) + ']'
            return repr(v)
        parts = [d(a) for a in args] + [f'{k}={d(v)}' for k, v in kwargs.items()]
        return '(' + ', '.join(parts) + ')'

    def scalar_op(self, op, *args):
        value = op(*[self.val(a) for a in args])
        node = self.graph.call_function(op, tuple(self.arg(a) for a in args))
        # a number input's name wins: it gives the better error message
        flags = [a.data_dependent for a in args if isinstance(a, ScalarProxy) and a.data_dependent]
        dd = next((f for f in flags if isinstance(f, str)), bool(flags))
        return ScalarProxy(self, node, value, dd)

    def shape_of(self, t) -> tuple:
        """``t.shape`` as a tuple of ScalarProxies (one getattr node per tensor node)."""
        if not isinstance(t, TensorProxy):
            t = self.get_attr_proxy(t)
        shape = self._shapes.get(t.node)
        if shape is None or len(shape) != t.value.dim():
            snode = self.graph.call_function(builtins.getattr, (t.node, 'shape'))
            shape = tuple(ScalarProxy(self, self.graph.call_function(operator.getitem, (snode, i)), v)
                          for i, v in enumerate(t.value.shape))
            self._shapes[t.node] = shape
        return shape

    def get_attr_proxy(self, t: torch.Tensor) -> TensorProxy:
        return TensorProxy(self, self.tensor_node(t), t)

    # --- dispatch -------------------------------------------------------

    def torch_function(self, func, args, kwargs):
        """A torch callable called with proxies among its arguments."""
        fn = self.registry.get(func)
        if fn is not None:
            return fn(self, *args, **kwargs)
        name = getattr(func, '__name__', None)
        objclass = getattr(func, '__objclass__', None)
        if name is not None and (objclass is torch._C._TensorBase or getattr(torch.Tensor, name, None) is func):
            return self.method(name, *args, **kwargs)
        if isinstance(func, types.FunctionType):
            # a Python function in torch that dispatched to us: run its body
            with _patch_globals(func.__globals__):
                return func(*args, **kwargs)
        if name is None:
            raise LoweringError(f'{func!r} has no name to find its ATen operator by', target=func)
        return self.function(name, args, kwargs, func)

    def function(self, name, args, kwargs, func=None):
        if name in ('dropout', 'feature_dropout', 'alpha_dropout', 'feature_alpha_dropout',
                    'dropout_', 'feature_dropout_', 'alpha_dropout_', 'feature_alpha_dropout_'):
            train = args[2] if len(args) > 2 else kwargs.get('train', True)
            if train is False:
                return args[0] if args else kwargs['input']
        return self.call_named(name, args, kwargs, what=_target_repr(func) if func is not None else name)

    def tensor_attr(self, t, name):
        """``t.<name>`` for a TensorProxy ``t`` that is not a proxy attribute."""
        if name in _CONST_ATTRS:
            return getattr(t.value, name)
        if name == 'T':
            return self.call(torch.ops.aten.permute.default, t, list(reversed(range(t.value.dim()))))
        if name == 'mT':
            return self.call(torch.ops.aten.transpose.int, t, -2, -1)
        if name == 'data':
            return self.call(torch.ops.aten.detach.default, t)
        attr = getattr(torch.Tensor, name, None)
        if attr is None:
            raise AttributeError(f"'Tensor' object has no attribute '{name}'")
        if callable(attr):
            return functools.partial(self.method, name, t)
        return getattr(t.value, name)

    def method(self, name, self_, *args, **kwargs):
        """``self_.<name>(*args, **kwargs)`` for a Tensor method or operator."""
        special = _METHODS.get(name)
        if special is not None:
            return special(self, self_, *args, **kwargs)
        if name in _NO_ATEN:
            raise LoweringError(f'Tensor.{name} has no ATen operator (it leaves the tensor world)',
                                target=f'Tensor.{name}')
        if name in _DUNDERS:
            aten, swap = _DUNDERS[name]
            if swap:
                return self.call_named(aten, (args[0], self_), {}, what=f'Tensor.{name}')
            return self.call_named(aten, (self_,) + args, kwargs, what=f'Tensor.{name}')
        if name in _DTYPE_METHODS:
            memory_format = kwargs.pop('memory_format', None)
            return self.call(torch.ops.aten.to.dtype, self_, _DTYPE_METHODS[name], memory_format=memory_format)
        return self.call_named(name, (self_,) + args, kwargs, what=f'Tensor.{name}')


# --- special methods ------------------------------------------------------

def _m_size(ctx, t, dim=None):
    shape = ctx.shape_of(t)
    return shape if dim is None else shape[ctx.concrete(dim)]


def _m_numel(ctx, t):
    # aten::numel is a TorchScript builtin, not a dispatcher operator, so the
    # C++ runtime cannot call it: the product of the symbolic sizes instead.
    shape = list(ctx.shape_of(t))
    if not shape:
        return 1
    n = shape[0]
    for s in shape[1:]:
        n = n * s
    return n


def _m_dim(ctx, t):
    return ctx.val(t).dim()


def _m_to(ctx, t, *args, **kwargs):
    dtype = kwargs.pop('dtype', None)
    device = kwargs.pop('device', None)
    other = None
    for a in args:
        if isinstance(a, (TensorProxy, torch.Tensor)):
            other = a
        elif isinstance(a, torch.dtype):
            dtype = a
        elif isinstance(a, (str, torch.device, int)) and not isinstance(a, bool):
            device = torch.device(a)
        elif isinstance(a, bool):
            kwargs.setdefault('non_blocking', a)
    if other is not None:
        return ctx.call(torch.ops.aten.to.other, t, other, **kwargs)
    if isinstance(device, str):
        device = torch.device(device)
    return ctx.call(torch.ops.aten.to.dtype_layout, t, dtype=dtype, device=device, **kwargs)


def _m_cpu(ctx, t, *args, **kwargs):
    if ctx.val(t).device.type == 'cpu':
        return t
    return ctx.call(torch.ops.aten.to.dtype_layout, t, device=torch.device('cpu'))


def _m_cuda(ctx, t, device=None, *args, **kwargs):
    return ctx.call(torch.ops.aten.to.dtype_layout, t, device=torch.device('cuda' if device is None else device))


def _m_item(ctx, t):
    return ctx.call(torch.ops.aten.item.default, t)


def _m_type(ctx, t, dtype=None, *args, **kwargs):
    if dtype is None:
        return ctx.val(t).type()
    if isinstance(dtype, str):
        dtype = {v: k for k, v in _TYPE_NAMES.items()}.get(dtype, None) or dtype
    if not isinstance(dtype, torch.dtype):
        raise LoweringError(f'Tensor.type({dtype!r}) cannot be lowered', target='Tensor.type')
    return ctx.call(torch.ops.aten.to.dtype, t, dtype)


_TYPE_NAMES = {torch.float32: 'torch.FloatTensor', torch.float64: 'torch.DoubleTensor',
               torch.int64: 'torch.LongTensor', torch.int32: 'torch.IntTensor', torch.bool: 'torch.BoolTensor'}


def _m_new_tensor(ctx, t, data, dtype=None, device=None, requires_grad=False):
    if _contains_proxy(data):
        raise LoweringError('Tensor.new_tensor with values computed in the graph cannot be lowered',
                            target='Tensor.new_tensor')
    tv = ctx.val(t)
    return ctx.get_attr_proxy(torch.tensor(data, dtype=dtype or tv.dtype, device=device or tv.device))


def _index_parts(ctx, x, idx):
    """Apply the basic part of ``x[idx]`` (select/slice/unsqueeze); return the
    view and the advanced (tensor) indices by dimension."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    ndim = ctx.val(x).dim()
    consumed = 0
    for it in idx:
        if it is None or it is Ellipsis:
            continue
        v = ctx.val(it)
        if isinstance(v, torch.Tensor) and v.dtype in (torch.bool, torch.uint8):
            consumed += v.dim()
        else:
            consumed += 1
    dim = 0
    adv: Dict[int, Any] = {}
    result = x
    for it in idx:
        if it is Ellipsis:
            dim += ndim - consumed
            continue
        if it is None:
            result = ctx.call(torch.ops.aten.unsqueeze.default, result, dim)
            dim += 1
            continue
        v = ctx.val(it)
        if isinstance(v, bool):
            raise LoweringError('indexing a tensor with a bool cannot be lowered', target='Tensor.__getitem__')
        if isinstance(v, int):
            result = ctx.call(torch.ops.aten.select.int, result, dim, it)
            continue
        if isinstance(it, slice):
            start, stop, step = it.start, it.stop, it.step
            if start is None and stop is None and step is None:
                dim += 1
                continue
            if step is None:
                step = 1
            result = ctx.call(torch.ops.aten.slice.Tensor, result, dim, start, stop, step)
            dim += 1
            continue
        if isinstance(v, (list, tuple)):
            if _contains_proxy(it):
                it = ctx.call(torch.ops.aten.stack.default, [ctx.scalar_tensor(e) for e in it])
            else:
                it = torch.tensor(v)
            v = ctx.val(it)
        if isinstance(v, torch.Tensor):
            adv[dim] = it
            dim += v.dim() if v.dtype in (torch.bool, torch.uint8) else 1
            continue
        raise LoweringError(f'cannot lower indexing with {type(v).__name__}', target='Tensor.__getitem__')
    return result, adv


def _m_getitem(ctx, x, idx):
    result, adv = _index_parts(ctx, x, idx)
    if adv:
        indices = [adv.get(i) for i in range(max(adv) + 1)]
        result = ctx.call(torch.ops.aten.index.Tensor, result, indices)
    if result is x:
        result = ctx.call(torch.ops.aten.alias.default, x)
    return result


def _m_setitem(ctx, x, idx, value):
    view, adv = _index_parts(ctx, x, idx)
    if adv:
        if view is not x:
            raise LoweringError('assignment mixing tensor indices with int/slice indices cannot be lowered',
                                target='Tensor.__setitem__')
        indices = [adv.get(i) for i in range(max(adv) + 1)]
        if not isinstance(value, (TensorProxy, torch.Tensor)):
            value = ctx.scalar_tensor(value)
        ctx.call(torch.ops.aten.index_put_.default, x, indices, value)
        return None
    if isinstance(value, (TensorProxy, torch.Tensor)):
        ctx.call(torch.ops.aten.copy_.default, view, value)
    else:
        ctx.call(torch.ops.aten.fill_.Scalar, view, value)
    return None


def _m_rtruediv(ctx, x, other):
    if isinstance(other, (TensorProxy, torch.Tensor)):
        return ctx.call_named('div', (other, x), {})
    return ctx.call(torch.ops.aten.mul.Scalar, ctx.call(torch.ops.aten.reciprocal.default, x), other)


def _m_len(ctx, x):
    return ctx.val(x).shape[0]


def _m_split(ctx, x, split_size, dim=0):
    if isinstance(split_size, (list, tuple)):
        return ctx.call(torch.ops.aten.split_with_sizes.default, x, list(split_size), dim)
    return ctx.call(torch.ops.aten.split.Tensor, x, split_size, dim)


def _m_contiguous(ctx, x, memory_format=torch.contiguous_format):
    return ctx.call(torch.ops.aten.contiguous.default, x, memory_format=memory_format)


_METHODS = {
    'size': _m_size, 'numel': _m_numel, 'nelement': _m_numel, 'dim': _m_dim, 'ndimension': _m_dim,
    'to': _m_to, 'cpu': _m_cpu, 'cuda': _m_cuda, 'item': _m_item, 'type': _m_type,
    'new_tensor': _m_new_tensor, '__getitem__': _m_getitem, '__setitem__': _m_setitem,
    '__rtruediv__': _m_rtruediv, '__rdiv__': _m_rtruediv, '__len__': _m_len, 'split': _m_split,
    'contiguous': _m_contiguous,
}
for _n in _CONST_ATTRS:
    if callable(getattr(torch.Tensor, _n, None)):
        _METHODS[_n] = (lambda n: lambda ctx, t, *a, **k: getattr(ctx.val(t), n)(*a, **k))(_n)


# ---------------------------------------------------------------------------
# patches active while lowering

@contextlib.contextmanager
def _patch_globals(g):
    saved = {}
    for n in _HTF_NAMES:
        if n in g and g[n] is not _no_torch_function:
            saved[n] = g[n]
            g[n] = _no_torch_function
    try:
        yield
    finally:
        g.update(saved)


def _factory(name, orig):
    @functools.wraps(orig)
    def f(*args, **kwargs):
        if _ACTIVE and (_contains_proxy(args) or _contains_proxy(kwargs)):
            ctx = _ACTIVE[-1]
            if name in ('tensor', 'as_tensor'):
                raise LoweringError(f'torch.{name} of values computed in the graph cannot be lowered',
                                    target=f'torch.{name}')
            return ctx.call_named(name, args, kwargs, what=f'torch.{name}')
        return orig(*args, **kwargs)
    f._fxcpp_orig = orig
    return f


def patched_target(target):
    """What ``patched()`` put in place of ``target`` when it is one of the torch factories it
    wraps (a traced graph calls the original: torch.fx 2.x traces ``torch.full(size, s)``
    with a proxy ``s``), else ``target``."""
    name = getattr(target, '__name__', None)
    if isinstance(name, str) and name in _FACTORIES + ('tensor', 'as_tensor'):
        current = getattr(torch, name, None)
        if getattr(current, '_fxcpp_orig', None) is target:
            return current
    return target


@contextlib.contextmanager
def patched(ctx: LoweringContext):
    """Activate ``ctx``: F.* bodies run on proxies, factories record symbolic sizes."""
    import torch.functional
    import torch.nn.functional
    _ACTIVE.append(ctx)
    saved = []
    try:
        for mod in (torch.nn.functional, torch.functional):
            for n in _HTF_NAMES:
                if hasattr(mod, n):
                    saved.append((mod, n, getattr(mod, n)))
                    setattr(mod, n, _no_torch_function)
        for n in _FACTORIES + ('tensor', 'as_tensor'):
            orig = getattr(torch, n)
            saved.append((torch, n, orig))
            setattr(torch, n, _factory(n, orig))
        yield ctx
    finally:
        for mod, n, v in reversed(saved):
            setattr(mod, n, v)
        _ACTIVE.pop()

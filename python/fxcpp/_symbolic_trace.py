"""Symbolic tracing front end of fxcpp (mirrors ``torch.fx._symbolic_trace``, torch 1.13.1).

Differences from torch.fx 1.13.1 (all are fixes, the traced graphs are the same):

* root functions with ``*args``/``**kwargs``/keyword-only arguments work on
  Python 3.11 (the code object is rewritten with ``CodeType.replace``);
* functions registered with ``torch.fx.wrap`` by other libraries are patched
  too, in addition to the ones registered with ``fxcpp.wrap``;
* ``_Patcher`` deduplication actually works (torch.fx's attribute name gets
  mangled), so a function registered in both registries is wrapped once;
* parameter / buffer / submodule lookups are cached per trace instead of
  scanning ``named_parameters()`` etc. on every access.
"""
import builtins
import collections
import contextlib
import copy
import functools
import inspect
import logging
import math
import os
import sys
import threading  # noqa: F401 -- a name torch.fx 2.x's module has
import warnings
from itertools import chain
from types import CodeType, FunctionType, ModuleType, TracebackType  # noqa: F401 -- torch.fx 2.x's names
from typing import (  # noqa: F401 -- Iterable... get_args: names torch.fx 2.x's module has
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    NamedTuple,
    Optional,
    ParamSpec,
    Set,
    Tuple,
    Type,
    TypeAlias,
    TypeVar,
    Union,
    get_args,
    overload,
)

import torch
import torch.utils._pytree as pytree
from torch._C import ScriptObject  # type: ignore[attr-defined]

import torch.fx._symbolic_trace as _torch_fx_symbolic_trace

from . import _C, _torch_compat
from ._torch_compat import FakeScriptObject, is_custom_class, is_opaque_symbolic_type  # noqa: F401 -- as torch.fx
from .graph import _PyTreeCodeGen, _PyTreeInfo, Graph
from .graph_module import GraphModule
from .node import Argument, base_types, map_aggregate
from .proxy import ParameterProxy, Proxy, Scope, ScopeContextManager, TracerBase, compatibility, _library_create_args
from .proxy import _RECORDS_META

HAS_VARSTUFF = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS

# Module.__call__/__getattr__ as they were at import time; the tracer patches them.
_orig_module_call: Callable = torch.nn.Module.__call__
_orig_module_getattr: Callable = torch.nn.Module.__getattr__

_proxyable_classes: Dict[Type, None] = {}

# The type variables of torch.fx 2.x's signatures (wrap, the patcher).
_T = TypeVar('_T')
_F = TypeVar('_F', bound=Callable[..., Any])
_P = ParamSpec('_P')

_is_fx_tracing_flag = False


log = logging.getLogger(__name__)


# Note [One tracing flag]
# ~~~~~~~~~~~~~~~~~~~~~~~
# "Is symbolic tracing running?" On torch.fx 2.x that is a thread-local flag
# (_is_fx_tracing_tls) that libraries read through
# torch.fx._symbolic_trace.is_fx_tracing(); fxcpp's tracer sets that very flag
# and its own is_fx_tracing() reads it, so the answer is one state for both
# tracers and per thread, as torch.fx's is. torch.fx 1.13 keeps a module
# global; there fxcpp keeps its own (_is_fx_tracing_flag) and sets torch.fx's
# beside it while it traces.
if _torch_compat.FX_TRACING_THREAD_LOCAL:
    from torch.fx._symbolic_trace import (  # noqa: F401 -- torch.fx 2.x's names, shared state
        _get_is_fx_tracing, _is_fx_tracing_context, _is_fx_tracing_tls, _set_is_fx_tracing)
else:
    def _get_is_fx_tracing() -> bool:
        return _is_fx_tracing_flag


if _torch_compat.FX_API_2:
    @functools.lru_cache
    def is_fx_tracing_warning() -> None:
        """Logs, once, torch.fx 2.x's note that is_fx_tracing() is also true under torch.export."""
        log.warning(
            "is_fx_tracing will return true for both fx.symbolic_trace and "
            "torch.export. Please use "
            "is_fx_tracing_symbolic_tracing() for specifically fx.symbolic_trace "
            "or torch.compiler.is_compiling() for specifically torch.export/compile."
        )

    def is_fx_tracing():
        is_fx_tracing_warning()
        return _get_is_fx_tracing()

    def is_fx_symbolic_tracing() -> bool:
        """True while symbolic tracing runs and Dynamo/torch.export is not compiling."""
        return _get_is_fx_tracing() and not torch.compiler.is_compiling()
else:
    def is_fx_tracing():
        return _is_fx_tracing_flag


@compatibility(is_backward_compatible=True)
class ProxyableClassMeta(type):
    """
    Metaclass that makes constructing instances of a class traceable.

    Calling the class with a Proxy among the arguments records a ``call_function``
    node whose target is the class, instead of running ``__init__``.
    Same behaviour as ``torch.fx.ProxyableClassMeta``.
    """

    def __init__(cls, name, bases, attrs):
        _proxyable_classes.setdefault(cls)
        super().__init__(name, bases, attrs)

    def __call__(cls, *args, **kwargs):
        instance = cls.__new__(cls)  # type: ignore[call-overload]

        proxy = _find_proxy(args, kwargs)
        if proxy is not None:
            return proxy.tracer.create_proxy("call_function", cls, args, kwargs)
        cls.__init__(instance, *args, **kwargs)  # type: ignore[misc]
        return instance


def _patch_function(fn: FunctionType, nargs: int) -> FunctionType:
    """Return a copy of ``fn`` whose ``*args``/``**kwargs``/keyword-only
    parameters are all plain positional parameters (``nargs`` of them), so the
    root function can be called with one placeholder proxy per parameter."""
    co = fn.__code__
    new_code = co.replace(
        co_argcount=nargs,
        co_posonlyargcount=0,
        co_kwonlyargcount=0,
        co_flags=co.co_flags & ~HAS_VARSTUFF,
    )
    return FunctionType(
        new_code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__
    )


@compatibility(is_backward_compatible=False)
class PHBase(object):
    """
    Marker type; its instance ``PH`` keeps a ``concrete_args`` entry as a real input.
    """

    def __repr__(self):
        return "PH"


PH = PHBase()


@compatibility(is_backward_compatible=False)
class PHWithMeta(PHBase):
    """
    A ``concrete_args`` placeholder that carries metadata: its ``ph_key`` and any other
    attribute set on it are copied onto the placeholder node it becomes (torch.fx 2.x).
    """

    def __init__(self, ph_key: Optional[str] = None):
        super().__init__()
        self.ph_key = ph_key


def _is_ph(x) -> bool:
    # Accept torch.fx's placeholders as well so code written against torch.fx keeps working.
    # torch.fx 1.13 takes the PH singleton only; 2.x any PHBase (PHWithMeta...).
    if _torch_compat.FX_API_2:
        return isinstance(x, (PHBase, _torch_fx_symbolic_trace.PHBase))
    return x is PH or x is _torch_fx_symbolic_trace.PH


def _transfer_attrs(fr: object, to: object) -> None:
    """Copies the plain (not callable, not dunder) attributes of ``fr`` that ``to`` lacks."""
    for name in dir(fr):
        value = getattr(fr, name)
        if not callable(value) and not name.startswith('__') and not hasattr(to, name):
            setattr(to, name, value)


def _transfer_ph_attrs(ph, node) -> None:
    """torch.fx 2.x: the plain attributes a user set on a placeholder object other than PH
    (PHWithMeta's ph_key, ...) become attributes of its placeholder node."""
    if ph is PH or ph is _torch_fx_symbolic_trace.PH:
        return
    _transfer_attrs(ph, node)


# Cache of autowrap function-id sets, keyed by the autowrap module tuple.
_autowrap_ids_cache: Dict[Tuple[int, ...], Tuple[Tuple[ModuleType, ...], frozenset]] = {}


def _autowrap_ids_for(modules) -> frozenset:
    key = tuple(id(m) for m in modules)
    hit = _autowrap_ids_cache.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], modules)):
        return hit[1]
    ids = frozenset(
        id(value)
        for name, value in chain(*[m.__dict__.items() for m in modules])
        if not name.startswith("_") and callable(value)
    )
    _autowrap_ids_cache[key] = (tuple(modules), ids)
    return ids


# Note [Constant attributes]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# A tensor (or ScriptObject; on torch.fx 2.x also a FakeScriptObject, a pytree
# TreeSpec or an opaque custom-class object) met as an argument while tracing
# becomes a get_attr node: of the module attribute that already holds it (found
# once per trace over every module's __dict__), else of a fresh attribute of
# the root. 1.13 names those "_tensor_constant<i>"; 2.x names them by kind
# ("_tensor_constant", "_torchbind_obj", "_tree_spec_constant", "_opaque_obj")
# through Tracer.get_fresh_qualname.
_TENSOR_LIKE = _torch_compat.constant_attribute_types()
_ConstantAttributeType = Union[_TENSOR_LIKE]  # noqa: F821 -- torch.fx 2.x's alias of those types
_constant_attribute_types = _TENSOR_LIKE
# Exact types commonly found in a Module's __dict__ that are never tensors.
_NOT_TENSOR_TYPES = frozenset((bool, int, float, str, type(None), dict, collections.OrderedDict,
                               tuple, list, set))
_module_named_children = torch.nn.Module.named_children
_module_named_modules = torch.nn.Module.named_modules


def _collect_tensor_attrs(root: torch.nn.Module, out: Dict[Any, str]) -> None:
    """Map every Tensor/ScriptObject stored directly in the ``__dict__`` of a
    module of the hierarchy to its qualified name (later visits win).
    The walk runs in C (fxcpp._C._collect_tensor_attrs)."""
    _C._collect_tensor_attrs(root, out, _TENSOR_LIKE, _NOT_TENSOR_TYPES, _module_named_children)


# Per Tracer subclass: whether its create_proxy accepts ``proxy_factory_fn``.
_accepts_proxy_factory: Dict[type, bool] = {}


def _create_proxy_accepts_factory(tracer) -> bool:
    cls = type(tracer)
    r = _accepts_proxy_factory.get(cls)
    if r is None:
        if cls.create_proxy is TracerBase.create_proxy:
            r = True
        else:
            try:
                r = "proxy_factory_fn" in inspect.signature(tracer.create_proxy).parameters
            except (TypeError, ValueError):
                r = False
        _accepts_proxy_factory[cls] = r
    return r


@compatibility(is_backward_compatible=True)
class Tracer(TracerBase):
    # Sphinx shows the first docstring line below as the signature.
    """Tracer(autowrap_modules=(math,), autowrap_functions=())

    Records the operations performed by a module or function into a ``Graph``;
    ``symbolic_trace(m)`` is shorthand for ``Tracer().trace(m)``. Subclasses can
    customise tracing by overriding the hook methods defined here.
    """

    @compatibility(is_backward_compatible=True)
    def __init__(
        self,
        autowrap_modules: Tuple[ModuleType] = (math,),
        autowrap_functions: Tuple[Callable, ...] = (),
        param_shapes_constant: bool = False,
    ) -> None:
        """
        Create a tracer.

        Args:
            autowrap_modules: modules whose public functions are recorded as leaf
                calls without an explicit ``wrap()``.
            autowrap_functions: individual functions handled the same way.
            param_shapes_constant: evaluate shape-like accesses (``shape``,
                ``size()``, ...) on parameters eagerly instead of returning proxies.
        """
        super().__init__()

        # id()s of callables recorded as leaf calls wherever they show up (reached as
        # ``math.sqrt`` or imported by name alike).
        self._autowrap_function_ids: Set[int] = set(_autowrap_ids_for(autowrap_modules))
        self._autowrap_function_ids.update(set([id(f) for f in autowrap_functions]))

        # Namespaces scanned for autowrap candidates when the trace starts (modules
        # reached during tracing are scanned as well).
        self._autowrap_search: List[ModuleType] = list(autowrap_modules)
        self.param_shapes_constant = param_shapes_constant

        self.submodule_paths: Optional[Dict[torch.nn.Module, str]] = None
        if _RECORDS_META:  # Note [Tracing metadata] (fxcpp/proxy.py)
            self.root_module_name: str = ""
            self.scope = Scope("", None)
            self.module_stack = collections.OrderedDict()
            self.num_calls: Dict[str, int] = {}
            self.node_name_to_scope: Dict[str, Tuple[str, type]] = {}

    # torch.fx 2.x: prefix -> next number to try, shared by all tracers (get_fresh_qualname).
    _qualname_counter: Dict[str, int] = collections.defaultdict(int)

    @compatibility(is_backward_compatible=True)
    def get_fresh_qualname(self, prefix: str) -> str:
        """A name ``<prefix><i>`` that ``self.root`` has no attribute of (torch.fx 2.x). The search
        starts at 0 when the root has no ``<prefix>0`` (and the counter restarts there), else where
        the last search for this prefix ended, in any tracer: which number a constant gets depends
        on what was traced before, as in torch.fx."""
        qualname = f"{prefix}0"
        if not hasattr(self.root, qualname):
            self._qualname_counter[prefix] = 0
            return qualname
        i = self._qualname_counter[prefix]
        while True:
            qualname = f"{prefix}{i}"
            i += 1
            if not hasattr(self.root, qualname):
                break
        self._qualname_counter[prefix] = i
        return qualname

    # -- per-trace identity caches -------------------------------------------

    def _fx_named_cache(self, kind: str) -> Dict[int, Tuple[str, Any]]:
        """id(obj) -> (first qualified name, obj) for root.named_<kind>(),
        built lazily once per (trace, root)."""
        caches = self.__dict__.get('_fx_id_caches')
        root = self.root
        if caches is None or caches[0] is not root:
            caches = (root, {})
            self.__dict__['_fx_id_caches'] = caches
        d = caches[1].get(kind)
        if d is None:
            d = {}
            for n, p in getattr(root, 'named_' + kind)():
                d.setdefault(id(p), (n, p))
            caches[1][kind] = d
        return d

    def _fx_lookup(self, kind: str, a) -> Optional[str]:
        entry = self._fx_named_cache(kind).get(id(a))
        if entry is not None and entry[1] is a:
            return entry[0]
        return None

    @compatibility(is_backward_compatible=True)
    def create_arg(self, a: Any) -> "Argument":
        """
        Turn ``a`` into a value that may be stored as a node argument.

        Parameters, buffers and submodules of ``root`` become ``get_attr`` nodes;
        other constant tensors are attached to ``root`` and referenced the same way;
        proxies and containers are handled by ``TracerBase.create_arg``. Override
        to support further types.
        """
        if isinstance(a, torch.nn.Parameter):
            n = self._fx_lookup('parameters', a)
            if n is None:
                # slow path: parameters registered during tracing
                for n_, p in self.root.named_parameters():
                    if a is p:
                        n = n_
                        break
                else:
                    raise NameError("parameter is not a member of this module")
            return self.create_node("get_attr", n, (), {})
        elif isinstance(a, torch.Tensor):
            n = self._fx_lookup('buffers', a)
            if n is not None:
                return self.create_node("get_attr", n, (), {})
        elif isinstance(a, torch.nn.Module):
            n = self._fx_lookup('modules', a)
            if n is not None:
                return self.create_node("get_attr", n, (), {})
        # NamedTuple instances appearing literally as args are reconstructed
        # with a call_function node.
        if isinstance(a, tuple) and hasattr(a, "_fields"):
            args = tuple(self.create_arg(elem) for elem in a)
            return self.create_node("call_function", a.__class__, args, {})

        # Constant tensors: refer to an existing attribute of the module
        # hierarchy when there is one, otherwise stash it on the root as
        # ``_tensor_constant<i>``.
        if isinstance(a, _TENSOR_LIKE) or (_RECORDS_META and is_opaque_symbolic_type is not None
                                           and is_opaque_symbolic_type(type(a))):
            qualname: Optional[str] = self.tensor_attrs.get(a)

            if not qualname and _RECORDS_META:  # Note [Constant attributes]
                base_name = _torch_compat.constant_attribute_base_name(a)
                if base_name is None:
                    raise RuntimeError(f"cannot create constant arg for {a} of type {type(a)}.")
                qualname = self.get_fresh_qualname(base_name)
                self.tensor_attrs[a] = qualname
                setattr(self.root, qualname, a)
            elif not qualname:
                # Names below the last one handed out for this root are taken,
                # so resume the search there instead of at 0.
                root = self.root
                hint = self.__dict__.get('_fx_next_tensor_constant')
                i = hint[1] if hint is not None and hint[0] is root else 0
                while True:
                    qualname = f"_tensor_constant{i}"
                    if not hasattr(root, qualname):
                        break
                    i += 1
                self.__dict__['_fx_next_tensor_constant'] = (root, i + 1)
                self.tensor_attrs[a] = qualname
                setattr(self.root, qualname, a)

            return self.create_node("get_attr", qualname, (), {})

        if type(a) in _proxyable_classes:
            # Proxyable-class object created outside the trace: store it on the root as a
            # constant and reference it with get_attr.
            if _RECORDS_META:
                qualname = self.get_fresh_qualname(f"_{a.__class__.__name__}_constant_")
            else:
                i = 0
                while True:
                    qualname = f"_{a.__class__.__name__}_constant_{i}"
                    if not hasattr(self.root, qualname):
                        break
                    i += 1
            setattr(self.root, qualname, a)

            return self.create_node("get_attr", qualname, (), {})

        return super().create_arg(a)

    @compatibility(is_backward_compatible=True)
    def is_leaf_module(self, m: torch.nn.Module, module_qualified_name: str) -> bool:
        """
        Whether a call to ``m`` is recorded as one opaque ``call_module`` node
        instead of being traced into. By default: modules defined in ``torch.nn`` /
        ``torch.ao.nn``, except ``Sequential``.

        Args:
            m: the module being called.
            module_qualified_name: dotted path of ``m`` below the root (``foo.bar``).
        """
        mod_name = m.__module__
        return (
            (mod_name.startswith("torch.nn") or mod_name.startswith("torch.ao.nn"))
            and not isinstance(m, torch.nn.Sequential)
        )

    @compatibility(is_backward_compatible=True)
    def path_of_module(self, mod: torch.nn.Module) -> str:
        """
        Return the dotted name under which ``mod`` lives in ``self.root``
        (``NameError`` when it is not one of its submodules).
        """
        # Table built when the trace started.
        if self.submodule_paths:
            path = self.submodule_paths.get(mod)
            if path is None:
                raise NameError("module is not installed as a submodule")
            assert isinstance(path, str)
            return path
        # No table: scan the hierarchy.
        else:
            for n, p in self.root.named_modules():
                if mod is p:
                    return n
            raise NameError("module is not installed as a submodule")

    @compatibility(is_backward_compatible=True)
    def call_module(
        self,
        m: torch.nn.Module,
        forward: Callable[..., Any],
        args: Tuple[Any, ...],
        kwargs: Dict[str, Any],
    ) -> Any:
        """
        Hook called for every ``nn.Module`` invocation during tracing.

        Leaf modules (see ``is_leaf_module``) are recorded as a ``call_module`` node
        and a Proxy is returned; other modules are executed through ``forward`` so
        their operations are traced inline. Override to change that policy.

        Args:
            m: the called module.
            forward: runs the module's original ``__call__``.
            args, kwargs: arguments of the call.
        """
        module_qualified_name = self.path_of_module(m)
        if _RECORDS_META:
            return self._call_module_in_scope(m, module_qualified_name, forward, args, kwargs)
        if not self.is_leaf_module(m, module_qualified_name):
            return forward(*args, **kwargs)
        return self.create_proxy("call_module", module_qualified_name, args, kwargs)

    def _call_module_in_scope(self, m, module_qualified_name, forward, args, kwargs):
        """torch.fx 2.x's call_module (Note [Tracing metadata]): the call runs with ``scope`` set to
        the module and its entry pushed on ``module_stack`` (keyed ``path@k`` on the k-th repeated
        call of the same path)."""
        with ScopeContextManager(self.scope, Scope(module_qualified_name, type(m))) as scope:
            num_calls = self.num_calls.get(module_qualified_name, 0)
            module_key = f"{scope.module_path}@{num_calls}" if num_calls > 0 else scope.module_path
            self.module_stack[module_key] = (module_qualified_name, scope.module_type)
            self.num_calls[module_qualified_name] = num_calls + 1
            if not self.is_leaf_module(m, module_qualified_name):
                ret_val = forward(*args, **kwargs)
            else:
                ret_val = self.create_proxy("call_module", module_qualified_name, args, kwargs)
            key, _ = self.module_stack.popitem(last=True)
            if key != module_key:
                raise AssertionError(f"Unexpected key {key}, expected {module_key}")
        return ret_val

    @compatibility(is_backward_compatible=False)
    def getattr(self, attr: str, attr_val: Any, parameter_proxy_cache: Dict[str, Any]):
        """
        Hook called for attribute reads on ``nn.Module`` objects during tracing.

        Parameters of ``root`` (and buffers when ``proxy_buffer_attributes`` is set)
        come back as ``get_attr`` proxies, memoised per name in
        ``parameter_proxy_cache``; anything else is returned as is.
        """
        if isinstance(attr_val, torch.nn.Parameter):
            n = self._fx_lookup('parameters', attr_val)
            if n is not None:
                return self._fx_param_proxy(n, attr_val, parameter_proxy_cache)

        if self.proxy_buffer_attributes and isinstance(attr_val, torch.Tensor):
            n = self._fx_lookup('buffers', attr_val)
            if n is not None:
                return self._fx_param_proxy(n, attr_val, parameter_proxy_cache)

        return attr_val

    def _fx_param_proxy(self, n: str, attr_val: Any, parameter_proxy_cache: Dict[str, Any]):
        proxy = parameter_proxy_cache.get(n)
        if proxy is None:
            kwargs = {}
            if _create_proxy_accepts_factory(self):
                kwargs["proxy_factory_fn"] = (
                    None
                    if not self.param_shapes_constant
                    else lambda node: ParameterProxy(self, node, n, attr_val)
                )
            proxy = self.create_proxy("get_attr", n, (), {}, **kwargs)  # type: ignore[arg-type]
            parameter_proxy_cache[n] = proxy
        return proxy

    # Not a stable API yet.
    @compatibility(is_backward_compatible=False)
    def create_args_for_root(self, root_fn, is_module, concrete_args=None):
        """
        Emit a ``placeholder`` per parameter of the root function (``*args`` and
        ``**kwargs`` included); return the function to run and its arguments.
        """
        # A function decorated with ``functools.wraps`` has the interesting
        # signature on the innermost callable.
        fn_for_analysis = inspect.unwrap(root_fn)
        co = fn_for_analysis.__code__
        total_args = co.co_argcount + co.co_kwonlyargcount
        orig_args = list(co.co_varnames)
        names_iter = iter(co.co_varnames)
        args: List[Any] = []
        skip_arg_idx = 0
        if is_module:
            if total_args == 0:
                raise RuntimeError(
                    "``self`` argument cannot be part of *args expansion!"
                )
            skip_arg_idx = 1
            next(names_iter)  # skip self
            args.append(self.root)

        # torch.fx 2.x: flat concrete_args (a tuple) for a root whose only named parameter is
        # `self` (or, for a function, the first) and that takes *args/**kwargs become
        # placeholders input_0, input_1, ... passed straight through.
        if (_torch_compat.FX_API_2 and isinstance(concrete_args, tuple) and len(concrete_args) > 0
                and (co.co_flags & HAS_VARSTUFF) and total_args == 1):
            for i, concrete_arg in enumerate(concrete_args):
                out = self.create_proxy("placeholder", f"input_{i}", (), {})
                if _is_ph(concrete_arg):
                    _transfer_ph_attrs(concrete_arg, out.node)
                args.append(out)
            return root_fn, args

        sig = inspect.signature(fn_for_analysis)
        annotations = fn_for_analysis.__annotations__

        def proxy_placeholder(name: str):
            if concrete_args is not None and name in concrete_args:
                cnt = 0

                def replace_ph(x):
                    nonlocal cnt
                    cnt += 1
                    param = sig.parameters[name]
                    default = (
                        ()
                        if param.default is inspect.Parameter.empty
                        else (param.default,)
                    )
                    out = self.create_proxy(
                        "placeholder", f"{name}_{str(cnt)}", default, {}
                    )
                    if _is_ph(x):
                        _transfer_ph_attrs(x, out.node)
                        return out
                    if (
                        type(x) == bool
                        or type(x) in base_types
                        and type(x) != torch.Tensor
                    ):
                        torch._assert(
                            out == x,
                            f"{name} has been specialized to have value {x} but got another value",
                        )
                    elif type(x) == type(None):
                        args = (
                            out,
                            f"{name} has been specialized to have value None but got another value",
                        )
                        self.create_proxy("call_function", _assert_is_none, args, {})
                    else:
                        warnings.warn(
                            f"Was not able to add assertion to guarantee correct input {name} to "
                            f"specialized function. It is up to the user to make sure that your inputs match the "
                            f"inputs you specialized the function with."
                        )

                    return x

                return pytree.tree_map(replace_ph, concrete_args[name])
            if name[0] == "*":
                default = ()
            else:
                param = sig.parameters[name]
                default = () if param.default is inspect.Parameter.empty else (param.default,)  # type: ignore[assignment]
            return self.create_proxy(
                "placeholder",
                name,
                default,
                {},
                type_expr=annotations.get(name, None),
            )

        arg_names = [next(names_iter) for idx in range(skip_arg_idx, total_args)]
        if isinstance(concrete_args, tuple):
            if len(arg_names) != len(concrete_args):
                raise RuntimeError(
                    f"Tracing expected {len(arg_names)} arguments but got {len(concrete_args)} concrete arguments"
                )
            concrete_args = {name: val for name, val in zip(arg_names, concrete_args)}
        args.extend(proxy_placeholder(names) for names in arg_names)

        if co.co_kwonlyargcount > 0 or co.co_flags & HAS_VARSTUFF:
            # TODO: carry type annotations for the *args / **kwargs placeholders.
            if co.co_flags & inspect.CO_VARARGS:
                args.append(proxy_placeholder("*" + next(names_iter)))
            if co.co_flags & inspect.CO_VARKEYWORDS:
                args.append(proxy_placeholder("**" + next(names_iter)))
            root_fn = _patch_function(root_fn, len(args))

        flat_args, in_spec = pytree.tree_flatten(tuple(args))
        if any(not isinstance(i, pytree.LeafSpec) for i in _torch_compat.tree_spec_children(in_spec)):
            # Structured (pytree) concrete_args: trace a wrapper that takes the flattened
            # inputs and rebuilds the original arguments.
            self.graph._codegen = _PyTreeCodeGen(
                _PyTreeInfo(orig_args[:total_args], in_spec, None)
            )

            def flatten_fn(*args):
                tree_args = pytree.tree_unflatten(list(args), in_spec)
                tree_out = root_fn(*tree_args)
                out_args, out_spec = pytree.tree_flatten(tree_out)
                assert isinstance(self.graph._codegen, _PyTreeCodeGen)
                self.graph._codegen.pytree_info = (
                    self.graph._codegen.pytree_info._replace(out_spec=out_spec)
                )
                return out_args

            return flatten_fn, flat_args
        return root_fn, args

    @compatibility(is_backward_compatible=True)
    def trace(
        self,
        root: Union[torch.nn.Module, Callable[..., Any]],
        concrete_args: Optional[Dict[str, Any]] = None,
    ) -> Graph:
        """
        Trace ``root`` (module or plain callable) and return the recorded ``Graph``.

        For a plain callable a fresh ``nn.Module`` becomes ``self.root`` and
        receives the constants met while tracing.

        Args:
            root: module or function to trace.
            concrete_args: argument values to specialise on rather than trace.
        """
        global _is_fx_tracing_flag
        old_is_fx_tracing_flag = _is_fx_tracing_flag
        old_torch_flag = _torch_compat.get_fx_tracing()
        _is_fx_tracing_flag = True
        # Libraries query torch.fx._symbolic_trace.is_fx_tracing(); keep it in sync.
        _torch_compat.set_fx_tracing(True)
        try:
            if isinstance(root, torch.nn.Module):
                # A lazy GraphModule generates its forward now: its placeholder
                # forward cannot be traced (fxcpp._lazy_graph_module).
                from ._lazy_graph_module import _LazyGraphModule
                _LazyGraphModule.force_recompile(root)
                self.root = root

                assert hasattr(
                    type(root), self.traced_func_name
                ), f"traced_func_name={self.traced_func_name} doesn't exist in {type(root).__name__}"

                fn = getattr(type(root), self.traced_func_name)
                self.submodule_paths = _C._module_paths(root, _module_named_modules)
            else:
                self.root = torch.nn.Module()
                fn = root

            # Reset the per-trace caches.
            self.__dict__.pop('_fx_id_caches', None)
            self.__dict__.pop('_fx_next_tensor_constant', None)

            tracer_cls: Optional[Type["Tracer"]] = getattr(self, "__class__", None)
            self.graph = Graph(tracer_cls=tracer_cls)
            if _RECORDS_META and hasattr(fn, '__code__'):  # Note [Code object file names]
                code = fn.__code__
                self.graph._co_fields = {'co_name': code.co_name, 'co_filename': code.co_filename,
                                         'co_firstlineno': code.co_firstlineno}

            # Map constant tensor attributes of the module hierarchy to their
            # qualified names (used by create_arg).
            self.tensor_attrs: Dict[Union[torch.Tensor, ScriptObject], str] = {}
            _collect_tensor_attrs(self.root, self.tensor_attrs)

            assert isinstance(fn, FunctionType)

            fn_globals = fn.__globals__  # read now: create_args_for_root may swap fn
            fn, args = self.create_args_for_root(
                fn, isinstance(root, torch.nn.Module), concrete_args
            )

            parameter_proxy_cache: Dict[str, Proxy] = {}  # one get_attr proxy per attribute

            tracer_getattr = self.getattr
            default_getattr = type(self).getattr is Tracer.getattr

            # Parameter reads through Module.__getattr__ have to yield proxies, otherwise
            # method calls made on them would go unrecorded.
            if default_getattr and not self.proxy_buffer_attributes:
                @functools.wraps(_orig_module_getattr)
                def module_getattr_wrapper(mod, attr):
                    attr_val = _orig_module_getattr(mod, attr)
                    # (torch.nn.Parameter has a slow Python-level __instancecheck__)
                    if isinstance(attr_val, torch.Tensor) and isinstance(attr_val, torch.nn.Parameter):
                        return tracer_getattr(attr, attr_val, parameter_proxy_cache)
                    return attr_val
            else:
                @functools.wraps(_orig_module_getattr)
                def module_getattr_wrapper(mod, attr):
                    attr_val = _orig_module_getattr(mod, attr)
                    return tracer_getattr(attr, attr_val, parameter_proxy_cache)

            autowrap_ids = self._autowrap_function_ids

            @functools.wraps(_orig_module_call)
            def module_call_wrapper(mod, *args, **kwargs):
                def forward(*args, **kwargs):
                    return _orig_module_call(mod, *args, **kwargs)

                _autowrap_check(
                    patcher,
                    getattr(getattr(mod, "forward", mod), "__globals__", {}),
                    autowrap_ids,
                )
                return self.call_module(mod, forward, args, kwargs)

            with _new_patcher() as patcher:
                # deduplicate=False: a nested trace patches these once more.
                patcher.patch_method(
                    torch.nn.Module,
                    "__getattr__",
                    module_getattr_wrapper,
                    deduplicate=False,
                )
                patcher.patch_method(
                    torch.nn.Module, "__call__", module_call_wrapper, deduplicate=False
                )
                _patch_wrapped_functions(patcher)
                _autowrap_check(patcher, fn_globals, autowrap_ids)
                for module in self._autowrap_search:
                    _autowrap_check(
                        patcher, module.__dict__, autowrap_ids
                    )
                self.create_node(
                    "output",
                    "output",
                    (self.create_arg(fn(*args)),),
                    {},
                    type_expr=fn.__annotations__.get("return", None),
                )

            self.submodule_paths = None
        finally:
            _is_fx_tracing_flag = old_is_fx_tracing_flag
            _torch_compat.set_fx_tracing(old_torch_flag)
            self.__dict__.pop('_fx_id_caches', None)
        return self.graph

    def __deepcopy__(self, memo):
        # Modules in _autowrap_search can't be deep-copied; that list is copied shallowly.
        new_tracer = Tracer.__new__(Tracer)

        for k, v in self.__dict__.items():
            if k in {'_autowrap_search'}:
                new_obj = copy.copy(v)
            else:
                new_obj = copy.deepcopy(v, memo)

            new_tracer.__dict__[k] = new_obj

        return new_tracer


_library_create_args.add(Tracer.create_arg)


# (globals dict, name) pairs registered through wrap(); patched for each trace.
_wrapped_fns_to_patch: List[Tuple[dict, str]] = []

# (class, method name) pairs recorded as call_method nodes (used for Tensor methods).
_wrapped_methods_to_patch: List[Tuple[type, str]] = []

if os.environ.get("FX_PATCH_GETITEM") == "1":
    # Opt-in: helps models that index tensors with proxies (e.g. BERT positional
    # embeddings) but is known to break quantization (pytorch issue 50710).
    _wrapped_methods_to_patch.append((torch.Tensor, "__getitem__"))


def _find_proxy(*objects_to_search):
    """Return the first Proxy inside the (nested) arguments, or None."""
    def search(x):
        if isinstance(x, Proxy):
            return x
        if isinstance(x, (tuple, list)):
            for e in x:
                r = search(e)
                if r is not None:
                    return r
        elif isinstance(x, dict):
            for e in x.values():
                r = search(e)
                if r is not None:
                    return r
        elif isinstance(x, slice):
            for e in (x.start, x.stop, x.step):
                r = search(e)
                if r is not None:
                    return r
        return None

    return search(objects_to_search)


# orig function -> its (stateless) tracing wrapper, reused across traces
_wrapped_func_cache: Dict[int, Tuple[Callable, Callable]] = {}


def _get_wrapped_func(orig_fn):
    hit = _wrapped_func_cache.get(id(orig_fn))
    if hit is not None and hit[0] is orig_fn:
        return hit[1]
    w = _create_wrapped_func(orig_fn)
    _wrapped_func_cache[id(orig_fn)] = (orig_fn, w)
    return w


def _create_wrapped_func(orig_fn):
    @functools.wraps(orig_fn)
    def wrapped(*args, **kwargs):
        """Record a ``call_function`` node for ``orig_fn`` when an argument is a Proxy;
        otherwise just call it."""
        proxy = _find_proxy(args, kwargs)
        if proxy is not None:
            return_proxy = proxy.tracer.create_proxy(
                "call_function", orig_fn, args, kwargs
            )
            return_proxy.node.meta["is_wrapped"] = True
            return return_proxy
        return orig_fn(*args, **kwargs)

    return wrapped


def _create_wrapped_method(cls, name):
    orig_fn = getattr(cls, name)

    @functools.wraps(orig_fn)
    def wrapped(*args, **kwargs):
        """Record a ``call_method`` node when an argument is a Proxy; otherwise call
        the original method."""
        proxy = _find_proxy(args, kwargs)
        if proxy is not None:
            return proxy.tracer.create_proxy("call_method", name, args, kwargs)
        return orig_fn(*args, **kwargs)

    return wrapped


class _PatchedFn(NamedTuple):
    frame_dict: Any
    fn_name: str
    orig_fn: Any
    new_fn: Any = None

    def revert(self):
        raise NotImplementedError()

    def patch(self):
        raise NotImplementedError()


class _PatchedFnSetItem(_PatchedFn):
    def revert(self):
        self.frame_dict[self.fn_name] = self.orig_fn

    def patch(self):
        self.frame_dict[self.fn_name] = self.new_fn


class _PatchedFnDel(_PatchedFn):
    def revert(self):
        del self.frame_dict[self.fn_name]

    def patch(self):
        self.frame_dict[self.fn_name] = self.new_fn


class _PatchedFnSetAttr(_PatchedFn):
    def revert(self):
        setattr(self.frame_dict, self.fn_name, self.orig_fn)

    def patch(self):
        setattr(self.frame_dict, self.fn_name, self.new_fn)


# Attribute marking functions installed by a _Patcher (value: deduplicate flag).
_ALREADY_PATCHED = "__fx_already_patched"


class _Patcher(object):
    def __init__(self):
        super(_Patcher, self).__init__()
        self.patches_made: List[_PatchedFn] = []
        self.visited: Set[int] = set()

    def patch(
        self,
        frame_dict: Dict[str, Any],
        name: str,
        new_fn: Callable,
        deduplicate: bool = True,
    ):
        """Set ``frame_dict[name] = new_fn`` until the patcher exits."""
        setattr(new_fn, _ALREADY_PATCHED, deduplicate)
        if name not in frame_dict and hasattr(builtins, name):
            self.patches_made.append(_PatchedFnDel(frame_dict, name, None, new_fn))
        elif getattr(frame_dict[name], _ALREADY_PATCHED, False):
            return  # wrapper already installed
        else:
            self.patches_made.append(
                _PatchedFnSetItem(frame_dict, name, frame_dict[name], new_fn)
            )
        frame_dict[name] = new_fn

    def patch_method(
        self, cls: type, name: str, new_fn: Callable, deduplicate: bool = True
    ):
        """Set ``cls.name = new_fn`` until the patcher exits."""
        setattr(new_fn, _ALREADY_PATCHED, deduplicate)
        orig_fn = getattr(cls, name)
        if getattr(orig_fn, _ALREADY_PATCHED, False):
            return  # wrapper already installed
        self.patches_made.append(_PatchedFnSetAttr(cls, name, orig_fn, new_fn))
        setattr(cls, name, new_fn)

    def visit_once(self, thing: Any):
        """True the first time ``thing`` is passed in, False afterwards."""
        idx = id(thing)
        if idx in self.visited:
            return False
        self.visited.add(idx)
        return True

    def revert_all_patches(self):
        """Undo every patch for now (they stay recorded: reapply_all_patches redoes them)."""
        for patch in self.patches_made:
            patch.revert()
        return self.patches_made

    def reapply_all_patches(self):
        """Redo every recorded patch (after revert_all_patches)."""
        for patch in self.patches_made:
            patch.patch()
        return self.patches_made

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        """Revert every patch made through this patcher."""
        while self.patches_made:
            # newest first, so a name patched twice gets its original back
            self.patches_made.pop().revert()
        self.visited.clear()


#: The patcher of the trace running now (None outside tracing): torch.fx 2.x's name.
CURRENT_PATCHER: Optional[_Patcher] = None


@contextlib.contextmanager
def _new_patcher():
    """A fresh patcher, CURRENT_PATCHER while the block runs, its patches reverted at the end.
    On torch 2.x torch.fx's own CURRENT_PATCHER names it too, so torch's code that steps out of
    tracing (Dynamo compiling a frame: torch.fx._symbolic_trace._maybe_revert_all_patches)
    reverts fxcpp's patches as it reverts torch.fx's."""
    global CURRENT_PATCHER
    prior = CURRENT_PATCHER
    shares = hasattr(_torch_fx_symbolic_trace, 'CURRENT_PATCHER')
    prior_torch = _torch_fx_symbolic_trace.CURRENT_PATCHER if shares else None
    patcher = _Patcher()
    CURRENT_PATCHER = patcher
    if shares:
        _torch_fx_symbolic_trace.CURRENT_PATCHER = patcher
    try:
        with patcher:
            yield patcher
    finally:
        CURRENT_PATCHER = prior
        if shares:
            _torch_fx_symbolic_trace.CURRENT_PATCHER = prior_torch


@contextlib.contextmanager
def _maybe_revert_all_patches():
    """Within the block, the running trace's patches are undone (torch.fx 2.x's helper)."""
    patcher = CURRENT_PATCHER
    removed = made = None
    try:
        if patcher is not None:
            removed = patcher.revert_all_patches()
        yield
    finally:
        if patcher is not None:
            made = patcher.reapply_all_patches()
        if made != removed:
            raise AssertionError("CURRENT_PATCHER was changed during a revert_all_patches")


def _all_wrapped_fns_to_patch():
    # fxcpp's own registry plus everything registered through torch.fx.wrap by
    # other libraries (e.g. torchvision.ops.stochastic_depth).
    return chain(_wrapped_fns_to_patch, _torch_compat.fx_wrapped_fns())


def _all_wrapped_methods_to_patch():
    return chain(_wrapped_methods_to_patch, _torch_compat.fx_wrapped_methods())


def _patch_wrapped_functions(patcher: _Patcher):
    """
    Install tracing wrappers for every function and method registered with
    ``wrap()`` (ours and torch.fx's).
    """
    for frame_dict, name in _all_wrapped_fns_to_patch():
        if name not in frame_dict and hasattr(builtins, name):
            orig_fn = getattr(builtins, name)
        else:
            orig_fn = frame_dict[name]
        if getattr(orig_fn, _ALREADY_PATCHED, False):
            continue  # registered twice (e.g. via both fxcpp.wrap and torch.fx.wrap)
        patcher.patch(frame_dict, name, _get_wrapped_func(orig_fn))

    seen: Set[Tuple[int, str]] = set()
    for cls, name in _all_wrapped_methods_to_patch():
        if (id(cls), name) in seen:
            continue
        seen.add((id(cls), name))
        patcher.patch_method(cls, name, _create_wrapped_method(cls, name))


def _autowrap_check(
    patcher: _Patcher, frame_dict: Dict[str, Any], function_ids: Set[int]
):
    """
    Replace autowrap candidates (``math.sqrt`` and the like) found in
    ``frame_dict`` with tracing wrappers; each namespace is visited once.
    """
    if patcher.visit_once(frame_dict):
        for name, value in frame_dict.items():
            if (
                not name.startswith("_")
                and callable(value)
                and id(value) in function_ids
            ):
                patcher.patch(frame_dict, name, _get_wrapped_func(value))


@compatibility(is_backward_compatible=True)
def wrap(fn_or_name: Union[str, Callable]):
    """
    Register a global function, or the name of one, as a leaf function: while
    tracing, calls to it are recorded as ``call_function`` nodes instead of
    being traced into. Call it at module top level or use it as a decorator.

    Args:
        fn_or_name: the function, or the name of a global of the calling module.
    """
    if not callable(fn_or_name) and not isinstance(fn_or_name, str):
        raise RuntimeError(
            "Unsupported type for global function! Must be either a callable or "
            "string name"
        )

    if callable(fn_or_name):
        assert not isinstance(fn_or_name, str)  # narrows the type for mypy
        fn_name = fn_or_name.__name__
    else:
        assert isinstance(
            fn_or_name, str
        ), "fn_or_name must be a global function or string name"
        fn_name = fn_or_name

    f = sys._getframe(1)
    if f.f_code.co_name != "<module>":
        raise NotImplementedError("wrap must be called at the top level of a module")

    _wrapped_fns_to_patch.append((f.f_globals, fn_name))
    return fn_or_name


@compatibility(is_backward_compatible=True)
def symbolic_trace(
    root: Union[torch.nn.Module, Callable[..., Any]],
    concrete_args: Optional[Dict[str, Any]] = None,
) -> GraphModule:
    """
    Trace ``root`` and return a ``GraphModule`` built from the recorded graph.

    ``concrete_args`` pins chosen inputs to fixed values, so control flow that
    depends on them can be traced; inside a structured value, ``PH`` marks the
    entries that stay real inputs (structures are flattened with pytree).
    Same behaviour as ``torch.fx.symbolic_trace``.

    Args:
        root: ``nn.Module`` or function to trace.
        concrete_args: argument name -> value to specialise on.
    """
    tracer = Tracer()
    graph = tracer.trace(root, concrete_args)
    name = (
        root.__class__.__name__ if isinstance(root, torch.nn.Module) else root.__name__
    )
    from ._lazy_graph_module import _make_graph_module  # it imports graph_module, which imports this module
    return _make_graph_module(tracer.root, graph, name)


def __getattr__(name):
    # torch.fx 2.x's module has _make_graph_module (from _lazy_graph_module, which imports
    # graph_module, which imports this module: fetched on first use).
    if name == '_make_graph_module':
        from ._lazy_graph_module import _make_graph_module
        return _make_graph_module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# torch.fx's own helper (wrapped there), so that generated code names it as
# torch.fx's does: `torch.fx._symbolic_trace._assert_is_none(...)`.
from torch.fx._symbolic_trace import _assert_is_none  # noqa: E402,F401

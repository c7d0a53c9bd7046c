"""fxcpp.aten._lower: lowering a model to a graph of ATen operators.

``lower(model, *example_inputs)`` returns an fxcpp ``GraphModule`` whose nodes
are placeholders, get_attrs (parameters, buffers, constants), the output, and
``call_function``s of concrete ATen overloads (``torch.ops.aten.conv2d.default``)
or of a closed set of primitives for shape arithmetic (``check_lowered``
lists them). See Note [Value-carrying proxies] (``_trace.py``) for how the
model is run, and Note [Overload resolution] (``_schema.py``) for how calls
become overloads.
"""
import builtins
import operator
from typing import Any, Callable, Dict, Optional

import torch

from ..graph import Graph
from ..graph_module import GraphModule
from ..node import Node, map_arg
from ._trace import (LoweringContext, LoweringError, ScalarProxy, TensorProxy, _contains_proxy, _target_repr,
                     patched, patched_target)

__all__ = ['lower', 'register_lowering', 'LoweringError', 'check_lowered', 'LoweringContext',
           'PRIMITIVES', 'SHAPE_ATTRS']

_REGISTRY: Dict[Any, Callable] = {}

#: call_function targets besides ATen overloads that a lowered graph may use
PRIMITIVES = (operator.getitem, operator.add, operator.sub, operator.mul, operator.floordiv,
              operator.truediv, operator.mod, operator.neg, builtins.getattr)
#: attributes ``getattr(tensor, name)`` may read
SHAPE_ATTRS = ('shape', 'dtype', 'device', 'ndim')


_MISSING = object()


def register_lowering(target, fn: Optional[Callable] = _MISSING):
    """Register how to lower ``target``; usable as a decorator.

    ``target`` is an ``nn.Module`` subclass (a leaf module of the traced graph)
    or a callable (a function the graph calls, e.g. one wrapped with
    ``fx.wrap``, or a torch function). The lowering is called as
    ``fn(ctx, *args, **kwargs)`` for callables and ``fn(ctx, module, *args,
    **kwargs)`` for module classes, with proxies for the values the graph
    computes. It returns the result (proxies, or structures of them). Inside,
    ordinary torch code on the proxies is lowered as usual, and
    ``ctx.call(torch.ops.aten.<op>.<overload>, *args, **kwargs)`` emits one
    overload explicitly::

        @fxcpp.aten.register_lowering(MySwish)
        def _(ctx, module, x):
            return ctx.call(torch.ops.aten.mul.Tensor, x, torch.sigmoid(x))

    ``register_lowering(target, fn)`` registers directly and returns ``fn``;
    ``register_lowering(target, None)`` removes the lowering of ``target``.
    """
    def deco(f):
        if f is None:
            _REGISTRY.pop(target, None)
        else:
            _REGISTRY[target] = f
        return f
    if fn is not _MISSING:
        return deco(fn)
    return deco


def _lookup(registry, obj_or_cls):
    if isinstance(obj_or_cls, type):
        for c in obj_or_cls.__mro__:
            f = registry.get(c)
            if f is not None:
                return f
        return None
    try:
        return registry.get(obj_or_cls)
    except TypeError:
        return None


def _as_graph_module(model) -> GraphModule:
    if isinstance(model, GraphModule):
        return model
    if isinstance(model, torch.fx.GraphModule):
        from ..interop import from_torch_fx
        return from_torch_fx(model)
    if isinstance(model, torch.nn.Module):
        from .._symbolic_trace import symbolic_trace
        return symbolic_trace(model)
    raise TypeError(f'fxcpp.aten.lower expects an nn.Module or a GraphModule, not {type(model).__name__}')


def _is_torch_nn(mod) -> bool:
    m = type(mod).__module__ or ''
    return m.startswith('torch.nn.') and not m.startswith(('torch.nn.quantized', 'torch.nn.intrinsic',
                                                          'torch.nn.qat'))


def _hint(target_text):
    return (f'Register a lowering with `@fxcpp.aten.register_lowering({target_text})` (a function '
            f'`f(ctx, *args, **kwargs)` -- `f(ctx, module, *args, **kwargs)` for a module class -- that '
            f'computes the result from the proxies with torch code or `ctx.call(torch.ops.aten.<op>.<overload>, '
            f'...)`), or keep this part of the model in Python.')


def _node_error(node: Node, err: Exception, module=None) -> LoweringError:
    if node.op == 'call_module':
        tgt = f'{node.target!r} ({_target_repr(type(module))})' if module is not None else repr(node.target)
        hint_target = _target_repr(type(module)) if module is not None else node.target
    elif node.op == 'call_method':
        tgt = f'Tensor.{node.target}'
        hint_target = f'torch.Tensor.{node.target}'
    else:
        tgt = _target_repr(node.target)
        hint_target = tgt
    reason = getattr(err, 'reason', None) or f'{type(err).__name__}: {err}'
    inner = getattr(err, 'target', None)
    inner_text = ''
    if inner is not None and inner is not node.target:
        inner_text = f' (inside, at {inner if isinstance(inner, str) else _target_repr(inner)})'
    where = _where(err) if inner is not None or not isinstance(err, LoweringError) else ''
    msg = (f'cannot lower node `{node.name}` ({node.op} {tgt}){inner_text}{where}: {reason}\n' + _hint(hint_target))
    e = LoweringError(msg, node=node, target=node.target)
    e.reason = reason
    return e


def _where(err: BaseException) -> str:
    """' at FILE:LINE in FUNC' for the innermost frame of ``err`` outside fxcpp.aten."""
    import os
    import traceback
    here = os.path.dirname(os.path.abspath(__file__))
    frames = [f for f in traceback.extract_tb(err.__traceback__)
              if not os.path.abspath(f.filename).startswith(here)]
    if not frames:
        return ''
    f = frames[-1]
    return f' (at {f.filename}:{f.lineno} in {f.name})'


def _build_root(attrs: Dict[str, torch.Tensor]) -> torch.nn.Module:
    root = torch.nn.Module()
    for qual, t in attrs.items():
        *path, leaf = qual.split('.')
        mod = root
        for p in path:
            sub = mod._modules.get(p)
            if sub is None:
                sub = torch.nn.Module()
                mod.add_module(p, sub)
            mod = sub
        if isinstance(t, torch.nn.Parameter):
            mod.register_parameter(leaf, t)
        else:
            mod.register_buffer(leaf, t)
    return root


def _dce(graph: Graph):
    for node in reversed(list(graph.nodes)):
        if node.op in ('call_function', 'get_attr') and len(node.users) == 0:
            t = node.target
            if isinstance(t, torch._ops.OpOverload) and t._schema.is_mutable:
                continue
            graph.erase_node(node)


def _cse_primitives(graph: Graph):
    """Merge duplicate getattr/getitem nodes on the same inputs."""
    seen = {}
    for node in list(graph.nodes):
        if node.op == 'call_function' and node.target in (builtins.getattr, operator.getitem) \
                and not node.kwargs and all(isinstance(a, (Node, int, str)) for a in node.args):
            key = (node.target,) + tuple(('n', id(a)) if isinstance(a, Node) else ('v', type(a), a)
                                         for a in node.args)
            prev = seen.get(key)
            if prev is not None:
                node.replace_all_uses_with(prev)
                graph.erase_node(node)
            else:
                seen[key] = node


def lower(model, *example_inputs, lowerings: Optional[Dict[Any, Callable]] = None, check: bool = True,
          shape_prop: bool = True, progress: Optional[Callable[[int, int], None]] = None) -> GraphModule:
    """Lower ``model`` to a GraphModule of ATen overloads (Note [Value-carrying proxies]).

    Args:
        model: an ``nn.Module`` (traced with ``fxcpp.symbolic_trace`` first), an
            fxcpp ``GraphModule`` or a ``torch.fx.GraphModule``. Lower it in the
            mode it will run in (normally ``model.eval()``).
        example_inputs: one value per placeholder, used to run the model once.
            Sizes stay symbolic (the result runs on other batch sizes); Python
            control flow on sizes specializes to these inputs. Number inputs
            (int, float, bool) stay inputs of the result; Python control flow
            on them raises LoweringError.
        lowerings: extra ``{target: fn}`` lowerings for this call only (see
            ``register_lowering``); they take precedence over registered ones.
        check: run ``check_lowered`` on the result.
        shape_prop: record ``node.meta['tensor_meta']`` by running the result
            on the example inputs (as ``fxcpp.passes.shape_prop.ShapeProp``).
        progress: called as ``progress(done, total)`` after each node of the
            traced graph is lowered (``fxcpp export`` draws a progress bar).

    Raises:
        LoweringError: a node cannot be lowered; the message names it, its
            target, and what to do.
    """
    registry = dict(_REGISTRY)
    if lowerings:
        registry.update(lowerings)
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f'fxcpp.aten.lower expects an nn.Module or a GraphModule, not {type(model).__name__}')
    try:
        gm = _as_graph_module(model)
    except Exception as e:  # not symbolically traceable: run forward itself on the proxies
        graph = Graph()
        ctx = LoweringContext(graph, model, registry)
        _run_direct(ctx, model, example_inputs, e)
        return _finish(ctx, graph, example_inputs, check, shape_prop)
    graph = Graph()
    ctx = LoweringContext(graph, gm, registry)
    inputs = list(example_inputs)
    env: Dict[Node, Any] = {}
    output = None

    def load(a):
        return map_arg(a, lambda n: env[n])

    total = len(gm.graph.nodes)
    with torch.no_grad(), patched(ctx):
        for done, node in enumerate(gm.graph.nodes, 1):
            if progress is not None:
                progress(done, total)
            module = None
            try:
                if node.op == 'placeholder':
                    name = node.target.lstrip('*')
                    if node.target.startswith('*') and not node.target.startswith('**'):
                        # `*xs` (torch.fx 2.x traces varargs): the rest of the inputs, one
                        # placeholder each, as a tuple.
                        env[node] = tuple(ctx.input_value(graph.placeholder(f'{name}_{i}'), f'{name}_{i}', v)
                                          for i, v in enumerate(inputs))
                        inputs = []
                    elif inputs:
                        v = inputs.pop(0)
                        env[node] = ctx.input_value(graph.placeholder(name), name, v)
                    elif node.args:
                        env[node] = node.args[0]
                    else:
                        raise LoweringError(f'no example input for placeholder {name}')
                elif node.op == 'get_attr':
                    obj = gm
                    for part in node.target.split('.'):
                        obj = getattr(obj, part)
                    env[node] = ctx.get_attr(node.target, obj) if isinstance(obj, torch.Tensor) else obj
                elif node.op == 'call_function':
                    args, kwargs = load(node.args), load(node.kwargs)
                    fn = _lookup(registry, node.target)
                    if fn is not None:
                        env[node] = fn(ctx, *args, **kwargs)
                    else:
                        env[node] = patched_target(node.target)(*args, **kwargs)
                elif node.op == 'call_method':
                    args, kwargs = load(node.args), load(node.kwargs)
                    self_obj, *rest = args
                    env[node] = getattr(self_obj, node.target)(*rest, **kwargs)
                elif node.op == 'call_module':
                    args, kwargs = load(node.args), load(node.kwargs)
                    module = gm.get_submodule(node.target)
                    fn = _lookup(registry, type(module))
                    if fn is not None:
                        env[node] = fn(ctx, module, *args, **kwargs)
                    elif _is_torch_nn(module):
                        env[node] = module(*args, **kwargs)
                    else:
                        raise LoweringError(
                            f'{_target_repr(type(module))} is a leaf module of the traced graph and not a '
                            'torch.nn module, so fxcpp.aten does not know what it computes')
                elif node.op == 'output':
                    output = load(node.args[0])
            except LoweringError as e:
                if e.node is not None:
                    raise
                raise _node_error(node, e, module) from e
            except Exception as e:
                raise _node_error(node, e, module) from e
        try:
            graph.output(ctx.arg(output))
        except LoweringError as e:
            raise LoweringError(f'cannot lower the output: {e}') from e

    return _finish(ctx, graph, example_inputs, check, shape_prop)


def _run_direct(ctx, model, example_inputs, trace_error):
    """Lower ``model`` by calling its forward on proxies (for models that
    symbolic tracing rejects; Python control flow specializes)."""
    import inspect
    graph = ctx.graph
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        params = []
    args = []
    for i, v in enumerate(example_inputs):
        name = f'arg{i}'
        if i < len(params) and params[i].kind in (params[i].POSITIONAL_ONLY, params[i].POSITIONAL_OR_KEYWORD):
            name = params[i].name
        elif params and params[min(i, len(params) - 1)].kind == params[0].VAR_POSITIONAL or any(
                p.kind == p.VAR_POSITIONAL for p in params):
            var = next(p for p in params if p.kind == p.VAR_POSITIONAL)
            name = f'{var.name}_{i}'
        args.append(ctx.input_value(graph.placeholder(name), name, v))
    registry = ctx.registry
    orig_call = torch.nn.Module.__call__

    def call(mod, *a, **k):
        fn = _lookup(registry, type(mod))
        if fn is not None and (_contains_proxy(a) or _contains_proxy(k)):
            return fn(ctx, mod, *a, **k)
        return orig_call(mod, *a, **k)

    torch.nn.Module.__call__ = call
    try:
        with torch.no_grad(), patched(ctx):
            out = orig_call(model, *args)
            graph.output(ctx.arg(out))
    except Exception as e:
        reason = e.reason if isinstance(e, LoweringError) else f'{type(e).__name__}: {e}'
        target = getattr(e, 'target', None)
        if target is None:
            hint = 'Rewrite that part without data-dependent Python, or keep it in Python.'
        else:
            hint = _hint(target if isinstance(target, str) else _target_repr(target))
        raise LoweringError(f'cannot lower {type(model).__name__}.forward{_where(e)} (run directly on proxies '
                            f'because symbolic tracing failed: {type(trace_error).__name__}: {trace_error}): '
                            f'{reason}\n{hint}', target=target) from e
    finally:
        torch.nn.Module.__call__ = orig_call


def _finish(ctx, graph, example_inputs, check, shape_prop):
    _cse_primitives(graph)
    _dce(graph)
    result = GraphModule(_build_root(ctx.attrs), graph)
    if check:
        check_lowered(result)
    if shape_prop:
        from ..passes.shape_prop import ShapeProp
        ShapeProp(result).propagate(*[x.clone() if isinstance(x, torch.Tensor) else x for x in example_inputs])
    return result


# ---------------------------------------------------------------------------
# the checker

_ARG_TYPES = (bool, int, float, str, torch.dtype, torch.device, torch.layout, torch.memory_format)


def _bad_arg(a, allow_slice=False, allow_dict=False):
    """The first disallowed value inside an argument, or None."""
    if a is None or isinstance(a, Node) or type(a) in _ARG_TYPES or isinstance(
            a, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return None
    if isinstance(a, (list, tuple)):
        for e in a:
            b = _bad_arg(e)
            if b is not None:
                return b
        return None
    if allow_slice and isinstance(a, slice):
        for e in (a.start, a.stop, a.step):
            if not (e is None or isinstance(e, Node) or type(e) is int):
                return e
        return None
    if allow_dict and isinstance(a, dict):
        for e in a.values():
            b = _bad_arg(e)
            if b is not None:
                return b
        return None
    return a


def _is_tensor_node(n) -> bool:
    tm = n.meta.get('tensor_meta') if isinstance(n, Node) else None
    return type(tm).__name__ == 'TensorMetadata'


def check_lowered(gm) -> None:
    """Raise ``LoweringError`` naming the first node of ``gm`` (a GraphModule or
    Graph) that is not allowed in a lowered graph: only placeholder, output,
    get_attr, call_function of ``torch._ops.OpOverload``s and of ``PRIMITIVES``
    (``getattr`` only for ``SHAPE_ATTRS``; arithmetic only on non-tensors),
    with arguments made of nodes, None, bool, int, float, str, dtype, device,
    layout, memory format and lists/tuples of these (a slice only as a
    getitem index; a dict only in the output)."""
    graph = gm.graph if hasattr(gm, 'graph') else gm

    def fail(node, why):
        raise LoweringError(f'node `{node.name}` ({node.op} {_target_repr(node.target)}) is not allowed in a '
                            f'lowered graph: {why}', node=node, target=node.target)

    for node in graph.nodes:
        if node.op == 'output':
            b = _bad_arg(node.args[0], allow_dict=True)
            if b is not None:
                fail(node, f'the output holds a {type(b).__name__}')
            continue
        if node.op in ('placeholder', 'get_attr'):
            continue
        if node.op != 'call_function':
            fail(node, f'op {node.op!r}; only placeholder, get_attr, call_function and output are allowed')
        t = node.target
        is_getitem = t is operator.getitem
        for a in list(node.args) + list(node.kwargs.values()):
            b = _bad_arg(a, allow_slice=is_getitem)
            if b is not None:
                fail(node, f'argument {b!r:.80} of type {type(b).__name__}')
        if isinstance(t, torch._ops.OpOverload):
            schema = t._schema
            qualified = schema.name + ('.' + schema.overload_name if schema.overload_name else '')
            if not torch._C._dispatch_has_kernel(qualified):
                fail(node, f'{qualified} is a TorchScript builtin, not a dispatcher operator: the C++ runtime '
                           'cannot call it')
            continue
        if not any(t is p for p in PRIMITIVES):
            fail(node, 'the target is neither an ATen overload (torch.ops.aten.<op>.<overload>) nor a primitive')
        if t is builtins.getattr:
            if len(node.args) != 2 or not isinstance(node.args[0], Node) or node.args[1] not in SHAPE_ATTRS:
                fail(node, f'getattr may only read {", ".join(SHAPE_ATTRS)} of a node')
        elif is_getitem:
            if len(node.args) != 2 or not isinstance(node.args[0], Node) or not (
                    type(node.args[1]) is int or isinstance(node.args[1], (slice, Node))):
                fail(node, 'getitem takes a node and an int or slice index')
            if _is_tensor_node(node.args[0]):
                fail(node, 'getitem on a tensor (tensor indexing must use aten ops)')
        else:
            for a in node.args:
                if isinstance(a, Node) and _is_tensor_node(a):
                    fail(node, f'{_target_repr(t)} on a tensor (tensor arithmetic must use aten ops)')
                if not (isinstance(a, Node) or type(a) in (int, float, bool)):
                    fail(node, f'{_target_repr(t)} on a {type(a).__name__}')

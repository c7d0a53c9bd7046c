"""fxcpp.interpreter: Interpreter and Transformer (mirrors torch.fx.interpreter 1.13).

The node loop and argument loading of :meth:`Interpreter.run` and
:meth:`Interpreter.run_node` execute in C++ (``fxcpp._C._interp_run`` /
``_interp_run_node``). Every overridable method below keeps its Python
definition -- it is what ``super()`` calls reach and what the C++ loop calls
when a subclass overrides a method. When a method is *not* overridden (the
attribute found on ``type(self)`` is the one defined here, and the instance
does not shadow it), the C++ loop performs its work directly, without a
Python-level call: e.g. a ``call_function`` node calls its target straight
from C++ with an argument tuple rebuilt from the core argument tree.
"""
import contextlib
import inspect
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import torch

from . import _C, _torch_compat
from . import traceback as fx_traceback
from ._compatibility import compatibility
from ._symbolic_trace import Tracer
from .graph import Graph
from .graph_module import GraphModule
from .node import Argument, Node, Target, map_aggregate, map_arg
from .proxy import Proxy

__all__ = ['Interpreter', 'Transformer']


def _annotate_exception(e: BaseException, node: Node) -> BaseException:
    """torch.fx's annotation of an exception raised while executing ``node``.

    Returns the exception to raise (a new RuntimeError for KeyError, as in torch.fx).
    """
    msg = f"While executing {node.format_node()}"
    msg = '{}\n\n{}'.format(e.args[0], msg) if e.args else str(msg)
    msg += f"\nOriginal traceback:\n{node.stack_trace}"
    msg += _torch_compat.INTERPRETER_ERROR_FOOTER
    e.args = (msg,) + e.args[1:]
    if isinstance(e, KeyError):
        r = RuntimeError(*e.args)
        r.__context__ = e
        return r
    return e


def _last_uses_of(graph) -> Dict[Any, List[Any]]:
    """user -> [values last used by it] for a graph that is not fxcpp's (torch.fx's order)."""
    last_use: Dict[Any, Any] = {}
    out: Dict[Any, List[Any]] = {}
    for node in reversed(graph.nodes):
        for value in node.all_input_nodes:
            if value not in last_use:
                last_use[value] = node
                out.setdefault(node, []).append(value)
    return out


@compatibility(is_backward_compatible=True)
class Interpreter:
    """Executes the graph of a GraphModule one node at a time (see torch.fx.Interpreter).

    ``run`` feeds each node to ``run_node``, which dispatches on the node's op to
    ``placeholder``, ``get_attr``, ``call_function``, ``call_method``,
    ``call_module`` or ``output``; any of these, as well as ``fetch_attr``,
    ``fetch_args_kwargs_from_env`` and ``map_nodes_to_values``, may be overridden.

    Args:
        module: the GraphModule to execute.
        garbage_collect_values: drop each value from ``self.env`` once its last
            user has run (when False, every value is kept).
    """

    if _torch_compat.FX_API_2:
        @compatibility(is_backward_compatible=True)
        def __init__(self, module: torch.nn.Module, garbage_collect_values: bool = True,
                     graph: Optional[Graph] = None):
            # torch.fx 2.x: any module, and the graph to run may be given apart from it.
            self.module = module
            self.submodules = dict(self.module.named_modules())
            self.graph = graph if graph is not None else self.module.graph
            self.env: Dict[Node, Any] = {}
            self.name = "Interpreter"
            self.garbage_collect_values = garbage_collect_values
            self.extra_traceback = True
            if self.garbage_collect_values:
                if isinstance(self.graph, Graph):
                    self.user_to_last_uses: Dict[Node, List[Node]] = _C._interp_last_uses(self.graph)
                else:  # a torch.fx graph (run by torch.fx's loop: see run)
                    self.user_to_last_uses = _last_uses_of(self.graph)
    else:
        @compatibility(is_backward_compatible=True)
        def __init__(self, module: GraphModule, garbage_collect_values: bool = True):
            assert isinstance(module, GraphModule)
            self.module = module
            self.submodules = dict(self.module.named_modules())
            self.graph = self.module.graph
            self.env: Dict[Node, Any] = {}
            self.garbage_collect_values = garbage_collect_values
            if self.garbage_collect_values:
                # user -> [values whose last use is `user`], from the core pass
                # fxcpp::last_uses (one reverse walk, torch.fx's register_last_uses order).
                self.user_to_last_uses: Dict[Node, List[Node]] = _C._interp_last_uses(self.module.graph)

    @compatibility(is_backward_compatible=True)
    def run(self, *args, initial_env: Optional[Dict[Node, Any]] = None, enable_io_processing: bool = True) -> Any:
        """Execute the graph on ``args`` and return what its output node yields.

        Args:
            *args: positional inputs, matched to the placeholders in order.
            initial_env: optional Node -> value mapping; nodes found in it are
                not executed.
            enable_io_processing: pass inputs / outputs through the graph's
                ``process_inputs`` / ``process_outputs``.
        """
        if not isinstance(self.graph, Graph):
            # torch.fx 2.x interprets any module's graph: a torch.fx graph (e.g. an
            # ExportedProgram's module) runs through torch.fx's own loop, with this object's methods
            return torch.fx.Interpreter.run(self, *args, initial_env=initial_env,
                                            enable_io_processing=enable_io_processing)
        if _torch_compat.FX_API_2:
            self.env = initial_env if initial_env is not None else {}
        else:
            self.env = initial_env if initial_env else {}
        if enable_io_processing:
            args = self.graph.process_inputs(*args)
        self.args_iter: Iterator[Any] = iter(args)
        return _C._interp_run(self, self.graph, enable_io_processing)

    if _torch_compat.FX_API_2:
        @contextlib.contextmanager
        def _set_current_node(self, node: Node) -> Iterator[None]:
            """torch.fx 2.x: the node whose meta preserve_node_meta() hands to the nodes made meanwhile."""
            with fx_traceback.set_current_meta(node, f"Interpreter_{self.__class__.__name__}"):
                yield

        @compatibility(is_backward_compatible=True)
        def boxed_run(self, args_list: List[Any]) -> Any:
            """``run`` with the boxed calling convention: the inputs come in a list, which is
            cleared before the graph runs (so that input tensors are freed as soon as they die)."""
            placeholder_nodes = [n for n in self.graph.nodes if n.op == 'placeholder']
            if len(args_list) != len(placeholder_nodes):
                detail = 'extra arguments' if len(args_list) > len(placeholder_nodes) else 'missing arguments'
                raise RuntimeError(f'Interpreter.boxed_run expected {len(placeholder_nodes)} arguments for '
                                   f'placeholders but received {len(args_list)} ({detail})')
            env = dict(zip(placeholder_nodes, args_list))
            args_list.clear()
            return self.run(initial_env=env)

    @compatibility(is_backward_compatible=True)
    def run_node(self, n: Node) -> Any:
        """Run node ``n``: fetch its arguments, then dispatch on ``n.op``."""
        if isinstance(n, torch.fx.Node) and not isinstance(n, Node):  # a torch.fx graph's node (2.x)
            return torch.fx.Interpreter.run_node(self, n)
        return _C._interp_run_node(self, n)

    # Per-opcode handlers
    @compatibility(is_backward_compatible=True)
    def placeholder(self, target: 'Target', args: Tuple[Argument, ...], kwargs: Dict[str, Any]) -> Any:
        """The next positional input of ``run`` (all remaining ones for ``*args``)."""
        assert isinstance(target, str)
        if target.startswith('*'):
            return list(self.args_iter)
        try:
            return next(self.args_iter)
        except StopIteration:
            if len(args) > 0:
                return args[0]
            raise RuntimeError(f'Expected positional argument for parameter {target}, but one was not passed in!')

    @compatibility(is_backward_compatible=True)
    def get_attr(self, target: 'Target', args: Tuple[Argument, ...], kwargs: Dict[str, Any]) -> Any:
        """The attribute ``target`` of the module hierarchy."""
        assert isinstance(target, str)
        return self.fetch_attr(target)

    @compatibility(is_backward_compatible=True)
    def call_function(self, target: 'Target', args: Tuple[Argument, ...], kwargs: Dict[str, Any]) -> Any:
        """``target(*args, **kwargs)``."""
        assert not isinstance(target, str)
        return target(*args, **kwargs)

    @compatibility(is_backward_compatible=True)
    def call_method(self, target: 'Target', args: Tuple[Argument, ...], kwargs: Dict[str, Any]) -> Any:
        """``args[0].<target>(*args[1:], **kwargs)``."""
        self_obj, *args_tail = args
        assert isinstance(target, str)
        return getattr(self_obj, target)(*args_tail, **kwargs)

    @compatibility(is_backward_compatible=True)
    def call_module(self, target: 'Target', args: Tuple[Argument, ...], kwargs: Dict[str, Any]) -> Any:
        """Call the submodule ``target`` with ``args`` and ``kwargs``."""
        assert isinstance(target, str)
        submod = self.fetch_attr(target)
        return submod(*args, **kwargs)

    @compatibility(is_backward_compatible=True)
    def output(self, target: 'Target', args: Tuple[Argument, ...], kwargs: Dict[str, Any]) -> Any:
        """The value returned by the graph (``args[0]``)."""
        return args[0]

    # Utilities
    @compatibility(is_backward_compatible=True)
    def fetch_attr(self, target: str):
        """Resolve the dotted name ``target`` starting from ``self.module``."""
        target_atoms = target.split('.')
        attr_itr = self.module
        for i, atom in enumerate(target_atoms):
            if not hasattr(attr_itr, atom):
                seen = target_atoms[:i + 1] if _torch_compat.FX_API_2 else target_atoms[:i]
                raise RuntimeError(f"Node referenced nonexistent target {'.'.join(seen)}")
            attr_itr = getattr(attr_itr, atom)
        return attr_itr

    @compatibility(is_backward_compatible=True)
    def fetch_args_kwargs_from_env(self, n: Node) -> Tuple[Tuple, Dict]:
        """``n.args`` and ``n.kwargs`` with each Node replaced by its value in ``self.env``."""
        args = self.map_nodes_to_values(n.args, n)
        assert isinstance(args, tuple)
        kwargs = self.map_nodes_to_values(n.kwargs, n)
        assert isinstance(kwargs, dict)
        return args, kwargs

    @compatibility(is_backward_compatible=True)
    def map_nodes_to_values(self, args: Argument, n: Node) -> Argument:
        """Recursively replace every Node in ``args`` by its value in ``self.env``.

        ``n`` is the node that owns ``args``; it only appears in error messages.
        """
        if isinstance(n, torch.fx.Node) and not isinstance(n, Node):  # a torch.fx graph's node (2.x)
            return torch.fx.Interpreter.map_nodes_to_values(self, args, n)
        env = self.env

        def load_arg(n_arg: Node) -> Any:
            if n_arg not in env:
                raise RuntimeError(f'Node {n} referenced nonexistent value {n_arg}! Run Graph.lint() '
                                   f'to diagnose such issues')
            return env[n_arg]
        return map_arg(args, load_arg)


@compatibility(is_backward_compatible=True)
class Transformer(Interpreter):
    """An Interpreter that produces a new GraphModule (see torch.fx.Transformer).

    Values are Proxies recording into ``self.new_graph``; overriding
    ``call_function``/``call_module``/... rewrites the graph.
    """

    @compatibility(is_backward_compatible=True)
    def __init__(self, module):
        super().__init__(module)
        self.new_graph = Graph()
        self.new_graph.set_codegen(module.graph._codegen)

        class TransformerTracer(Tracer):
            def __init__(self, graph: Graph):
                super().__init__()
                self.graph = graph

            def is_leaf_module(self, _, __) -> bool:
                return True

        self.tracer = TransformerTracer(self.new_graph)
        self.tracer.root = module

    @compatibility(is_backward_compatible=True)
    def placeholder(self, target: 'Target', args: Tuple[Argument, ...], kwargs: Dict[str, Any]) -> Proxy:
        """Record a ``placeholder`` in ``self.new_graph`` and return its Proxy."""
        assert isinstance(target, str)
        default_value = next(iter(args)) if args else inspect.Signature.empty
        return Proxy(self.new_graph.placeholder(target, default_value=default_value), self.tracer)

    @compatibility(is_backward_compatible=True)
    def get_attr(self, target: 'Target', args: Tuple[Argument, ...], kwargs: Dict[str, Any]) -> Proxy:
        """Record a ``get_attr`` node in ``self.new_graph`` and return its Proxy."""
        assert isinstance(target, str)
        if _torch_compat.TRANSFORMER_PRESERVES_META:
            return self.tracer.create_proxy('get_attr', target, args, kwargs)
        return Proxy(self.new_graph.get_attr(target), self.tracer)

    if _torch_compat.TRANSFORMER_PRESERVES_META:
        @compatibility(is_backward_compatible=True)
        def run_node(self, n: Node) -> Any:
            """Run node ``n`` with its meta current (the nodes it makes copy it; torch.fx 2.x).
            set_current_meta does nothing for a node without meta: such a node skips it, unless a
            subclass has its own _set_current_node."""
            if n.meta or type(self)._set_current_node is not Interpreter._set_current_node:
                with self._set_current_node(n):
                    return super().run_node(n)
            return super().run_node(n)

    @compatibility(is_backward_compatible=True)
    def call_module(self, target: 'Target', args: Tuple[Argument, ...], kwargs: Dict[str, Any]) -> Any:
        # The tracer's leaf-module policy (every module is a leaf) applies.
        assert isinstance(target, str)
        submod = self.fetch_attr(target)
        return self.tracer.call_module(submod, submod.forward, args, kwargs)

    @compatibility(is_backward_compatible=True)
    def call_function(self, target: 'Target', args: Tuple[Argument, ...], kwargs: Dict[str, Any]) -> Any:
        # Recorded through the tracer so that wrapped functions stay wrapped.
        return self.tracer.create_proxy('call_function', target, args, kwargs)

    @compatibility(is_backward_compatible=True)
    def transform(self) -> GraphModule:
        """Run the transformation and return a GraphModule built from ``self.new_graph``."""
        preserve = _torch_compat.TRANSFORMER_PRESERVES_META
        with (fx_traceback.preserve_node_meta() if preserve else fx_traceback.override_stack_trace()):
            result = super().run(enable_io_processing=False)
        if result is not None:
            def strip_proxy(a: Union[Argument, Proxy]) -> Any:
                return a.node if isinstance(a, Proxy) else a
            new_output = self.new_graph.output(map_aggregate(result, strip_proxy))
            if preserve:  # the old output node's meta, entry by entry
                old_output = next(iter(reversed(self.graph.nodes)))
                assert old_output.op == 'output', f'Expected output node, got op={old_output.op}'
                for k, v in old_output.meta.items():
                    new_output.meta[k] = v
        return GraphModule(self.module, self.new_graph)


_C._interp_register(Interpreter, _annotate_exception, fx_traceback)

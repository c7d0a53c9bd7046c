"""fxcpp.experimental.optimization: ``fuse`` (Conv+BatchNorm folding for inference),
``remove_dropout`` and ``extract_subgraph`` on fxcpp GraphModules.

Same signatures and results as ``torch.fx.experimental.optimization`` 1.13 (same ``code``, same
outputs), traced and rewritten with fxcpp.

``fuse(model, inplace=False)``: torch.fx deep-copies the whole model before tracing it, then
``torch.nn.utils.fusion.fuse_conv_bn_eval`` deep-copies each fused conv again before replacing its
weight and bias. Here the model is traced as it is and only what the result references is
deep-copied (one memo, so sharing between those objects is kept; a fused conv takes the place of
its original in the copy), which gives the same module without copying the modules the fusion
replaces; and a fused conv is built without deep-copying the conv (``_fuse_conv_bn_eval``: a copy
of its plain ``__dict__`` holding the Parameters of torch's ``fuse_conv_bn_weights``, bitwise the
same as torch's; a conv with other state goes through torch's function). As in torch.fx, the
caller's model is not modified (with ``inplace=True`` only a submodule that the graph calls
directly and that contains a fused conv is, as there).
"""
import copy
import copyreg
from collections import OrderedDict
from typing import Any, Dict, Iterable, List, Tuple, Type

import torch
import torch.nn as nn
from torch.nn.utils.fusion import fuse_conv_bn_eval, fuse_conv_bn_weights

from .._symbolic_trace import Tracer, symbolic_trace
from . import _on_torch_fx
from ..graph import Graph
from ..graph_module import GraphModule
from ..interpreter import Transformer
from ..node import Argument, Node, Target

__all__ = ['extract_subgraph', 'fuse', 'matches_module_pattern', 'remove_dropout', 'replace_node_module']

_PATTERNS = ((nn.Conv1d, nn.BatchNorm1d), (nn.Conv2d, nn.BatchNorm2d), (nn.Conv3d, nn.BatchNorm3d))


def _parent_name(target: str) -> Tuple[str, str]:
    """``'a.b.c'`` -> ``('a.b', 'c')``; ``'c'`` -> ``('', 'c')``."""
    parent, _, name = target.rpartition('.')
    return parent, name


def matches_module_pattern(pattern: Iterable[Type], node: Node, modules: Dict[str, Any]) -> bool:
    """Whether ``node`` and its first argument are call_module nodes of exactly the types of
    ``pattern`` (its second and first entry)."""
    if len(node.args) == 0:
        return False
    for expected_type, current in zip(pattern, (node.args[0], node)):
        if not isinstance(current, Node) or current.op != 'call_module':
            return False
        target = current.target
        if not isinstance(target, str) or target not in modules:
            return False
        if type(modules[target]) is not expected_type:
            return False
    return True


def replace_node_module(node: Node, modules: Dict[str, Any], new_module: torch.nn.Module):
    """Install ``new_module`` at ``node.target`` (in ``modules`` and on its parent module)."""
    assert isinstance(node.target, str)
    parent_name, name = _parent_name(node.target)
    modules[node.target] = new_module
    setattr(modules[parent_name], name, new_module)


def _resolve(root: Any, target: str) -> Any:
    obj = root
    for atom in target.split('.'):
        obj = getattr(obj, atom)
    return obj


_ATOMIC = frozenset((type(None), bool, int, float, complex, str, bytes))


class _NotPlain(Exception):
    pass


def _plain_copy(value: Any, memo: Dict[int, Any]) -> Any:
    """``copy.deepcopy(value, memo)`` for the plain values a conv's ``__dict__`` holds: atomic
    values, tuples of them, lists / sets / dicts / OrderedDicts of them (one copy per object, as
    with deepcopy's memo); raises ``_NotPlain`` for anything else."""
    t = type(value)
    if t in _ATOMIC:
        return value
    if t is tuple:
        for x in value:
            if type(x) not in _ATOMIC:
                raise _NotPlain
        return value  # deepcopy returns a tuple of atomic values itself
    if t is list or t is set or t is dict or t is OrderedDict:
        copied = memo.get(id(value))
        if copied is not None:
            return copied
        if t is list or t is set:
            for x in value:
                if type(x) not in _ATOMIC:
                    raise _NotPlain
        else:
            for k, x in value.items():
                if type(k) not in _ATOMIC or type(x) not in _ATOMIC:
                    raise _NotPlain
        copied = t(value)
        memo[id(value)] = copied
        return copied
    raise _NotPlain


def _fuse_conv_bn_eval(conv: nn.Module, bn: nn.Module) -> nn.Module:
    """``torch.nn.utils.fusion.fuse_conv_bn_eval(conv, bn)`` without deep-copying the conv whose
    weight and bias it then replaces.

    torch deep-copies ``conv`` (``cls.__new__`` + ``__setstate__`` of a deep copy of its
    ``__dict__``, which clones the weight and bias) and assigns it the Parameters of
    ``fuse_conv_bn_weights(clone of weight, clone of bias, bn...)``. Here the same object is built
    from a copy of ``__dict__`` made without the generic deepcopy machinery (its values are plain:
    ints, strs, tuples, empty hook dicts) whose ``_parameters`` holds (same keys, same order) the
    Parameters of ``fuse_conv_bn_weights`` called on ``conv``'s own weight and bias, which have the
    clones' values, so the fused weights are bitwise the same. They are computed without recording
    autograd history: the results are new leaf Parameters (requires_grad=True) either way. A conv
    whose state holds anything else goes through torch's function."""
    assert not (conv.training or bn.training), "Fusion only for eval!"
    cls = type(conv)
    state = conv.__dict__
    params = state.get('_parameters')
    if (type(params) is not OrderedDict or len(params) != 2 or 'weight' not in params or 'bias' not in params
            or cls in copyreg.dispatch_table):
        return fuse_conv_bn_eval(conv, bn)
    memo: Dict[int, Any] = {}
    new_state = {}
    try:
        for key, value in state.items():
            t = type(value)
            if t in _ATOMIC:
                new_state[key] = value
            elif value is params:
                new_state[key] = None  # (set below, at this place in the order)
            elif t is OrderedDict and not value:  # the hook dicts
                copied = memo.get(id(value))
                if copied is None:
                    copied = memo[id(value)] = OrderedDict()
                new_state[key] = copied
            else:
                new_state[key] = _plain_copy(value, memo)
    except _NotPlain:
        return fuse_conv_bn_eval(conv, bn)
    nonpersistent = new_state.get('_non_persistent_buffers_set')
    if nonpersistent and ('weight' in nonpersistent or 'bias' in nonpersistent):
        return fuse_conv_bn_eval(conv, bn)  # (torch's setattr would drop them there)
    with torch.no_grad():
        weight, bias = fuse_conv_bn_weights(params['weight'], params['bias'], bn.running_mean, bn.running_var,
                                            bn.eps, bn.weight, bn.bias)
    new_params = OrderedDict()
    for key in params:  # the original order
        new_params[key] = weight if key == 'weight' else bias
    new_state['_parameters'] = new_params
    fused = cls.__new__(cls)
    fused.__setstate__(new_state)
    return fused


def fuse(model: torch.nn.Module, inplace=False) -> torch.nn.Module:
    """Fold every eval-mode BatchNorm{1,2,3}d applied to the only use of a Conv{1,2,3}d into the
    conv (torch.fx's ``fuse``). Returns an fxcpp GraphModule; ``model`` is copied unless
    ``inplace`` (see the module docstring)."""
    graph = Tracer().trace(model)
    training = model.training
    # what torch.fx's traced module holds: the targets the graph references
    referenced = {}
    for node in graph.nodes:
        if node.op == 'call_module' or node.op == 'get_attr':
            referenced.setdefault(node.target, None)
    modules: Dict[str, Any] = {}
    for target in referenced:
        obj = _resolve(model, target)
        if isinstance(obj, torch.nn.Module):
            modules[target] = obj
    calls = graph.find_nodes(op='call_module')

    fused: Dict[str, torch.nn.Module] = {}  # conv target -> fused conv
    replaced: Dict[int, torch.nn.Module] = {}  # id(original conv) -> fused conv
    for conv_type, bn_type in _PATTERNS:
        for node in calls:
            if type(modules.get(node.target)) is not bn_type:  # (an erased node had another type)
                continue
            conv_node = node.args[0] if node.args else None
            if not isinstance(conv_node, Node) or conv_node.op != 'call_module':
                continue
            if type(modules.get(conv_node.target)) is not conv_type:
                continue
            if len(conv_node.users) > 1:  # the conv's output is used elsewhere too
                continue
            conv, bn = modules[conv_node.target], modules[node.target]
            if not bn.track_running_stats:
                continue
            new_conv = _fuse_conv_bn_eval(conv, bn)
            target = conv_node.target
            parent_name, name = _parent_name(target)
            if inplace and parent_name in modules:  # torch.fx sets it on the module it holds
                setattr(modules[parent_name], name, new_conv)
            if target not in fused:
                replaced.setdefault(id(conv), new_conv)
            fused[target] = new_conv
            modules[target] = new_conv
            node.replace_all_uses_with(conv_node)
            graph.erase_node(node)

    memo: Dict[int, Any] = {} if inplace else dict(replaced)
    root: Dict[str, Any] = {}
    for node in graph.nodes:
        if node.op != 'call_module' and node.op != 'get_attr':
            continue
        target = node.target
        if target in root:
            continue
        parent, _, rest = target, '', ''
        while parent and parent not in fused:
            parent, _, tail = parent.rpartition('.')
            rest = tail + ('.' + rest if rest else '')
        if parent:  # at or inside a fused conv
            root[target] = _resolve(fused[parent], rest) if rest else fused[parent]
            continue
        obj = _resolve(model, target)
        root[target] = obj if inplace else copy.deepcopy(obj, memo)
    out = GraphModule(root, graph)
    out.training = training
    return out


class _DropoutRemover(Transformer):
    def call_module(self, target: Target, args: Tuple[Argument, ...], kwargs: Dict[str, Any]) -> Any:
        if isinstance(self.submodules[target], nn.Dropout):
            assert len(args) == 1
            return args[0]
        return super().call_module(target, args, kwargs)


def remove_dropout(model: nn.Module) -> nn.Module:
    """``model`` traced with fxcpp, without its ``nn.Dropout`` calls (torch.fx's
    ``remove_dropout``)."""
    return _DropoutRemover(symbolic_trace(model)).transform()


def extract_subgraph(orig_module: nn.Module, nodes: List[Node], inputs: List[Node], outputs: List[Node]):
    """A GraphModule running ``nodes`` (in order) on placeholders named after ``inputs`` and
    returning the list of ``outputs`` (torch.fx's ``extract_subgraph``). The nodes may be torch.fx's
    (torch.fx's MKL-DNN pass hands its own graph's nodes to the autotuner's heuristic): they are
    copied into a torch.fx graph, which the GraphModule converts."""
    new_graph = Graph() if all(isinstance(n, Node) for n in nodes) else torch.fx.Graph()
    env: Dict[Node, Node] = {}
    for inp in inputs:
        env[inp] = new_graph.placeholder(inp.name)
    for node in nodes:
        env[node] = new_graph.node_copy(node, env.__getitem__)
    new_graph.output([env[output] for output in outputs])
    new_graph.lint()
    return GraphModule(orig_module, new_graph)


# ---- optimize_for_inference ------------------------------------------------------------------
# torch.fx's MKL-DNN layout pass (grouping into MklSubgraphs, the heuristics, the autotuner) is
# run as torch.fx wrote it, on a graph traced by fxcpp's Tracer: fxcpp's Graph is a torch.fx
# Graph, so the pass edits it in place; the torch.fx GraphModule it returns is converted.
from torch.fx.experimental.optimization import (  # noqa: E402,F401  (re-exported)
    MklSubgraph,
    UnionFind,
    modules_to_mkldnn,
    reset_modules,
    use_mkl_length,
)
from torch.fx.experimental import optimization as _torch_optimization  # noqa: E402

__all__ += ['MklSubgraph', 'UnionFind', 'gen_mkl_autotuner', 'modules_to_mkldnn', 'optimize_for_inference',
            'reset_modules', 'use_mkl_length']


def optimize_for_inference(model: torch.nn.Module, pass_config: Dict[str, Any] = None,
                           tracer: Type[Tracer] = Tracer) -> torch.nn.Module:
    """torch.fx's ``optimize_for_inference``: Conv/BN fusion (fxcpp's ``fuse``), dropout removal
    (fxcpp's ``remove_dropout``) and the MKL-DNN layout optimisation (torch.fx's pass, on a graph
    traced with ``tracer``, fxcpp's by default). ``pass_config`` as in torch.fx. Returns an fxcpp
    GraphModule."""
    config = {"conv_bn_fuse": True, "remove_dropout": True}
    config.update(pass_config or {})
    if config["conv_bn_fuse"]:
        model = fuse(model)
    if config["remove_dropout"]:
        model = remove_dropout(model)
    rest = dict(pass_config or {}, conv_bn_fuse=False, remove_dropout=False)
    result = _torch_optimization.optimize_for_inference(model, rest, _on_torch_fx.tracer_for_torch_fx(tracer))
    if result is model:
        return model
    from ..interop import from_torch_fx
    return from_torch_fx(result)


def gen_mkl_autotuner(example_inputs, iters: int = 10, warmup: int = 1):
    """A heuristic for ``optimize_for_inference``'s ``mkldnn_layout_optimize`` config: runs each
    candidate subgraph ``iters`` times (after ``warmup``) in MKL-DNN layout and in dense layout on
    random inputs of the shapes that running the model on ``example_inputs`` gives (passed to
    ``forward`` as one argument, as torch.fx does), and keeps MKL-DNN where it was faster.

    torch.fx 1.13's reads ``node.shape``, which nothing sets any more (its ShapeProp writes
    ``meta['tensor_meta']``), so it raises AttributeError on the first subgraph; here the shapes
    are recorded by running the module once on ``example_inputs``."""
    import time
    from torch.fx import Interpreter  # the module is torch.fx's GraphModule around an fxcpp graph

    state: Dict[str, Any] = {}

    def shapes_of(gm, old_modules) -> Dict[Node, torch.Size]:
        # One dense run: the MKL-DNN modules' originals, layout conversions as identities.
        shapes: Dict[Node, torch.Size] = {}

        class _Shapes(Interpreter):
            def call_module(self, target, args, kwargs):
                mod = self.fetch_attr(target)
                return old_modules.get(mod, mod)(*args, **kwargs)

            def call_method(self, target, args, kwargs):
                if target in ('to_mkldnn', 'to_dense'):
                    return args[0]
                return super().call_method(target, args, kwargs)

            def run_node(self, n):
                out = super().run_node(n)
                if isinstance(out, torch.Tensor):
                    shapes[n] = out.shape
                return out

        with torch.no_grad():
            _Shapes(gm).run(example_inputs)  # one argument, as torch.fx passes it
        return shapes

    def timed(f) -> float:
        for _ in range(warmup):
            f()
        begin = time.time()
        for _ in range(iters):
            f()
        return time.time() - begin

    def use_mkl_heuristic(graph: MklSubgraph) -> bool:
        if not state:
            state['gm'] = graph.fx_graph.owning_module
            state['old_modules'] = graph.fx_graph.old_modules  # type: ignore[attr-defined]
            state['shapes'] = shapes_of(state['gm'], state['old_modules'])
        inputs = [torch.randn(state['shapes'][n]) for n in graph.start_nodes]
        outputs = [n.args[0] for n in graph.end_nodes]
        sub = extract_subgraph(state['gm'], graph.nodes, graph.start_nodes, outputs)
        with torch.no_grad():
            mkl = timed(lambda: [o.to_dense() for o in sub(*[i.to_mkldnn() for i in inputs])])
            reset_modules(sub.graph.nodes, dict(sub.named_modules()), state['old_modules'])
            dense = timed(lambda: sub(*inputs))
        return mkl < dense

    return use_mkl_heuristic

"""What differs between the torches fxcpp runs on (1.13.1 and 2.x), in one place.

Every check of the installed torch's version or of a torch internal that moved lives
here, so the rest of the package reads one name instead of testing versions itself.
"""
import torch
import torch.fx

#: (major, minor) of the installed torch.
TORCH_VERSION = tuple(int(p) for p in torch.__version__.split('+')[0].split('.')[:2])

#: The torch.fx release whose printouts, generated code and names fxcpp reproduces (the core's
#: process-wide fxcpp::Dialect, Note [Dialect]; set once when fxcpp is imported): "2" for torch.fx
#: 2.x (checked against 2.14.1), "1.13" for torch.fx 1.13.1.
FX_DIALECT = '2' if TORCH_VERSION >= (2, 0) else '1.13'

#: torch.fx 2.x's GraphModule.print_readable returns the text it prints (1.13: None).
PRINT_READABLE_RETURNS_TEXT = FX_DIALECT == '2'

def fx_assertion_message(kind, value):
    """The message of the AssertionError torch.fx raises for a bad create_node input: none on
    1.13 (bare asserts, but for args/kwargs), worded with the culprit on 2.x. ``kind`` is 'op'
    (an opcode not in _legal_ops), 'target' (a target that is not a str where one is
    expected), 'args' or 'kwargs' (not a tuple / dict)."""
    if kind == 'args':
        return 'args must be a tuple' + (f', got {type(value)}' if FX_DIALECT == '2' else '')
    if kind == 'kwargs':
        return 'kwargs must be a dict' + (f', got {type(value)}' if FX_DIALECT == '2' else '')
    if FX_DIALECT == '1.13':
        return None
    if kind == 'op':
        hash(value)  # 2.x tests membership in a set: an unhashable op raises TypeError there
        return f"op '{value}' is not in _legal_ops"
    return f'Expected target to be str, got {type(value)}'


#: torch.fx 2.x's Node derives from a C type (torch._C._NodeBase) with an instance layout
#: of its own, so it cannot be a second base of fxcpp's Node, whose C base has another.
#: On 1.13 it is a plain Python class and stays a (layout-free) second base, so torch.fx's
#: isinstance checks accept fxcpp nodes (the interop design for 2.x is issue 23's).
FX_NODE_HAS_C_BASE = getattr(torch._C, '_NodeBase', None) is not None and \
    issubclass(torch.fx.Node, torch._C._NodeBase)

#: Same for torch.fx.Graph (a Python class on every torch so far).
FX_GRAPH_HAS_C_BASE = any(b.__module__ == 'torch._C' for b in torch.fx.Graph.__mro__[1:] if b is not object)


#: The names `from torch.fx import *` binds: torch.fx.__all__ on 2.x; 1.13 has no __all__,
#: so its star import takes the public names torch/fx/__init__.py binds (modules aside).
TORCH_FX_ALL = tuple(getattr(torch.fx, '__all__', None) or (
    'symbolic_trace', 'Tracer', 'wrap', 'PH', 'ProxyableClassMeta', 'Graph', 'CodeGen', 'GraphModule', 'Node',
    'map_arg', 'Proxy', 'Interpreter', 'Transformer', 'replace_pattern'))


def node_bases(native_base):
    """The bases of fxcpp's Node: its C base, and torch.fx.Node where layouts allow."""
    return (native_base,) if FX_NODE_HAS_C_BASE else (native_base, torch.fx.Node)


def graph_bases(native_base):
    """The bases of fxcpp's Graph: its C base, and torch.fx.Graph where layouts allow."""
    return (native_base,) if FX_GRAPH_HAS_C_BASE else (native_base, torch.fx.Graph)


def _fx_tracing_accessors():
    """Getter and setter of torch.fx's "is symbolic tracing running" flag, which libraries
    read through torch.fx._symbolic_trace.is_fx_tracing(): a module global on 1.13, a
    thread-local (_get_is_fx_tracing/_set_is_fx_tracing) on 2.x."""
    import torch.fx._symbolic_trace as st
    if hasattr(st, '_get_is_fx_tracing') and hasattr(st, '_set_is_fx_tracing'):
        return st._get_is_fx_tracing, st._set_is_fx_tracing

    def get():
        return st._is_fx_tracing_flag

    def set_(value):
        st._is_fx_tracing_flag = value
    return get, set_


#: get_fx_tracing() -> bool and set_fx_tracing(bool): torch.fx's tracing flag (see above).
get_fx_tracing, set_fx_tracing = _fx_tracing_accessors()

#: torch.fx 2.x's context variable under which GraphModule deep copies share torchbind objects
#: without __getstate__/__setstate__ and process groups instead of copying them (None: none).
SHARE_TORCHBIND_ON_DEEPCOPY = getattr(__import__('torch.fx.graph_module').fx.graph_module,
                                      '_share_torchbind_and_process_group', None)

#: torch.fx's tracing flag is thread-local (2.x): fxcpp shares it (Note [One tracing flag] in
#: fxcpp/_symbolic_trace.py).
FX_TRACING_THREAD_LOCAL = hasattr(__import__('torch.fx._symbolic_trace').fx._symbolic_trace, '_get_is_fx_tracing')


def fx_wrapped_fns():
    """(globals dict, function name) pairs registered through torch.fx.wrap: a list of such
    pairs on 1.13, a dict {(id(globals), name): globals} on 2.x."""
    import torch.fx._symbolic_trace as st
    table = st._wrapped_fns_to_patch
    if isinstance(table, dict):
        return [(frame_dict, name) for (_, name), frame_dict in list(table.items())]
    return list(table)


def fx_wrapped_methods():
    """(class, method name) pairs registered with torch.fx for call_method wrapping (a list
    on every torch so far)."""
    import torch.fx._symbolic_trace as st
    table = st._wrapped_methods_to_patch
    if isinstance(table, dict):
        return list(table.keys())
    return list(table)


#: What GraphModule.to_folder writes after a pickled submodule's path in the generated
#: ``torch.load(...)``: torch >= 2.6 loads weights only by default, which refuses a pickled
#: module; 1.13's default loads it (and its torch.fx writes nothing there).
TO_FOLDER_LOAD_MODULE_ARGS = ', weights_only=False' if TORCH_VERSION >= (2, 6) else ''


#: torch.fx 2.x's to_folder assigns submodules and parameters as ``setattr(self, 'name', ...)``
#: (any attribute name stays valid Python); 1.13 writes ``self.name = ...``.
TO_FOLDER_SETATTR = TORCH_VERSION >= (2, 0)


#: Graph.lint warns about a get_attr whose target is no module, parameter or buffer (a plain
#: tensor attribute) and stops descending there: torch.fx 1.13; 2.x accepts it silently.
LINT_WARNS_ON_PLAIN_GET_ATTR = TORCH_VERSION < (2, 0)


#: _PyTreeCodeGen as torch.fx 2.x has it (Note [Pytree codegen on 2.x] in graph.py); 1.13's otherwise.
PYTREE_CODEGEN_2X = FX_DIALECT == '2'


def _fx_inplace_wrapper():
    """torch.fx.passes.infra.pass_manager.inplace_wrapper: in 1.13, removed in 2.x."""
    from torch.fx.passes.infra import pass_manager
    return getattr(pass_manager, 'inplace_wrapper', None)


#: torch.fx's pass_manager.inplace_wrapper, or None where torch.fx no longer has it (2.x).
FX_INPLACE_WRAPPER = _fx_inplace_wrapper()


def _fx_drawer_options_2x():
    """Whether torch.fx's FxGraphDrawer takes 2.x's options (parse_stack_trace, dot_graph_shape,
    normalize_args) and draws 2.x's extras (buf_meta clusters); 1.13's takes neither."""
    import inspect
    try:
        from torch.fx.passes import graph_drawer
        label = graph_drawer.FxGraphDrawer._get_node_label
    except (ImportError, AttributeError):  # no pydot: no drawer
        return FX_DIALECT == '2'
    return 'parse_stack_trace' in inspect.signature(label).parameters


#: torch.fx 2.x's FxGraphDrawer: the options and drawing above (see _fx_drawer_options_2x).
FX_DRAWER_OPTIONS_2X = _fx_drawer_options_2x()


def fx_drawer_node_label(drawer, graph_module, node, skip_node_names_in_args, parse_stack_trace=False):
    """torch.fx FxGraphDrawer._get_node_label: 2.x added a parse_stack_trace parameter."""
    from torch.fx.passes import graph_drawer
    label = graph_drawer.FxGraphDrawer._get_node_label
    if FX_DRAWER_OPTIONS_2X:
        return label(drawer, graph_module, node, skip_node_names_in_args, parse_stack_trace)
    return label(drawer, graph_module, node, skip_node_names_in_args)


def untyped_storage(t):
    """``t``'s untyped storage: ``Tensor.untyped_storage()`` on 2.x (``Tensor.storage()``
    warns there that TypedStorage is deprecated); ``storage()._untyped()`` or
    ``storage().untyped()`` on 1.13."""
    if hasattr(t, 'untyped_storage'):
        return t.untyped_storage()
    s = t.storage()
    return s._untyped() if hasattr(s, '_untyped') else s.untyped()


def write_storage_record(writer, name, storage):
    """Writes ``storage``'s bytes as record ``name`` of a ``torch._C.PyTorchFileWriter``: by
    the storage on 2.x (passing its data pointer is deprecated there and warns), by data
    pointer on 1.13 (which takes no storage)."""
    if TORCH_VERSION >= (2, 0):
        writer.write_record(name, storage, storage.nbytes())
    else:
        writer.write_record(name, storage.data_ptr(), storage.nbytes())


def _register_pytree_node_fn():
    """torch.utils._pytree's node registration: register_pytree_node on 2.x (whose
    _register_pytree_node is deprecated and warns), _register_pytree_node on 1.13."""
    import torch.utils._pytree as pytree
    return getattr(pytree, 'register_pytree_node', None) or pytree._register_pytree_node


#: register_pytree_node(cls, flatten_fn, unflatten_fn) of the installed torch.
register_pytree_node = _register_pytree_node_fn()


def tree_spec_children(spec):
    """The child specs of a pytree TreeSpec: spec.children() on 2.x (children_specs is
    deprecated there and warns), the children_specs list on 1.13."""
    children = getattr(type(spec), 'children', None)
    if callable(children):
        return list(spec.children())
    return spec.children_specs


def _shape_prop_memory_formats():
    """The order in which torch.fx's ShapeProp probes memory formats (the first one a tensor
    is contiguous in is recorded): 1.13 iterates a set literal (hash order, fixed within a
    process), 2.x a tuple (contiguous, channels_last, channels_last_3d)."""
    import torch
    import torch.fx.passes.shape_prop as sp
    formats = (torch.contiguous_format, torch.channels_last, torch.channels_last_3d)
    if hasattr(sp, 'is_contiguous_for_memory_format_or_false'):  # 2.x's tuple
        return formats
    return tuple(set(formats))


#: Memory formats in torch.fx ShapeProp's probing order.
SHAPE_PROP_MEMORY_FORMATS = _shape_prop_memory_formats()


#: Whether this torch has Dynamo (torch.compile): 2.0 and later.
HAS_DYNAMO = TORCH_VERSION >= (2, 0)


def register_dynamo_backend(name, fn, import_dynamo=False) -> bool:
    """Registers ``fn`` as torch.compile's backend ``name``; False on a torch without
    Dynamo. Importing torch._dynamo takes seconds, so unless ``import_dynamo`` this
    only registers when it is already loaded (an installed fxcpp is found through its
    ``torch_dynamo_backends`` entry point anyway). A name Dynamo already knows -- from
    the entry point, which Dynamo loads (importing fxcpp) and registers itself, or from
    an earlier call -- is left alone: registering it twice is an error in Dynamo."""
    import sys
    if not HAS_DYNAMO:
        return False
    if not import_dynamo and 'torch._dynamo' not in sys.modules:
        return False
    from torch._dynamo.backends import registry
    if name in registry._BACKENDS or name in registry._COMPILER_FNS:
        return True
    registry.register_backend(compiler_fn=fn, name=name)
    return True


#: torch.export.save writes .pt2 archives (torch 2.5 on; fxcpp reads and writes schema 8.x,
#: what 2.14.1 writes). None where the installed torch has no torch.export.save.
EXPORT_SAVE = getattr(getattr(torch, 'export', None), 'save', None) if TORCH_VERSION >= (2, 5) else None

# torch.export.export and torch.export.save (the .pt2 archives fxcpp reads: docs/pt2_format.md).
HAS_EXPORT = EXPORT_SAVE is not None and hasattr(torch.export, 'export')

#: torch.fx 2.x's tracer keeps node.meta while tracing (Note [Tracing metadata] in
#: fxcpp/proxy.py): every node created inside a submodule's forward gets
#: meta["nn_module_stack"], the tracer keeps scope/module_stack/num_calls/node_name_to_scope,
#: a stack trace (record_stack_traces) is recorded when the node is created, from the first
#: `forward` frame on, and constants are named through Tracer.get_fresh_qualname. torch.fx
#: 1.13 records none of it and takes the stack trace from the innermost user frame outwards.
TRACER_RECORDS_META = FX_DIALECT == '2'


#: torch.fx 2.x's TracerBase.create_arg also passes OpOverloads, higher-order operators, enum
#: members and opaque constants through unchanged, records a dataclass instance as a
#: call_function node of its class (fields as kwargs), and formats the node into the "Keys for
#: dictionaries ... cannot contain a Node" error (1.13 raises NotImplementedError for the former
#: and leaves "{k}" unformatted). (Note [Arguments torch.fx 2.x records] in fxcpp/proxy.py.)
CREATE_ARG_2X = FX_DIALECT == '2'


def create_arg_passthrough_types():
    """The types torch.fx 2.x's create_arg keeps as they are beyond its base types: a tuple of
    classes for isinstance (empty on 1.13)."""
    if not CREATE_ARG_2X:
        return ()
    import enum
    kinds = [enum.Enum, torch._ops.OpOverload]
    if hasattr(torch._ops, 'HigherOrderOperator'):
        kinds.append(torch._ops.HigherOrderOperator)
    return tuple(kinds)


def is_opaque_constant_type(cls):
    """torch 2.x's test for a registered opaque constant type (kept as is in node arguments);
    False where torch has none."""
    fn = _OPAQUE_CONSTANT
    return fn is not None and fn(cls)


try:
    from torch._library.opaque_object import is_opaque_constant_type as _OPAQUE_CONSTANT
except ImportError:
    _OPAQUE_CONSTANT = None


def tracer_uninteresting_files():
    """Files whose frames torch.fx 2.x leaves out of a recorded stack trace (its own tracing and
    compiler internals): torch's list (frozen set of paths, computed once by torch)."""
    from torch.fx.experimental.symbolic_shapes import uninteresting_files
    return uninteresting_files()


def tracer_stack_trace_anchors():
    """(filename, co_name) pairs torch.fx 2.x keeps in a forward-only stack trace (annotate_fn
    registers them); an empty set where torch has none."""
    import torch.fx.proxy as fx_proxy
    return getattr(fx_proxy, '_STACK_TRACE_ANCHORS', frozenset())


#: torch.fx 2.x's verbose-code vocabulary (Note [Verbose annotations] in src/core/codegen.cpp):
#: dtype -> "f32"-style abbreviation, and how a device is written (2.14: without the current
#: accelerator's index under compile_on_one_rank). Empty / str on 1.13, which writes no annotations.
FX_DTYPE_ABBRS = getattr(__import__('torch.fx.graph', fromlist=['graph']), 'dtype_abbrs', {})


def fx_device_annotation(device):
    import torch.fx.node as fx_node
    fn = getattr(fx_node, '_device_annotation', None)
    return fn(device) if fn is not None else str(device)


def fx_sym_repr(value):
    """torch.fx 2.x's CodeGen._sym_repr (print_readable(fast_sympy_print=True) overrides it)."""
    return torch.fx.graph.CodeGen._sym_repr(value)


def fx_sym_types():
    """The symbolic scalar types (SymInt, SymFloat, SymBool) torch.fx 2.x annotates as Sym(...)."""
    try:
        from torch.fx.experimental.proxy_tensor import py_sym_types
        return py_sym_types
    except ImportError:
        return ()


def fx_override_sym_repr(fn):
    """Context manager that makes fx_sym_repr use `fn` (torch.fx 2.x's fast_sympy_print)."""
    import torch.fx.graph_module as fx_gm
    return fx_gm._override_sym_repr(fn)


#: torch.fx 2.x's print_readable titles a child GraphModule's class with the child's attribute
#: name; torch.fx 1.13 with its class name (_get_name()).
PRINT_READABLE_CHILD_BY_NAME = FX_DIALECT == '2'

#: python_code's keyword options: verbose on 1.13; 2.x adds include_stride, include_device,
#: colored, expanded_def, record_func and additional_meta (and FX_GRAPH_SHOW_STRIDE/DEVICE).
PYTHON_CODE_2X_OPTIONS = FX_DIALECT == '2'

#: A generic annotation's origin in generated code: torch.fx 1.13 spells `list`, `dict`, ... as
#: typing.List, typing.Dict, ... whatever the annotation; 2.x only for typing's own generics
#: (typing.Dict[str, int]) and writes a builtin generic (dict[str, int]) as it is.
TYPING_ORIGINS_FOR_TYPING_GENERICS_ONLY = FX_DIALECT == '2'

#: fxcpp's Graph, Node, Interpreter, ... take torch.fx 2.x's signatures (``find_nodes(sort=)``,
#: ``eliminate_dead_code(is_impure_node=)``, ``Node.insert_arg``, ...) on 2.x and keep torch.fx
#: 1.13.1's (which PyTorch 1.13's backward-compatibility tests pin) on 1.13.
FX_API_2 = FX_DIALECT == '2'


def _side_effectful_functions():
    """The set of side-effectful call_function targets dead code elimination keeps: torch.fx's
    own set on 2.x (torch.fx.has_side_effect adds to it, and torch's is_impure reads it); on
    1.13 fxcpp's copy of 1.13's set (torch.fx 1.13 has no has_side_effect)."""
    if FX_API_2:
        import torch.fx.node as fx_node
        return fx_node._side_effectful_functions
    return {torch._assert, torch.ops.profiler._record_function_enter,
            torch.ops.profiler._record_function_enter_new, torch.ops.profiler._record_function_exit}


#: The one set of side-effectful targets (fxcpp.node._side_effectful_functions is this object).
SIDE_EFFECTFUL_FUNCTIONS = _side_effectful_functions()


def _fx_is_impure_fn():
    """torch._library.utils.is_impure (torch.fx 2.x's call_function impurity: mutable schemas,
    effectful and random operators, the side-effectful set), or None where torch lacks it."""
    if not FX_API_2:
        return None
    try:
        from torch._library.utils import is_impure
    except ImportError:
        return None
    return is_impure


_FX_IS_IMPURE = _fx_is_impure_fn()


def call_function_is_impure(target, args=None, kwargs=None, impure_random=True):
    """Whether a call_function node of ``target`` is impure, as the installed torch.fx's
    Node.is_impure decides: 1.13 (and a 2.x without torch._library.utils.is_impure) asks the
    side-effectful set only; 2.x also reads the operator's schema, effects and randomness,
    and, for auto_functionalized, its first argument."""
    if _FX_IS_IMPURE is None:
        try:
            return target in SIDE_EFFECTFUL_FUNCTIONS
        except TypeError:
            return False
    return bool(_FX_IS_IMPURE(target, args=args, kwargs=kwargs, impure_random=impure_random))


def _args_dependent_impure_targets():
    """call_function targets whose impurity depends on their arguments (2.x: the
    auto_functionalized higher-order operators), which a per-target answer cannot decide."""
    if _FX_IS_IMPURE is None:
        return ()
    hop = getattr(torch.ops, 'higher_order', None)
    return tuple(t for t in (getattr(hop, 'auto_functionalized', None), getattr(hop, 'auto_functionalized_v2', None))
                 if t is not None)


#: See _args_dependent_impure_targets.
ARGS_DEPENDENT_IMPURE_TARGETS = _args_dependent_impure_targets()


def dce_impure_random():
    """Whether eliminate_dead_code keeps random operators: always on 1.13 (it does not know
    them); on 2.x True, unless a torch.compile TracingContext is active, where inductor's
    ``fallback_random`` decides (as torch.fx 2.x's eliminate_dead_code)."""
    if not FX_API_2:
        return True
    try:
        if torch._guards.TracingContext.try_get():
            import torch._inductor.config as inductor_config
            return bool(inductor_config.fallback_random)
    except AttributeError:
        pass
    return True


#: What torch.fx's Interpreter appends to the message of an exception raised by a node, after
#: the node and its stack trace: 2.x points at tlparse; 1.13 nothing.
INTERPRETER_ERROR_FOOTER = ('\nUse tlparse to see full graph. '
                            '(https://github.com/pytorch/tlparse?tab=readme-ov-file#tlparse-parse-structured-pt2-logs)'
                            if TORCH_VERSION >= (2, 6) else '')


def _torch_library_names():
    """torch._library's helpers that torch.fx 2.x's _symbolic_trace imports (None where this
    torch has no such helper): FakeScriptObject, is_custom_class, is_opaque_symbolic_type."""
    names = {'FakeScriptObject': None, 'is_custom_class': None, 'is_opaque_symbolic_type': None}
    import importlib
    for module, name in (('torch._library.fake_class_registry', 'FakeScriptObject'),
                         ('torch._library.opaque_object', 'is_custom_class'),
                         ('torch._library.opaque_object', 'is_opaque_symbolic_type')):
        try:
            names[name] = getattr(importlib.import_module(module), name, None)
        except ImportError:
            pass
    return names['FakeScriptObject'], names['is_custom_class'], names['is_opaque_symbolic_type']


FakeScriptObject, is_custom_class, is_opaque_symbolic_type = _torch_library_names()


def constant_attribute_types():
    """The values the tracer stores on the root and reads back with get_attr (Note [Constant
    attributes] in fxcpp/_symbolic_trace.py): tensors and ScriptObjects on 1.13; torch.fx 2.x
    adds FakeScriptObjects and pytree TreeSpecs."""
    kinds = [torch.Tensor, torch._C.ScriptObject]
    if FX_API_2:
        import torch.utils._pytree as pytree
        kinds += [t for t in (FakeScriptObject, getattr(pytree, 'TreeSpec', None)) if t is not None]
    return tuple(kinds)


def constant_attribute_base_name(value):
    """The name stem of the root attribute a constant is stored under: "_tensor_constant" on
    1.13; on 2.x by kind, as torch.fx 2.x names them. None: not a constant (2.x raises)."""
    if not FX_API_2 or isinstance(value, torch.Tensor):
        return '_tensor_constant'
    if isinstance(value, tuple(t for t in (FakeScriptObject, torch._C.ScriptObject) if t is not None)):
        return '_torchbind_obj'
    import torch.utils._pytree as pytree
    if isinstance(value, pytree.TreeSpec):
        return '_tree_spec_constant'
    if is_custom_class is not None and is_custom_class(type(value)):
        return '_opaque_obj'
    return None


def split_module_global_state_targets():
    """The call_function targets whose global state (grad mode, autocast) torch.fx 2.x's
    split_module carries into later partitions (none on 1.13)."""
    if not FX_API_2:
        return ()
    out = [torch._C._set_grad_enabled]
    amp = getattr(torch, 'amp', None)
    for name in ('_enter_autocast', '_exit_autocast'):
        fn = getattr(amp, name, None)
        if fn is not None:
            out.append(fn)
    return tuple(out)


def is_symbolic_example(value) -> bool:
    """Whether a node.meta['example_value'] holds symbolic sizes (a SymInt/SymFloat/SymBool, or
    a tensor with a symbolic size, also inside tuples, lists and dicts), which torch.fx 2.x's
    split_module passes along."""
    sym = fx_sym_types()
    if not sym or value is None:
        return False
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, sym):
            return True
        if isinstance(v, torch.Tensor):
            if any(isinstance(d, sym) for d in v.shape):
                return True
        elif isinstance(v, (tuple, list)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
    return False


def _legalize_graph_prioritized_ops():
    """call_function targets that torch.fx 2.x's legalize_graph places as soon as their inputs
    are (at the front of its queue): the symbolic-size arithmetic and comparisons and the runtime
    assertion operators, so asserts come before data-dependent operations. None on 1.13, whose
    queue is plain first-in first-out."""
    if FX_DIALECT != '2':
        return ()
    import operator
    ops = [operator.add, operator.mul, operator.sub, operator.floordiv, operator.truediv, operator.mod,
           operator.le, operator.lt, operator.ge, operator.gt, operator.eq, operator.ne]
    aten = torch.ops.aten
    for name, overload in [('sym_constrain_range', 'default'), ('sym_constrain_range_for_size', 'default'),
                           ('_assert_async', 'msg'), ('scalar_tensor', 'default'), ('_assert_scalar', 'default')]:
        packet = getattr(aten, name, None)
        if packet is not None and hasattr(packet, overload):
            ops.append(getattr(packet, overload))
    return tuple(ops)


#: See _legalize_graph_prioritized_ops (a tuple: membership as torch.fx tests it, by ==).
LEGALIZE_GRAPH_PRIORITIZED_OPS = _legalize_graph_prioritized_ops()

#: torch.fx 2.x's legalize_graph gives the sorted graph the old graph's CodeGen (the same object);
#: 1.13's keeps the new graph's default one.
LEGALIZE_GRAPH_KEEPS_CODEGEN = FX_DIALECT == '2'

#: torch.fx 2.x's const folding, inlining the non-constant submodule, replaces each
#: ``getitem(call, i)`` of its tuple result by the i-th output itself (1.13 leaves
#: ``(a, b, c)[i]`` nodes in the graph).
CONST_FOLD_INLINES_GETITEMS = FX_DIALECT == '2'

#: torch.fx 2.x folds a module whose every op is constant (the folded module returns the folded
#: attributes); 1.13 raises AttributeError (no 'submod_1').
CONST_FOLD_ALL_CONSTANT = FX_DIALECT == '2'


def _fx_tracing_meta_hooks():
    """torch.fx 2.x's helpers for the metadata a tracer records under preserve_node_meta():
    the sequence number of the node being made (torch.fx.proxy._get_seq_nr), the node a
    functionalization replay regenerates (torch.fx.traceback.get_current_replay_node), and the
    stack-trace marker of gradient accumulation; None where the installed torch lacks one."""
    import torch.fx.proxy as fx_proxy
    import torch.fx.traceback as fx_tb
    return (getattr(fx_proxy, '_get_seq_nr', None), getattr(fx_tb, 'get_current_replay_node', None),
            getattr(fx_tb, 'GRADIENT_ACC_SPECIAL_STACK', None))


_FX_SEQ_NR, _FX_REPLAY_NODE, FX_GRADIENT_ACC_STACK = _fx_tracing_meta_hooks()


def fx_seq_nr(node_name):
    """meta['seq_nr'] for a node made under preserve_node_meta() (None: none recorded)."""
    return _FX_SEQ_NR(node_name) if _FX_SEQ_NR is not None else None


def fx_current_replay_node():
    """The node a functionalization replay regenerates now, or None."""
    return _FX_REPLAY_NODE() if _FX_REPLAY_NODE is not None else None


#: torch.fx 2.x's Transformer keeps node metadata: it transforms under preserve_node_meta(),
#: each node's meta (plus from_node provenance) is current while it runs, get_attr nodes are
#: made by the tracer (so they get that metadata too) and the new output node gets the old one's
#: meta. torch.fx 1.13's overrides the stack trace only.
TRANSFORMER_PRESERVES_META = FX_API_2


def _partitioner_2x():
    """Whether torch.fx's CapabilityBasedPartitioner is 2.x's: more constructor options
    (non_compute_ops, allowed_single_node_partition_ops, skip_horizontal_fusion) and a lazily
    read ``dependency_viewer`` (downstream sets) instead of 1.13's ``dependency_map``; it asks
    ``is_node_supported`` in reverse graph order and proposes with 2.x's algorithm, which the
    core follows then (``PartitionerAlgorithm::Torch2``; 1.13's otherwise)."""
    from torch.fx.passes.infra import partitioner
    return hasattr(partitioner, '_DependencyViewer')


#: See _partitioner_2x.
PARTITIONER_2X = _partitioner_2x()

#: torch.fx 2.x's fuse_by_partitions inserts each fused call after the partition's last node and
#: re-sorts with stable_topological_sort; 1.13's inserts it after the last output and re-sorts
#: with legalize_graph.
FUSE_BY_PARTITIONS_2X = FX_API_2

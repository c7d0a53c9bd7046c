"""``GraphModule``: an ``nn.Module`` whose ``forward`` is generated from a Graph.

Behaviour mirrors ``torch.fx.graph_module`` (1.13.1).  Implementation notes:

* ``forward`` is built from the generated source by :mod:`fxcpp._forward_builder`:
  sources are registered with :mod:`linecache` under ``<eval_with_key>.N``
  names, built code objects are memoised by source text, and on CPython 3.11
  the code object is assembled directly instead of by ``compile()`` (Note
  [Direct bytecode] in ``src/backends/cpython311/assembler.h``).
  ``fxcpp.graph_module._DIRECT_BYTECODE = False`` turns direct assembly off;
  ``_VERIFY_BYTECODE = True`` compares every assembled code object with
  ``compile()``'s (the test suite runs that way).  Both names read and write
  through to :mod:`fxcpp._forward_builder`.
* With ``_LAZY_FORWARD`` (default) ``recompile`` produces the source eagerly
  but builds ``forward`` on its first lookup; a syntactically invalid
  generated program therefore raises on first use rather than in
  ``recompile``.  Set ``_LAZY_FORWARD = False`` for torch.fx's eager timing.
"""
import contextlib
import copy
import linecache
import os
import sys
import traceback
import types
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple, Type, Union

import torch
import torch.fx
import torch.nn as nn
import torch.overrides
from torch.nn.modules.module import _addindent
from torch.package import Importer, PackageExporter, PackageImporter, sys_importer

from . import _forward_builder, _torch_compat
# Forward building (source loader, memo caches, direct bytecode, lazy
# forward) lives in _forward_builder; torch.fx has these names here.
from ._forward_builder import (  # noqa: F401
    _EvalCacheLoader, _LazyForward, _exec_with_source, _forward_from_src, _loader)
from ._compatibility import compatibility
from .graph import Graph, PythonCode, _LinenoMap, _PyTreeCodeGen, _custom_builtins, _is_from_torch

# When true, ``recompile`` defers building ``forward`` from the generated
# source until it is first looked up (call, ``inspect``, TorchScript, ...).
# The source text (``code``) is always produced eagerly.
_LAZY_FORWARD = True


def _format_import_statement(name: str, obj: Any, importer: Importer) -> str:
    builtin = _custom_builtins.get(name)
    if builtin is not None:
        return builtin.import_str
    if _is_from_torch(name):
        return 'import torch'
    module_name, attr_name = importer.get_name(obj)
    return f'from {module_name} import {attr_name} as {name}'


def _format_import_block(globals: Dict[str, Any], importer: Importer):
    statements: Set[str] = {_format_import_statement(name, obj, importer)
                            for name, obj in globals.items()}
    return '\n'.join(statements)


# ---------------------------------------------------------------------------
# (De)serialization entry points -- referenced by pickles, keep names stable
# ---------------------------------------------------------------------------

@compatibility(is_backward_compatible=True)
def reduce_graph_module(body: Dict[Any, Any], import_block: str) -> torch.nn.Module:
    # Older pickles stored the generated source under ``code``.
    fn_src = body.get('_code') or body['code']
    forward = _forward_from_src(import_block + fn_src, {})
    return _deserialize_graph_module(forward, body)


@compatibility(is_backward_compatible=True)
def reduce_package_graph_module(
    importer: PackageImporter, body: Dict[Any, Any], generated_module_name: str
) -> torch.nn.Module:
    forward = importer.import_module(generated_module_name).forward
    return _deserialize_graph_module(forward, body)


@compatibility(is_backward_compatible=True)
def reduce_deploy_graph_module(
    importer: PackageImporter, body: Dict[Any, Any], import_block: str
) -> torch.nn.Module:
    ns: Dict[str, Any] = {"__builtins__": importer.patched_builtins}
    fn_src = body.get('_code')
    assert fn_src is not None
    forward = _forward_from_src(import_block + fn_src, ns)
    return _deserialize_graph_module(forward, body)


# Note [fxcpp in torch.package]
# torch.package's exporter externs `torch` (and the standard library) without being told, so a
# torch.fx GraphModule packages as it is. The pickle of an fxcpp GraphModule names
# fxcpp.graph_module.reduce_package_graph_module, and fxcpp is a compiled extension that a
# package cannot hold (its Python files are no use without fxcpp._C): it must be extern like
# torch. Unless one of the user's patterns already decides fxcpp, `__reduce_package__` adds
# `fxcpp` and `fxcpp.**` to the exporter's extern patterns (the exporter matches the pickle's
# modules against its patterns after the pickle is written, so the pattern is in place for them),
# and the package loads wherever fxcpp is installed, as one with torch.fx loads wherever torch is.
def _extern_fxcpp(exporter) -> None:
    patterns = getattr(exporter, 'patterns', None)
    if patterns is None or any(p.matches('fxcpp.graph_module') for p in patterns):
        return
    exporter.extern(['fxcpp', 'fxcpp.**'])


# GraphModule.meta's entry of attributes a deep copy sets on the copy (torch.fx 2.x).
_USER_PRESERVED_ATTRIBUTES_KEY = "_user_preserved_attributes"


class _CodeOnlyModule(torch.nn.Module):
    """The module a pickled GraphModule's saved ``__dict__`` is re-traced through (its class gets
    the saved ``forward``)."""

    def __init__(self, body):
        super().__init__()
        self.__dict__ = body


def _deserialize_graph_module(forward, body: Dict[Any, Any]) -> torch.nn.Module:
    """Rebuild a GraphModule from its saved ``__dict__`` (minus the graph) and
    its generated ``forward``: the graph is recovered by symbolically tracing
    the generated code, treating every submodule as a leaf."""

    # symbolic tracing reads ``forward`` off the class, so give it a class
    class CodeOnlyModule(_CodeOnlyModule):
        pass

    CodeOnlyModule.forward = forward

    tracer_cls = body.get('_tracer_cls')
    if tracer_cls is None:
        from ._symbolic_trace import Tracer
        tracer_cls = Tracer

    graphmodule_cls_name = body.get('_graphmodule_cls_name', 'GraphModule')

    base_tracer: Any = tracer_cls

    class KeepModules(base_tracer):
        # submodules were not traced through originally; don't now either
        def is_leaf_module(self, _: torch.nn.Module, __: str) -> bool:
            return True

    com = CodeOnlyModule(body)
    tracer_extras = body.get('_tracer_extras', {})
    graph = KeepModules().trace(com, **tracer_extras)

    # do not leave the local (unpicklable) KeepModules class on the graph
    graph._tracer_cls = tracer_cls
    from ._lazy_graph_module import _make_graph_module  # it imports this module
    gm = _make_graph_module(com, graph, class_name=graphmodule_cls_name)

    # The constructor only keeps attributes the graph references; restore any
    # other state that was saved.
    for k, v in body.items():
        if not hasattr(gm, k):
            setattr(gm, k, v)
    return gm


# ---------------------------------------------------------------------------
# Attribute copying helpers
# ---------------------------------------------------------------------------

def _to_folder_assign(tab, name, value_str, comment=''):
    """A line of to_folder's ``__init__`` giving the module attribute ``name`` its value
    (``comment``: text after it, from its ' #' on)."""
    if _torch_compat.TO_FOLDER_SETATTR:
        return f"{tab * 2}setattr(self, '{name}', {value_str}){comment}\n"
    return f"{tab * 2}self.{name} = {value_str}{comment}\n"


def _check_hook(f, kind):
    """torch.fx 2.x's check of a node hook (its messages: a replace hook is called create_node's)."""
    if not callable(f):
        raise AssertionError(f'{kind} hook must be a callable.')


_module_setattr = torch.nn.Module.__setattr__


def _install(to_module: torch.nn.Module, field: str, value: Any) -> None:
    # Fast path: a submodule under a fresh name is exactly what
    # nn.Module.__setattr__ would store in _modules (after all its checks).
    if (isinstance(value, torch.nn.Module) and type(to_module).__setattr__ is _module_setattr
            and field not in to_module.__dict__ and field not in to_module._parameters
            and field not in to_module._buffers and field not in to_module._modules and '.' not in field
            and field):
        to_module._modules[field] = value
        return
    # plain tensors (not Parameters) become buffers
    if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
        to_module.register_buffer(field, value)
    else:
        setattr(to_module, field, value)


_MISSING = object()


def _peek(module: Any, item: str, default: Any = _MISSING):
    """getattr(module, item[, default]) without going through nn.Module.__getattr__
    (and its exception on a miss) when the answer is in the instance: same lookup
    order as Python's attribute protocol for an nn.Module whose class does not
    define ``item``."""
    if isinstance(module, torch.nn.Module) and not hasattr(type(module), item):
        d = module.__dict__
        if item in d:
            return d[item]
        for table in ('_parameters', '_buffers', '_modules'):
            t = d.get(table)
            if t is not None and item in t:
                return t[item]
        if type(module).__getattr__ is _module_getattr:
            if default is _MISSING:
                return getattr(module, item)  # raises nn.Module's own AttributeError
            return default
    return getattr(module, item) if default is _MISSING else getattr(module, item, default)


_module_getattr = torch.nn.Module.__getattr__


def _child(module: torch.nn.Module, item: str):
    """getattr(module, item) for a path step, fast for registered members."""
    return _peek(module, item)


# Copy the value found at dotted path ``target`` in ``from_module`` to the same
# path in ``to_module``; missing intermediate modules are created as plain
# ``nn.Module()``s.  ``cache`` (optional) remembers the (source, destination)
# pair of each resolved prefix so that common prefixes are walked only once.
def _copy_attr(from_module: torch.nn.Module, to_module: torch.nn.Module, target: str,
               cache: Optional[Dict[str, Tuple[Any, Any]]] = None):
    prefix_path, _, field = target.rpartition('.')
    hit = cache.get(prefix_path) if (cache is not None and prefix_path) else None
    if hit is not None:
        from_module, to_module = hit
        if from_module is to_module:
            return  # an ancestor was copied as a whole already
    elif prefix_path:
        for item in prefix_path.split('.'):
            f = _child(from_module, item)
            t = _peek(to_module, item, None)
            if f is t:
                # an ancestor was copied as a whole already, nothing left to do
                if cache is not None:
                    cache[prefix_path] = (f, f)
                return
            if t is None:
                t = torch.nn.Module()
                _install(to_module, item, t)
            from_module, to_module = f, t
        if cache is not None:
            cache[prefix_path] = (from_module, to_module)
    if cache and target in cache:
        cache.clear()  # replacing a module that cached paths go through
    _install(to_module, field, _peek(from_module, field))


# Store ``from_obj`` at dotted path ``target`` inside ``to_module``, creating
# plain ``nn.Module()``s for missing intermediate levels.
def _assign_attr(from_obj: Any, to_module: torch.nn.Module, target: str):
    *prefix, field = target.split('.')
    for item in prefix:
        t = getattr(to_module, item, None)
        if t is None:
            t = torch.nn.Module()
            setattr(to_module, item, t)
        to_module = t
    _install(to_module, field, from_obj)


# ---------------------------------------------------------------------------
# Error context for exceptions raised inside generated code
# ---------------------------------------------------------------------------

class _WrappedCall:
    def __init__(self, cls, cls_call):
        self.cls = cls
        self.cls_call = cls_call

    @staticmethod
    def _generate_error_message(frame_summary: traceback.FrameSummary) -> str:
        """The formatted traceback, followed by the offending generated line
        with two lines of context on each side."""
        lineno = frame_summary.lineno
        assert lineno is not None
        line = frame_summary.line
        assert line is not None
        src_lines = linecache.getlines(frame_summary.filename)

        header = ("Call using an FX-traced Module, "
                  f"line {lineno} of the traced Module's "
                  "generated forward function:")
        before = "".join(src_lines[lineno - 2:lineno])
        marker = "~" * len(line) + "~~~ <--- HERE"
        after = "\n".join(src_lines[lineno:lineno + 2])
        return "\n".join([traceback.format_exc(), header, before, marker, after])

    def __call__(self, obj, *args, **kwargs):
        try:
            if self.cls_call is not None:
                return self.cls_call(obj, *args, **kwargs)
            return super(self.cls, obj).__call__(*args, **kwargs)  # type: ignore[misc]
        except Exception as e:
            assert e.__traceback__
            innermost = traceback.StackSummary.extract(
                traceback.walk_tb(e.__traceback__))[-1]  # type: ignore[arg-type]
            if "eval_with_key" not in innermost.filename:
                raise e
            print(_WrappedCall._generate_error_message(innermost), file=sys.stderr)
            raise e.with_traceback(None)


def call_wrapped(self, *args, **kwargs):
    return self._wrapped_call(self, *args, **kwargs)


_call_wrapped = call_wrapped
del call_wrapped


_GET_ATTR_OR_CALL_MODULE = ('get_attr', 'call_module')


@compatibility(is_backward_compatible=True)
class GraphModule(torch.nn.Module):
    """An ``nn.Module`` whose ``forward`` is Python code generated from a :class:`Graph`.

    ``gm.graph`` is the graph, ``gm.code`` the generated source. Assigning a new graph
    regenerates both; after editing the nodes of the current graph in place, call
    ``recompile()``.
    """
    def __new__(cls: 'Type[GraphModule]', *args, **kwargs):
        # Every instance gets its own singleton subclass so that it can carry
        # its own generated ``forward``.  Never stack one GraphModuleImpl on
        # top of another (pytorch/pytorch#63883): start from the first class
        # in the MRO that is not one.
        for t in cls.__mro__:
            if t.__qualname__.rpartition('.')[2] != 'GraphModuleImpl':
                cls = t
                break

        class GraphModuleImpl(cls):  # type: ignore[misc, valid-type]
            pass
        return super().__new__(GraphModuleImpl)

    @compatibility(is_backward_compatible=True)
    def __init__(self,
                 root: Union[torch.nn.Module, Dict[str, Any]],
                 graph: Graph,
                 class_name: str = 'GraphModule'):
        """
        Build a GraphModule executing ``graph``.

        Args:
            root: an ``nn.Module`` or a dict. Every ``get_attr``/``call_module``
                target of the graph is copied from the same dotted path of the
                module (or from the dict entry of that name) into this module.
            graph: the graph the ``forward`` code is generated from.
            class_name: name given to the generated class (shown in reprs and
                error messages).
        """
        super().__init__()
        self.__class__.__name__ = class_name
        if not isinstance(graph, Graph) and isinstance(graph, torch.fx.Graph):
            from .interop import from_torch_fx  # interop imports this module
            graph = from_torch_fx(graph)
        if isinstance(root, torch.nn.Module):
            if hasattr(root, 'training'):
                self.training = root.training
            seen: Set[str] = set()
            paths: Dict[str, Tuple[Any, Any]] = {}
            if _torch_compat.FX_API_2 and isinstance(root, _CodeOnlyModule):
                # torch.fx 2.x: a module rebuilt from its pickle keeps every submodule, buffer and
                # parameter it had, used by the graph or not.
                for name in [k for k, _ in root.named_children()] + [k for k, _ in root.named_buffers()] + \
                        [k for k, _ in root.named_parameters()]:
                    _copy_attr(root, self, name, paths)
            for node in () if _torch_compat.FX_API_2 and isinstance(root, _CodeOnlyModule) else graph.nodes:
                if node.op in _GET_ATTR_OR_CALL_MODULE:
                    target = node.target
                    assert isinstance(target, str)
                    if target not in seen:
                        seen.add(target)
                        _copy_attr(root, self, target, paths)
        elif isinstance(root, dict):
            targets_to_copy: List[str] = []
            for node in graph.nodes:
                if node.op in _GET_ATTR_OR_CALL_MODULE:
                    target = node.target
                    assert isinstance(target, str)
                    if target not in root:
                        raise RuntimeError('Node ' + str(node) + ' referenced target ' + target +
                                           ' but that target was not provided in ``root``!')
                    targets_to_copy.append(target)
            # Shallower names first, so that assigning ``foo.bar`` cannot wipe
            # out an already assigned ``foo.bar.baz`` (stable sort).
            targets_to_copy.sort(key=lambda t: t.count('.'))
            for target in targets_to_copy:
                _assign_attr(root[target], self, target)
        else:
            raise RuntimeError('Unsupported type ' + str(root) + ' passed for root!')

        self.graph = graph

        # Keep the Tracer class that produced the graph (needed by
        # torch.package to re-trace the code on load) unless it is a local
        # class, which could not be pickled.
        self._tracer_cls = None
        tracer_cls = graph._tracer_cls
        if tracer_cls and '<locals>' not in tracer_cls.__qualname__:
            self._tracer_cls = tracer_cls

        self._tracer_extras = {}
        if graph._tracer_extras:
            self._tracer_extras = graph._tracer_extras

        # free-form metadata attached by users / passes
        self.meta: Dict[str, Any] = {}
        if _torch_compat.FX_API_2:
            # torch.fx 2.x's node hooks (Note [GraphModule node hooks] in graph.py) and the
            # ShapeEnv slot its symbolic-shape passes fill.
            self._replace_hooks: List[Callable[..., object]] = []
            self._create_node_hooks: List[Callable[['Node'], object]] = []
            self._erase_node_hooks: List[Callable[['Node'], object]] = []
            self._deepcopy_hooks: List[Callable[['GraphModule'], object]] = []
            self.shape_env = None

    # TorchScript cannot compile the graph setter (pytorch/pytorch#44842);
    # it is not meant to be used from TorchScript anyway.
    __jit_unused_properties__ = ['graph']

    @property
    def graph(self) -> Graph:
        """The ``Graph`` this module's code is generated from."""
        return self._graph

    @graph.setter
    def graph(self, g: Graph) -> None:
        """Install ``g`` as this module's graph and regenerate ``forward``
        (a ``torch.fx.Graph`` is converted with ``fxcpp.from_torch_fx``)."""
        if not isinstance(g, Graph) and isinstance(g, torch.fx.Graph):
            from .interop import from_torch_fx  # interop imports this module
            g = from_torch_fx(g)
        assert isinstance(g, Graph), f'Expected a Graph instance, but got {type(g)}'
        self._graph = g
        g.owning_module = self
        self.recompile()

    @compatibility(is_backward_compatible=False)
    def to_folder(self, folder: Union[str, os.PathLike], module_name: str = "FxModule"):
        """Write this module (source, state dict, pickled submodules) to ``folder``
        so that ``from <folder> import <module_name>`` brings it back.

        Args:
            folder: output directory (created if missing).
            module_name: class name used in the written source.
        """
        folder = Path(folder)
        folder.mkdir(exist_ok=True)
        torch.save(self.state_dict(), folder / 'state_dict.pt')
        tab = " " * 4
        builtin_imports = '\n'.join(v.import_str for v in _custom_builtins.values())
        lines = [f"""
import torch
{builtin_imports}

from torch.nn import *
class {module_name}(torch.nn.Module):
    def __init__(self):
        super().__init__()
"""]
        # modules whose repr() is valid constructor source
        safe_reprs = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d,
                      nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)

        blobified_modules = []
        for child_name, child in self.named_children():
            child_comment = ''
            if type(child) in safe_reprs:
                child_str = repr(child)
            else:
                child_file = folder / f'{child_name}.pt'
                torch.save(child, child_file)
                blobified_modules.append(child_name)
                child_repr = repr(child).replace('\r', ' ').replace('\n', ' ')
                child_str = f"torch.load(r'{child_file}'{_torch_compat.TO_FOLDER_LOAD_MODULE_ARGS})"
                child_comment = f" # {child_repr}"
            lines.append(_to_folder_assign(tab, child_name, child_str, child_comment))

        for buffer_name, buffer in self._buffers.items():
            if buffer is None:
                continue
            lines.append(f"{tab * 2}self.register_buffer('{buffer_name}', "
                         f"torch.empty({list(buffer.shape)}, dtype={buffer.dtype}))\n")

        for param_name, param in self._parameters.items():
            if param is None:
                continue
            lines.append(_to_folder_assign(tab, param_name, "torch.nn.Parameter("
                                           f"torch.empty({list(param.shape)}, dtype={param.dtype}))"))

        lines.append(f"{tab * 2}self.load_state_dict(torch.load(r'{folder}/state_dict.pt'))\n")
        lines.append(f"{_addindent(self.code, 4)}\n")

        (folder / 'module.py').write_text(''.join(lines))
        (folder / '__init__.py').write_text('from .module import *')

        if blobified_modules:
            warnings.warn("Was not able to save the following children modules as reprs -"
                          f"saved as pickled files instead: {blobified_modules}")

    @compatibility(is_backward_compatible=True)
    def add_submodule(self, target: str, m: torch.nn.Module) -> bool:
        """
        Install ``m`` at dotted path ``target``, creating plain ``nn.Module()``s for
        missing intermediate levels.

        Returns ``False`` (without installing) if some level of the path already
        exists but is not an ``nn.Module``; ``True`` otherwise.
        """
        *prefix, field = target.split('.')
        mod: torch.nn.Module = self
        for item in prefix:
            submod = getattr(mod, item, None)
            if submod is None:
                submod = torch.nn.Module()
                setattr(mod, item, submod)
            if not isinstance(submod, torch.nn.Module):
                return False
            mod = submod
        mod.add_module(field, m)
        return True

    @compatibility(is_backward_compatible=True)
    def delete_submodule(self, target: str) -> bool:
        """
        Remove the submodule at dotted path ``target``.

        Returns ``True`` if it was removed, ``False`` if the path does not lead to a
        submodule (nothing is changed then).
        """
        *path, leaf = target.split(".")
        mod: torch.nn.Module = self
        for item in path:
            if not hasattr(mod, item):
                return False
            mod = getattr(mod, item)
            if not isinstance(mod, torch.nn.Module):
                return False
        if not hasattr(mod, leaf):
            return False
        if not isinstance(getattr(mod, leaf), torch.nn.Module):
            return False
        delattr(mod, leaf)
        return True

    @compatibility(is_backward_compatible=True)
    def delete_all_unused_submodules(self) -> None:
        """
        Remove every submodule the graph does not use.

        A submodule is kept if it lies on the dotted path of a ``call_module`` or
        ``get_attr`` target, or inside a module that a ``call_module`` node calls.
        """
        used: Set[str] = set()
        for node in self.graph.nodes:
            op = node.op
            if op != "call_module" and op != "get_attr":
                continue
            target = node.target
            # every dotted prefix of the target: foo, foo.bar, foo.bar.baz
            path = None
            for atom in target.split("."):
                path = atom if path is None else f"{path}.{atom}"
                used.add(path)
            # a called module keeps all of its descendants alive
            if op == "call_module":
                try:
                    submod = self.get_submodule(target)
                except AttributeError:
                    # references a nonexistent submodule: nothing to keep
                    continue
                for submod_name, _ in submod.named_modules():
                    if submod_name != '':
                        used.add(f"{target}.{submod_name}")

        to_delete = [name for name, _ in self.named_modules() if name not in used]
        for name in to_delete:
            self.delete_submodule(name)

    @property
    def code(self) -> str:
        """The Python source generated for ``forward``."""
        if not hasattr(self, '_code'):
            raise RuntimeError('Code has not been generated! Please report a bug to PyTorch')
        return self._code

    @compatibility(is_backward_compatible=True)
    def recompile(self) -> PythonCode:
        """
        Regenerate ``code`` and ``forward`` from ``self.graph``; call this after
        modifying the graph in place.
        """
        graph = self._graph
        codegen = graph._codegen
        if isinstance(codegen, _PyTreeCodeGen):
            self._in_spec = codegen.pytree_info.in_spec
            self._out_spec = codegen.pytree_info.out_spec
        python_code = graph.python_code(root_module='self')
        src = python_code.src
        self._code = src
        if _torch_compat.PYTHON_CODE_2X_OPTIONS:  # torch.fx 2.x's per-module line bookkeeping
            self._lineno_map = _LinenoMap(python_code)
            self._prologue_start = python_code._prologue_start

        cls = type(self)
        co_fields = graph.__dict__.get('_co_fields')  # Note [Code object file names]
        if _LAZY_FORWARD:
            cls.forward = _LazyForward(src, python_code.globals, cls, co_fields)
        else:
            cls.forward = _forward_from_src(src, python_code.globals, co_fields)

        # Wrap calls for error reporting.  If this very class defines its own
        # ``__call__`` that one is wrapped; otherwise the wrapper dispatches
        # dynamically through super() (normally to nn.Module.__call__, which
        # must not be captured here since symbolic tracing patches it).
        cls_dict = vars(cls)
        if '_wrapped_call' not in cls_dict:
            cls_call = cls.__call__ if '__call__' in cls_dict else None
            cls._wrapped_call = _WrappedCall(cls, cls_call)  # type: ignore[attr-defined]
        cls.__call__ = _call_wrapped

        return python_code

    def _python_code_for_save(self) -> PythonCode:
        """The PythonCode pickling and packaging write: ``recompile()``'s (a lazy module
        generates it then, fxcpp._lazy_graph_module)."""
        return self.recompile()

    # _tracer_cls travels in the saved state, so a GraphModule subclass gets
    # re-traced with its own Tracer subclass on load.
    def __reduce_deploy__(self, importer: Importer):
        dict_without_graph = self.__dict__.copy()
        dict_without_graph['_graphmodule_cls_name'] = self.__class__.__name__
        del dict_without_graph['_graph']

        python_code = self._python_code_for_save()
        import_block = _format_import_block(python_code.globals, importer)
        return (reduce_deploy_graph_module, (dict_without_graph, import_block))

    def __reduce_package__(self, exporter: PackageExporter):
        _extern_fxcpp(exporter)
        dict_without_graph = self.__dict__.copy()
        dict_without_graph['_graphmodule_cls_name'] = self.__class__.__name__
        del dict_without_graph['_graph']

        generated_module_name = f'fx-generated._{exporter.get_unique_id()}'
        python_code = self._python_code_for_save()
        import_block = _format_import_block(python_code.globals, exporter.importer)
        module_code = import_block + self.code
        exporter.save_source_string(generated_module_name, module_code)
        return (reduce_package_graph_module, (dict_without_graph, generated_module_name))

    def __reduce__(self):
        """
        Pickle only the generated source plus ``__dict__`` (the Graph has no stable
        on-disk format); loading re-traces the source to rebuild the graph.
        """
        dict_without_graph = self.__dict__.copy()
        python_code = self._python_code_for_save()
        import_block = _format_import_block(python_code.globals, sys_importer)
        del dict_without_graph['_graph']
        return (reduce_graph_module, (dict_without_graph, import_block))

    # __reduce__ re-traces; deepcopy must not go through it
    def __deepcopy__(self, memo):
        if _torch_compat.FX_API_2:
            return self._deepcopy_2x(memo)
        fake_mod = torch.nn.Module()
        fake_mod.__dict__ = copy.deepcopy(self.__dict__)
        return GraphModule(fake_mod, fake_mod.__dict__['_graph'])

    if _torch_compat.FX_API_2:
        def _deepcopy_init(self) -> Callable[..., None]:
            """The initializer a deep copy runs on the new instance (torch.fx 2.x's hook)."""
            return GraphModule.__init__

        def _deepcopy_2x(self, memo):
            # torch.fx 2.x: a module of the same class, in the memo before its state is copied
            # (so state that refers back to the module, e.g. meta, copies without recursion),
            # keeping every submodule, buffer and parameter (_CodeOnlyModule), the state-dict and
            # node hooks and meta; user-preserved attributes are restored from meta, then the
            # deepcopy hooks see the copy.
            res = type(self).__new__(type(self))
            memo[id(self)] = res
            share = _torch_compat.SHARE_TORCHBIND_ON_DEEPCOPY
            if share is not None and share.get():
                import torch.distributed as dist
                groups = dist.ProcessGroup if dist.is_available() else ()
                for v in self.__dict__.values():
                    if isinstance(v, torch.ScriptObject) and not (v._has_method('__getstate__')
                                                                  and v._has_method('__setstate__')):
                        memo.setdefault(id(v), v)
                    elif isinstance(v, groups):
                        memo.setdefault(id(v), v)
            fake_mod = _CodeOnlyModule(copy.deepcopy(self.__dict__, memo))
            self._deepcopy_init()(res, fake_mod, fake_mod.__dict__['_graph'])
            for attr in ('_state_dict_hooks', '_load_state_dict_pre_hooks', '_load_state_dict_post_hooks',
                         '_replace_hooks', '_create_node_hooks', '_erase_node_hooks', '_deepcopy_hooks'):
                if attr in self.__dict__:
                    setattr(res, attr, copy.deepcopy(self.__dict__[attr], memo))
            res.meta = copy.deepcopy(getattr(self, 'meta', {}), memo)
            for name, value in res.meta.get(_USER_PRESERVED_ATTRIBUTES_KEY, {}).items():
                setattr(res, name, value)
            for hook in getattr(self, '_deepcopy_hooks', ()):
                hook(res)
            return res

    if _torch_compat.FX_API_2:
        # torch.fx 2.x's node hook registry (Note [GraphModule node hooks] in graph.py).
        @contextlib.contextmanager
        def _set_replace_hook(self, f: Callable[..., object]) -> Iterator[None]:
            """Calls ``f(old=node, new=new_name, user=user)`` for each use rewired or renamed
            while the context is open."""
            if not callable(f):
                raise AssertionError('Replace hook must be a callable.')
            self._register_replace_node_hook(f)
            try:
                yield
            finally:
                self._unregister_replace_node_hook(f)

        def _register_replace_node_hook(self, f: Callable[..., object]) -> None:
            """Calls ``f(old=node, new=new_name, user=user)`` for each use rewired or renamed."""
            _check_hook(f, 'create_node')
            self._replace_hooks.append(f)

        def _unregister_replace_node_hook(self, f: Callable[..., object]) -> None:
            _check_hook(f, 'create_node')
            self._replace_hooks.remove(f)

        def _register_create_node_hook(self, f: Callable[['Node'], object]) -> None:
            """Calls ``f(node)`` for each node created in this module's graph."""
            _check_hook(f, 'create_node')
            self._create_node_hooks.append(f)

        def _unregister_create_node_hook(self, f: Callable[['Node'], object]) -> None:
            _check_hook(f, 'create_node')
            self._create_node_hooks.remove(f)

        def _register_erase_node_hook(self, f: Callable[['Node'], object]) -> None:
            """Calls ``f(node)`` for each node about to be erased from this module's graph."""
            _check_hook(f, 'erase_node')
            self._erase_node_hooks.append(f)

        def _unregister_erase_node_hook(self, f: Callable[['Node'], object]) -> None:
            _check_hook(f, 'erase_node')
            self._erase_node_hooks.remove(f)

        def _register_deepcopy_hook(self, f: Callable[['GraphModule'], object]) -> None:
            """Calls ``f(copy)`` on each deep copy of this module."""
            _check_hook(f, 'deepcopy')
            self._deepcopy_hooks.append(f)

        def _unregister_deepcopy_hook(self, f: Callable[['GraphModule'], object]) -> None:
            _check_hook(f, 'deepcopy')
            self._deepcopy_hooks.remove(f)

    def __copy__(self):
        res = GraphModule(self, self.graph)
        if _torch_compat.FX_API_2:
            res.meta = getattr(self, 'meta', {})  # torch.fx 2.x: the copy shares meta
        return res

    @compatibility(is_backward_compatible=False)
    def print_readable(self, print_output: bool = True, include_stride: bool = False, include_device: bool = False,
                       colored: bool = False, *, fast_sympy_print: bool = False, expanded_def: bool = False,
                       additional_meta: Optional[List[str]] = None):
        """
        Return (and by default print) the verbose generated code of this module and
        of its GraphModule children. torch.fx 1.13 returns None when it prints, 2.x the text
        (_torch_compat.PRINT_READABLE_RETURNS_TEXT). The options are torch.fx 2.x's (Note
        [Verbose annotations]): strides and devices in the metadata annotations, ANSI colors,
        one parameter per line (this module only), the named meta entries in the comments, and
        fast_sympy_print (symbolic sizes printed by torch._inductor's faster printer); on 1.13
        they change nothing, as torch.fx 1.13 has none of them.
        """
        with contextlib.ExitStack() as stack:
            if fast_sympy_print and _torch_compat.PYTHON_CODE_2X_OPTIONS:
                from torch._inductor.utils import sympy_str
                stack.enter_context(_torch_compat.fx_override_sym_repr(lambda expr: sympy_str(expr.node.expr)))
            return self._print_readable(self._get_name(), print_output, include_stride, include_device, colored,
                                        expanded_def, additional_meta)

    def _print_readable(self, module_name, print_output, include_stride, include_device, colored, expanded_def,
                        additional_meta):
        if _torch_compat.PYTHON_CODE_2X_OPTIONS:
            code = self._graph.python_code(root_module='self', verbose=True, include_stride=include_stride,
                                           include_device=include_device, colored=colored,
                                           expanded_def=expanded_def, additional_meta=additional_meta)
        else:
            code = self._graph.python_code(root_module='self', verbose=True)
        module_code = code.src.lstrip('\n')
        module_code = f"class {module_name}(torch.nn.Module):\n" + module_code
        module_code = _addindent(module_code, 4)

        submodule_code_list = [""]
        for name, submodule in self.named_children():
            if isinstance(submodule, GraphModule):
                child_name = name if _torch_compat.PRINT_READABLE_CHILD_BY_NAME else submodule._get_name()
                submodule_code_list.append(submodule._print_readable(
                    child_name, False, include_stride, include_device, colored, False, additional_meta))
        submodule_code = _addindent("\n".join(submodule_code_list), 4)

        output = module_code + submodule_code
        if print_output:
            print(output)
            return output if _torch_compat.PRINT_READABLE_RETURNS_TEXT else None
        return output

    def __str__(self) -> str:
        orig_str = super().__str__()
        print_readable_reminder = "# To see more debug info, please use `graph_module.print_readable()`"
        return '\n'.join([orig_str, self._code, print_readable_reminder])

    def _replicate_for_data_parallel(self):
        new_gm = self.__copy__()
        new_gm._is_replica = True
        return new_gm


# ---------------------------------------------------------------------------
# The forward builder's switches, under the names the README documents
# ---------------------------------------------------------------------------

_BUILDER_SWITCHES = frozenset({'_DIRECT_BYTECODE', '_VERIFY_BYTECODE'})


def _builder_switch(name: str) -> property:
    def get(self) -> Any:
        return getattr(_forward_builder, name)

    def set_(self, value: Any) -> None:
        setattr(_forward_builder, name, value)
    return property(get, set_, doc=f'fxcpp._forward_builder.{name}, read and written through')


class _GraphModuleModule(types.ModuleType):
    """The type of this module: ``_DIRECT_BYTECODE`` and ``_VERIFY_BYTECODE``
    read and write through to :mod:`fxcpp._forward_builder`, which owns them,
    so ``fxcpp.graph_module._DIRECT_BYTECODE = False`` keeps working (the
    documented way to customise module attribute access). They are data
    descriptors, so tools that save and restore a module attribute through
    its ``__dict__`` unless a data descriptor is in the way (pytest 8+'s
    monkeypatch) restore them with a plain assignment."""

    _DIRECT_BYTECODE = _builder_switch('_DIRECT_BYTECODE')
    _VERIFY_BYTECODE = _builder_switch('_VERIFY_BYTECODE')

    def __dir__(self):
        return sorted(set(super().__dir__()) | _BUILDER_SWITCHES)


sys.modules[__name__].__class__ = _GraphModuleModule


# torch.fx.graph_module's __all__ where the installed torch has one (torch.fx 1.13 has none).
import torch.fx.graph_module as _torch_module  # noqa: E402
if hasattr(_torch_module, '__all__'):
    __all__ = [n for n in _torch_module.__all__ if n in globals()]
del _torch_module

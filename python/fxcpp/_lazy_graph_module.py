"""fxcpp._lazy_graph_module: GraphModules that generate their code on first use (mirrors
torch.fx._lazy_graph_module, torch 2.x).

Under ``_use_lazy_graph_module(True)`` (torch.fx's own context manager and flag: one state for
both libraries, the one Dynamo and AOTAutograd set), ``symbolic_trace`` and the other builders
that go through ``_make_graph_module`` return a ``_LazyGraphModule``: its ``recompile()`` only
marks the module; the code is generated when ``forward`` is first called or ``code``/``str``/
pickling needs it (``_real_recompile``), and ``_needs_recompile()`` says whether that is
still to come. A plain fxcpp ``GraphModule`` already builds its ``forward`` function lazily but
generates its code in ``recompile()`` (in C++, cheaply), as torch.fx's GraphModule does.
On torch 1.13, which has no lazy modules, the flag is this module's own and stays off.
"""
import contextlib
from typing import Any, Optional, Type

from .graph_module import GraphModule

try:
    import torch.fx._lazy_graph_module as _torch_lazy
except ImportError:  # torch 1.13
    _torch_lazy = None

__all__ = ['_LazyGraphModule', '_make_graph_module', '_use_lazy_graph_module', '_force_skip_lazy_graph_module',
           '_get_graph_module_cls']


if _torch_lazy is not None:
    _use_lazy_graph_module = _torch_lazy._use_lazy_graph_module
    _force_skip_lazy_graph_module = _torch_lazy._force_skip_lazy_graph_module

    def _lazy_wanted() -> bool:
        return bool(_torch_lazy._use_lazy_graph_module_flag and not _torch_lazy._force_skip_lazy_graph_module_flag)
else:
    _flags = {'use': False, 'skip': False}

    @contextlib.contextmanager
    def _use_lazy_graph_module(should_use: bool):
        """Within the block, graph modules are made lazy when `should_use` (unless skipped)."""
        prior = _flags['use']
        _flags['use'] = should_use and not _flags['skip']
        try:
            yield
        finally:
            _flags['use'] = prior

    @contextlib.contextmanager
    def _force_skip_lazy_graph_module():
        """Within the block, graph modules are never made lazy."""
        prior = _flags['skip']
        _flags['skip'] = True
        try:
            yield
        finally:
            _flags['skip'] = prior

    def _lazy_wanted() -> bool:
        return _flags['use'] and not _flags['skip']


def _get_graph_module_cls() -> Type[GraphModule]:
    """The class `_make_graph_module` builds now: _LazyGraphModule inside
    _use_lazy_graph_module(True), GraphModule otherwise."""
    return _LazyGraphModule if _lazy_wanted() else GraphModule


def _make_graph_module(*args: Any, graph_module_cls: Optional[Type[GraphModule]] = None, **kwargs: Any) -> GraphModule:
    """`graph_module_cls(*args, **kwargs)`, by default the class _get_graph_module_cls() names."""
    if graph_module_cls is None:
        graph_module_cls = _get_graph_module_cls()
    return graph_module_cls(*args, **kwargs)


class _LazyGraphModule(GraphModule):
    """A GraphModule whose code is generated on first use, not by ``recompile()``."""

    @classmethod
    def from_graphmodule(cls, gm: GraphModule) -> '_LazyGraphModule':
        """`gm` itself when lazy already, otherwise a lazy module over its graph (a torch.fx
        GraphModule's graph is converted)."""
        if isinstance(gm, _LazyGraphModule):
            return gm
        return _LazyGraphModule(gm, gm.graph)

    @staticmethod
    def force_recompile(gm: GraphModule) -> None:
        """Generate `gm`'s code now if it is a lazy module still waiting to."""
        if isinstance(gm, _LazyGraphModule):
            gm.real_recompile()

    def real_recompile(self) -> None:
        """Generate the code now if ``recompile()`` has deferred it."""
        if self._needs_recompile():
            self._real_recompile()

    @classmethod
    def _needs_recompile(cls) -> bool:
        return cls.forward is _LazyGraphModule._lazy_forward

    def _lazy_forward(self, *args, **kwargs):
        # Called through a forward saved before the code existed: generate it, then call the
        # real forward (a saved bound method keeps working, with no further recompiles).
        self.real_recompile()
        assert not self._needs_recompile()
        return self(*args, **kwargs)

    forward = _lazy_forward

    def _real_recompile(self):
        return super().recompile()

    def recompile(self):
        """Defer code generation to the first call of ``forward`` (or read of ``code``)."""
        type(self).forward = _LazyGraphModule._lazy_forward

    @property
    def code(self) -> str:
        self.real_recompile()
        return super().code

    def __str__(self) -> str:
        self.real_recompile()
        return super().__str__()

    def _python_code_for_save(self):
        return self._real_recompile()

    # Pickling and packaging save the generated code and __dict__ (with the code in it).
    def __reduce__(self):
        self.real_recompile()
        return super().__reduce__()

    def __reduce_package__(self, exporter):
        self.real_recompile()
        return super().__reduce_package__(exporter)

    def __reduce_deploy__(self, importer):
        self.real_recompile()
        return super().__reduce_deploy__(importer)

"""The C++ runtime from Python: ``CppModule``, ``compile`` and ``load``."""

import os
import stat

import torch

from .. import _C_torch
from ._format import _graph_module, _reserved_names, _set_attr, _to_bytes

__all__ = ['CppModule', 'compile', 'load']


# Note [Assigning a loaded tensor]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A CppModule's tensors are buffers sharing storage with the C++ runtime, which
# holds the tensors themselves, not the module's attributes. ``load_state_dict``
# copies into them, so the runtime sees the new values. Plain nn.Module
# assignment (``m.weight = t``, ``register_buffer``, ``register_parameter``,
# ``setattr``, ``load_state_dict(assign=True)``) would instead rebind the
# attribute to another tensor: ``state_dict()`` would show it and the runtime
# would still run with the old one. So on the module and on each submodule
# that holds its tensors, assigning one of those names copies the value in,
# exactly as ``load_state_dict`` does (the same call, after the same shape
# check); deleting one, or replacing a submodule that holds some, is refused.
# Unlike plain nn.Module, the attribute then still is the runtime's tensor (not
# ``t`` itself), with its dtype (``t`` converted, as load_state_dict converts).


class _RuntimeTensors:
    """What CppModule and the submodules holding its tensors share: assigning
    one of the runtime's tensors copies into it (Note [Assigning a loaded tensor])."""

    #: names of this module's buffers the C++ runtime runs with (set when it is loaded)
    _fxcpp_loaded = frozenset()
    #: this module's qualified name in the loaded module, with a trailing '.' (for messages)
    _fxcpp_prefix = ''

    def __setattr__(self, name, value):
        if name in self._fxcpp_loaded:
            _copy_into(self, name, value)
        elif _holds_loaded(self, name):
            _refuse_replacing(self, name)
        else:
            super().__setattr__(name, value)

    def __delattr__(self, name):
        if name in self._fxcpp_loaded:
            raise RuntimeError(f'CppModule: cannot delete {self._fxcpp_prefix + name!r}: it is one of the tensors '
                               f'the C++ runtime runs with')
        if _holds_loaded(self, name):
            _refuse_replacing(self, name)
        super().__delattr__(name)

    def register_buffer(self, name, tensor, persistent=True):
        if name in self._fxcpp_loaded:
            if not persistent:
                raise RuntimeError(f'CppModule: {self._fxcpp_prefix + name!r} is one of the tensors the C++ runtime '
                                   f'runs with: it stays in state_dict() (persistent=False cannot apply to it)')
            return _copy_into(self, name, tensor)
        return super().register_buffer(name, tensor, persistent)

    def register_parameter(self, name, param):
        if name in self._fxcpp_loaded:
            return _copy_into(self, name, param)
        return super().register_parameter(name, param)

    def add_module(self, name, module):
        if _holds_loaded(self, name):
            _refuse_replacing(self, name)
        return super().add_module(name, module)


class _LoadedSubmodule(_RuntimeTensors, torch.nn.Module):
    """A submodule of a CppModule that holds some of its tensors (a plain
    ``nn.Module`` as loaded, with _RuntimeTensors' assignment)."""

    def _get_name(self):
        return 'Module'


def _holds_loaded(mod, name) -> bool:
    sub = mod.__dict__.get('_modules', {}).get(name)
    return isinstance(sub, _LoadedSubmodule)


def _refuse_replacing(mod, name):
    sub = mod._modules[name]
    held = sorted(sub._fxcpp_prefix + n for _, m in sub.named_modules() for n in m._fxcpp_loaded)
    listed = ', '.join(repr(h) for h in held[:3]) + (f' and {len(held) - 3} more' if len(held) > 3 else '')
    raise RuntimeError(f'CppModule: cannot replace or delete the submodule {mod._fxcpp_prefix + name!r}: it holds '
                       f'tensors the C++ runtime runs with ({listed}). Assign those tensors (their values are copied '
                       f'in) or use load_state_dict.')


def _copy_into(mod, name, value):
    """``mod.<name> = value`` for one of the runtime's tensors: load_state_dict's
    copy, after its shape check (Note [Assigning a loaded tensor])."""
    qualified = mod._fxcpp_prefix + name
    current = mod._buffers[name]
    if not isinstance(value, torch.Tensor):
        raise TypeError(f'CppModule: cannot assign a {type(value).__name__} to {qualified!r}: it is one of the tensors '
                        f'the C++ runtime runs with; assign a tensor of shape {list(current.shape)} (its values are '
                        f'copied in, as load_state_dict copies them)')
    if value.shape != current.shape:
        raise RuntimeError(f'CppModule: cannot assign a tensor of shape {list(value.shape)} to {qualified!r}, one of '
                           f'the tensors the C++ runtime runs with, of shape {list(current.shape)}: its values are '
                           f'copied in, as load_state_dict copies them, so the shape must stay. For another shape, '
                           f'change the model before fxcpp.aten.lower and save it again.')
    if value is not current:
        mod.load_state_dict({name: value}, strict=False)


def _mark_loaded(root, names) -> None:
    """Makes each submodule on the path of a runtime tensor a _LoadedSubmodule and
    records the tensors each module holds."""
    held = {}
    for qualified in names:
        *path, leaf = qualified.split('.')
        mod, prefix = root, ''
        for part in path:
            mod = mod._modules[part]
            prefix += part + '.'
            if type(mod) is torch.nn.Module:
                mod.__class__ = _LoadedSubmodule
                object.__setattr__(mod, '_fxcpp_prefix', prefix)
        held.setdefault(id(mod), (mod, set()))[1].add(leaf)
    for mod, leaves in held.values():
        object.__setattr__(mod, '_fxcpp_loaded', frozenset(leaves))


class CppModule(_RuntimeTensors, torch.nn.Module):
    """An ``nn.Module`` whose forward runs a loaded graph in the C++ runtime.

    The forward converts its inputs, releases the GIL for the whole graph and
    converts the outputs back (Note [Runtime and the GIL] in
    src/bindings/torch/runtime_bindings.cpp), so several Python threads can
    run inferences on one module in parallel. Outputs are inference tensors,
    as under ``torch.inference_mode()``. The module's tensors are registered
    as buffers that share storage with the runtime: ``state_dict()`` shows
    them, and no second copy exists. Wrong inputs raise TypeError naming the
    input; a failing kernel raises RuntimeError naming the node.

    ``load_state_dict`` changes what runs, and so does assigning one of the
    tensors (``m.lin.weight = t``, ``register_buffer``/``register_parameter``
    of its name, ``setattr``): the values of ``t`` are copied in, as
    ``load_state_dict`` copies them, so the shape must stay and the tensor
    keeps its dtype (Note [Assigning a loaded tensor]). Deleting one of them,
    or replacing a submodule holding some, raises RuntimeError.
    """

    def __init__(self, runtime):
        super().__init__()
        self._runtime = runtime
        reserved = _reserved_names(type(self))
        tensors = runtime.tensors()
        for name, _kind, tensor in tensors:
            _set_attr(self, name, tensor, 'buffer', reserved)
        _mark_loaded(self, [name for name, _kind, _tensor in tensors])

    def forward(self, *inputs):
        return self._runtime.run(*inputs)

    def _apply(self, fn, *args, **kwargs):
        # .to(), .double(), .half(), .cuda(), ... come here. The runtime reads the
        # tensors it loaded, which the buffers share: a conversion that made new
        # tensors would change what state_dict() shows and not what runs. So
        # those are refused; conversions that give back the same tensors work.
        for name, t in self.named_buffers():
            out = fn(t)
            if out is not t:
                raise RuntimeError(
                    f'CppModule: this conversion would change the tensors the C++ runtime runs with (buffer '
                    f'{name!r}: {t.dtype} on {t.device} -> {out.dtype} on {out.device}), which a loaded module '
                    f'cannot do. Convert the inputs instead, or convert the model before fxcpp.aten.lower and '
                    f'save it again.')
        return self

    @property
    def input_names(self):
        """Placeholder names, in order."""
        return self._runtime.input_names()

    def extra_repr(self) -> str:
        return f'inputs={self._runtime.input_names()}, instructions={self._runtime.num_instructions()}'

    def graph_str(self) -> str:
        """The loaded graph, printed by the C++ core as torch.fx prints graphs."""
        return str(self._runtime)


def compile(model, *example_inputs) -> CppModule:
    """Lowers ``model`` (an nn.Module or GraphModule) with ``fxcpp.aten.lower``
    and loads the result into the C++ runtime: ``compile(m, x)(x)`` runs
    ``m`` with no Python per op."""
    from ._lower import lower
    gm = lower(model, *example_inputs)
    # Encoded in memory and loaded from those bytes: no temporary file. The caller's own
    # model: trusted.
    return CppModule(_C_torch.load(_to_bytes(gm), plan_memory=True, trusted=True))


def _read(path) -> bytes:
    with open(path, 'rb') as f:
        return f.read()


_MALFORMED = (KeyError, TypeError, AttributeError, IndexError, RuntimeError, SyntaxError, OverflowError,
              RecursionError, UnicodeError, LookupError, EOFError)


def load(path, runtime: str = 'python', plan_memory: bool = True, trusted: bool = False, mmap: bool = True):
    """Reads a file written by :func:`fxcpp.aten.save`, or a ``.pt2`` archive
    written by ``torch.export.save`` (told apart by content; docs/pt2_format.md).

    ``runtime='python'`` returns a GraphModule (same ``code`` as the saved
    one; from an untrusted file, its forward runs the C++ runtime's argument guards:
    Note [Argument guards in Python] in _guards.py); ``runtime='cpp'`` returns a :class:`CppModule` whose forward runs the
    whole graph in the C++ runtime with the GIL released. Either way the file
    is read once and parsed once, by the C++ reader, which checks it whole
    (Note [Python load path] in _format.py); no code from the file runs. A
    malformed or newer file raises ValueError saying what is wrong; a file
    that cannot be read raises OSError. ``plan_memory=False`` makes the C++
    runtime allocate every result as eager PyTorch does (Note [Memory
    planning] in src/torch/plan.h). ``trusted=True`` lifts the restrictions
    on what a file may ask the runtime to do: only for files you made
    yourself (docs/fxpt_format.md).

    ``mmap=True`` (the default) maps the file: the tensors view it, its pages
    are read when first used, and the page cache shares them between loads
    (Note [Memory-mapped weights] in src/torch/zip_reader.cpp). Each load
    maps the file privately: writing into a loaded weight in place changes
    that module's copy only, never another module's nor the file. The file
    must stay as it is while the module lives (truncating it makes the
    process die of SIGBUS when a weight past the new end is read): use
    ``mmap=False`` for a file another process may change; the file is then
    read into memory (as a file that is not a regular file, a fifo, always is).
    """
    if runtime not in ('python', 'cpp'):
        raise ValueError(f"fxcpp.aten.load: runtime must be 'python' or 'cpp', not {runtime!r}")
    if not mmap:
        return _load_bytes(_read(path), runtime, plan_memory, trusted)
    path = os.fsdecode(os.fspath(path))
    with open(path, 'rb') as f:  # OSError, as with mmap=False, when it cannot be opened
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            data = f.read()  # a fifo or a device: read once, into memory
            return _load_bytes(data, runtime, plan_memory, trusted)
    return _load_bytes(path, runtime, plan_memory, trusted)


def _load_bytes(data, runtime: str = 'python', plan_memory: bool = True, trusted: bool = False):
    """:func:`load` of a file's bytes already in memory (copied), or of a
    path (str: mapped). runtime='show': a GraphModule only to be shown, never run (an
    untrusted file's guarded operators then run no guard)."""
    try:
        if runtime == 'cpp':
            return CppModule(_C_torch.load(data, plan_memory=plan_memory, trusted=trusted))
        return _graph_module(data, trusted, to_run=runtime != 'show')
    except ValueError:
        raise
    except _MALFORMED as e:
        raise ValueError(f'fxcpp.aten.load: malformed file: {type(e).__name__}: {e}') from e

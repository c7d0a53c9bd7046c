"""The C++ runtime from Python: ``CppModule``, ``compile`` and ``load``."""

import os
import stat

import torch

from .. import _C_torch
from ._format import _graph_module, _reserved_names, _set_attr, _to_bytes

__all__ = ['CppModule', 'compile', 'load']


class CppModule(torch.nn.Module):
    """An ``nn.Module`` whose forward runs a loaded graph in the C++ runtime.

    The forward converts its inputs, releases the GIL for the whole graph and
    converts the outputs back (Note [Runtime and the GIL] in
    src/bindings/torch/runtime_bindings.cpp), so several Python threads can
    run inferences on one module in parallel. Outputs are inference tensors,
    as under ``torch.inference_mode()``. The module's tensors are registered
    as buffers that share storage with the runtime: ``state_dict()`` shows
    them, and no second copy exists. Wrong inputs raise TypeError naming the
    input; a failing kernel raises RuntimeError naming the node.
    """

    def __init__(self, runtime):
        super().__init__()
        self._runtime = runtime
        reserved = _reserved_names(type(self))
        for name, _kind, tensor in runtime.tensors():
            _set_attr(self, name, tensor, 'buffer', reserved)

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
    one; from an untrusted file, one that calls no operator whose arguments fxcpp checks
    only in its C++ runtime: Note [Argument guards]); ``runtime='cpp'`` returns a :class:`CppModule` whose forward runs the
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
    are read when first used, and modules loaded from one file share them
    (Note [Memory-mapped weights] in src/torch/zip_reader.cpp). The file must
    then stay as it is while they live (truncating it makes the process die
    of SIGBUS when a weight past the new end is read; writing into a loaded
    weight in place changes it in every module loaded from that file, never
    the file): use ``mmap=False`` for a file another process may change, or
    for weights of this module's own; the file is then read into memory (as a
    file that is not a regular file, a fifo, always is).
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
    untrusted file may call guarded operators, which the Python runtime refuses)."""
    try:
        if runtime == 'cpp':
            return CppModule(_C_torch.load(data, plan_memory=plan_memory, trusted=trusted))
        return _graph_module(data, trusted, to_run=runtime != 'show')
    except ValueError:
        raise
    except _MALFORMED as e:
        raise ValueError(f'fxcpp.aten.load: malformed file: {type(e).__name__}: {e}') from e

"""torch.export's ExportedProgram as an fxcpp GraphModule: ``from_exported_program``."""
import io
import os

from .. import _torch_compat
from ._format import _graph_module

__all__ = ['from_exported_program']


def from_exported_program(ep, *, trusted: bool = False):
    """The fxcpp GraphModule of ``ep``, a ``torch.export.ExportedProgram``:
    calling it equals ``ep.module()(*args)``; it prints, edits and runs like
    any GraphModule, and ``fxcpp.aten.save(gm, 'm.pt2')`` writes it back as an
    archive ``torch.export.load`` reads (docs/pt2_format.md).

    The program goes through the one .pt2 reader (src/torch/pt2.cpp): torch
    serializes it into memory, the C++ reader builds the graph. So the
    GraphModule is exactly what ``fxcpp.aten.load`` gives for the archive
    ``torch.export.save(ep, path)`` writes: parameters, buffers and constants
    lifted back to attributes (get_attr nodes of their qualified names), user
    inputs as placeholders, the output arranged as the program's out_spec,
    each value's serialized metadata (symbolic sizes included) in
    ``node.meta['pt2_value']``. It is the caller's own program, so the
    operator allow-list for files from strangers does not apply. What the
    reader cannot express (keyword or container inputs, higher-order
    operators, TorchBind objects, ...) raises ValueError saying why.

    ``ep`` may also be the path (str or os.PathLike) of a ``.pt2`` archive,
    such as ``torch.export.save`` writes: it is then read by fxcpp's own reader,
    as ``fxcpp.aten.load(path, runtime='python', trusted=trusted)`` reads it,
    never by ``torch.export.load`` (which unpickles: a weight stored pickled
    runs its author's code; docs/untrusted_files.md). A file is not the
    caller's own program: the operator allow-list applies unless
    ``trusted=True`` (only for files you made yourself). ``trusted`` has no
    effect on an ExportedProgram.
    """
    if isinstance(ep, (str, os.PathLike)):
        from ._runtime import load
        return load(ep, runtime='python', trusted=trusted)
    save = _torch_compat.EXPORT_SAVE
    if save is None:
        import torch
        raise RuntimeError(f'fxcpp.aten.from_exported_program needs torch.export (torch 2.5 or newer); this torch '
                           f'is {torch.__version__}')
    buf = io.BytesIO()
    save(ep, buf)
    try:
        return _graph_module(buf.getvalue(), trusted=True)
    except ValueError:
        raise
    except (KeyError, TypeError, AttributeError, IndexError, RuntimeError) as e:
        raise ValueError(f'fxcpp.aten.from_exported_program: {type(e).__name__}: {e}') from e

"""Helpers for differential tests against torch.fx."""
import contextlib
import io
import re

import torch
import torch.fx as tfx

import fxcpp as fx

LIBS = [tfx, fx]

_ADDR = re.compile(r' at 0x[0-9a-f]+')


def norm(text: str) -> str:
    """Normalize object addresses and module names so outputs compare across libraries."""
    return _ADDR.sub(' at 0xADDR', text)


def tabular(graph) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        graph.print_tabular()
    return norm(buf.getvalue())


def same_values(a, b):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor)
        assert a.shape == b.shape and a.dtype == b.dtype
        assert torch.allclose(a, b, equal_nan=True)
    elif isinstance(a, (list, tuple)):
        assert type(a) == type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            same_values(x, y)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            same_values(a[k], b[k])
    else:
        assert a == b


def raises_same(fn_ref, fn_ours):
    """Both raise the same exception type with the same (normalized) message."""
    err = []
    for fn in (fn_ref, fn_ours):
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            err.append(e)
        else:
            err.append(None)
    a, b = err
    assert a is not None, "torch.fx did not raise"
    assert b is not None, f"fxcpp did not raise (torch.fx raised {type(a).__name__}: {a})"
    assert type(a) is type(b), (type(a), type(b), str(a), str(b))
    assert norm(str(a)) == norm(str(b))
    return b

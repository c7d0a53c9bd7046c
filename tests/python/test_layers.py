"""The layers of docs/design.md, checked on the tree: each folder includes only from the layers
below it. core (include/fxcpp/core, src/core) includes nothing of fxcpp's passes or torch layer, no
Python and no torch headers; passes (include/fxcpp/passes, src/passes) nothing of the torch layer,
Python or torch; the torch layer (include/fxcpp/torch, src/torch) no Python. A new arrow upwards
fails here with the file and the line."""
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
PYTHON = ('Python.h', 'pybind11/', 'frameobject.h', 'structmember.h')
TORCH = ('torch/', 'ATen/', 'c10/', 'caffe2/')

# (layer, its folders, include prefixes it must not use)
LAYERS = [
    ('core', ('include/fxcpp/core', 'src/core'), ('fxcpp/passes/', 'fxcpp/torch/') + PYTHON + TORCH),
    ('passes', ('include/fxcpp/passes', 'src/passes'), ('fxcpp/torch/',) + PYTHON + TORCH),
    ('torch', ('include/fxcpp/torch', 'src/torch'), PYTHON),
]


def _includes(folder):
    for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
        for f in sorted(files):
            if f.endswith(('.h', '.cpp', '.inc')):
                path = os.path.join(dirpath, f)
                with open(path, encoding='utf-8') as fh:
                    text = fh.read()
                for m in INCLUDE.finditer(text):
                    line = text.count('\n', 0, m.start()) + 1
                    yield os.path.relpath(path, ROOT), line, m.group(1)


@pytest.mark.parametrize('layer,folders,banned', LAYERS, ids=[lay[0] for lay in LAYERS])
def test_no_layer_includes_from_a_layer_above(layer, folders, banned):
    seen = 0
    bad = []
    for folder in folders:
        for path, line, inc in _includes(folder):
            seen += 1
            if inc.startswith(banned):
                bad.append(f'{path}:{line}: #include {inc}')
    assert seen, f'no includes found under {folders}: the layout moved, update LAYERS'
    assert not bad, f'the {layer} layer includes from a layer above it:\n' + '\n'.join(bad)

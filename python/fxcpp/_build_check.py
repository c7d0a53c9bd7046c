"""Refuses to import a build of fxcpp into a process with another torch or CPython.

Note [One torch per build]
~~~~~~~~~~~~~~~~~~~~~~~~~~
fxcpp._C_torch links LibTorch's C++ symbols, which change between torch releases, and
both extensions are built for one CPython's ABI. A build beside another torch would fail
on an undefined symbol deep in an import, or crash later on a changed layout; so CMake
writes what the build was made against into fxcpp/_build_config.py
(cmake/build_config.py.in), a wheel pins ``torch==X.Y.Z`` in its metadata (pip refuses to
install it beside another torch; cmake/torch_pin.py), and ``import fxcpp`` compares the
record with the running torch and CPython before any extension loads, raising one
ImportError that names both and says how to rebuild.
"""
import sys

try:
    from ._build_config import PYTHON_VERSION, TORCH_VERSION
except ImportError:  # a source tree without a build: fxcpp._C's own import error says so
    PYTHON_VERSION = TORCH_VERSION = ''


def running_torch_version():
    """The running torch's release ("2.14.1"), without a local label ("+cu128")."""
    import torch
    return torch.__version__.split('+')[0]


def check():
    here = f'{sys.version_info[0]}.{sys.version_info[1]}'
    if PYTHON_VERSION and PYTHON_VERSION != here:
        raise ImportError(f'this build of fxcpp is for CPython {PYTHON_VERSION}, but this process runs CPython '
                          f'{here} ({sys.executable}): install or build fxcpp with this Python '
                          f'(pip install --no-build-isolation .)')
    if TORCH_VERSION:
        import torch
        have = running_torch_version()
        if have != TORCH_VERSION:
            raise ImportError(f'this build of fxcpp was built against torch {TORCH_VERSION}, but this process has '
                              f'torch {have} ({torch.__file__}): rebuild fxcpp against this torch '
                              f'(pip install --no-build-isolation --no-deps --force-reinstall .) or install '
                              f'torch=={TORCH_VERSION}')

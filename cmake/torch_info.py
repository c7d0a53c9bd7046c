"""Prints, for CMake, where the torch of this interpreter keeps its C++ parts.

Run by cmake/FxcppTorch.cmake with the Python the extensions are built for. Under
pip's isolated build environment the interpreter's own site-packages are hidden
from sys.path; the torch to build against is the one installed there, so they
are added back (after the build environment's own paths) before giving up.

Output: one `key=value` per line: dir (the torch package folder), version,
cxx11_abi (0 or 1), include (its C++ headers, or empty where a distribution
keeps them elsewhere, as Debian does in /usr/include), lib (its libraries, or empty).
"""
import os
import sys
import sysconfig


def _import_torch():
    try:
        import torch  # noqa: F401
        return torch
    except ImportError:
        pass
    for key in ("purelib", "platlib"):
        path = sysconfig.get_paths()[key]
        if path not in sys.path:
            sys.path.append(path)
    import torch  # noqa: F811
    return torch


def main() -> int:
    try:
        torch = _import_torch()
    except ImportError as e:
        print(f"error=this Python ({sys.executable}) cannot import torch: {e}. Install torch into it "
              f"(pip install torch==2.14.1) or point FXCPP_TORCH_DIR at a torch package folder.")
        return 0
    root = os.path.dirname(os.path.abspath(torch.__file__))
    include = os.path.join(root, "include")
    lib = os.path.join(root, "lib")
    print(f"dir={root}")
    print(f"version={torch.__version__.split('+')[0]}")
    print(f"cxx11_abi={int(bool(torch._C._GLIBCXX_USE_CXX11_ABI))}")
    print(f"include={include if os.path.isdir(os.path.join(include, 'ATen')) else ''}")
    print(f"lib={lib if os.path.exists(os.path.join(lib, 'libtorch_cpu.so')) else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

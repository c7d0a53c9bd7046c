#!/usr/bin/env bash
# Builds libtorchbind_test.so (the TorchScript custom classes TestFX.setUp loads) from the
# fetched test/cpp/jit/test_custom_class_registrations.cpp against PYTHON's torch: Debian's
# libtorch-dev (headers in /usr/include) for 1.13, the wheel's own include/ and lib/ for 2.14.
# Prints the library's path; prints nothing (and exits 0) when it cannot be built, in which case
# the tests that need it are skipped on both sides.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
UP="${UPSTREAM_DIR:-$ROOT/.upstream}"
SRC="$UP/src/test/cpp/jit/test_custom_class_registrations.cpp"
LIB="$UP/lib/libtorchbind_test.so"
CXX="${CXX:-g++}"
PYTHON="${PYTHON:-/usr/bin/python3}"
if [ -f "$LIB" ] && [ "$LIB" -nt "$SRC" ]; then echo "$LIB"; exit 0; fi
mkdir -p "$UP/lib"
abi="$("$PYTHON" -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))' 2>/dev/null || echo 1)"
tdir="$("$PYTHON" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null || true)"
major="$("$PYTHON" -c 'import torch; print(torch.__version__.split(".")[0])' 2>/dev/null || echo 1)"
if [ "$major" -ge 2 ] && [ -f "$tdir/include/torch/custom_class.h" ]; then   # the 2.14 wheel
  # LibTorch 2.10+ headers need C++20 (cmake/FxcppTorch.cmake).
  FLAGS=(-std=c++20 -I"$tdir/include" -I"$tdir/include/torch/csrc/api/include" -L"$tdir/lib" -Wl,-rpath,"$tdir/lib")
else                                                                        # Debian's libtorch-dev
  FLAGS=(-std=c++17 -I/usr/include/torch/csrc/api/include)
fi
if "$CXX" -O1 -shared -fPIC -D_GLIBCXX_USE_CXX11_ABI="$abi" -I"$UP/src" "${FLAGS[@]}" \
      "$SRC" -o "$LIB.tmp" -ltorch -ltorch_cpu -lc10 \
      >"$UP/lib/build.log" 2>&1 && mv "$LIB.tmp" "$LIB"; then
  echo "$LIB"
else
  echo "upstream: could not build libtorchbind_test.so (see $UP/lib/build.log); TestFX is skipped on both sides" >&2
fi

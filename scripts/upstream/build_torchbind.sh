#!/usr/bin/env bash
# Builds libtorchbind_test.so (the TorchScript custom classes TestFX.setUp loads) from the
# fetched test/cpp/jit/test_custom_class_registrations.cpp against the installed libtorch-dev.
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
if "$CXX" -std=c++17 -O1 -shared -fPIC -D_GLIBCXX_USE_CXX11_ABI="$abi" -I"$UP/src" \
      -I/usr/include/torch/csrc/api/include "$SRC" -o "$LIB.tmp" -ltorch -ltorch_cpu -lc10 \
      >"$UP/lib/build.log" 2>&1 && mv "$LIB.tmp" "$LIB"; then
  echo "$LIB"
else
  echo "upstream: could not build libtorchbind_test.so (see $UP/lib/build.log); TestFX is skipped on both sides" >&2
fi

#!/usr/bin/env bash
# Runs pytest over the ASan+UBSan build of the extension (make test-asan-python).
#   scripts/asan_python.sh BUILD_DIR PYTHON [pytest args...]
# BUILD_DIR was configured with FXCPP_SANITIZE=ON, so the sanitized extensions sit in
# BUILD_DIR/pkg/fxcpp beside links to the package's Python files (the fxcpp_py_package target);
# this preloads the sanitizer runtimes, which must come first in a process whose python3 is
# not instrumented.
set -euo pipefail
build=$(realpath "$1"); python=$2; shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
ls "$build"/pkg/fxcpp/_C*.so >/dev/null
asan=$(gcc -print-file-name=libasan.so)
ubsan=$(gcc -print-file-name=libubsan.so)
# Python and torch keep memory until exit by design, so LeakSanitizer stays off here; leaks of
# Python objects are checked by tests/python/test_memory.py. Any ASan or UBSan report aborts
# the run with a non-zero status (halt_on_error), so a report cannot pass unnoticed. An allocation
# too large to satisfy returns null as the real allocator does (allocator_may_return_null), so
# tests of "cannot allocate" errors see the exception a user would see.
# pytest runs with --capture=sys, so the runtimes' reports (written to file descriptor 2)
# reach the terminal even when a report ends the process.
export ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:exitcode=99:verify_asan_link_order=0:strict_string_checks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=99
export FXCPP_PACKAGE_ROOT=$build/pkg
export PYTHONPATH=$build/pkg
cd "$root"
LD_PRELOAD="$asan $ubsan" exec "$python" -m pytest -q -p no:cacheprovider --capture=sys "$@"

#!/usr/bin/env bash
# `make test-upstream`: PyTorch 1.13.1's own torch.fx tests, run once on torch.fx and once on a
# mechanically rewritten copy that uses fxcpp, each in its own pytest process (in parallel),
# then compared test by test (scripts/upstream/compare.py).
#
#   UPSTREAM_SELECTION=default  test_fx.py -k "not TestOperatorSignatures and not
#                               TestVisionTracing and not TestFunctionalTracing" (a few minutes)
#   UPSTREAM_SELECTION=all      all of test_fx.py, TestFunctionalTracing/TestVisionTracing too
#                               (~30 minutes)
#   UPSTREAM_PYTEST_ARGS        extra pytest arguments for both sides, split on whitespace (-x)
#   FXCPP_UPSTREAM_STRICT=1     exit non-zero when a test passes on torch.fx but not on fxcpp
#   FXCPP_UPSTREAM_OPTIONAL=1   exit 0 with a message when the sources cannot be fetched
#
# Everything downloaded or generated lives in .upstream/ (git-ignored):
#   src/ the pristine tests, fxcpp-test/ the rewrite, rewrite.log, lib/libtorchbind_test.so,
#   results/{torch.fx,fxcpp}.{xml,log}.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
UP="${UPSTREAM_DIR:-$ROOT/.upstream}"
export UPSTREAM_DIR="$UP"
PYTHON="${PYTHON:-/usr/bin/python3}"
SITE="$ROOT/tests/upstream/site"
SELECTION="${UPSTREAM_SELECTION:-default}"
start=$(date +%s)

# In `make test` (FXCPP_UPSTREAM_OPTIONAL=1) an unreachable Debian mirror skips the comparison
# with a message instead of failing the whole test run; `make test-upstream` alone fails.
if ! "$ROOT/scripts/upstream/fetch.sh"; then
  if [ "${FXCPP_UPSTREAM_OPTIONAL:-0}" = 1 ]; then
    echo "upstream: SKIPPED: could not fetch Debian's pytorch source package (see above)" >&2
    exit 0
  fi
  exit 1
fi
# The fxcpp package to test: the build tree's assembled package (make passes FXCPP_PACKAGE_ROOT).
PKG="${FXCPP_PACKAGE_ROOT:-$ROOT/build/pkg}"
export FXCPP_TORCHBIND_LIB="$("$ROOT/scripts/upstream/build_torchbind.sh")"

# The harness's own tests first: the expecttest stand-in must fail on a mismatch, the rewrite
# must point names at fxcpp only where fxcpp has them.
PYTHONPATH="$SITE:$PKG" "$PYTHON" -m pytest -q -p no:cacheprovider \
    "$ROOT/tests/upstream/test_expecttest.py" "$ROOT/tests/upstream/test_rewrite.py" \
    "$ROOT/tests/upstream/test_compare.py"

PYTHONPATH="$PKG" "$PYTHON" "$ROOT/scripts/upstream/rewrite.py" \
    "$UP/src/test" "$UP/fxcpp-test" "$UP/rewrite.log"

case "$SELECTION" in
  default) K=(-k "not TestOperatorSignatures and not TestVisionTracing and not TestFunctionalTracing") ;;
  all)     K=() ;;
  *)       echo "upstream: UPSTREAM_SELECTION must be 'default' or 'all'" >&2; exit 2 ;;
esac
read -r -a EXTRA <<< "${UPSTREAM_PYTEST_ARGS:-}"

mkdir -p "$UP/results"
rm -f "$UP"/results/*.xml
run_side() {  # name testdir pythonpath
  local name="$1" dir="$2" path="$3"
  (cd "$dir" && PYTHONPATH="$path" "$PYTHON" -m pytest -q -p no:cacheprovider -p fxcpp_upstream \
      -o junit_family=xunit1 --junitxml="$UP/results/$name.xml" test_fx.py "${K[@]}" "${EXTRA[@]}" \
      >"$UP/results/$name.log" 2>&1) || true
  echo "upstream: $name: $(grep -E '(passed|failed|error|no tests ran|collected)' "$UP/results/$name.log" \
      | tail -1)  (log: $UP/results/$name.log)"
}
echo "upstream: running test_fx.py ($SELECTION selection) on torch.fx and on fxcpp"
run_side torch.fx "$UP/src/test" "$SITE" &
ref_pid=$!
run_side fxcpp "$UP/fxcpp-test" "$SITE:$PKG" &
our_pid=$!
wait "$ref_pid" "$our_pid"
echo
set +e
"$PYTHON" "$ROOT/scripts/upstream/compare.py" "$UP/results/torch.fx.xml" "$UP/results/fxcpp.xml" \
    | tee "$UP/results/summary.txt"
rc=${PIPESTATUS[0]}
set -e
echo "upstream: wall time $(( $(date +%s) - start ))s"
exit "$rc"

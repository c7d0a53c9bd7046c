#!/usr/bin/env bash
# `make test-upstream` / `make test-upstream-214`: PyTorch's own torch.fx tests, run once on
# torch.fx and once on a mechanically rewritten copy that uses fxcpp, each in its own pytest
# process (in parallel), then compared test by test (scripts/upstream/compare.py).
#
#   UPSTREAM_TORCH=1.13         (default) PyTorch 1.13.1's test_fx.py on Debian's torch 1.13.1
#                               (PYTHON, default /usr/bin/python3); results in .upstream/
#   UPSTREAM_TORCH=2.14         PyTorch 2.14.1's test_fx.py, test_fx_experimental.py and
#                               fx/test_*.py on torch 2.14.1 (PYTHON: the .venv's python);
#                               results in .upstream/214/
#   UPSTREAM_SELECTION=default  1.13: test_fx.py -k "not TestOperatorSignatures and not
#                               TestVisionTracing and not TestFunctionalTracing" (a few minutes)
#                               2.14: the same -k over test_fx.py and the fx/test_*.py files
#                               test_fx.py does not import
#   UPSTREAM_SELECTION=all      every test of those files (1.13: ~30 minutes); 2.14: all of
#                               fx/test_*.py and test_fx_experimental.py too
#   UPSTREAM_PYTEST_ARGS        extra pytest arguments for both sides, split on whitespace (-x)
#   FXCPP_UPSTREAM_STRICT=1     exit non-zero when a test passes on torch.fx but not on fxcpp
#                               (tests in tests/upstream/known_differences_{113,214}.txt excepted)
#   FXCPP_UPSTREAM_OPTIONAL=1   exit 0 with a message when the sources cannot be fetched
#   FXCPP_PACKAGE_ROOT          the fxcpp package to test (default: build/pkg for 1.13, the
#                               fxcpp installed in PYTHON's environment for 2.14)
#
# Everything downloaded or generated lives in $UPSTREAM_DIR (git-ignored):
#   src/ the pristine tests (and their expect files), fxcpp-test/ the rewrite, rewrite.log,
#   lib/libtorchbind_test.so, results/{torch.fx,fxcpp}.{xml,log}, results/summary.txt,
#   results/per_class.tsv.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
export UPSTREAM_TORCH="${UPSTREAM_TORCH:-1.13}"
case "$UPSTREAM_TORCH" in
  1.13) UP="${UPSTREAM_DIR:-$ROOT/.upstream}"
        PYTHON="${PYTHON:-/usr/bin/python3}"
        PKG="${FXCPP_PACKAGE_ROOT:-$ROOT/build/pkg}" ;;
  2.14) UP="${UPSTREAM_DIR:-$ROOT/.upstream/214}"
        PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
        PKG="${FXCPP_PACKAGE_ROOT:-}" ;;
  *)    echo "upstream: UPSTREAM_TORCH must be 1.13 or 2.14" >&2; exit 2 ;;
esac
export UPSTREAM_DIR="$UP" PYTHON
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
# PYTHONPATH for the fxcpp side: the site folder, then the package under test if one is named.
OURS_PATH="$SITE${PKG:+:$PKG}"
export FXCPP_TORCHBIND_LIB="$("$ROOT/scripts/upstream/build_torchbind.sh")"

# The harness's own tests first: the expecttest stand-in must fail on a mismatch, the rewrite
# must point names at fxcpp only where fxcpp has them, the expect files must be found.
PYTHONPATH="$OURS_PATH" "$PYTHON" -m pytest -q -p no:cacheprovider --rootdir "$ROOT/tests/upstream" \
    "$ROOT/tests/upstream/test_expecttest.py" "$ROOT/tests/upstream/test_rewrite.py" \
    "$ROOT/tests/upstream/test_compare.py" "$ROOT/tests/upstream/test_expect_files.py"

PYTHONPATH="$OURS_PATH" "$PYTHON" "$ROOT/scripts/upstream/rewrite.py" \
    "$UP/src/test" "$UP/fxcpp-test" "$UP/rewrite.log"

case "$UPSTREAM_TORCH" in
  1.13) FILES=(test_fx.py) ;;
  2.14) FILES=(test_fx.py)
        # test_fx.py imports most fx/test_*.py classes (`from fx.test_dce_pass import TestDCE`)
        # and runs them; the default selection leaves those files out, `all` runs them again
        # on their own, as PyTorch's CI does.
        imported="$(sed -nE 's/^from fx\.([A-Za-z0-9_]+) import .*/fx\/\1.py/p' "$UP/src/test/test_fx.py")"
        for f in $(cd "$UP/src/test" && ls fx/test_*.py); do
          if [ "$SELECTION" = all ] || ! grep -qxF "$f" <<< "$imported"; then FILES+=("$f"); fi
        done
        [ "$SELECTION" = all ] && FILES+=(test_fx_experimental.py) ;;
esac
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
  # --rootdir: test ids relative to the test folder on both sides (pytest >= 8 would otherwise
  # take the repository's pyproject.toml as the root and prefix each side's own path).
  # --continue-on-collection-errors: a file that does not import is one failed entry, not the end.
  (cd "$dir" && PYTHONPATH="$path" "$PYTHON" -m pytest -q -p no:cacheprovider -p fxcpp_upstream \
      --rootdir "$dir" --continue-on-collection-errors -o junit_family=xunit1 \
      --junitxml="$UP/results/$name.xml" "${FILES[@]}" "${K[@]}" "${EXTRA[@]}" \
      >"$UP/results/$name.log" 2>&1) || true
  echo "upstream: $name: $(grep -E '(passed|failed|error|no tests ran|collected)' "$UP/results/$name.log" \
      | tail -1)  (log: $UP/results/$name.log)"
}
echo "upstream: running ${FILES[*]} from $(cat "$UP/src/.version") ($SELECTION selection)" \
     "on torch.fx and on fxcpp"
run_side torch.fx "$UP/src/test" "$SITE" &
ref_pid=$!
run_side fxcpp "$UP/fxcpp-test" "$OURS_PATH" &
our_pid=$!
wait "$ref_pid" "$our_pid"
echo
set +e
"$PYTHON" "$ROOT/scripts/upstream/compare.py" --title "$(cat "$UP/src/.version") FX tests" \
    --known "$ROOT/tests/upstream/known_differences_${UPSTREAM_TORCH/./}.txt" --per-class "$UP/results/per_class.tsv" \
    "$UP/results/torch.fx.xml" "$UP/results/fxcpp.xml" | tee "$UP/results/summary.txt"
rc=${PIPESTATUS[0]}
set -e
echo "upstream: wall time $(( $(date +%s) - start ))s" | tee -a "$UP/results/summary.txt"
exit "$rc"

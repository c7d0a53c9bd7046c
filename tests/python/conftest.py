import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The package under test: FXCPP_PACKAGE_ROOT names a folder holding an assembled fxcpp
# (make's 1.13 leg: build/pkg; the ASan legs: build-asan-py/pkg and build-asan-214/pkg, whose fxcpp._C is the
# ASan+UBSan build); the check below makes sure the run really imports it. Unset (the
# 2.14 leg), the fxcpp installed into the running Python is tested.
PY = os.environ.get('FXCPP_PACKAGE_ROOT')
if PY and PY not in sys.path:
    sys.path.insert(0, PY)

# examples/ holds models the tests share with the benchmarks (examples/gpt2.py).
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(HERE)), 'examples')
if EXAMPLES not in sys.path:
    sys.path.append(EXAMPLES)

import fxcpp._C  # noqa: E402

if PY and not os.path.abspath(fxcpp._C.__file__).startswith(os.path.abspath(PY) + os.sep):
    raise RuntimeError(f'fxcpp._C was imported from {fxcpp._C.__file__}, not from {PY}')

# Note [Direct bytecode]: every forward function the suite builds from
# directly assembled bytecode is compared with what compile() gives for the
# same source; a difference fails the test that built it.
import fxcpp.graph_module  # noqa: E402

fxcpp.graph_module._VERIFY_BYTECODE = True

# Hypothesis's explain phase re-runs a failing example under a line tracer (sys.settrace) to
# point at the lines involved; on a test that fails by design (a strict xfail on torch 2.x),
# tracing torch.fx 2.14's partitioner took over ten minutes. The suite runs without it; the
# failing example is still shrunk and printed.
from hypothesis import Phase, settings  # noqa: E402

NO_EXPLAIN = tuple(p for p in Phase if p.name != 'explain')
settings.register_profile('fxcpp', phases=NO_EXPLAIN)
settings.load_profile('fxcpp')



def pytest_terminal_summary(terminalreporter):
    """The expected failures by reason, counted: on the 2.14 leg these are the torch.fx 2.14
    differences still open (tests/python/torch2.py, issue 23), so the log lists them."""
    reasons = {}
    for rep in terminalreporter.stats.get('xfailed', []):
        reason = getattr(rep, 'wasxfail', '') or '(no reason given)'
        reasons[reason] = reasons.get(reason, 0) + 1
    if not reasons:
        return
    terminalreporter.section('expected failures by reason')
    for reason, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])):
        terminalreporter.write_line(f'{n:5d}  {reason}')


# Note [The suite on every core]: make runs the Python suites with pytest-xdist, one worker per
# core (PYTEST_JOBS in the Makefile). The scheduler below sends each file to one worker as a whole,
# so a module's fixtures are computed once, as in a serial run; and the three files that draw on
# test_planner_fuzz's recorded ATen calls (one OpInfo walk of minutes, cached per process) go to
# the same worker, so the walk happens once, not once per worker. (xdist's own --dist loadgroup
# marks do not take effect with pytest 9 and pytest-xdist 3.8: every test went its own way.)
_SHARED_GROUPS = {'test_planner_fuzz.py': 'aten_calls', 'test_guard_sweep.py': 'aten_calls',
                  'test_structured_fuzz.py': 'aten_calls'}

# Each worker runs torch on one thread: two workers on two cores with torch's default of a thread per
# core each would oversubscribe them (and torch's pool spins while it waits).
if os.environ.get('PYTEST_XDIST_WORKER'):
    import torch  # noqa: E402

    torch.set_num_threads(1)

import pytest  # noqa: E402


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: unused without it
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class FileGroups(LoadScopeScheduling):
        """--dist loadfile, with the files of _SHARED_GROUPS as one unit."""

        def _split_scope(self, nodeid):
            path = nodeid.split('::', 1)[0]
            return _SHARED_GROUPS.get(os.path.basename(path), path)

    return FileGroups(config, log)

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The package under test: FXCPP_PACKAGE_ROOT names a folder holding an assembled fxcpp
# (make's 1.13 leg: build/pkg; the ASan legs: build-asan-py*/pkg, whose fxcpp._C is the
# ASan+UBSan build); the check below makes sure the run really imports it. Unset (the
# 2.14 leg), the fxcpp installed into the running Python is tested.
PY = os.environ.get('FXCPP_PACKAGE_ROOT')
if PY and PY not in sys.path:
    sys.path.insert(0, PY)

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


import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# make test-asan-python points this at a package tree whose fxcpp._C is the
# ASan+UBSan build (scripts/asan_python.sh); the check below makes sure the
# run really imports it.
PY = os.environ.get('FXCPP_PACKAGE_ROOT') or os.path.join(os.path.dirname(os.path.dirname(HERE)), 'python')
if PY not in sys.path:
    sys.path.insert(0, PY)

import fxcpp._C  # noqa: E402

if not os.path.realpath(fxcpp._C.__file__).startswith(os.path.realpath(PY) + os.sep):
    raise RuntimeError(f'fxcpp._C was imported from {fxcpp._C.__file__}, not from {PY}')

# Note [Direct bytecode]: every forward function the suite builds from
# directly assembled bytecode is compared with what compile() gives for the
# same source; a difference fails the test that built it.
import fxcpp.graph_module  # noqa: E402

fxcpp.graph_module._VERIFY_BYTECODE = True

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PY = os.path.join(os.path.dirname(os.path.dirname(HERE)), 'python')
if PY not in sys.path:
    sys.path.insert(0, PY)

# Note [Direct bytecode]: every forward function the suite builds from
# directly assembled bytecode is compared with what compile() gives for the
# same source; a difference fails the test that built it.
import fxcpp.graph_module  # noqa: E402

fxcpp.graph_module._VERIFY_BYTECODE = True

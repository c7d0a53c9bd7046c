import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PY = os.path.join(os.path.dirname(os.path.dirname(HERE)), 'python')
if PY not in sys.path:
    sys.path.insert(0, PY)

"""`python3 -m fxcpp`: the fxcpp command line (see fxcpp.cli)."""
import sys

from fxcpp.cli import main

if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Installs the fxcpp Python package for this interpreter (called by `make install`).

Copies the package's Python files (python/fxcpp) to
<prefix>/lib/python3.X/dist-packages/fxcpp and writes the console script
<prefix>/bin/fxcpp; `make install` then has CMake install the extensions beside them
(FXCPP_PYTHON_INSTALL_DIR, RUNPATH to the installed libfxcpp_core/libfxcpp_torch).
`--print-site` prints the package folder and exits. Defaults: prefix /usr/local (or $PREFIX); $DESTDIR is
prepended to every path for staged installs.

    scripts/install_python.py [--prefix /usr/local] [--uninstall]
"""
import argparse
import os
import shutil
import stat
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(REPO, "python", "fxcpp")

SCRIPT = """#!{python}
# fxcpp command line (installed by fxcpp's scripts/install_python.py)
import sys

from fxcpp.cli import main

if __name__ == "__main__":
    sys.exit(main())
"""


def paths(prefix, destdir):
    pyver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = os.path.join(prefix, "lib", pyver, "dist-packages")
    bindir = os.path.join(prefix, "bin")
    if destdir:
        site = destdir + site
        bindir = destdir + bindir
    return site, bindir


def install(prefix, destdir):
    site, bindir = paths(prefix, destdir)
    dest = os.path.join(site, "fxcpp")
    os.makedirs(site, exist_ok=True)
    os.makedirs(bindir, exist_ok=True)
    tmp = dest + ".tmp-install"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(PKG, tmp, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.tmp", "_C*.so"))
    with open(os.path.join(tmp, "_checkout"), "w") as f:  # lets `fxcpp bench` / `fxcpp demo` find the sources
        f.write(REPO + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(tmp, dest)
    script = os.path.join(bindir, "fxcpp")
    with open(script + ".tmp", "w") as f:
        f.write(SCRIPT.format(python=sys.executable))
    os.chmod(script + ".tmp", 0o755)
    os.replace(script + ".tmp", script)
    mode = os.stat(script).st_mode
    os.chmod(script, mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    print(f"installed fxcpp package -> {dest}")
    print(f"installed console script -> {script}")


def uninstall(prefix, destdir):
    site, bindir = paths(prefix, destdir)
    for p in (os.path.join(site, "fxcpp"),):
        if os.path.isdir(p):
            shutil.rmtree(p)
            print(f"removed {p}")
    script = os.path.join(bindir, "fxcpp")
    if os.path.exists(script):
        os.unlink(script)
        print(f"removed {script}")


def main():
    ap = argparse.ArgumentParser(description="install the fxcpp Python package and console script")
    ap.add_argument("--prefix", default=os.environ.get("PREFIX") or "/usr/local")
    ap.add_argument("--uninstall", action="store_true")
    ap.add_argument("--print-site", action="store_true")
    args = ap.parse_args()
    destdir = os.environ.get("DESTDIR", "")
    if args.print_site:
        print(os.path.join(paths(args.prefix, "")[0], "fxcpp"))
        return 0
    try:
        (uninstall if args.uninstall else install)(args.prefix, destdir)
    except PermissionError as e:
        sys.exit(f"install_python: permission denied: {e.filename} -- run as root (sudo make install) "
                 f"or choose another PREFIX")
    return 0


if __name__ == "__main__":
    sys.exit(main())

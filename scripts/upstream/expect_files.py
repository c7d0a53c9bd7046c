#!/usr/bin/env python3
"""Names the expect files PyTorch's extracted FX tests read, for scripts/upstream/fetch.sh.

    expect_files.py EXTRACTED_DIR TOP < MEMBERS

MEMBERS is the source tarball's member list (`tar -tf`), TOP its top folder. PyTorch's
`TestCase.assertExpected` reads `test/expect/<Class>.<test>[-<subname>].expect` beside the test
script, so every member `TOP/test/expect/<Class>.*` whose <Class> is a class defined at the top
level of a `*.py` file under EXTRACTED_DIR is printed, one per line, sorted.
"""
import ast
import os
import sys


def defined_classes(root):
    """Names of the top-level classes in every *.py file under root (files that do not parse
    are skipped: their tests cannot run either)."""
    names = set()
    for d, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".py"):
                continue
            try:
                with open(os.path.join(d, f), encoding="utf-8") as fh:
                    tree = ast.parse(fh.read())
            except (SyntaxError, UnicodeDecodeError):
                continue
            names.update(n.name for n in tree.body if isinstance(n, ast.ClassDef))
    return names


def expect_members(members, top, classes):
    prefix = f"{top}/test/expect/"
    out = []
    for m in members:
        m = m.strip()
        if not m.startswith(prefix) or not m.endswith(".expect"):
            continue
        name = m[len(prefix):]
        if "/" not in name and name.split(".", 1)[0] in classes:
            out.append(m)
    return sorted(out)


def main(argv):
    if len(argv) != 3:
        raise SystemExit(__doc__)
    for m in expect_members(sys.stdin, argv[2], defined_classes(argv[1])):
        print(m)


if __name__ == "__main__":
    main(sys.argv)

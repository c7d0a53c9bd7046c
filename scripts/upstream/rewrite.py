#!/usr/bin/env python3
"""Mechanically points a copy of PyTorch's torch.fx tests at fxcpp.

    rewrite.py SRC_TEST_DIR DST_TEST_DIR LOG

Every `*.py` under SRC_TEST_DIR is copied to DST_TEST_DIR with its references to torch.fx
pointed at fxcpp wherever the installed fxcpp package (import it with PYTHONPATH=<repo>/build/pkg)
has the module or name, and left on torch.fx where it does not:

  * `from torch.fx.M import a, b as c` -> `from fxcpp.M import ...` for the names fxcpp.M has
    (attribute or submodule); the names it lacks stay in a `from torch.fx.M import ...`.
  * `import torch.fx.M as x` -> `import fxcpp.M as x` when fxcpp.M imports. A plain
    `import torch.fx` (it binds `torch`) is left alone.
  * `from torch import fx` (PyTorch 2.x's tests) -> `import fxcpp as fx`; the other names of the
    statement stay in a `from torch import ...`.
  * `torch.fx.a.b.c` in code (not in strings or comments) -> `fxcpp.a.b.c` when the whole dotted
    chain resolves in fxcpp; `import fxcpp; ` is then put in front of the file's first import.

Line numbers are preserved (a rewritten multi-line import keeps its line count), so tracebacks
point at the same lines in both copies. Every decision is written to LOG, one line each:
`file:line: before -> after` or `file:line: kept on torch.fx: fxcpp lacks X`.
No test is edited by hand; run this again to regenerate the copy.
"""
import ast
import importlib
import io
import os
import shutil
import sys
import tokenize

_MISSING = object()


def _import(name):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _resolve(parts):
    """fxcpp.<parts...> as an object, or _MISSING (returns the first missing dotted name too)."""
    obj = _import("fxcpp")
    name = "fxcpp"
    for part in parts:
        name = f"{name}.{part}"
        nxt = getattr(obj, part, _MISSING)
        if nxt is _MISSING and isinstance(obj, type(sys)):
            nxt = _import(name) or _MISSING
        if nxt is _MISSING:
            return _MISSING, name
        obj = nxt
    return obj, None


def _fx_suffix(module):
    """'torch.fx.a.b' -> ['a', 'b']; None when the module is not torch.fx or below it."""
    if module == "torch.fx":
        return []
    if module and module.startswith("torch.fx."):
        return module[len("torch.fx."):].split(".")
    return None


def _alias(a):
    return a.name if a.asname is None else f"{a.name} as {a.asname}"


class _Source:
    def __init__(self, text):
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, lineno, col, utf8=False):
        line = self.lines[lineno - 1]
        if utf8:  # ast columns count UTF-8 bytes
            col = len(line.encode("utf-8")[:col].decode("utf-8"))
        return self.starts[lineno - 1] + col


def rewrite_file(rel, text, log):
    src = _Source(text)
    tree = ast.parse(text)
    edits = []       # (start, end, new_text)
    import_spans = []  # offsets of import statements, skipped by the dotted-chain pass

    def segment(node):
        s = src.offset(node.lineno, node.col_offset, utf8=True)
        e = src.offset(node.end_lineno, node.end_col_offset, utf8=True)
        return s, e

    for node in ast.walk(tree):
        if (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "torch"
                and any(a.name == "fx" for a in node.names)):
            s, e = segment(node)
            import_spans.append((s, e))
            stmts = [f"import fxcpp as {a.asname or 'fx'}" for a in node.names if a.name == "fx"]
            rest = [a for a in node.names if a.name != "fx"]
            if rest:
                stmts.append(f"from torch import {', '.join(map(_alias, rest))}")
            before = " ".join(text[s:e].split())
            log.append(f"{rel}:{node.lineno}: {before} -> {'; '.join(stmts)}")
            edits.append((s, e, "; ".join(stmts) + "\n" * (node.end_lineno - node.lineno)))
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            suffix = _fx_suffix(node.module)
            if suffix is None:
                continue
            s, e = segment(node)
            import_spans.append((s, e))
            mod, missing = _resolve(suffix)
            fx_mod = ".".join(["fxcpp"] + suffix)
            ours, theirs = [], []
            for a in node.names:
                if mod is not _MISSING and _resolve(suffix + [a.name])[0] is not _MISSING:
                    ours.append(a)
                else:
                    theirs.append(a)
                    log.append(f"{rel}:{node.lineno}: kept on torch.fx: fxcpp lacks "
                               f"{missing or fx_mod + '.' + a.name} (from {node.module} "
                               f"import {a.name})")
            if not ours:
                continue
            stmts = [f"from {fx_mod} import {', '.join(map(_alias, ours))}"]
            if theirs:
                stmts.append(f"from {node.module} import {', '.join(map(_alias, theirs))}")
            new = "; ".join(stmts) + "\n" * (node.end_lineno - node.lineno)
            before = " ".join(text[s:e].split())
            log.append(f"{rel}:{node.lineno}: {before} -> {'; '.join(stmts)}")
            edits.append((s, e, new))
        elif isinstance(node, ast.Import):
            fx_names = [a for a in node.names if _fx_suffix(a.name) is not None]
            if not fx_names:
                continue
            s, e = segment(node)
            import_spans.append((s, e))
            changed, parts = False, []
            for a in node.names:
                suffix = _fx_suffix(a.name)
                if suffix is not None and a.asname is not None:
                    mod, missing = _resolve(suffix)
                    if mod is not _MISSING:
                        parts.append(f"{'.'.join(['fxcpp'] + suffix)} as {a.asname}")
                        changed = True
                        continue
                    log.append(f"{rel}:{node.lineno}: kept on torch.fx: fxcpp lacks {missing}")
                parts.append(_alias(a))
            if changed:
                new = "import " + ", ".join(parts)
                log.append(f"{rel}:{node.lineno}: {' '.join(text[s:e].split())} -> {new}")
                edits.append((s, e, new + "\n" * (node.end_lineno - node.lineno)))

    # Dotted chains torch.fx.a.b... in code.
    toks = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
            if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT,
                              tokenize.DEDENT)]
    chains = 0
    i = 0
    while i < len(toks):
        t = toks[i]
        if (t.type == tokenize.NAME and t.string == "torch" and i + 2 < len(toks)
                and toks[i + 1].string == "." and toks[i + 2].string == "fx"
                and toks[i + 2].type == tokenize.NAME
                and not (i > 0 and toks[i - 1].string == ".")):
            start = src.offset(*t.start)
            if any(s <= start < e for s, e in import_spans):
                i += 3
                continue
            parts, j = [], i + 3
            while (j + 1 < len(toks) and toks[j].string == "." and toks[j + 1].type == tokenize.NAME):
                parts.append(toks[j + 1].string)
                j += 2
            end = src.offset(*toks[j - 1].end)
            before = "torch.fx" + "".join("." + p for p in parts)
            obj, missing = _resolve(parts)
            if obj is _MISSING:
                log.append(f"{rel}:{t.start[0]}: kept on torch.fx: fxcpp lacks {missing} ({before})")
            else:
                after = ".".join(["fxcpp"] + parts)
                log.append(f"{rel}:{t.start[0]}: {before} -> {after}")
                edits.append((start, end, after))
                chains += 1
            i = j
            continue
        i += 1

    if chains:
        first = next((n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                      and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")), None)
        if first is None:
            raise SystemExit(f"{rel}: uses torch.fx.* but has no import to put `import fxcpp` beside")
        at = src.offset(first.lineno, 0)
        edits.append((at, at, "import fxcpp; "))
        log.append(f"{rel}:{first.lineno}: (added) import fxcpp")

    out = text
    for s, e, new in sorted(edits, key=lambda x: (x[0], x[1]), reverse=True):
        out = out[:s] + new + out[e:]
    if out.count("\n") != text.count("\n"):
        raise SystemExit(f"{rel}: rewrite changed the line count")
    ast.parse(out)  # still Python
    return out


def main(argv):
    if len(argv) != 4:
        raise SystemExit(__doc__)
    src_dir, dst_dir, log_path = argv[1:]
    if _import("fxcpp") is None:
        raise SystemExit("rewrite.py: fxcpp does not import (PYTHONPATH=<repo>/build/pkg, built?)")
    log = []
    tmp = dst_dir + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    for root, _, files in os.walk(src_dir):
        for f in sorted(files):
            path = os.path.join(root, f)
            rel = os.path.relpath(path, src_dir)
            dst = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if f.endswith(".py"):
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
                with open(dst, "w", encoding="utf-8") as fh:
                    fh.write(rewrite_file(rel, text, log))
            else:
                shutil.copy2(path, dst)
    shutil.rmtree(dst_dir, ignore_errors=True)
    os.rename(tmp, dst_dir)
    with open(log_path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(log) + "\n")
    kept = sum(": kept on torch.fx: " in line for line in log)
    print(f"upstream: rewrote {len(log) - kept} torch.fx references to fxcpp, kept {kept} on "
          f"torch.fx (log: {log_path})")


if __name__ == "__main__":
    main(sys.argv)

#!/usr/bin/env python3
"""Compares the junit XML of PyTorch's FX tests run on torch.fx and on fxcpp.

    compare.py [--title T] [--known FILE] [--per-class TSV] TORCH_FX_XML FXCPP_XML

Prints each side's passed/failed/skipped counts, then per test class, every test that passes on
torch.fx but not on fxcpp (with the first line of fxcpp's error) and every test that passes on
fxcpp but not on torch.fx. --per-class also writes the per-class counts to TSV.

--known FILE lists known differences, one `TEST_ID | reason` a line (`#` starts a comment): a
listed test that passes on torch.fx but not on fxcpp is printed with its reason under "Known
differences" instead of as a regression; a listed test that no longer differs is reported as
stale. Exits 0, or 1 when FXCPP_UPSTREAM_STRICT=1 and there are regressions or stale entries
(or a side produced no results).
"""
import argparse
import collections
import os
import re
import sys
import xml.etree.ElementTree as ET

_RANK = {"passed": 0, "skipped": 1, "failed": 2}
# Parametrized test names embed reprs such as `<function f at 0x7f..>`; addresses differ per run.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
# They also embed class reprs with the module path (dots made underscores): a parameter that is
# fxcpp's counterpart of a torch.fx class (`<class 'fxcpp_passes_..._CSEPass'>`, from the rewritten
# import) names the same test as torch.fx's (`<class 'torch_fx_passes_..._CSEPass'>`).
_FXCPP_CLASS = re.compile(r"<class 'fxcpp_")


def test_id(classname, name):
    """The id both sides share: addresses dropped, fxcpp class paths spelled as torch.fx's."""
    return _FXCPP_CLASS.sub("<class 'torch_fx_", _ADDRESS.sub("", f"{classname}::{name}"))


def test_class(tid):
    """The test class part of an id (`test_fx.TestFX`); a file that did not import has none."""
    return tid.split("::", 1)[0] or "(collection)"


def load(path):
    """{test id: (outcome, first line of the message)} from a pytest junit XML file."""
    results = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        tid = test_id(case.get('classname') or "", case.get('name'))
        outcome, msg = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
                text = (child.get("message") or child.text or "").strip()
                msg = text.splitlines()[0] if text else child.tag
                break
            if child.tag == "skipped":
                outcome = "skipped"
                msg = (child.get("message") or "").strip()
        prev = results.get(tid)
        if prev is None or _RANK[outcome] > _RANK[prev[0]]:
            results[tid] = (outcome, msg)
    return results


def counts(results):
    c = {"passed": 0, "failed": 0, "skipped": 0}
    for outcome, _ in results.values():
        c[outcome] += 1
    return c


def load_known(path):
    """{test id: reason} from a known-differences file (see the module docstring)."""
    known = {}
    if not path or not os.path.exists(path):
        return known
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            tid, sep, reason = line.rpartition(" | ")
            if not sep or not tid.strip() or not reason.strip():
                raise SystemExit(f"{path}:{n}: expected `TEST_ID | reason`, got {line!r}")
            known[tid.strip()] = reason.strip()
    return known


def per_class(ref, ours, regressions):
    """[(class, ref counts, our counts, regressions)] sorted by class."""
    rows = collections.defaultdict(lambda: [collections.Counter(), collections.Counter(), 0])
    for side, res in ((0, ref), (1, ours)):
        for tid, (outcome, _) in res.items():
            rows[test_class(tid)][side][outcome] += 1
    for tid in regressions:
        rows[test_class(tid)][2] += 1
    return sorted((k, r, o, g) for k, (r, o, g) in rows.items())


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--title", default="PyTorch FX tests")
    ap.add_argument("--known", help="known differences file: TEST_ID | reason")
    ap.add_argument("--per-class", help="write per-class counts to this TSV file")
    ap.add_argument("ref_xml")
    ap.add_argument("ours_xml")
    args = ap.parse_args(argv[1:])
    strict = os.environ.get("FXCPP_UPSTREAM_STRICT") == "1"
    known = load_known(args.known)
    sides = []
    for path in (args.ref_xml, args.ours_xml):
        try:
            sides.append(load(path))
        except (OSError, ET.ParseError) as e:
            print(f"upstream: no results in {path}: {e}")
            return 1 if strict else 0
    ref, ours = sides
    print(f"{args.title}\n{'':<30}passed  failed  skipped   total")
    for name, res in (("torch.fx", ref), ("fxcpp", ours)):
        c = counts(res)
        print(f"  {name:<28}{c['passed']:>6}  {c['failed']:>6}  {c['skipped']:>7}  {len(res):>6}")
    differ = sorted(t for t, (o, _) in ref.items()
                    if o == "passed" and ours.get(t, ("failed",))[0] == "failed")
    regressions = [t for t in differ if t not in known]
    known_hit = [t for t in differ if t in known]
    # Only tests that ran on both sides can be stale (a smaller selection skips the others).
    stale = sorted(t for t in known if t in ref and t in ours and t not in differ)
    gains = sorted(t for t, (o, _) in ours.items()
                   if o == "passed" and ref.get(t, ("failed",))[0] == "failed")
    only = sorted(set(ref) ^ set(ours))
    rows = per_class(ref, ours, regressions)
    width = max([len(cls) for cls, *_ in rows] + [36])
    print(f"\n  {'Per test class: passed/failed/skipped':<{width}}  {'torch.fx':>12}  {'fxcpp':>12}"
          f"  regressions")
    for cls, r, o, g in rows:
        ref_c = f"{r['passed']}/{r['failed']}/{r['skipped']}"
        our_c = f"{o['passed']}/{o['failed']}/{o['skipped']}"
        print(f"  {cls:<{width}}  {ref_c:>12}  {our_c:>12}  {g:>11}")
    if args.per_class:
        with open(args.per_class, "w", encoding="utf-8") as fh:
            fh.write("class\ttorch.fx passed\ttorch.fx failed\ttorch.fx skipped\t"
                     "fxcpp passed\tfxcpp failed\tfxcpp skipped\tregressions\n")
            for cls, r, o, g in rows:
                fh.write(f"{cls}\t{r['passed']}\t{r['failed']}\t{r['skipped']}\t"
                         f"{o['passed']}\t{o['failed']}\t{o['skipped']}\t{g}\n")
    print(f"\nPass with torch.fx, fail with fxcpp ({len(regressions)}):")
    for t in regressions:
        print(f"  {t}\n      {ours.get(t, ('failed', 'not run on the fxcpp side'))[1][:200]}")
    if known_hit:
        print(f"\nKnown differences, pass with torch.fx, fail with fxcpp ({len(known_hit)}):")
        for t in known_hit:
            print(f"  {t}\n      reason: {known[t]}\n      {ours.get(t, ('failed', ''))[1][:200]}")
    if stale:
        print(f"\nKnown differences that no longer differ: remove them from {args.known} ({len(stale)}):")
        for t in stale:
            print(f"  {t}")
    print(f"\nPass with fxcpp, fail with torch.fx ({len(gains)}):")
    for t in gains:
        print(f"  {t}\n      torch.fx: {ref.get(t, ('failed', 'not run on the torch.fx side'))[1][:200]}")
    if only:
        print(f"\nCollected on one side only ({len(only)}):")
        for t in only:
            print(f"  {t} ({'torch.fx' if t in ref else 'fxcpp'})")
    if (regressions or stale) and strict:
        print(f"\nupstream: FXCPP_UPSTREAM_STRICT=1 and {len(regressions)} regression(s), "
              f"{len(stale)} stale known difference(s)")
        return 1
    if regressions or stale:
        print("\nupstream: informational (set FXCPP_UPSTREAM_STRICT=1 to fail on regressions)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

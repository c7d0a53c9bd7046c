#!/usr/bin/env python3
"""Compares the junit XML of PyTorch's FX tests run on torch.fx and on fxcpp.

    compare.py TORCH_FX_XML FXCPP_XML

Prints each side's passed/failed/skipped counts, every test that passes on torch.fx but not on
fxcpp (with the first line of fxcpp's error) and every test that passes on fxcpp but not on
torch.fx. Exits 0, or 1 when FXCPP_UPSTREAM_STRICT=1 and there are regressions (or a side
produced no results).
"""
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


def load(path):
    """{test id: (outcome, first line of the message)} from a pytest junit XML file."""
    results = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        tid = test_id(case.get('classname'), case.get('name'))
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


def main(argv):
    if len(argv) != 3:
        raise SystemExit(__doc__)
    strict = os.environ.get("FXCPP_UPSTREAM_STRICT") == "1"
    sides = []
    for path in argv[1:]:
        try:
            sides.append(load(path))
        except (OSError, ET.ParseError) as e:
            print(f"upstream: no results in {path}: {e}")
            return 1 if strict else 0
    ref, ours = sides
    print("PyTorch 1.13.1 FX tests        passed  failed  skipped   total")
    for name, res in (("torch.fx", ref), ("fxcpp", ours)):
        c = counts(res)
        print(f"  {name:<28}{c['passed']:>6}  {c['failed']:>6}  {c['skipped']:>7}  {len(res):>6}")
    regressions = sorted(t for t, (o, _) in ref.items()
                         if o == "passed" and ours.get(t, ("failed",))[0] == "failed")
    gains = sorted(t for t, (o, _) in ours.items()
                   if o == "passed" and ref.get(t, ("failed",))[0] == "failed")
    only = sorted(set(ref) ^ set(ours))
    print(f"\nPass with torch.fx, fail with fxcpp ({len(regressions)}):")
    for t in regressions:
        print(f"  {t}\n      {ours.get(t, ('failed', 'not run on the fxcpp side'))[1][:200]}")
    print(f"\nPass with fxcpp, fail with torch.fx ({len(gains)}):")
    for t in gains:
        print(f"  {t}\n      torch.fx: {ref.get(t, ('failed', 'not run on the torch.fx side'))[1][:200]}")
    if only:
        print(f"\nCollected on one side only ({len(only)}):")
        for t in only:
            print(f"  {t} ({'torch.fx' if t in ref else 'fxcpp'})")
    if regressions and strict:
        print(f"\nupstream: FXCPP_UPSTREAM_STRICT=1 and {len(regressions)} regression(s)")
        return 1
    if regressions:
        print("\nupstream: informational (set FXCPP_UPSTREAM_STRICT=1 to fail on regressions)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

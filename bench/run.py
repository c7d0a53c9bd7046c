#!/usr/bin/env python3
"""Runs every fxcpp benchmark side by side and writes the report.

    make bench         = bench/run.py --full    (< 15 minutes)
    make bench-quick   = bench/run.py --quick   (about 3 minutes on 2 cores; 5 with torch 2.14)
    fxcpp bench [--quick|--full]

Suites (each a separate process, so one crash cannot take the others down):
  core_cpp   build/fxcpp_core_bench (Google Benchmark, C++ core alone), read
             through --benchmark_out=<json>
  graph_api  bench/bench_graph_api.py   fxcpp vs torch.fx through the Python Graph API
  trace      bench/bench_trace.py       symbolic_trace end to end
  transform  bench/bench_transform.py   Interpreter / Transformer / replace_pattern
             (run when present)
  runtime    bench/bench_runtime.py     the LibTorch runtime (fxcpp.aten / fxcpp::torch)
             against ATen calls, TorchScript, Static Runtime, torch.fx and eager;
             runs build/fxcpp_runtime_bench for the C++ side, and
             build/fxcpp_capture_bench (fxcpp::torch::trace against
             torch::jit::tracer on torch::nn modules). Its lines carry
             <variant value>,<reference value> in the fxcpp,torchfx fields
  toolbox    bench/bench_toolbox.py     split_module, const_fold, fuse and the partitioner (issue 13)
  export     bench/bench_export.py      torch.export archives in fxcpp's runtime against eager,
             AOTInductor and torch.compile (Inductor, aot_eager, backend="fxcpp") (issue 25;
             torch 2.x only; compiles models with Inductor, so it is the longest suite)

Python suites print lines

    BENCH,<suite>,<case>,<size>,<fxcpp>,<torchfx>[,<unit>]

where the values are per node (unit `us/node` unless given, e.g. `B/node`),
and `skip` (or an empty field) marks a cell that was not measured. Anything
else they print is passed through.

A suite may also print `NOTE,<suite>,<text>` (e.g. what the torch it runs on
lacks); the notes go into latest_meta.json and the report.

Every row records the torch it was measured with (the `torch` column; a
--only run keeps the other suites' rows with their own torch), so BENCHMARKS.md
says which torch each number came from. The C++ bench binaries come from
$FXCPP_BUILD_DIR (default build/), which must be built for the same torch as
the Python running this script (the Makefile: build-214/ with .venv's torch).

Writes bench/results/latest.csv (+ latest_meta.json: machine, mode, suite
status) and renders BENCHMARKS.md and bench/results/*.png (bench/report.py);
--results DIR writes all of that (BENCHMARKS.md included) into DIR instead.
"""
import argparse
import csv
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
CORE_BENCH = os.path.join(os.environ.get("FXCPP_BUILD_DIR") or os.path.join(REPO, "build"), "fxcpp_core_bench")
CORE_REPETITIONS = 5
PY_SUITES = [("graph_api", "bench_graph_api.py"), ("trace", "bench_trace.py"), ("transform", "bench_transform.py"),
             ("runtime", "bench_runtime.py"), ("toolbox", "bench_toolbox.py"),
             ("explorer", "bench_explorer.py"), ("export", "bench_export.py")]
CSV_FIELDS = ["suite", "case", "size", "unit", "fxcpp", "torchfx", "speedup", "torch"]

# Per-suite wall-clock limits (seconds): quick mode takes about 3 minutes in all on 2 cores with
# torch 1.13, more with torch 2.14 (its torch.fx is slower in graph_api's GraphModule cases and its
# partitioner's proposal on the 1e4 chain takes about a minute).
TIMEOUTS = {"quick": {"core_cpp": 60, "graph_api": 120, "trace": 90, "transform": 45, "runtime": 90,
                       "toolbox": 240, "explorer": 120, "export": 600},
            "full": {"core_cpp": 400, "graph_api": 600, "trace": 180, "transform": 600, "runtime": 300,
                      "toolbox": 900, "explorer": 600, "export": 2400}}

# Google Benchmark name -> graph_api case of the same operation (for side-by-side rows).
CPP_CASES = {"Build": "build", "GraphCopy": "graph_copy", "Dce": "dce", "ReplaceAllUsesWith": "rauw",
             "Erase": "erase", "Iterate": "iterate", "PythonCode": "python_code", "Lint": "lint",
             "BytesPerNode": "memory", "StreamFloor": "memory_floor"}


# ------------------------------------------------------------------------------------
# Machine
# ------------------------------------------------------------------------------------

def machine_info():
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gib = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem_gib = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    info = {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "nproc": usable,
        "mem_gib": mem_gib,
        "os": platform.platform(),
        "python": platform.python_version(),
        "load_avg": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
    }
    try:
        import torch
        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
    except Exception:  # noqa: BLE001
        info["torch"] = None
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        info["commit"] = rev + ("+dirty" if dirty else "") if rev else None
    except (OSError, subprocess.TimeoutExpired):
        info["commit"] = None
    return info


# ------------------------------------------------------------------------------------
# Running suites
# ------------------------------------------------------------------------------------

def _float(s):
    s = s.strip()
    if s in ("", "skip", "nan", "None", "-"):
        return None
    try:
        return float(s)
    except ValueError:
        return None


def parse_note_line(line):
    """NOTE,suite,text -> (suite, text), or None."""
    parts = line.strip().split(",", 2)
    if len(parts) != 3 or parts[0] != "NOTE":
        return None
    return parts[1], parts[2].strip()


def parse_bench_line(line):
    """BENCH,suite,case,size,fxcpp,torchfx[,unit] -> row dict, or None."""
    parts = line.strip().split(",")
    if len(parts) not in (6, 7) or parts[0] != "BENCH":
        return None
    try:
        size = int(float(parts[3]))
    except ValueError:
        return None
    return {"suite": parts[1], "case": parts[2], "size": size, "unit": parts[6] if len(parts) == 7 else "us/node",
            "fxcpp": _float(parts[4]), "torchfx": _float(parts[5])}


def run_streaming(cmd, timeout, label, env=None):
    """Runs cmd, echoing its output live; returns (rc or 'timeout', stdout lines)."""
    lines = []
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            bufsize=1)

    def pump():
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            print(f"  [{label}] {line.rstrip()}", flush=True)

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        rc = "timeout"
    t.join(timeout=5)
    return rc, lines


def run_python_suite(name, script, mode, timeout):
    path = os.path.join(HERE, script)
    if not os.path.exists(path):
        return [], {"status": "absent"}
    env = dict(os.environ)
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    t0 = time.perf_counter()
    rc, lines = run_streaming([sys.executable, path, f"--{mode}"], timeout, name, env)
    if rc == 2 and any(f"unrecognized arguments: --{mode}" in l for l in lines):
        # a suite without this mode flag: run its default mode
        print(f"  [{name}] (no --{mode} option: running its default mode)", flush=True)
        rc, lines = run_streaming([sys.executable, path], max(1, timeout - (time.perf_counter() - t0)), name, env)
    rows = [r for r in map(parse_bench_line, lines) if r is not None]
    notes = list(dict.fromkeys(n[1] for n in map(parse_note_line, lines) if n is not None))
    status = "ok" if rc == 0 else ("timeout" if rc == "timeout" else f"exit {rc}")
    st = {"status": status, "seconds": round(time.perf_counter() - t0, 1), "rows": len(rows)}
    if notes:
        st["notes"] = notes
    return rows, st


def run_core_bench(mode, timeout):
    if not os.path.exists(CORE_BENCH):
        print(f"  {CORE_BENCH} not found (cmake --build <build dir> --target fxcpp_core_bench; "
              f"FXCPP_BUILD_DIR picks the build dir): skipped")
        return [], {"status": "absent"}
    fd, out_json = tempfile.mkstemp(prefix="fxcpp_core_bench.", suffix=".json.tmp")
    os.close(fd)
    cmd = [CORE_BENCH, f"--benchmark_out={out_json}", "--benchmark_out_format=json", "--benchmark_color=false"]
    # Best of several repetitions, as the Python suites take the best of
    # several runs: on this shared VM a single 1e6-node measurement (a few
    # iterations) moves by up to 30% between runs, memory floor included.
    if mode == "quick":
        cmd += ["--benchmark_filter=/(1000|10000|100000)(/|$)", "--benchmark_min_time=0.05",
                "--benchmark_repetitions=2"]
    else:
        cmd += ["--benchmark_min_time=0.2", f"--benchmark_repetitions={CORE_REPETITIONS}"]
    t0 = time.perf_counter()
    rc, _ = run_streaming(cmd, timeout, "core_cpp")
    rows = []
    try:
        with open(out_json) as f:
            data = json.load(f)
        rows = parse_core_json(data)
    except (OSError, ValueError) as e:
        print(f"  [core_cpp] could not read {out_json}: {e}", flush=True)
    finally:
        try:
            os.unlink(out_json)
        except OSError:
            pass
    status = "ok" if rc == 0 else ("timeout" if rc == "timeout" else f"exit {rc}")
    if rc == 0 and not rows:
        status = "no rows"
    return rows, {"status": status, "seconds": round(time.perf_counter() - t0, 1), "rows": len(rows)}


_UNIT_TO_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def parse_core_json(data):
    """Google Benchmark JSON -> rows (suite core_cpp; fxcpp = C++ us/node; torchfx empty).
    With repetitions, a case keeps its best time (cold: the first repetition's)."""
    rows = []
    seen = {}

    def add(row, best=True):
        key = (row["case"], row["size"])
        if key not in seen:
            seen[key] = row
            rows.append(row)
        elif best and row["fxcpp"] < seen[key]["fxcpp"]:
            seen[key]["fxcpp"] = row["fxcpp"]

    for b in data.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration" or b.get("error_occurred"):
            continue
        name = b.get("run_name") or b.get("name", "")
        parts = name.split("/")
        base = parts[0][3:] if parts[0].startswith("BM_") else parts[0]
        case = CPP_CASES.get(base, base.lower())
        try:
            size = int(parts[1]) if len(parts) > 1 else int(b.get("nodes", 0))
        except ValueError:
            continue
        if "bytes/node" in b:
            if len(parts) > 2 and parts[2] == "1":
                case = "memory_two_inputs"  # add(prev, y) instead of add(prev, int)
            add({"suite": "core_cpp", "case": case, "size": size, "unit": "B/node",
                 "fxcpp": float(b["bytes/node"]), "torchfx": None})
            continue
        nodes = float(b.get("nodes", size) or size)
        if not nodes:
            continue
        us = float(b["real_time"]) * _UNIT_TO_US.get(b.get("time_unit", "ns"), 1e-3)
        add({"suite": "core_cpp", "case": case, "size": size, "unit": "us/node",
             "fxcpp": us / nodes, "torchfx": None})
        if "cold_ns_per_node" in b:  # the untimed warm-up run (Note [Warm-up run])
            add({"suite": "core_cpp", "case": case + "_cold", "size": size, "unit": "us/node",
                 "fxcpp": float(b["cold_ns_per_node"]) / 1000.0, "torchfx": None}, best=False)
    return rows


# ------------------------------------------------------------------------------------
# Output
# ------------------------------------------------------------------------------------

def write_csv(rows, path):
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for r in rows:
            sp = None
            if r["fxcpp"] and r["torchfx"]:
                sp = r["torchfx"] / r["fxcpp"]
            w.writerow({**{k: r[k] for k in CSV_FIELDS if k in r},
                        "fxcpp": "" if r["fxcpp"] is None else f"{r['fxcpp']:.6g}",
                        "torchfx": "" if r["torchfx"] is None else f"{r['torchfx']:.6g}",
                        "speedup": "" if sp is None else f"{sp:.4g}",
                        "torch": r.get("torch") or ""})
    os.replace(tmp, path)


# The row suites each runner suite writes (transform reports several).
ROW_SUITES = {"transform": {"forward", "interp", "transformer", "replace", "shape_prop"}}


def merge_previous(rows, meta, csv_path, meta_path, suites_run):
    """Rows of suites not run now are taken from the previous latest.csv."""
    replaced = set(suites_run)
    for s in suites_run:
        replaced |= ROW_SUITES.get(s, set())
    replaced |= {r["suite"] for r in rows}
    try:
        with open(csv_path, newline="") as f:
            old = [r for r in csv.DictReader(f) if r["suite"] not in replaced]
    except OSError:
        return rows, meta
    prev = {}
    try:
        with open(meta_path) as f:
            prev = json.load(f)
        for name, st in prev.get("suites", {}).items():
            meta["suites"].setdefault(name, st)
    except (OSError, ValueError):
        pass
    # rows written before the torch column existed came from the previous run's torch
    prev_torch = prev.get("machine", {}).get("torch") or ""
    kept = [{"suite": r["suite"], "case": r["case"], "size": int(r["size"]), "unit": r["unit"],
             "fxcpp": _float(r["fxcpp"]), "torchfx": _float(r["torchfx"]),
             "torch": r.get("torch") or prev_torch} for r in old]
    return kept + rows, meta


def main(argv=None):
    ap = argparse.ArgumentParser(prog="run.py", description="fxcpp vs torch.fx: all benchmarks + report")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="small sizes, < 2 minutes (default)")
    mode.add_argument("--full", action="store_true", help="all sizes, < 15 minutes")
    ap.add_argument("--only", help="comma-separated suites: core_cpp,graph_api,trace,transform,runtime,toolbox,explorer "
                                   "(their rows replace those in the previous latest.csv)")
    ap.add_argument("--no-report", action="store_true", help="write the CSV only")
    ap.add_argument("--results", metavar="DIR", default=RESULTS,
                    help="write latest.csv, latest_meta.json, the plots and BENCHMARKS.md into DIR "
                         "(default: bench/results/, and BENCHMARKS.md at the repository root)")
    args = ap.parse_args(argv)
    m = "full" if args.full else "quick"
    only = set(args.only.split(",")) if args.only else None
    results = os.path.abspath(args.results)
    os.makedirs(results, exist_ok=True)
    md_path = os.path.join(REPO, "BENCHMARKS.md") if results == os.path.abspath(RESULTS) else \
        os.path.join(results, "BENCHMARKS.md")

    info = machine_info()
    print(f"fxcpp benchmarks ({m}) -- {info['date']}")
    print(f"machine: {info['cpu']}, nproc {info['nproc']}, {info['mem_gib']} GiB; Python {info['python']}, "
          f"torch {info.get('torch')}; commit {info.get('commit')}", flush=True)
    t_start = time.perf_counter()
    rows, status = [], {}

    if only is None or "core_cpp" in only:
        print("\n== core_cpp: build/fxcpp_core_bench", flush=True)
        r, st = run_core_bench(m, TIMEOUTS[m]["core_cpp"])
        st["torch"] = info.get("torch")
        rows += r
        status["core_cpp"] = st
    for name, script in PY_SUITES:
        if only is not None and name not in only:
            continue
        print(f"\n== {name}: bench/{script} --{m}", flush=True)
        r, st = run_python_suite(name, script, m, TIMEOUTS[m][name])
        st["torch"] = info.get("torch")
        rows += r
        status[name] = st
        if st["status"] == "absent":
            print("  (not present, skipped)")

    for r in rows:
        r["torch"] = info.get("torch")
    total = time.perf_counter() - t_start
    meta = {"mode": m, "machine": info, "suites": status, "seconds": round(total, 1),
            "command": "make bench" if m == "full" else "make bench-quick"}
    csv_path = os.path.join(results, "latest.csv")
    meta_path = os.path.join(results, "latest_meta.json")
    if only is not None:
        # a partial run replaces its suites' rows and keeps the others
        rows, meta = merge_previous(rows, meta, csv_path, meta_path, set(status))
        meta["command"] = f"bench/run.py --{m} --only {args.only} (merged into the previous results)"
    write_csv(rows, csv_path)
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=2)
    print(f"\nwrote {os.path.relpath(csv_path, REPO)} ({len(rows)} rows) in {total:.0f} s")
    for name, st in status.items():
        print(f"  {name:10} {st['status']}" + (f", {st.get('rows', 0)} rows, {st.get('seconds')} s"
                                                 if "seconds" in st else ""))
    if not args.no_report:
        sys.path.insert(0, HERE)
        import report
        md = report.render(csv_path, meta_path, REPO, md_path=md_path)
        print(f"wrote {os.path.relpath(md, REPO)} and plots in {os.path.relpath(results, REPO)}/")
        summary = report.headline(report.load_rows(csv_path))
        if summary:
            print("\n" + summary)
    failed = [n for n, st in status.items() if st["status"] not in ("ok", "absent")]
    if failed:
        print(f"\nsuites with problems: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main())

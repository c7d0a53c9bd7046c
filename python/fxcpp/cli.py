"""The ``fxcpp`` command line (also ``python3 -m fxcpp``).

    fxcpp show MODULE:CALLABLE [--format code|graph|table|dot] [--input-shape 1,3,224,224] [-o FILE]
    fxcpp show FILE.fxpt|FILE.pt2 [--format ...]
    fxcpp show MODULE:CALLABLE --format html|svg|png -o FILE   (the graph explorer)
    fxcpp show --diff BEFORE AFTER -o diff.html
    fxcpp export MODULE:CALLABLE --input-shape 1,3,224,224 -o FILE.pt2|FILE.fxpt
    fxcpp run FILE.fxpt|FILE.pt2 --input-shape 1,3,224,224 [--repeat N]
    fxcpp bench [--quick | --full] [...]
    fxcpp demo [--quick]

Expected problems (a bad MODULE:CALLABLE, a model that cannot be traced, a
missing graphviz, ...) end with a short ``fxcpp: error: ...`` message, a hint,
and a non-zero exit status; set FXCPP_DEBUG=1 to see the full traceback.
"""
import argparse
import inspect
import json
import os
import shutil
import subprocess
import sys
import traceback
from typing import Any, Dict, List, Optional

# What the user names (a file, MODULE:CALLABLE) is resolved by fxcpp._spec, as in the explorer.
from fxcpp._spec import (_EXAMPLE, EXIT_ERROR, EXIT_USAGE, SpecError, _debug_hint, _first_line,  # noqa: F401
                         _target_str, instantiate, load_callable, parse_shape, propagate_shapes, trace)
from fxcpp._spec import is_file as _is_fxpt, load_file as _load_fxpt, resolve as _resolve

__all__ = ["main", "graph_table", "CliError"]

#: CliError is the spec resolver's error class (fxcpp._spec.SpecError, a ValueError): a spec
#: refused by the explorer and by the command line is the same error, with the same message.
#: It is printed as `fxcpp: error: <msg>` plus optional hint lines (`hint` is a str or a list of
#: str), and the command ends with its `code` (EXIT_ERROR, or EXIT_USAGE for a bad command line).
CliError = SpecError


# ------------------------------------------------------------------------------------
# Formatting
# ------------------------------------------------------------------------------------

def _clip(s: str, width: int) -> str:
    s = " ".join(s.split())
    return s if len(s) <= width else s[: width - 3] + "..."


def graph_table(graph, limit: Optional[int] = None, shapes: bool = False, width: int = 44) -> str:
    """The nodes of `graph` as a text table (opcode, name, target, args, kwargs
    [, shape]) -- print_tabular without the tabulate dependency. Shows at most
    `limit` rows (all when None)."""
    headers = ["opcode", "name", "target", "args", "kwargs"] + (["shape"] if shapes else [])
    rows: List[List[str]] = []
    total = 0
    for n in graph.nodes:
        total += 1
        if limit is not None and len(rows) >= limit:
            continue
        row = [n.op, n.name, _target_str(n), str(n.args), str(n.kwargs)]
        if shapes:
            row.append(_shape_str(n.meta.get("fxcpp_shape")))
        rows.append([_clip(c, width) for c in row])
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    fmt = "  ".join("{:<%d}" % w for w in widths)
    lines = [fmt.format(*headers).rstrip(), "  ".join("-" * w for w in widths)]
    lines += [fmt.format(*r).rstrip() for r in rows]
    if limit is not None and total > len(rows):
        lines.append(f"... ({total - len(rows)} more rows, {total} in all)")
    return "\n".join(lines)


def _shape_str(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, tuple) and all(isinstance(d, int) for d in v):
        return "(" + ", ".join(map(str, v)) + ")"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_shape_str(x) for x in v) + "]"
    return str(v)


# (Loading and tracing a model: fxcpp._spec, the one resolver of what a user names, shared with
# the explorer; load_callable, instantiate, trace, parse_shape and propagate_shapes are its.)


def to_dot(gm, name: str) -> str:
    """Graphviz DOT text for gm.graph, rendered by the C++ core, with module
    types (and shapes, when propagated) as extra label fields."""
    import torch
    from fxcpp import _C

    modules = dict(gm.named_modules())

    def extra(node):
        out = []
        if node.op == "call_module" and node.target in modules:
            out.append(torch.typename(modules[node.target]))
        shape = node.meta.get("fxcpp_shape")
        if shape is not None:
            out.append("shape=" + _shape_str(shape))
        return out

    return _C._graph_to_dot(gm.graph, name, extra=extra)


def render_dot(dot_text: str, path: str) -> None:
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if ext in ("dot", "gv", ""):
        _write(path, dot_text)
        return
    exe = shutil.which("dot")
    if exe is None:
        raise CliError(f"cannot render {path}: Graphviz's `dot` is not installed",
                       "install it (Debian: sudo apt-get install graphviz), or write DOT text with "
                       "-o FILE.dot and render it elsewhere")
    try:
        proc = subprocess.run([exe, f"-T{ext}", "-o", path], input=dot_text.encode(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    except subprocess.TimeoutExpired:
        raise CliError(f"graphviz timed out rendering {path}", "try a smaller model or -o FILE.dot")
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        raise CliError(f"graphviz failed to render {path}: {err[0] if err else 'exit ' + str(proc.returncode)}",
                       "supported extensions include svg, png and pdf (see `dot -T?`); "
                       "-o FILE.dot writes the DOT text")


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError as e:
        raise CliError(f"cannot write {path}: {e.strerror or e}")


# ------------------------------------------------------------------------------------
# Commands
# ------------------------------------------------------------------------------------

class _Progress:
    """A progress bar on stderr for work that takes seconds; silent unless stderr is a terminal."""

    def __init__(self, total: int, label: str):
        self.total, self.label, self.done = max(total, 1), label, 0
        self.live = sys.stderr.isatty()
        self._draw()

    def _draw(self) -> None:
        if self.live:
            width = 30
            filled = width * self.done // self.total
            sys.stderr.write(f"\r{self.label} [{'#' * filled}{' ' * (width - filled)}] {self.done}/{self.total}")
            sys.stderr.flush()

    def step(self, n: int = 1) -> None:
        self.done = min(self.done + n, self.total)
        self._draw()

    def close(self) -> None:
        if self.live:
            sys.stderr.write("\r" + " " * (len(self.label) + 50) + "\r")
            sys.stderr.flush()


def _random_input(shape):
    import torch
    try:
        return torch.randn(shape)
    except (RuntimeError, MemoryError, OverflowError, ValueError) as e:
        raise CliError(f"cannot make an input of shape {tuple(shape)}: {_first_line(e)}",
                       "use a smaller --input-shape", EXIT_USAGE)


#: the most intra-op threads `fxcpp run --threads` takes (more only thrash, or hang creating them)
MAX_THREADS = 256


def _export_format(output: str) -> str:
    """What `fxcpp export -o OUTPUT` writes: by the file's extension, .pt2 (torch.export) or
    .fxpt (fxcpp's tracer and lowering); any other name gets .pt2 where this torch has
    torch.export, .fxpt where it does not (torch 1.13)."""
    from fxcpp import _torch_compat
    if output.endswith(".fxpt"):
        return "fxpt"
    if output.endswith(".pt2"):
        if not _torch_compat.HAS_EXPORT:
            import torch
            raise CliError(f"cannot write {output}: .pt2 files are written by torch.export, which torch "
                           f"{torch.__version__} does not have", "write a .fxpt file: -o FILE.fxpt", EXIT_USAGE)
        return "pt2"
    return "pt2" if _torch_compat.HAS_EXPORT else "fxpt"


def _save_pt2(ep, path: str) -> None:
    """torch.export.save(ep) into memory, then written to `path` by fxcpp's one file writer
    (Note [Atomic saving] in src/torch/save.cpp): a failure leaves no partial file and an existing
    one unchanged; a device (/dev/null) is written directly. Raises OSError when it cannot be
    written."""
    import io

    import torch

    from . import _C_torch
    buf = io.BytesIO()
    torch.export.save(ep, buf)
    _C_torch.write_file(path, buf.getbuffer())


def _export_pt2(args, model, example) -> int:
    """fxcpp export to .pt2: torch.export.export, saved by torch.export.save (docs/pt2_format.md),
    then read back by fxcpp's loader to say whether `fxcpp run` can run it."""
    import time
    import warnings

    import torch
    from fxcpp import aten
    if not isinstance(model, torch.nn.Module):
        raise CliError(f"cannot export {args.target} with torch.export: it is a {type(model).__name__}, not an "
                       "nn.Module", "wrap it in an nn.Module, or write a .fxpt file: -o FILE.fxpt")
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ep = torch.export.export(model, (example,))
    except Exception as e:  # noqa: BLE001 -- export runs the model
        raise CliError(f"torch.export cannot export {args.target}: {type(e).__name__}: {_first_line(e)}",
                       ["write a .fxpt file instead (-o FILE.fxpt: fxcpp's tracer and lowering)", _debug_hint()])
    print(f"fxcpp: exported {args.target} with torch.export: {len(ep.graph.nodes)} nodes", file=sys.stderr)
    try:
        _save_pt2(ep, args.output)
    except OSError as e:
        raise CliError(f"cannot write {args.output!r}: {os.strerror(e.errno) if e.errno else e}",
                       "nothing was written (an existing file is unchanged)")
    size = os.path.getsize(args.output) if os.path.isfile(args.output) else 0
    print(f"fxcpp: wrote {args.output}: {len(ep.graph.nodes)} nodes, {size / 1e6:.1f} MB "
          f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    if os.path.isfile(args.output):
        try:
            aten.load(args.output, runtime="cpp")
        except ValueError as e:
            if "trusted" in str(e):
                print(f"fxcpp: note: it calls an operator a file from an untrusted source may not call; run it "
                      f"with fxcpp run --trusted ({_first_line(e)})", file=sys.stderr)
            else:
                print(f"fxcpp: note: fxcpp's runtime cannot run it: {_first_line(e)}", file=sys.stderr)
    return 0


def cmd_export(args) -> int:
    import time

    import torch
    from fxcpp import aten
    fmt = _export_format(args.output)
    shape = parse_shape(args.input_shape)
    example = _random_input(shape)
    obj = load_callable(args.target)
    model = instantiate(obj, args.target)
    if isinstance(model, torch.nn.Module):
        model.eval()
    if fmt == "pt2":
        return _export_pt2(args, model, example)
    t0 = time.perf_counter()
    gm = trace(model, args.target, None, args.leaf_module or ())
    print(f"fxcpp: traced {args.target}: {len(gm.graph.nodes)} nodes", file=sys.stderr)
    try:
        lowered = aten.lower(gm, example, **({"progress": _progress_hook()} if _lower_takes_progress() else {}))
    except aten.LoweringError as e:
        raise CliError(f"cannot lower {args.target}: {_first_line(e)}",
                       "register a lowering with @fxcpp.aten.register_lowering(target), or keep that part in Python "
                       "(--leaf-module does not help here: the runtime needs every op in ATen)")
    except Exception as e:  # noqa: BLE001 -- lowering runs the model
        raise CliError(f"cannot lower {args.target}: {type(e).__name__}: {_first_line(e)}", _debug_hint())
    try:
        aten.save(lowered, args.output)
    except OSError as e:
        raise CliError(f"cannot write {args.output!r}: {os.strerror(e.errno) if e.errno else e}",
                       "nothing was written (an existing file is unchanged)")
    except ValueError as e:
        raise CliError(f"cannot save {args.target}: {_first_line(e)}")
    size = os.path.getsize(args.output)
    print(f"fxcpp: wrote {args.output}: {len(lowered.graph.nodes)} nodes, {size / 1e6:.1f} MB "
          f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return 0


def _lower_takes_progress() -> bool:
    from fxcpp import aten
    try:
        return "progress" in inspect.signature(aten.lower).parameters
    except (TypeError, ValueError):
        return False


def _progress_hook():
    bar: List[Optional[_Progress]] = [None]

    def hook(done: int, total: int) -> None:
        if bar[0] is None:
            bar[0] = _Progress(total, "lowering")
        bar[0].step(done - bar[0].done)
        if done >= total:
            bar[0].close()
    return hook


def cmd_run(args) -> int:
    import time

    import torch
    shape = parse_shape(args.input_shape)
    if args.repeat < 1:
        raise CliError("--repeat must be at least 1", None, EXIT_USAGE)
    if not 1 <= args.threads <= MAX_THREADS:
        raise CliError(f"--threads must be between 1 and {MAX_THREADS}, not {args.threads}",
                       f"this machine has {os.cpu_count()} CPUs", EXIT_USAGE)
    torch.set_num_threads(args.threads)
    m = _load_fxpt(args.file, "cpp", args.trusted)
    x = _random_input(shape)

    def call():
        try:
            return m(x)
        except Exception as e:  # noqa: BLE001 -- the model's kernels
            raise CliError(f"running {args.file} on an input of shape {tuple(shape)} failed: "
                           f"{type(e).__name__}: {_first_line(e)}")

    out = call()
    times = []
    bar = _Progress(args.repeat, "running")
    for _ in range(args.repeat):
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
        bar.step()
    bar.close()
    stats = m._runtime.plan_stats()
    print(f"{args.file}: {stats['instructions']} ops in the C++ runtime "
          f"({stats['managed']} writing into {stats['buffers']} planned buffers)")
    for path, value in _leaves(out, "output"):
        desc = f"{str(value.dtype).replace('torch.', '')}{list(value.shape)}" if isinstance(value, torch.Tensor) \
            else repr(value)
        print(f"  {path}: {desc}")
    times.sort()
    print(f"latency over {args.repeat} runs ({args.threads} thread{'s' if args.threads > 1 else ''}): "
          f"median {times[len(times) // 2] * 1e3:.3f} ms, min {times[0] * 1e3:.3f} ms")
    return 0


def _leaves(value, path):
    if isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{path}[{i}]")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, f"{path}[{k!r}]")
    else:
        yield path, value


def _concrete_args(args) -> Optional[Dict[str, Any]]:
    if not args.concrete_args:
        return None
    try:
        concrete = json.loads(args.concrete_args)
    except json.JSONDecodeError as e:
        raise CliError(f"bad --concrete-args: not JSON ({e.msg})",
                       "for example --concrete-args '{\"flag\": true}'", EXIT_USAGE)
    if not isinstance(concrete, dict):
        raise CliError("bad --concrete-args: expected a JSON object {\"arg\": value, ...}", None, EXIT_USAGE)
    return concrete


def _explore_target(spec: str, args):
    """The graph `fxcpp show --format html/svg/png` draws: a .fxpt or .pt2 file read by fxcpp's
    reader (nothing from it runs; .pt2 value shapes shown), or a traced MODULE:CALLABLE (with
    shapes when --input-shape is given): fxcpp._spec.resolve, as fxcpp.explorer.load."""
    from fxcpp import _spec
    if _is_fxpt(spec):
        gm = _resolve(spec, trusted=args.trusted)
        _spec.pt2_shapes(gm)
        return gm
    return _resolve(spec, input_shape=args.input_shape, concrete_args=_concrete_args(args),
                    leaf_modules=args.leaf_module or ())


def cmd_explore(args) -> int:
    from fxcpp import explorer
    fmt = args.format if args.format in ("html", "svg", "png") else "html"
    if args.diff:
        if not args.other:
            raise CliError("--diff needs two graphs: fxcpp show --diff BEFORE AFTER", None, EXIT_USAGE)
        before, after = _explore_target(args.target, args), _explore_target(args.other, args)
        try:
            page = explorer.explore_diff(before, after, name=f"{args.target} \u2192 {args.other}")
        except ValueError as e:
            raise CliError(str(e))
        s = page.summary
        print(f"fxcpp: diff: {s['added']} added, {s['removed']} removed, {s['changed']} changed", file=sys.stderr)
    else:
        if args.other:
            raise CliError(f"unexpected second graph {args.other!r}", "compare two graphs with --diff", EXIT_USAGE)
        target = _explore_target(args.target, args)
        try:
            page = explorer.explore(target, name=args.target)
        except ValueError as e:
            raise CliError(str(e))
    if fmt == "png":
        if not args.output:
            raise CliError("--format png needs -o FILE.png", None, EXIT_USAGE)
        try:
            page.png(args.output, expand=args.expand)
        except ImportError:
            raise CliError("--format png needs Pillow, which is not installed",
                           "pip install pillow (Debian: apt-get install python3-pil), or write an SVG with "
                           "--format svg")
        except OSError as e:
            raise CliError(f"cannot write {args.output}: {e.strerror or e}")
        print(f"fxcpp: wrote {args.output}", file=sys.stderr)
        return 0
    text = page.html if fmt == "html" else page.svg(expand=args.expand)
    if args.output:
        _write(args.output, text)
        print(f"fxcpp: wrote {args.output}", file=sys.stderr)
    else:
        _flush_stdout(text)
    return 0


def cmd_show(args) -> int:
    if args.format in ("html", "svg", "png") or args.diff or args.other:
        return cmd_explore(args)
    if _is_fxpt(args.target):  # read by fxcpp's reader to be shown: nothing from the file runs
        gm = _resolve(args.target, trusted=args.trusted)
        name = os.path.splitext(os.path.basename(args.target))[0]
        shapes = False
    else:
        shape = parse_shape(args.input_shape) if args.input_shape is not None else None
        gm = _resolve(args.target, input_shape=shape, concrete_args=_concrete_args(args),
                      leaf_modules=args.leaf_module or ())
        name = args.target.split(":")[1]
        shapes = shape is not None
    if args.format == "code":
        text = gm.code.strip("\n") + "\n"
    elif args.format == "graph":
        text = str(gm.graph) + "\n"
    elif args.format == "table":
        text = graph_table(gm.graph, shapes=shapes, width=args.width) + "\n"
    else:
        text = to_dot(gm, name)
    if args.output:
        if args.format == "dot":
            render_dot(text, args.output)
        else:
            _write(args.output, text)
        print(f"fxcpp: wrote {args.output}", file=sys.stderr)
    else:
        _flush_stdout(text)
    return 0


def _repo_root() -> Optional[str]:
    here = os.path.dirname(os.path.abspath(__file__))
    # The last candidate resolves links: make test-asan-python runs a package tree whose
    # files are links into the checkout.
    cands = [os.environ.get("FXCPP_REPO"), os.path.dirname(os.path.dirname(here)),
             os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))]
    try:  # an installed copy records its source checkout (scripts/install_python.py)
        with open(os.path.join(here, "_checkout")) as f:
            cands.append(f.read().strip())
    except OSError:
        pass
    for c in cands:
        if c and os.path.isfile(os.path.join(c, "bench", "run.py")):
            return c
    return None


def _delegate(script: str, argv: List[str], what: str) -> int:
    root = _repo_root()
    if root is None:
        raise CliError(f"{what} lives in fxcpp's source checkout ({script}), which was not found",
                       "run it from the checkout (make bench / make demo), or set FXCPP_REPO=/path/to/fxcpp")
    env = dict(os.environ)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        return subprocess.call([sys.executable, os.path.join(root, script)] + argv, env=env, cwd=root)
    except KeyboardInterrupt:
        return 130


def cmd_bench(args, rest: List[str]) -> int:
    argv = (["--quick"] if args.quick else ["--full"] if args.full else []) + rest
    return _delegate(os.path.join("bench", "run.py"), argv, "the benchmark suite")


def cmd_demo(args, rest: List[str]) -> int:
    return _delegate(os.path.join("examples", "demo.py"), (["--quick"] if args.quick else []) + rest, "the demo")


_TRUSTED_HELP = ("load a .fxpt or .pt2 file without the restrictions on what it may ask the runtime to do -- only for "
                 "files you made yourself (docs/fxpt_format.md)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fxcpp", description="fxcpp: torch.fx with a C++ core -- trace and inspect models, run benchmarks.")
    from fxcpp import __version__
    p.add_argument("--version", action="version", version=f"fxcpp {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    s = sub.add_parser("show", help="trace a model and print it",
                       description="Trace MODULE:CALLABLE with fxcpp.symbolic_trace and print it. CALLABLE may be "
                                   "an nn.Module, a class or factory (called with no arguments; weights=None when "
                                   "it takes `weights`), or a function of tensors.",
                       epilog=f"example: fxcpp show {_EXAMPLE} --format table --input-shape 1,3,224,224")
    s.add_argument("target", metavar="MODULE:CALLABLE", help=f"what to trace, e.g. {_EXAMPLE}; or a .fxpt file")
    s.add_argument("other", nargs="?", metavar="AFTER", help="with --diff: the graph to compare TARGET with")
    s.add_argument("--format", "-f", choices=["code", "graph", "table", "dot", "html", "svg", "png"], default="code",
                   help="code: generated Python (default); graph: the IR as text; table: one row per node; "
                        "dot: Graphviz DOT (from the C++ core); html: the interactive explorer page (folded by "
                        "module; self-contained); svg/png: its drawing as a picture (png painted with Pillow)")
    s.add_argument("--diff", action="store_true",
                   help="compare two graphs: fxcpp show --diff BEFORE AFTER -o diff.html (added, removed and "
                        "changed nodes marked; also .fxpt/.pt2 files)")
    s.add_argument("--expand", type=int, default=0, metavar="DEPTH",
                   help="svg/png: open groups down to this depth (default 0: top-level groups folded)")
    s.add_argument("--input-shape", metavar="D0,D1,...",
                   help="run the traced model on torch.randn(shape) and show each node's output shape "
                        "(table and dot formats)")
    s.add_argument("-o", "--output", metavar="FILE",
                   help="write to FILE; with --format dot, FILE.svg/.png/.pdf is rendered with Graphviz's dot")
    s.add_argument("--concrete-args", metavar="JSON",
                   help="JSON object of arguments to specialize, e.g. '{\"flag\": true}' (removes control flow)")
    s.add_argument("--leaf-module", action="append", metavar="NAME",
                   help="do not trace into this submodule (qualified name or class name); repeatable")
    s.add_argument("--width", type=int, default=60, help=argparse.SUPPRESS)
    s.add_argument("--trusted", action="store_true", help=_TRUSTED_HELP)

    e = sub.add_parser("export", help="export a model to a .pt2 file (torch.export) or a .fxpt file (fxcpp)",
                       description="Export MODULE:CALLABLE on torch.randn(--input-shape) for the C++ runtime. "
                                   "FILE.pt2: with torch.export.export, saved by torch.export.save (torch 2.x; "
                                   "the input's sizes are fixed at export). FILE.fxpt: traced by fxcpp, lowered to "
                                   "ATen operators (fxcpp.aten.lower) and saved by fxcpp.aten.save. Another name "
                                   "gets .pt2 where torch has torch.export, .fxpt where it does not.",
                       epilog=f"example: fxcpp export {_EXAMPLE} --input-shape 1,3,224,224 -o resnet18.pt2")
    e.add_argument("target", metavar="MODULE:CALLABLE", help=f"what to export, e.g. {_EXAMPLE}")
    e.add_argument("--input-shape", metavar="D0,D1,...", required=True, help="the example input's shape")
    e.add_argument("-o", "--output", metavar="FILE.pt2|FILE.fxpt", required=True, help="where to write the file")
    e.add_argument("--leaf-module", action="append", metavar="NAME", help=argparse.SUPPRESS)

    r = sub.add_parser("run", help="run a .fxpt or .pt2 file in the C++ runtime; print output shapes and latency",
                       epilog="example: fxcpp run resnet18.fxpt --input-shape 1,3,224,224 --repeat 20")
    r.add_argument("file", metavar="FILE.fxpt")
    r.add_argument("--input-shape", metavar="D0,D1,...", required=True, help="run on torch.randn(shape)")
    r.add_argument("--repeat", type=int, default=10, help="timed runs after a warm-up (default 10)")
    r.add_argument("--threads", type=int, default=1, help=f"intra-op threads, 1 to {MAX_THREADS} (default 1)")
    r.add_argument("--trusted", action="store_true", help=_TRUSTED_HELP)

    b = sub.add_parser("bench", help="run the side-by-side benchmark suite (bench/run.py)",
                       description="Runs bench/run.py: fxcpp vs torch.fx benchmarks, writing bench/results/ "
                                   "and BENCHMARKS.md. Extra arguments are passed through.")
    g = b.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="small sizes (< 2 minutes)")
    g.add_argument("--full", action="store_true", help="all sizes (< 15 minutes)")

    d = sub.add_parser("demo", help="run the end-to-end demo (examples/demo.py)")
    d.add_argument("--quick", action="store_true", help="fewer timing repetitions")
    return p


def _silence_stdout() -> None:
    # What is still buffered would fail again when the interpreter exits.
    try:
        sys.stdout = open(os.devnull, "w")
    except OSError:
        pass


def _flush_stdout(text: str = "") -> None:
    """Writes `text` to standard output and flushes it; a failure (a full
    disk, /dev/full) is a CliError, not a traceback."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        _silence_stdout()
        raise CliError(f"cannot write the output: {e.strerror or e}", "write to a file with -o FILE")


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command not in ("bench", "demo") and rest:
        parser.error("unrecognized arguments: " + " ".join(rest))
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        if args.command == "show":
            code = cmd_show(args)
        elif args.command == "export":
            code = cmd_export(args)
        elif args.command == "run":
            code = cmd_run(args)
        elif args.command == "bench":
            code = cmd_bench(args, rest)
        else:
            code = cmd_demo(args, rest)
        _flush_stdout()
        return code
    except CliError as e:
        print(f"fxcpp: error: {e}", file=sys.stderr)
        for h in ([e.hint] if isinstance(e.hint, str) else e.hint or []):
            print(f"hint: {h}", file=sys.stderr)
        if os.environ.get("FXCPP_DEBUG"):
            traceback.print_exc()
        return e.code
    except BrokenPipeError:  # e.g. `fxcpp show ... | head`
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except KeyboardInterrupt:
        return 130
    except OSError as e:  # output that cannot be written (print() to a full disk, /dev/full)
        _silence_stdout()
        print(f"fxcpp: error: {e.strerror or e}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())

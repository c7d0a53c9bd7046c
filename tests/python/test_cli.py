"""The `fxcpp` command line (python3 -m fxcpp): commands, output formats, DOT validity
and the error paths (short message + hint, non-zero exit, never a traceback)."""
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile

import pytest
import torch

import fxcpp
from fxcpp import _torch_compat

PYTHON = sys.executable  # the interpreter (and torch) of this session: the package under test is built for it
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HAVE_DOT = shutil.which("dot") is not None


MODELS = textwrap.dedent('''
    import torch

    class Small(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)
        def forward(self, x):
            return torch.relu(self.lin(x)) + 1

    class Dyn(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x + 1
            return x - 1

    class Flag(torch.nn.Module):
        def forward(self, x, flag=True):
            if flag:
                return x + 1
            return x - 1

    class Inner(torch.nn.Module):
        def forward(self, x):
            for row in x:
                x = x + row
            return x

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()
        def forward(self, x):
            return self.inner(x) * 2

    def fn(x, y):
        return torch.relu(x) + y

    def factory():
        return Small()

    def broken():
        raise RuntimeError("boom")

    class Weird(torch.nn.Module):
        def forward(self, x):
            return getattr(x, 'we{ir}d|<m> "q"')(x)

    not_callable = 42
''')


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    (d / "mymodels.py").write_text(MODELS)
    return d


def run(workdir, *args, timeout=180, extra_env=None):
    env = dict(os.environ, **(extra_env or {}))
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(fxcpp.__file__)))
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("FXCPP_DEBUG", None)
    return subprocess.run([PYTHON, "-m", "fxcpp", *args], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=timeout)


# Under the ASan build (make test-asan-python) an allocation too large to satisfy returns null, as
# the real allocator does, after ASan prints this warning on stderr: not the CLI's output.
_ASAN_WARNING = re.compile(r"^==\d+==WARNING: AddressSanitizer failed to allocate .*\n", re.M)


def assert_clean_error(p, *needles, code=None):
    assert p.returncode != 0, p.stdout
    if code is not None:
        assert p.returncode == code, (p.returncode, p.stderr)
    err = _ASAN_WARNING.sub("", p.stderr)
    assert "Traceback" not in err, err
    assert err.startswith("fxcpp: error:") or "usage:" in err, err
    for n in needles:
        assert n in err, (n, err)


# ---------------------------------------------------------------------------------------
# A small DOT parser (the subset of the language the exporter emits, parsed strictly)
# ---------------------------------------------------------------------------------------

_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\\n]|\\.)*")|(?P<id>[A-Za-z_][A-Za-z_0-9]*|-?\d+(?:\.\d+)?)'
                    r'|(?P<arrow>->)|(?P<punct>[{}\[\];,=]))')


def parse_dot(text):
    """Parses `digraph ID { stmt* }`; returns (name, {node: attrs}, [(src, dst)]).
    Raises AssertionError on any syntax error, undeclared edge endpoint, or
    unbalanced record label."""
    toks, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        assert m and m.end() > pos, f"bad token at {pos}: {text[pos:pos + 30]!r}"
        toks.append(next((k, v) for k, v in m.groupdict().items() if v is not None))
        pos = m.end()
    toks.append(("eof", ""))
    pos = [0]

    def peek():
        return toks[pos[0]]

    def take(kind=None, value=None):
        t = toks[pos[0]]
        assert kind is None or t[0] == kind, f"expected {kind}, got {t}"
        assert value is None or t[1] == value, f"expected {value!r}, got {t}"
        if t[0] != "eof":
            pos[0] += 1
        return t

    def ident():
        k, v = take()
        assert k in ("str", "id"), f"expected an ID, got {(k, v)}"
        return v[1:-1] if k == "str" else v

    def attrs():
        out = {}
        if peek() == ("punct", "["):
            take()
            while peek() != ("punct", "]"):
                key = ident()
                take("punct", "=")
                out[key] = ident()
                if peek() == ("punct", ","):
                    take()
            take("punct", "]")
        return out

    assert ident() == "digraph"
    name = ident()
    take("punct", "{")
    nodes, edges = {}, []
    while peek() != ("punct", "}"):
        a = ident()
        if a in ("graph", "node", "edge"):
            attrs()
        elif peek()[0] == "arrow":
            take()
            edges.append((a, ident()))
            attrs()
        else:
            assert a not in nodes, f"duplicate node {a}"
            nodes[a] = attrs()
        take("punct", ";")
    take("punct", "}")
    take("eof")
    for s, d in edges:
        assert s in nodes and d in nodes, f"edge {s} -> {d} to an undeclared node"
    for n, at in nodes.items():
        label = re.sub(r"\\.", "", at.get("label", ""))
        depth = 0
        for ch in label:
            depth += {"{": 1, "}": -1}.get(ch, 0)
            assert depth >= 0, f"unbalanced record label of {n}"
        assert depth == 0, f"unbalanced record label of {n}"
    return name, nodes, edges


def test_parse_dot_rejects_bad_text():
    with pytest.raises(AssertionError):
        parse_dot('digraph "g" { "a" -> "b"; }')               # undeclared nodes
    with pytest.raises(AssertionError):
        parse_dot('digraph "g" { "a" [label="{x"]; }')         # unbalanced record
    with pytest.raises(AssertionError):
        parse_dot('digraph "g" { "a [label="x"]; }')           # broken quoting


# ---------------------------------------------------------------------------------------
# show
# ---------------------------------------------------------------------------------------

def test_show_resnet18_code_and_table(workdir):
    p = run(workdir, "show", "torchvision.models:resnet18")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("def forward(self, x : torch.Tensor) -> torch.Tensor:")
    assert "layer4_1_relu_1" in p.stdout and "self.fc(flatten)" in p.stdout

    p = run(workdir, "show", "torchvision.models:resnet18", "--format", "table", "--input-shape", "1,3,224,224")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["opcode", "name", "target", "args", "kwargs", "shape"]
    assert len(lines) == 2 + 71
    assert re.search(r"^call_module\s+conv1\s+conv1\s+\(x,\)\s+\{\}\s+\(1, 64, 112, 112\)$", p.stdout, re.M)
    assert re.search(r"^output\s+output\s+output\s+\(fc,\)\s+\{\}\s+\(1, 1000\)$", p.stdout, re.M)


def _small_traced_by(symbolic_trace, workdir):
    sys.path.insert(0, str(workdir))
    try:
        import mymodels
        return symbolic_trace(mymodels.Small())
    finally:
        sys.path.remove(str(workdir))


def test_show_prints_as_torch_fx(workdir):
    import torch.fx
    ref = _small_traced_by(torch.fx.symbolic_trace, workdir)
    p = run(workdir, "show", "mymodels:Small", "-f", "graph")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(ref.graph).strip()
    p = run(workdir, "show", "mymodels:factory")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == ref.code.strip()


def test_show_formats_small_model(workdir):
    ref = _small_traced_by(fxcpp.symbolic_trace, workdir)
    p = run(workdir, "show", "mymodels:Small", "-f", "graph")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(ref.graph).strip()
    p = run(workdir, "show", "mymodels:factory")                 # factories are called
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == ref.code.strip()
    p = run(workdir, "show", "mymodels:fn", "-f", "table")      # functions of tensors are traced
    assert p.returncode == 0, p.stderr
    assert [l.split()[0] for l in p.stdout.splitlines()[2:]] == \
        ["placeholder", "placeholder", "call_function", "call_function", "output"]
    assert "torch.relu" in p.stdout and "operator.add" in p.stdout


def test_show_dot_is_valid(workdir, tmp_path):
    p = run(workdir, "show", "torchvision.models:resnet18", "--format", "dot", "--input-shape", "1,3,224,224")
    assert p.returncode == 0, p.stderr
    name, nodes, edges = parse_dot(p.stdout)
    assert name == "resnet18"
    assert len(nodes) == 71
    assert ("maxpool", "layer1_0_conv1") in edges and ("maxpool", "add") in edges
    assert "torch.nn.modules.conv.Conv2d" in nodes["conv1"]["label"]
    assert "shape=(1, 64, 112, 112)" in nodes["conv1"]["label"]
    assert nodes["x"]["fillcolor"] == "AliceBlue"
    n_users = sum(len(set(d for s, d in edges if s == n)) for n in nodes)
    assert n_users == len(edges)  # one edge per (value, user) pair
    if HAVE_DOT:
        dot_file = tmp_path / "r.dot"
        dot_file.write_text(p.stdout)
        r = subprocess.run(["dot", "-Tsvg", str(dot_file)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert "<svg" in r.stdout


def test_dot_escapes_hostile_names(workdir, tmp_path):
    # A call_method target with DOT/record metacharacters, through the C++ exporter.
    g = fxcpp.Graph()
    x = g.placeholder("x")
    n = g.call_method('we{ir}d|<m> "q" \\', (x, 'a{b}|c<d>"e\\'))
    n.name = 'n"{|}\\'
    g.output(n)
    text = fxcpp._C._graph_to_dot(g, 'graph "name" \\')
    name, nodes, edges = parse_dot(text)
    assert len(nodes) == 3 and len(edges) == 2
    if HAVE_DOT:
        r = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr


@pytest.mark.skipif(not HAVE_DOT, reason="graphviz (dot) not installed")
def test_show_dot_renders_svg(workdir, tmp_path):
    out = tmp_path / "small.svg"
    p = run(workdir, "show", "mymodels:Small", "--format", "dot", "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert out.read_text().lstrip().startswith(("<?xml", "<svg"))
    out_dot = tmp_path / "small.dot"
    p = run(workdir, "show", "mymodels:Small", "--format", "dot", "-o", str(out_dot))
    assert p.returncode == 0, p.stderr
    parse_dot(out_dot.read_text())


def test_cli_main_in_process(workdir, capsys, monkeypatch):
    # the console script's entry point, without a subprocess
    from fxcpp.cli import main
    monkeypatch.chdir(workdir)
    monkeypatch.syspath_prepend(str(workdir))
    assert main(["show", "mymodels:Small", "-f", "code"]) == 0
    assert "def forward(self, x)" in capsys.readouterr().out
    assert main(["show", "mymodels:nope"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("fxcpp: error: 'mymodels' has no attribute 'nope'")


# ---------------------------------------------------------------------------------------
# error paths
# ---------------------------------------------------------------------------------------

def test_error_dynamic_control_flow(workdir):
    p = run(workdir, "show", "mymodels:Dyn")
    assert_clean_error(p, "cannot trace mymodels:Dyn: dynamic control flow", "mymodels.py:",
                       "hint:", "--concrete-args", "--leaf-module", code=1)
    p = run(workdir, "show", "mymodels:Flag")
    assert_clean_error(p, "dynamic control flow", """--concrete-args '{"flag": true}'""", code=1)
    p = run(workdir, "show", "mymodels:Flag", "--concrete-args", '{"flag": false}')
    assert p.returncode == 0, p.stderr
    assert "sub = x - 1" in p.stdout
    p = run(workdir, "show", "mymodels:Outer")                # iteration inside a submodule
    assert_clean_error(p, "in submodule 'inner'", "--leaf-module inner", code=1)
    p = run(workdir, "show", "mymodels:Outer", "--leaf-module", "inner", "-f", "graph")
    assert p.returncode == 0, p.stderr
    assert "call_module[target=inner]" in p.stdout


def test_error_bad_target_spec(workdir):
    assert_clean_error(run(workdir, "show", "resnet18"), "expected MODULE:CALLABLE", code=2)
    assert_clean_error(run(workdir, "show", "torchvision.modelz:resnet18"),
                       "cannot import module 'torchvision.modelz'", code=1)
    assert_clean_error(run(workdir, "show", "torchvision.models:resnet1800"),
                       "has no attribute 'resnet1800'", "did you mean torchvision.models:resnet18", code=1)
    assert_clean_error(run(workdir, "show", "mymodels:not_callable"), "is a int, not a callable", code=1)
    assert_clean_error(run(workdir, "show", "mymodels:broken"), "calling mymodels:broken() failed",
                       "RuntimeError: boom", code=1)
    assert_clean_error(run(workdir, "show", "torch.nn:Linear"), "calling torch.nn:Linear() failed", code=1)


def test_error_bad_options(workdir, tmp_path):
    assert_clean_error(run(workdir, "show", "mymodels:Small", "--input-shape", "1,x"),
                       "bad --input-shape", code=2)
    assert_clean_error(run(workdir, "show", "mymodels:Small", "--input-shape", "2,5"),
                       "running the traced model on an input of shape (2, 5) failed at node lin", code=1)
    assert_clean_error(run(workdir, "show", "mymodels:Small", "--concrete-args", "{oops"),
                       "bad --concrete-args", code=2)
    assert_clean_error(run(workdir, "show", "mymodels:Small", "--format", "jpeg"), "invalid choice", code=2)
    assert_clean_error(run(workdir, "show", "mymodels:Small", "--format", "html", "--concrete-args", "{oops"),
                       "bad --concrete-args", code=2)
    assert_clean_error(run(workdir, "show", "mymodels:Small", "-o", str(tmp_path / "no" / "such" / "x.py")),
                       "cannot write", code=1)
    if HAVE_DOT:
        assert_clean_error(run(workdir, "show", "mymodels:Small", "-f", "dot", "-o", str(tmp_path / "x.nope")),
                           "graphviz failed to render", code=1)
    p = run(workdir)
    assert p.returncode == 2 and "usage: fxcpp" in p.stderr


def test_error_missing_graphviz(workdir, tmp_path):
    # hide `dot` from PATH: rendering must fail with an install hint, .dot output still works
    env_path = os.environ.get("PATH", "")
    os.environ["PATH"] = str(tmp_path)
    try:
        p = run(workdir, "show", "mymodels:Small", "-f", "dot", "-o", str(tmp_path / "x.svg"))
        assert_clean_error(p, "Graphviz's `dot` is not installed", "apt-get install graphviz", code=1)
        p = run(workdir, "show", "mymodels:Small", "-f", "dot", "-o", str(tmp_path / "x.dot"))
        assert p.returncode == 0, p.stderr
    finally:
        os.environ["PATH"] = env_path


def test_bench_delegates_to_runner(workdir):
    # A pip-installed fxcpp does not know the checkout it was built from: FXCPP_REPO names it.
    p = run(workdir, "bench", "--help-runner", extra_env={"FXCPP_REPO": REPO})
    # bench/run.py exists in the checkout: the unknown flag reaches it (argparse error from the runner)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "run.py" in p.stderr and "--help-runner" in p.stderr


# ---------------------------------------------------------------------------------------
# export / run / show FILE.fxpt (the C++ runtime)
# ---------------------------------------------------------------------------------------

def test_export_run_and_show_a_saved_model(workdir, tmp_path):
    out = tmp_path / "r18.fxpt"
    p = run(workdir, "export", "torchvision.models:resnet18", "--input-shape", "1,3,64,64", "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert "fxcpp: wrote" in p.stderr and "lowering [" not in p.stderr  # no bar without a terminal
    p = run(workdir, "run", str(out), "--input-shape", "3,3,64,64", "--repeat", "2")
    assert p.returncode == 0, p.stderr
    assert "ops in the C++ runtime" in p.stdout
    assert "output: float32[3, 1000]" in p.stdout
    assert re.search(r"latency over 2 runs \(1 thread\): median [0-9.]+ ms", p.stdout)
    p = run(workdir, "show", str(out))
    assert p.returncode == 0, p.stderr
    assert "torch.ops.aten.conv2d.default(x, conv1_weight" in p.stdout
    from fxcpp import aten
    assert p.stdout == aten.load(str(out)).code.strip("\n") + "\n"
    p = run(workdir, "show", str(out), "--format", "graph")
    assert p.returncode == 0 and p.stdout.startswith("graph():")


@pytest.mark.skipif(not _torch_compat.HAS_EXPORT,
                    reason=f"fxcpp export -o FILE.pt2 uses torch.export (torch 2.5 on); this torch is {torch.__version__}")
def test_export_to_pt2_with_torch_export_then_run_and_show(workdir, tmp_path):
    out = tmp_path / "small.pt2"
    p = run(workdir, "export", "mymodels:Small", "--input-shape", "2,4", "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert "fxcpp: exported mymodels:Small with torch.export" in p.stderr and "fxcpp: wrote" in p.stderr
    assert all(line.startswith("fxcpp: ") for line in p.stderr.splitlines()), p.stderr
    # torch's own archive: torch.export.load reads it, and it equals the model.
    ep = torch.export.load(str(out))
    x = torch.randn(2, 4)
    from fxcpp import aten
    torch.testing.assert_close(aten.load(str(out), runtime="cpp")(x), ep.module()(x))
    assert oct(out.stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    p = run(workdir, "run", str(out), "--input-shape", "2,4", "--repeat", "2")
    assert p.returncode == 0, p.stderr
    assert "output: float32[2, 3]" in p.stdout
    # Its sizes were fixed at export: another batch is a clear error (Note [Exported input checks]).
    assert_clean_error(run(workdir, "run", str(out), "--input-shape", "3,4"),
                       "Expected input at x.shape[0] to be equal to 2, but got 3")
    p = run(workdir, "show", str(out))
    assert p.returncode == 0, p.stderr
    assert "torch.ops.aten.linear.default(x, p_lin_weight, p_lin_bias)" in p.stdout, p.stdout
    # A name that is neither .pt2 nor .fxpt gets .pt2 on this torch.
    other = tmp_path / "small.model"
    assert run(workdir, "export", "mymodels:Small", "--input-shape", "2,4", "-o", str(other)).returncode == 0
    assert zipfile.ZipFile(other).read(next(n for n in zipfile.ZipFile(other).namelist()
                                            if n.endswith("archive_format"))) == b"pt2"
    # What torch.export cannot export is a clean error with a way out.
    assert_clean_error(run(workdir, "export", "mymodels:fn", "--input-shape", "2,4", "-o", str(tmp_path / "f.pt2")),
                       "not an nn.Module")


def _umask():
    m = os.umask(0)
    os.umask(m)
    return m


@pytest.mark.skipif(_torch_compat.HAS_EXPORT, reason="this torch has torch.export")
def test_export_to_pt2_needs_torch_export(workdir, tmp_path):
    assert_clean_error(run(workdir, "export", "mymodels:Small", "--input-shape", "2,4", "-o", str(tmp_path / "s.pt2")),
                       "torch.export", "-o FILE.fxpt", code=2)


def test_version_is_the_packages():
    assert re.fullmatch(r"\d+\.\d+\.\d+", fxcpp.__version__)
    p = run(REPO, "--version")
    assert p.returncode == 0 and p.stdout.strip() == f"fxcpp {fxcpp.__version__}", (p.stdout, p.stderr)


def test_runtime_commands_fail_cleanly(workdir, tmp_path):
    bad = tmp_path / "bad.fxpt"
    bad.write_bytes(b"not a zip")
    assert_clean_error(run(workdir, "run", str(bad), "--input-shape", "1,3"), "cannot load", "not a readable")
    assert_clean_error(run(workdir, "run", str(tmp_path / "missing.fxpt"), "--input-shape", "1,3"), "no such file")
    good = tmp_path / "good.fxpt"
    assert run(workdir, "export", "torchvision.models:resnet18", "--input-shape", "1,3,32,32",
               "-o", str(good)).returncode == 0
    assert_clean_error(run(workdir, "run", str(good), "--input-shape", "3,32,32"),
                       "expected a 4-dimensional tensor")
    p = run(workdir, "export", "mymodels:Weird", "--input-shape", "1,3", "-o", str(tmp_path / "w.fxpt"))
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert "fxcpp: error: cannot lower mymodels:Weird: cannot lower node" in p.stderr
    assert "hint: register a lowering with @fxcpp.aten.register_lowering" in p.stderr


# ---------------------------------------------------------------------------------------
# misuse: every one ends in `fxcpp: error:` (or argparse's usage error), never a traceback
# or a hang (issue 24, item 9)
# ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_fxpt(workdir, tmp_path_factory):
    path = tmp_path_factory.mktemp("fxpt") / "small.fxpt"
    p = run(workdir, "export", "mymodels:Small", "--input-shape", "1,4", "-o", str(path))
    assert p.returncode == 0, p.stderr
    return path


def assert_error_after_progress(p, *needles, code=None):
    """assert_clean_error for a command that reports progress before it fails."""
    lines = p.stderr.splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("fxcpp: error:")), None)
    assert first is not None and all(line.startswith("fxcpp: ") for line in lines[:first]), p.stderr
    assert_clean_error(subprocess.CompletedProcess(p.args, p.returncode, p.stdout, "\n".join(lines[first:])),
                       *needles, code=code)


def test_misuses_fail_cleanly(workdir, tmp_path, small_fxpt):
    f = str(small_fxpt)
    # --threads out of range: set_num_threads raised (0, -1), aborted or hung (huge)
    for n in ("0", "-1", "100000", "100000000000000000000"):
        assert_clean_error(run(workdir, "run", f, "--input-shape", "1,4", "--threads", n, timeout=60),
                           "--threads must be between 1 and", code=2)
    # an input too large to allocate
    assert_clean_error(run(workdir, "run", f, "--input-shape", "100000,100000,100000"),
                       "cannot make an input of shape (100000, 100000, 100000)", code=2)
    assert_clean_error(run(workdir, "export", "mymodels:Small", "--input-shape", "100000,100000,100000",
                           "-o", str(tmp_path / "x.fxpt")), "cannot make an input of shape", code=2)
    # outputs that cannot be written: nothing is reported as written, an existing file stays
    keep = tmp_path / "keep.fxpt"
    keep.write_bytes(b"old")
    for out in ("/dev/full", str(tmp_path / "no" / "dir" / "x.fxpt"), str(tmp_path), ""):
        p = run(workdir, "export", "mymodels:Small", "--input-shape", "1,4", "-o", out)
        assert_error_after_progress(p, "cannot write", code=1)
        assert "wrote" not in p.stderr
    assert keep.read_bytes() == b"old" and sorted(os.listdir(tmp_path)) == ["keep.fxpt"]
    # a directory where a file is expected
    assert_clean_error(run(workdir, "run", str(tmp_path), "--input-shape", "1,4"), "is a directory", code=1)
    # a full standard output
    for args in (["show", f], ["show", "mymodels:Small"], ["run", f, "--input-shape", "1,4"]):
        with open("/dev/full", "w") as full:
            env = dict(os.environ)
            env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(fxcpp.__file__)))
            p = subprocess.run([PYTHON, "-m", "fxcpp", *args], cwd=workdir, env=env, stdout=full,
                               stderr=subprocess.PIPE, text=True, timeout=180)
        assert_clean_error(p, "No space left on device", code=1)
    # a forward that fails with an exception other than TypeError/RuntimeError is reported too
    assert_clean_error(run(workdir, "run", f, "--input-shape", "1,5"), "failed", code=1)


def test_trusted_option(workdir, small_fxpt):
    for cmd in (["run", str(small_fxpt), "--input-shape", "1,4", "--repeat", "1"], ["show", str(small_fxpt)]):
        p = run(workdir, *cmd, "--trusted")
        assert p.returncode == 0, p.stderr
    for cmd in ("run", "show"):
        p = run(workdir, cmd, "--help")
        assert "--trusted" in p.stdout and "only for files you made yourself" in " ".join(p.stdout.split())


from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

_ARGV_PIECES = st.lists(st.sampled_from([
    ["--input-shape", "1,4"], ["--input-shape", "0"], ["--input-shape", "1,x"], ["--input-shape", "3"],
    ["--input-shape", "2,4"], ["--repeat", "1"], ["--repeat", "0"], ["--repeat", "x"], ["--threads", "0"],
    ["--threads", "1"], ["--threads", "-5"], ["--threads", "99999"], ["--format", "graph"], ["--format", "table"],
    ["--format", "nope"], ["-o", "/dev/full"], ["-o", "/nonexistent-dir/x"], ["-o", "."], ["--trusted"],
    ["--width", "-3"], ["--concrete-args", "{"], ["--leaf-module", "lin"]]), max_size=4)


@settings(max_examples=int(os.environ.get("FXCPP_HYPOTHESIS_MAX_EXAMPLES", 60)), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(cmd=st.sampled_from(["run", "show"]), target=st.sampled_from(["GOOD", "BAD", "MISSING", "DIR", "/dev/null",
                                                                      "mymodels:Small", "mymodels:nope", ""]),
       shape=st.sampled_from(["1,4", "2,4", "1,5", "0", "100000,100000,100000"]), pieces=_ARGV_PIECES)
def test_argv_fuzz_never_tracebacks(workdir, small_fxpt, capsys, monkeypatch, cmd, target, shape, pieces):
    """Random command lines, in process: main() returns a status (or argparse
    exits with 2) and prints no traceback."""
    import torch
    from fxcpp.cli import main
    monkeypatch.chdir(workdir)
    monkeypatch.syspath_prepend(str(workdir))
    bad = workdir / "bad.fxpt"
    bad.write_bytes(b"not a zip")
    target = {"GOOD": str(small_fxpt), "BAD": str(bad), "MISSING": str(workdir / "missing.fxpt"),
              "DIR": str(workdir)}.get(target, target)
    argv = [cmd, target] + (["--input-shape", shape] if cmd == "run" else []) + [a for p in pieces for a in p]
    threads = torch.get_num_threads()
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
        assert code == 2, argv
    finally:
        torch.set_num_threads(threads)
    err = capsys.readouterr().err
    assert isinstance(code, int), argv
    assert "Traceback" not in err, (argv, err)
    if code not in (0, None):
        assert err.startswith("fxcpp: error:") or "usage:" in err, (argv, err)


# ---------------------------------------------------------------------------------------
# --input-shape: every value is a shape or a usage error naming what is wrong (issue 35, item 5)
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, needle", [
    ("99999999999999999999,4", "dimension 0 is 99999999999999999999; each dimension must be a positive integer of "
                               "at most 2**63-1"),
    ("4,9223372036854775808", "dimension 1 is 9223372036854775808"),
    ("9" * 5000, "dimension 0 is 999"),                     # more digits than int() takes
    ("0,4", "dimension 0 is 0"),
    ("4294967296,4294967296", "18446744073709551616 elements, more than a tensor may have"),
    (",".join(["1"] * 65), "65 dimensions, more than the 64"),
    ("-1,4", "expected comma-separated positive integers"),
    ("1.5,4", "expected comma-separated positive integers"),
    ("1e3", "expected comma-separated positive integers"),
    ("+4", "expected comma-separated positive integers"),
    ("\u00b2,4", "expected comma-separated positive integers"),  # str.isdigit() says yes, int() says no
    ("\u0663,4", "expected comma-separated positive integers"),  # an Arabic-Indic 3: not ASCII
    ("1,,4", "expected comma-separated positive integers"),
    ("", "expected comma-separated positive integers"),
])
def test_bad_input_shapes_are_usage_errors(workdir, small_fxpt, tmp_path, capsys, monkeypatch, shape, needle):
    from fxcpp.cli import EXIT_USAGE, main
    monkeypatch.chdir(workdir)
    monkeypatch.syspath_prepend(str(workdir))
    for argv in (["run", str(small_fxpt), f"--input-shape={shape}"],
                 ["show", "mymodels:Small", f"--input-shape={shape}", "-f", "table"],
                 ["show", "mymodels:Small", f"--input-shape={shape}", "-f", "svg"],
                 ["export", "mymodels:Small", f"--input-shape={shape}", "-o", str(tmp_path / "x.fxpt")]):
        assert main(argv) == EXIT_USAGE, argv
        err = capsys.readouterr().err
        assert err.startswith("fxcpp: error: bad --input-shape") and needle in err and "Traceback" not in err, \
            (argv, err)
        assert len(err.splitlines()) <= 3, err  # the error line and a hint, however long the shape
    assert not (tmp_path / "x.fxpt").exists()


def test_a_huge_dimension_is_a_usage_error(workdir, small_fxpt):
    """The reported case, through the real command line: a traceback before."""
    p = run(workdir, "run", str(small_fxpt), "--input-shape", "99999999999999999999,4")
    assert_clean_error(p, "bad --input-shape '99999999999999999999,4': dimension 0 is 99999999999999999999",
                       "hint:", code=2)


def test_good_input_shapes_parse():
    from fxcpp.cli import parse_shape
    assert parse_shape("1,3,224,224") == parse_shape(" 1 x 3x224 ,224 ") == (1, 3, 224, 224)
    assert parse_shape("007") == (7,)
    assert parse_shape(",".join(["1"] * 64)) == (1,) * 64
    assert parse_shape(f"{2 ** 63 - 1}") == (2 ** 63 - 1,)
    assert parse_shape([2, 4]) == (2, 4)


_SHAPE_TEXT = st.one_of(
    st.text(alphabet="0123456789,x -+.e\u00b2\u0663\t", max_size=30),
    st.lists(st.integers(-3, 2 ** 70), max_size=70).map(lambda dims: ",".join(map(str, dims))),
    st.text(max_size=16))


@settings(max_examples=int(os.environ.get("FXCPP_HYPOTHESIS_MAX_EXAMPLES", 60)), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(text=_SHAPE_TEXT)
def test_input_shape_fuzz_never_tracebacks(workdir, small_fxpt, capsys, monkeypatch, text):
    """Any --input-shape text: parse_shape gives positive dimensions of at most 2**63-1 elements
    in all, or a usage error; `fxcpp run` with it ends with a status and no traceback."""
    import math

    import torch
    from fxcpp.cli import EXIT_USAGE, CliError, main, parse_shape
    fields = [f.strip() for f in text.strip().replace("x", ",").split(",")]
    try:
        dims = parse_shape(text)
    except CliError as e:
        assert e.code == EXIT_USAGE and str(e).startswith("bad --input-shape"), (text, str(e))
        dims = None
    else:
        assert all(re.fullmatch("[0-9]+", f) for f in fields) and dims == tuple(int(f) for f in fields), text
        assert all(d > 0 for d in dims) and len(dims) <= 64 and math.prod(dims) <= 2 ** 63 - 1, text
    if dims is not None and 4096 < math.prod(dims) < 2 ** 50:
        return  # an input this machine might really allocate: not in a test
    monkeypatch.chdir(workdir)
    threads = torch.get_num_threads()
    try:
        code = main(["run", str(small_fxpt), f"--input-shape={text}", "--repeat", "1"])
    finally:
        torch.set_num_threads(threads)
    err = capsys.readouterr().err
    assert "Traceback" not in err, (text, err)
    assert code == 0 or err.startswith("fxcpp: error:"), (text, code, err)
    if dims is None:
        assert code == EXIT_USAGE, (text, err)

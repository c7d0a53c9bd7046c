"""scripts/upstream/rewrite.py on small sources (needs fxcpp importable: PYTHONPATH=<repo>/build/pkg).

Run by scripts/upstream/run.sh before the upstream suite.
"""
import importlib.util
import os

import pytest

_SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "upstream", "rewrite.py")
_spec = importlib.util.spec_from_file_location("upstream_rewrite", _SCRIPT)
rewrite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rewrite)


def run(src):
    log = []
    out = rewrite.rewrite_file("t.py", src, log)
    assert out.count("\n") == src.count("\n")
    return out, log


def test_from_import_split_by_what_fxcpp_has():
    out, log = run("from torch.fx import Graph, no_such_name as n\n")
    assert out == "from fxcpp import Graph; from torch.fx import no_such_name as n\n"
    assert "t.py:1: kept on torch.fx: fxcpp lacks fxcpp.no_such_name (from torch.fx import no_such_name)" in log
    assert any(line.startswith("t.py:1: from torch.fx import Graph") and "-> from fxcpp import Graph" in line
               for line in log)


def test_missing_module_stays_and_submodules_count():
    out, _ = run("from torch.fx.experimental.symbolic_shapes import ShapeEnv\n"
                 "from torch.fx.experimental.rewriter import RewritingTracer\n"
                 "from torch.fx import subgraph_rewriter\n")
    assert out == ("from torch.fx.experimental.symbolic_shapes import ShapeEnv\n"
                   "from fxcpp.experimental.rewriter import RewritingTracer\n"
                   "from fxcpp import subgraph_rewriter\n")


def test_multiline_import_keeps_line_count_and_indentation():
    src = ("def f():\n"
           "    from torch.fx.node import (Node,\n"
           "                              map_arg)\n"
           "    return Node\n")
    out, _ = run(src)
    assert out.splitlines()[1] == "    from fxcpp.node import Node, map_arg"
    compile(out, "t.py", "exec")


def test_aliased_module_import():
    out, _ = run("import torch.fx as fx\nimport torch.fx\nimport torch.fx.passes.splitter_base as e\n")
    assert out == "import fxcpp as fx\nimport torch.fx\nimport torch.fx.passes.splitter_base as e\n"


def test_dotted_chains_in_code_not_strings_or_comments():
    src = ("from __future__ import annotations\n"
           "import torch\n"
           "g = torch.fx.Graph()  # torch.fx.Graph\n"
           "s = 'torch.fx.Graph'\n"
           "t = torch.fx.experimental.symbolic_shapes\n"
           "u = x.torch.fx.Graph\n")
    out, log = run(src)
    assert out.splitlines() == [
        "from __future__ import annotations",
        "import fxcpp; import torch",
        "g = fxcpp.Graph()  # torch.fx.Graph",
        "s = 'torch.fx.Graph'",
        "t = torch.fx.experimental.symbolic_shapes",
        "u = x.torch.fx.Graph",
    ]
    assert "t.py:5: kept on torch.fx: fxcpp lacks fxcpp.experimental.symbolic_shapes (torch.fx.experimental.symbolic_shapes)" in log


def test_from_torch_import_fx():
    # PyTorch 2.x's tests (test/fx/test_lazy_graph_module.py) bind the module this way.
    out, log = run("from torch import fx\n"
                   "def f():\n"
                   "    from torch import (nn,\n"
                   "                       fx as tfx)\n"
                   "    return tfx\n")
    assert out.splitlines()[0] == "import fxcpp as fx"
    assert out.splitlines()[2] == "    import fxcpp as tfx; from torch import nn"
    assert "t.py:1: from torch import fx -> import fxcpp as fx" in log
    ns = {}
    exec(out, ns)
    assert ns["fx"].__name__ == "fxcpp" and ns["f"]().__name__ == "fxcpp"


def test_passes_and_experimental_modules_split_by_what_fxcpp_has():
    # 2.x's tests import from torch.fx.passes.* and torch.fx.experimental.*: each name goes
    # to fxcpp exactly when fxcpp has the module and the name.
    import fxcpp.passes.shape_prop
    src = ("from torch.fx.passes.shape_prop import ShapeProp, _no_such_helper\n"
           "from torch.fx.passes.no_such_module import thing\n")
    out, log = run(src)
    assert out.splitlines() == [
        "from fxcpp.passes.shape_prop import ShapeProp; "
        "from torch.fx.passes.shape_prop import _no_such_helper",
        "from torch.fx.passes.no_such_module import thing",
    ]
    assert any("fxcpp lacks fxcpp.passes.no_such_module" in line for line in log)


def test_non_fx_imports_untouched():
    src = ("import torch\nfrom torch.nn import Module\nfrom torch.fxx import a\n"
           "from torch import nn, fxx\nfrom torch.testing._internal.common_utils import run_tests\n")
    out, log = run(src)
    assert out == src and log == []


def test_rewritten_names_resolve_to_fxcpp():
    out, _ = run("from torch.fx.graph_module import GraphModule\n")
    ns = {}
    exec(out, ns)
    assert ns["GraphModule"].__module__.startswith("fxcpp")


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__]))

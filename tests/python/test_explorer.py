"""The graph explorer (issue 22) without a browser: grouping, the embedded data,
hostile names, cycles and erased nodes, the diff against torch.fx's own fuse,
and the CLI. The page itself is driven in Chromium by test_explorer_browser.py."""
import json
import os
import re
import subprocess
import sys

import pytest
import torch
import torch.fx

import fxcpp
from fxcpp import _C
from fxcpp.explorer import explore, explore_diff
from fxcpp.passes.shape_prop import ShapeProp

torchvision = pytest.importorskip("torchvision")


def _data(page):
    m = re.search(r'<script type="application/json" id="fxcpp-data">(.*?)</script>', page.html, re.S)
    assert m, "the page embeds its data"
    return json.loads(m.group(1))


def _group_paths(d, parent=0):
    return [d["groups"][-r - 1]["path"] for r in d["groups"][parent]["items"] if r < 0]


@pytest.fixture(scope="module")
def resnet50():
    m = torchvision.models.resnet50().eval()
    gm = fxcpp.symbolic_trace(m)
    ShapeProp(gm).propagate(torch.randn(1, 3, 224, 224))
    return gm


def test_page_is_self_contained(resnet50):
    page = explore(resnet50)
    html = page.html
    assert "<script src" not in html and "<link" not in html and "http://" not in html.replace(
        "http://www.w3.org/2000/svg", "")
    assert "https://" not in html
    d = _data(page)
    assert len(d["nodes"]["name"]) == len(resnet50.graph.nodes)
    # The top level: the stem, the four stages, the head; each stage a group.
    assert _group_paths(d) == ["layer1", "layer2", "layer3", "layer4"]
    layer3 = next(i for i, g in enumerate(d["groups"]) if g["path"] == "layer3")
    assert _group_paths(d, layer3) == [f"layer3.{k}" for k in range(6)]
    # Every node is in exactly one group's items.
    items = [r for g in d["groups"] for r in g["items"] if r >= 0]
    assert sorted(items) == list(range(len(resnet50.graph.nodes)))


def test_functional_nodes_join_their_block(resnet50):
    d = _data(explore(resnet50))
    names = d["nodes"]["name"]
    g = d["nodes"]["group"][names.index("add")]  # layer1.0's residual add (no module of its own)
    assert d["groups"][g]["path"] == "layer1.0"
    assert d["groups"][d["nodes"]["group"][names.index("flatten")]]["path"] == ""


def test_edges_carry_shapes(resnet50):
    d = _data(explore(resnet50))
    labels = {e[3] for g in d["groups"] for e in g["lay"]["edges"]}
    assert "[1, 1024, 14, 14] float32" in labels


def test_layouts_come_from_the_core():
    """The page's per-group layout is _C._layout's for the group's boxes and bundled edges."""
    gm = fxcpp.symbolic_trace(torchvision.models.resnet18())
    page = explore(gm)
    d = _data(page)
    root = d["groups"][0]
    n = len(root["items"]) + 2
    ws = [page.data.size[r][0] for r in root["items"]] + [12, 12]
    hs = [page.data.size[r][1] for r in root["items"]] + [6, 6]
    edges = root["lay"]["edges"]
    ref = _C._layout(ws, hs, [e[0] for e in edges], [e[1] for e in edges])
    assert root["lay"]["layer"] == ref["box_layer"]
    assert root["lay"]["bx"] == [round(x, 1) for x in ref["boxes"]]
    assert len(ref["boxes"]) == 4 * n


def test_torch_fx_graph_and_nn_module_stack():
    """A torch.fx GraphModule: groups from nn_module_stack where torch.fx records it."""
    m = torchvision.models.resnet18().eval()
    gm = torch.fx.symbolic_trace(m)
    d = _data(explore(gm))
    assert _group_paths(d) == ["layer1", "layer2", "layer3", "layer4"]
    d2 = _data(explore(gm.graph))
    assert len(d2["nodes"]["name"]) == len(gm.graph.nodes)


@pytest.mark.skipif(not hasattr(torch, "export"), reason="torch.export needs torch 2.x")
def test_exported_program():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.block = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))

        def forward(self, x):
            return self.block(x) + 1

    ep = torch.export.export(M(), (torch.randn(3, 4),))
    d = _data(explore(ep))
    assert "block" in _group_paths(d)
    assert any(s == "[3, 2]" for s in d["nodes"]["shape"])
    # The relu, block.1's only op, stands for its module: a module box and an outline entry.
    block = next(i for i, g in enumerate(d["groups"]) if g["path"] == "block")
    outline = d["groups"][block]["outline"]
    assert [d["groups"][-r - 1]["path"] if r < 0 else d["nodes"]["module"][r] for r in outline] == \
        ["block.0", "block.1", "block.2"]
    relu = outline[1]
    assert relu >= 0 and d["nodes"]["label"][relu] == "1" and d["nodes"]["h"][relu] == d["groups"][block]["h"]


def test_hostile_names_are_data():
    evil = '</script><script>window.pwned=1</script><img src=x onerror=alert(1)>&amp;'
    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(torch.relu, (x,), {"note": evil})
    g.output(y)
    page = explore(g, name=evil)
    html = page.html
    # The data element is closed once, by the page itself; no tag from the graph survives.
    assert html.count("</script>") == 2
    assert "<img" not in html and "onerror=alert" not in html.split('id="fxcpp-data">')[1].split("</script>")[0] \
        or "\\u003cimg" in html
    d = _data(page)
    assert d["name"] == evil
    assert evil in "".join(s for s in d["nodes"]["kwargs"][1] if isinstance(s, str))
    assert "iframe" in page._repr_html_() and "&lt;/script&gt;" in page._repr_html_()


def test_cycle_and_erased_node():
    g = fxcpp.Graph()
    x = g.placeholder("x")
    a = g.call_function(torch.relu, (x,))
    b = g.call_function(torch.neg, (a,))
    c = g.call_function(torch.sigmoid, (b,))
    g.output(c)
    a.args = (c,)  # a cycle a -> b -> c -> a made by hand
    d = _data(explore(g))
    edges = d["groups"][0]["lay"]["edges"]
    assert sum(e[5] for e in edges) == 1  # one edge reversed to break the cycle
    # An erased node that a live node still names (by hand, through torch.fx).
    tg = torch.fx.Graph()
    tx = tg.placeholder("x")
    ta = tg.call_function(torch.relu, (tx,))
    tb = tg.call_function(torch.neg, (ta,))
    tg.output(tb)
    ta.users.clear()
    tg.erase_node(ta)
    d = _data(explore(tg))
    assert "relu" not in d["nodes"]["name"]
    assert any("not in this graph" in s for s in d["nodes"]["args"][1] if isinstance(s, str))


def test_too_large_graph_is_refused_clearly(monkeypatch):
    """Past the explorer's node budget: a ValueError that says what to do, and the CLI's error line."""
    import fxcpp.explorer as ex
    from fxcpp import cli
    g = fxcpp.Graph()
    v = g.placeholder("x")
    for _ in range(20):
        v = g.call_function(torch.relu, (v,))
    g.output(v)
    monkeypatch.setattr(ex, "MAX_NODES", 10)
    with pytest.raises(ValueError, match=r"22 nodes, more than the explorer draws \(10\).*split_module"):
        explore(g)
    with pytest.raises(ValueError, match="more than the explorer draws"):
        explore_diff(g, g)
    monkeypatch.setattr(cli, "_explore_target", lambda spec, args: g)
    args = cli.build_parser().parse_args(["show", "m:f", "--format", "html", "-o", "x.html"])
    with pytest.raises(cli.CliError, match="more than the explorer draws"):
        cli.cmd_explore(args)


@pytest.mark.skipif(not hasattr(torch, "export"), reason="torch.export needs torch 2.x")
def test_pt2_file(tmp_path):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.block = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())

        def forward(self, x):
            return self.block(x) * 2

    path = str(tmp_path / "m.pt2")
    torch.export.save(torch.export.export(M(), (torch.randn(2, 4),)), path)
    page = explore(path)
    d = _data(page)
    assert d["name"] == "m.pt2"
    assert "block" in _group_paths(d)
    assert "[2, 4]" in d["nodes"]["shape"]


def test_large_flat_graph_is_chunked():
    g = fxcpp.Graph()
    v = g.placeholder("x")
    for i in range(3000):
        v = g.call_function(torch.relu if i % 2 else torch.neg, (v,))
    g.output(v)
    page = explore(g, max_children=50)
    d = _data(page)
    assert max(len(grp["items"]) for grp in d["groups"]) <= 50
    assert len(_group_paths(d)) <= 50
    assert sorted(r for grp in d["groups"] for r in grp["items"] if r >= 0) == list(range(3002))
    assert page.svg().startswith("<svg")


def _fold_bn(model):
    from torch.fx.experimental.optimization import fuse
    return fuse(model)


def test_diff_conv_bn_folding():
    """Before/after torch.fx's conv-bn fuse: exactly the batch norms removed,
    exactly the convolutions changed (their parameters), nothing added."""
    m = torchvision.models.resnet18().eval()
    before = torch.fx.symbolic_trace(m)
    after = _fold_bn(m)
    page = explore_diff(before, after)
    st = page.diff["status"]
    names = [n.name for n in page.data.nodes]
    mods = dict(before.named_modules())
    bns = sorted(n.name for n in before.graph.nodes
                 if n.op == "call_module" and isinstance(mods[n.target], torch.nn.BatchNorm2d))
    convs = sorted(n.name for n in before.graph.nodes
                   if n.op == "call_module" and isinstance(mods[n.target], torch.nn.Conv2d))
    assert sorted(names[i] for i, s in enumerate(st) if s == 2) == bns
    assert sorted(names[i] for i, s in enumerate(st) if s == 3) == convs
    assert not any(s == 1 for s in st)
    assert page.summary["removed"] == len(bns) and page.summary["changed"] == len(convs)
    d = _data(page)
    layer3 = next(i for i, g in enumerate(d["groups"]) if g["path"] == "layer3")
    assert d["diff"]["gchanges"][layer3] > 0


def test_diff_matches_renamed_nodes_by_structure():
    def f(x):
        return torch.sigmoid(torch.relu(x) + 1)

    a = fxcpp.symbolic_trace(f)
    b = fxcpp.symbolic_trace(f)
    for i, n in enumerate(b.graph.nodes):
        if n.op == "call_function":
            n.name = f"renamed_{i}"
    page = explore_diff(a, b)
    assert page.summary["added"] == page.summary["removed"] == page.summary["changed"] == 0
    assert page.summary["matched_by_structure"] == 3


def _svg_size(svg):
    m = re.match(r'<svg [^>]*width="(\d+)" height="(\d+)"', svg)
    return int(m.group(1)), int(m.group(2))


def _fill_share(im, box, fill):
    """The share of a box's inside (its border and corners left out) painted
    exactly `fill`; 0 unless `fill` is its most common colour (text covers the rest)."""
    from collections import Counter
    x0, y0 = int(box.x) + 3, int(box.y) + 3
    x1, y1 = int(box.x + box.w) - 3, int(box.y + box.h) - 3
    rgb = tuple(int(fill[k:k + 2], 16) for k in (1, 3, 5))
    count = Counter(im.getpixel((x, y)) for x in range(x0, x1) for y in range(y0, y1))
    top, n = count.most_common(1)[0]
    return n / sum(count.values()) if top == rgb else 0.0


def test_png_without_a_browser(tmp_path):
    """Pillow paints the SVG's drawing: the same size, each box in its fill
    (the diff's colours, module boxes like groups), no SVG renderer imported."""
    from PIL import Image
    from fxcpp.explorer import _svg
    m = torchvision.models.resnet18().eval()
    before = torch.fx.symbolic_trace(m)
    page = explore_diff(before, _fold_bn(m))
    svg = page.svg(expand=2)
    path = page.png(str(tmp_path / "d.png"), expand=2)
    assert "cairosvg" not in sys.modules
    sc = _svg.scene(page.data, page.diff, expand=2)
    import xml.etree.ElementTree as ET
    root = ET.fromstring(svg)  # well-formed, one <rect> per box of the scene plus the background
    rects = root.findall("{http://www.w3.org/2000/svg}rect")
    assert len(rects) == 1 + sum(isinstance(b, _svg.Box) for b in sc.items)
    assert {r.get("fill") for r in rects} >= {_svg._DIFF[2][0], _svg._DIFF[3][0], _svg.GROUP_FILL}
    with Image.open(path) as im:
        assert im.format == "PNG" and im.mode == "RGB" and im.size == _svg_size(svg)
        im = im.convert("RGB")
        names = [n.name for n in page.data.nodes]
        boxes = {(b.kind, b.ref): b for b in sc.items if isinstance(b, _svg.Box)}
        expect = {
            names.index("layer2_0_bn1"): _svg._DIFF[2][0],     # removed
            names.index("layer2_0_conv1"): _svg._DIFF[3][0],   # changed
            names.index("layer2_0_relu"): _svg.GROUP_FILL,     # an unchanged module
            names.index("add"): _svg.NODE_FILL,                # a function
            names.index("x"): _svg._FILL["placeholder"],
        }
        fills = set()
        for i, fill in expect.items():
            box = boxes.get(("module", i)) or boxes[("node", i)]
            assert box.fill == fill
            assert _fill_share(im, box, fill) > 0.3, names[i]
            fills.add(fill)
        assert len(fills) == len(expect)
        folded = next(b for b in sc.items if isinstance(b, _svg.Box) and b.kind == "group")
        assert _fill_share(im, folded, _svg.GROUP_FILL) > 0.3
    # scale: twice the size, the same drawing.
    page2 = explore(before)
    with Image.open(page2.png(str(tmp_path / "r.png"), scale=2)) as im:
        w, h = _svg_size(page2.svg())
        assert abs(im.size[0] - 2 * w) <= 1 and abs(im.size[1] - 2 * h) <= 1


def test_large_graph_png_fits(tmp_path, monkeypatch):
    """A drawing larger than the PNG pixel budget is scaled down to fit, not refused."""
    from PIL import Image
    from fxcpp.explorer import _png
    g = fxcpp.Graph()
    v = g.placeholder("x")
    for _ in range(400):
        v = g.call_function(torch.relu, (v,))
    g.output(v)
    page = explore(g)
    w, h = _svg_size(page.svg(expand=5))
    monkeypatch.setattr(_png, "MAX_PIXELS", w * h // 4)
    with Image.open(page.png(str(tmp_path / "big.png"), expand=5)) as im:
        assert im.size[0] * im.size[1] <= w * h // 4 and im.size[0] >= w // 2 - 1


def test_modules_read_like_the_model(resnet50):
    """The first view of resnet50: its top-level modules in order, each a
    box of the group kind (call_module nodes sized and drawn like folded groups)."""
    from fxcpp.explorer import _model, _svg
    page = explore(resnet50)
    d = _data(page)
    top = []
    for r in d["groups"][0]["items"]:
        if r < 0:
            top.append(d["groups"][-r - 1]["path"])
            assert d["groups"][-r - 1]["h"] == _model.GROUP_H
        elif d["nodes"]["op"][r] == "call_module":
            top.append(d["nodes"]["target"][r])
            assert d["nodes"]["h"][r] == _model.GROUP_H
    assert top == ["conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4", "avgpool", "fc"]
    # The outline: the same, then each block's modules once each (relu is called three times).
    outline = d["groups"][0]["outline"]
    assert [d["groups"][-r - 1]["path"] if r < 0 else d["nodes"]["module"][r] for r in outline] == top
    block = next(g for g in d["groups"] if g["path"] == "layer1.0")
    assert [d["groups"][-r - 1]["path"] if r < 0 else d["nodes"]["module"][r] for r in block["outline"]] == \
        [f"layer1.0.{m}" for m in ("conv1", "bn1", "relu", "conv2", "bn2", "conv3", "bn3", "downsample")]
    sc = _svg.scene(page.data)
    kinds = {b.kind for b in sc.items if isinstance(b, _svg.Box) and (b.kind == "group" or b.kind == "module")}
    assert kinds == {"group", "module"}
    mod = [b for b in sc.items if isinstance(b, _svg.Box) and b.kind in ("group", "module")]
    assert {(b.fill, b.stroke, b.rx, b.h) for b in mod} == {(_svg.GROUP_FILL, _svg.GROUP_STROKE, 6.0, _model.GROUP_H)}


def _cli(*args, cwd):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "fxcpp", *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=300)


def test_cli_html_svg_png_and_diff(tmp_path):
    r = _cli("show", "torchvision.models:resnet18", "--format", "html", "--input-shape", "1,3,224,224",
             "-o", str(tmp_path / "g.html"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "[1, 512, 7, 7]" in (tmp_path / "g.html").read_text()
    r = _cli("show", "torchvision.models:resnet18", "--format", "svg", "--expand", "1", "-o", str(tmp_path / "g.svg"),
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    svg = (tmp_path / "g.svg").read_text()
    assert svg.startswith("<svg") and "layer1_0_conv1" not in svg and "\u25be layer1" in svg
    r = _cli("show", "torchvision.models:resnet18", "--format", "png", "--expand", "1", "-o", str(tmp_path / "g.png"),
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    from PIL import Image
    with Image.open(tmp_path / "g.png") as im:
        assert im.format == "PNG" and im.size == _svg_size(svg)
    r = _cli("show", "--diff", "torchvision.models:resnet18", "-o", str(tmp_path / "d.html"), cwd=tmp_path)
    assert r.returncode == 2 and "two graphs" in r.stderr
    (tmp_path / "pair.py").write_text(
        "import torch\n"
        "class A(torch.nn.Module):\n"
        "    def forward(self, x):\n        return torch.relu(x) + 1\n"
        "class B(torch.nn.Module):\n"
        "    def forward(self, x):\n        return torch.relu(x) * 2\n")
    r = _cli("show", "--diff", "pair:A", "pair:B", "-o", str(tmp_path / "d.html"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "1 added, 1 removed, 0 changed" in r.stderr  # add -> mul; the output now reads its replacement


def test_fxpt_file_groups_lowered_ops(tmp_path):
    """A lowered graph (.fxpt) has no module calls: ops join the module owning
    the parameters they read, the others their producer's module."""
    from fxcpp import aten
    m = torchvision.models.resnet18().eval()
    lowered = aten.lower(fxcpp.symbolic_trace(m), torch.randn(1, 3, 64, 64))
    path = str(tmp_path / "r18.fxpt")
    aten.save(lowered, path)
    page = explore(path)
    d = _data(page)
    assert _group_paths(d) == ["conv1", "bn1", "layer1", "layer2", "layer3", "layer4", "fc"]
    names = d["nodes"]["name"]
    grp = d["nodes"]["group"]
    adds = [i for i, n in enumerate(names) if n.startswith("add")]
    assert d["groups"][grp[adds[0]]]["path"] == "layer1.0"
    conv = d["nodes"]["target"].index("aten.conv2d.default")
    assert d["groups"][grp[conv]]["path"] == "conv1"
    assert "float32" in {d["nodes"]["dtype"][i] for i in range(len(names))}


def test_diff_fxcpp_against_torch_fx():
    """fxcpp's trace against torch.fx's of the same model: the same graph."""
    m = torchvision.models.mobilenet_v3_small().eval()
    page = explore_diff(torch.fx.symbolic_trace(m), fxcpp.symbolic_trace(m))
    s = page.summary
    assert (s["added"], s["removed"], s["changed"]) == (0, 0, 0)
    assert s["matched_by_name"] + s["matched_by_structure"] == len(fxcpp.symbolic_trace(m).graph.nodes)


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(name=st.text(max_size=40), value=st.text(max_size=60))
def test_any_text_round_trips_as_data(name, value):
    """Whatever a title or an argument holds (markup, quotes, lone surrogates,
    U+2028), the embedded data has no '<' and parses back to the same text."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_function(torch.relu, (x,), {"k": value}))
    page = explore(g, name=name)
    body = page.html.split('id="fxcpp-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in body and ">" not in body
    d = _data(page)
    assert d["name"] == (name or "graph")
    segs = d["nodes"]["kwargs"][1]
    assert "".join(s for s in segs if isinstance(s, str)) == "{k: " + repr(value) + "}"


def test_bench_lowered_transformer_is_lowered():
    """bench/bench_explorer.py's 10,000-node transformer stack is ATen-level:
    the graph fxcpp.aten.lower gives for the stack (checked on 2 blocks), every
    call an ATen overload or a shape primitive, grouped by block in the explorer."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
    try:
        import bench_explorer as B
    finally:
        sys.path.pop(0)
    assert B.stack_matches_lowering(2)
    g = B.lowered_transformer(1000)
    calls = [n for n in g.nodes if n.op == "call_function"]
    assert not [n for n in g.nodes if n.op in ("call_module", "call_method")]
    assert all(isinstance(n.target, torch._ops.OpOverload) or getattr(n.target, "__module__", "") in
               ("_operator", "operator", "builtins") for n in calls)
    assert sum(isinstance(n.target, torch._ops.OpOverload) for n in calls) > len(calls) // 2
    d = _data(explore(g))
    paths = [p for grp in d["groups"] for p in [grp["path"]] if p.count(".") == 0 and p]
    assert {"0", "1"} <= set(paths)


def test_readme_shows_the_screenshots():
    """The README shows the browser tests' screenshots of each state (top level,
    layer3, search, diff), and each is a PNG in docs/explorer."""
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    shots = re.findall(r"!\[[^\]]*\]\((docs/explorer/[^)]+\.png)\)", readme)
    assert {os.path.basename(s) for s in shots} >= {"resnet50_top.png", "resnet50_layer3.png",
                                                    "resnet50_search.png", "resnet18_diff.png"}
    for s in shots:
        with open(os.path.join(root, s), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n", s

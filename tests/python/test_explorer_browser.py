"""The graph explorer's page in a real headless Chromium (Debian's chromium and
chromium-driver, driven by Selenium): resnet50's top level, expanding layer3,
search and details, the conv-bn diff, hostile names, no console errors.
Screenshots of these states go to $FXCPP_EXPLORER_SHOTS when it is set (the
README's pictures in docs/explorer/ are made that way)."""
import os
import shutil

import pytest
import torch
import torch.fx

import fxcpp
from fxcpp.explorer import explore, explore_diff
from fxcpp.passes.shape_prop import ShapeProp

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
torchvision = pytest.importorskip("torchvision")
from selenium.webdriver.common.by import By  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="chromium and chromium-driver are not installed "
                                                                   "(Debian: apt-get install chromium chromium-driver)")
SHOTS = os.environ.get("FXCPP_EXPLORER_SHOTS")


@pytest.fixture(scope="module")
def browser():
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    o = Options()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,900",
              "--disable-dev-shm-usage"):
        o.add_argument(a)
    o.binary_location = CHROMIUM
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # Chromium never runs under the sanitizer runtimes a test process may preload.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    d = webdriver.Chrome(service=Service(DRIVER, env=env), options=o)
    d.set_page_load_timeout(60)
    yield d
    d.quit()


def _open(browser, page, tmp_path, name):
    path = tmp_path / f"{name}.html"
    page.save(str(path))
    browser.get("file://" + str(path))
    assert browser.execute_script("return document.body.getAttribute('data-ready')") == "1"
    return browser


def _errors(browser):
    return [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def _shot(browser, name):
    if SHOTS:
        os.makedirs(SHOTS, exist_ok=True)
        browser.save_screenshot(os.path.join(SHOTS, name + ".png"))


def _group_labels(browser):
    return [e.get_attribute("textContent")[2:]
            for e in browser.find_elements(By.CSS_SELECTOR, "#viewport .group > text.name")]


@pytest.fixture(scope="module")
def resnet50():
    gm = fxcpp.symbolic_trace(torchvision.models.resnet50().eval())
    ShapeProp(gm).propagate(torch.randn(1, 3, 224, 224))
    return gm


def test_resnet50_top_level_expand_search(browser, resnet50, tmp_path):
    b = _open(browser, explore(resnet50), tmp_path, "resnet50")
    assert _group_labels(b) == ["layer1", "layer2", "layer3", "layer4"]
    assert b.find_element(By.ID, "banner").text == ""
    # The first view reads like the model: its top-level modules in order, the
    # single-module ones (conv1, avgpool, fc, ...) boxes of the same kind as layer1..layer4.
    top = b.execute_script("""
        var out = [];
        document.querySelectorAll('#viewport > .level > .boxes > .group, ' +
                                  '#viewport > .level > .boxes > .node.module')
          .forEach(function (e) {
            var r = e.querySelector('rect'), cs = getComputedStyle(r);
            out.push([e.getBoundingClientRect().top,
                      e.querySelector('text.name').textContent.replace(/^[\u25b8\u25be] /, ''),
                      cs.fill, cs.stroke, r.getAttribute('height'), r.getAttribute('rx')]);
          });
        return out.sort(function (a, b) { return a[0] - b[0]; });""")
    assert [t[1] for t in top] == ["conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4",
                                   "avgpool", "fc"]
    assert len({tuple(t[2:]) for t in top}) == 1, top
    outline = [e.text for e in b.find_elements(By.CSS_SELECTOR, "#outline > ul > li > a")]
    assert outline == [t[1] for t in top]
    _shot(b, "resnet50_top")
    # Expanding layer3 by a click on its box shows its six blocks.
    b.find_element(By.CSS_SELECTOR, "#viewport .group.folded[data-group] > text.name").click()  # layer1 first
    labels = _group_labels(b)
    assert labels[:1] == ["layer1"] and "0" in labels
    b.find_element(By.CSS_SELECTOR, "#viewport .group.open > text.name").click()  # fold layer1 again
    assert _group_labels(b) == ["layer1", "layer2", "layer3", "layer4"]
    layer3 = [e for e in b.find_elements(By.CSS_SELECTOR, "#viewport .group > text.name") if e.get_attribute("textContent").endswith("layer3")]
    layer3[0].click()
    assert _group_labels(b) == ["layer1", "layer2", "layer3", "0", "1", "2", "3", "4", "5", "layer4"]
    _shot(b, "resnet50_layer3")
    # Search selects the node (expanding what holds it) and the details show its shape.
    box = b.find_element(By.ID, "search")
    box.send_keys("layer4_2_conv3\n")
    assert b.find_element(By.CSS_SELECTOR, "#details h3").text == "layer4_2_conv3"
    assert b.find_element(By.CSS_SELECTOR, "#details td[data-key=shape]").text == "[1, 2048, 7, 7]"
    assert b.find_element(By.CSS_SELECTOR, "#details td[data-key=dtype]").text == "float32"
    sel = b.find_elements(By.CSS_SELECTOR, "#viewport .node.selected")
    assert len(sel) == 1 and "layer4_2_conv3" in sel[0].get_attribute("textContent")
    # Argument links jump to the producer.
    b.find_element(By.CSS_SELECTOR, "#details td[data-key=args] a").click()
    assert b.find_element(By.CSS_SELECTOR, "#details h3").text == "layer4_2_relu_1"
    _shot(b, "resnet50_search")
    # Keyboard: zoom and fit change the view transform.
    t0 = b.find_element(By.ID, "viewport").get_attribute("transform")
    b.find_element(By.TAG_NAME, "body").send_keys("+")
    assert b.find_element(By.ID, "viewport").get_attribute("transform") != t0
    assert _errors(b) == []


def test_diff_resnet18_conv_bn_folding(browser, tmp_path):
    from torch.fx.experimental.optimization import fuse
    m = torchvision.models.resnet18().eval()
    before = torch.fx.symbolic_trace(m)
    page = explore_diff(before, fuse(m))
    b = _open(browser, page, tmp_path, "diff")
    mods = dict(before.named_modules())
    bns = sorted(n.name for n in before.graph.nodes
                 if n.op == "call_module" and isinstance(mods[n.target], torch.nn.BatchNorm2d))
    convs = sorted(n.name for n in before.graph.nodes
                   if n.op == "call_module" and isinstance(mods[n.target], torch.nn.Conv2d))
    summary = b.find_element(By.ID, "summary").text
    assert summary == f"0 added, {len(bns)} removed, {len(convs)} changed"
    # Folded stages containing changes are marked.
    flagged = [e.find_element(By.CSS_SELECTOR, "text.name").get_attribute("textContent")[2:]
               for e in b.find_elements(By.CSS_SELECTOR, "#viewport .group.haschanges")]
    assert flagged == ["layer1", "layer2", "layer3", "layer4"]
    for p in ("layer1", "layer2", "layer3", "layer4"):
        b.execute_script(f"fxcppExplorer.toggle({p!r})")
    for g in b.execute_script("return fxcppExplorer.groupPaths()"):
        if g.count(".") == 1 or g.endswith("downsample"):
            b.execute_script(f"fxcppExplorer.toggle({g!r})")

    def names(cls):
        return sorted(e.get_attribute("textContent").split(" ")[0] for e in
                      b.find_elements(By.CSS_SELECTOR, f"#viewport .node.{cls} text.name"))

    assert names("removed") == bns
    assert names("changed") == convs
    assert names("added") == []
    b.find_element(By.ID, "search").send_keys("layer2_0_conv1\n")
    assert b.find_element(By.CSS_SELECTOR, "#details td[data-key=diff]").text == \
        "changed: module configuration or parameters differ"
    b.find_element(By.ID, "search").clear()
    b.find_element(By.ID, "search").send_keys("layer2_0_bn1\n")
    assert b.find_element(By.CSS_SELECTOR, "#details td[data-key=diff]").text == "removed"
    b.execute_script("fxcppExplorer.toggle('layer1'); fxcppExplorer.toggle('layer1')")
    _shot(b, "resnet18_diff")
    assert _errors(b) == []


def test_script_names_are_text(browser, tmp_path):
    evil = '</script><script>window.pwned=1</script><img src=x onerror="window.pwned=2">'
    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(torch.relu, (x,), {"note": evil})
    g.output(y)
    m = torch.nn.Module()
    gm = torch.fx.GraphModule(m, g)
    page = explore(gm, name=evil)
    b = _open(browser, page, tmp_path, "evil")
    assert b.execute_script("return window.pwned === undefined")
    assert b.find_element(By.ID, "title").text == evil
    b.find_element(By.ID, "search").send_keys("relu\n")
    assert evil in b.find_element(By.CSS_SELECTOR, "#details td[data-key=kwargs]").text
    assert b.execute_script("return window.pwned === undefined")
    assert b.find_elements(By.TAG_NAME, "img") == []
    assert _errors(b) == []


def test_cycle_and_large_graph(browser, tmp_path):
    g = fxcpp.Graph()
    x = g.placeholder("x")
    a = g.call_function(torch.relu, (x,))
    c = g.call_function(torch.neg, (a,))
    g.output(c)
    a.args = (c,)
    b = _open(browser, explore(g), tmp_path, "cycle")
    assert len(b.find_elements(By.CSS_SELECTOR, "#viewport .node")) == 4
    assert b.find_element(By.ID, "banner").text == ""
    assert _errors(b) == []
    # An erased node that a live node still names: drawn without it, the reader's details say so.
    tg = torch.fx.Graph()
    tx = tg.placeholder("x")
    ta = tg.call_function(torch.relu, (tx,))
    tb = tg.call_function(torch.neg, (ta,))
    tg.output(tb)
    ta.users.clear()
    tg.erase_node(ta)
    b = _open(browser, explore(tg), tmp_path, "erased")
    drawn = [e.get_attribute("data-node") for e in b.find_elements(By.CSS_SELECTOR, "#viewport .node")]
    assert len(drawn) == 3
    b.find_element(By.ID, "search").send_keys("neg\n")
    assert "relu (not in this graph)" in b.find_element(By.CSS_SELECTOR, "#details td[data-key=args]").text
    assert _errors(b) == []


def test_1e5_nodes(browser, tmp_path):
    """A 100,000-node chain-and-branch graph opens folded in chunks (a drawing,
    not a hung page); expanding one chunk draws it."""
    g = fxcpp.Graph()
    v = g.placeholder("x")
    while len(g.nodes) < 100_000:
        w = g.call_function(torch.relu, (v,))
        v = g.call_function(torch.add, (v, w)) if len(g.nodes) % 3 else w
    g.output(v)
    n = len(g.nodes)
    b = _open(browser, explore(g), tmp_path, "big")
    assert b.find_element(By.ID, "stats").text.startswith(f"{n} nodes")
    chunks = b.find_elements(By.CSS_SELECTOR, "#viewport .group.folded")
    assert 1 < len(chunks) <= 120
    first = b.execute_script("return fxcppExplorer.groupPaths()")[1]
    assert b.execute_script(f"return fxcppExplorer.toggle({first!r})") >= 0
    assert len(b.find_elements(By.CSS_SELECTOR, "#viewport .group.open")) == 1
    assert _errors(b) == []


def test_console_errors_are_seen(browser, tmp_path):
    """The harness's no-error checks can fail: an uncaught error in the page
    reaches the browser log and the page's banner."""
    g = torch.fx.Graph()
    g.output(g.placeholder("x"))
    b = _open(browser, explore(g), tmp_path, "probe")
    assert _errors(b) == []
    b.execute_script("setTimeout(function () { throw new Error('probe-error'); }, 0)")
    import time
    for _ in range(50):
        errs = _errors(b)
        if errs:
            break
        time.sleep(0.1)
    assert any("probe-error" in e["message"] for e in errs)
    assert b.find_element(By.ID, "banner").text.startswith("fxcpp explorer error")

"""Memory-mapped weights (issue 25, item 3; Note [Memory-mapped weights] in
src/torch/zip_reader.cpp): loading a file raises resident memory by far less
than its weights, each load of a file maps it privately, outputs do not
change, a buffer the model mutates is each module's own and never reaches the
file. .fxpt on every torch; .pt2 (torch.export.save) on torch 2.x.

Resident memory is measured in a fresh interpreter (VmRSS of
/proc/self/status around the load), compared generously (a quarter of the
weights), with a load with mmap=False in the same way as the control that
shows the measurement sees a copy.
"""
import os
import subprocess
import sys

import pytest
import torch

import fxcpp.aten
from fxcpp import _torch_compat

needs_export = pytest.mark.skipif(_torch_compat.TORCH_VERSION < (2, 5),
                                  reason='torch.export.save writes .pt2 archives from torch 2.5 on; this torch '
                                         f'is {torch.__version__}')

WEIGHT_BYTES = 64 << 20  # one 4096 x 4096 float32 weight


class Big(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4096, 4096, bias=False)

    def forward(self, x):
        return torch.relu(self.lin(x))


class Counter(torch.nn.Module):
    """A model that mutates a buffer (its calls), as export writes it back."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer('calls', torch.zeros(4))

    def forward(self, x):
        self.calls.add_(1)
        return self.lin(x) + self.calls


def _fxpt(tmp_path, model, *args, name='m'):
    path = str(tmp_path / f'{name}.fxpt')
    fxcpp.aten.save(fxcpp.aten.lower(model.eval(), *args), path)
    return path


def _counter_fxpt(tmp_path, model, x, name='counter'):
    """Counter as a lowered graph that adds to its buffer in place (aten.add_ on the get_attr)."""
    import fxcpp
    g = fxcpp.Graph()
    inp = g.placeholder('x')
    calls = g.get_attr('calls')
    g.call_function(torch.ops.aten.add_.Tensor, (calls, 1))
    lin = g.call_function(torch.ops.aten.linear.default, (inp, g.get_attr('lin.weight'), g.get_attr('lin.bias')))
    g.output(g.call_function(torch.ops.aten.add.Tensor, (lin, calls)))
    path = str(tmp_path / f'{name}.fxpt')
    fxcpp.aten.save(fxcpp.GraphModule(model, g), path)
    return path


def _pt2(tmp_path, model, *args, name='m'):
    path = str(tmp_path / f'{name}.pt2')
    torch.export.save(torch.export.export(model.eval(), args), path)
    return path


@pytest.fixture(scope='module')
def big_files(tmp_path_factory):
    d = tmp_path_factory.mktemp('mmap')
    torch.manual_seed(0)
    m = Big()
    x = torch.randn(2, 4096)
    files = {'fxpt': _fxpt(d, m, x)}
    if _torch_compat.TORCH_VERSION >= (2, 5):
        files['pt2'] = _pt2(d, m, x)
    return files


_RSS_SCRIPT = r'''
import sys, fxcpp.aten
def rss():
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) * 1024
path, runtime, mmap = sys.argv[1], sys.argv[2], sys.argv[3] == '1'
before = rss()
m = fxcpp.aten.load(path, runtime=runtime, mmap=mmap)
print(rss() - before)
'''


def _rss_growth(path, runtime, mmap):
    # The interpreter has imported torch and fxcpp before `before` is taken.
    r = subprocess.run([sys.executable, '-c', _RSS_SCRIPT, path, runtime, '1' if mmap else '0'],
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr
    return int(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize('fmt', ['fxpt', pytest.param('pt2', marks=needs_export)])
@pytest.mark.parametrize('runtime', ['cpp', 'python'])
def test_loading_does_not_read_the_weights_into_memory(big_files, fmt, runtime):
    path = big_files[fmt]
    assert os.path.getsize(path) > WEIGHT_BYTES
    mapped = _rss_growth(path, runtime, True)
    copied = _rss_growth(path, runtime, False)
    assert copied > WEIGHT_BYTES // 2, f'the control (mmap=False) grew by {copied} bytes only'
    assert mapped < WEIGHT_BYTES // 4, f'loading {fmt} ({runtime}) mapped grew resident memory by {mapped} bytes'


@pytest.mark.parametrize('fmt', ['fxpt', pytest.param('pt2', marks=needs_export)])
def test_each_load_maps_its_own_pages_and_gives_the_same_outputs(big_files, fmt):
    """Note [Weights no program can write for another]: loads map the file privately."""
    path = big_files[fmt]
    a = fxcpp.aten.load(path, runtime='cpp')
    b = fxcpp.aten.load(path, runtime='python')
    c = fxcpp.aten.load(path, runtime='cpp', mmap=False)
    (name, wa), = a.state_dict().items()
    wb = dict(b.state_dict())[name]
    wc = c.state_dict()[name]
    assert wa.data_ptr() != wb.data_ptr()
    assert wa.data_ptr() != wc.data_ptr()
    assert torch.equal(wa, wc) and torch.equal(wb, wc)
    x = torch.randn(2, 4096)  # the .pt2 program was exported at batch 2, static
    with torch.no_grad():
        want = Big_like(wc)(x)
        assert torch.equal(a(x), c(x))
        assert torch.equal(b(x), c(x))
        torch.testing.assert_close(a(x), want)


def Big_like(weight):
    m = Big()
    with torch.no_grad():
        m.lin.weight.copy_(weight)
    return m.eval()


@pytest.mark.parametrize('fmt', ['fxpt', pytest.param('pt2', marks=needs_export)])
@pytest.mark.parametrize('runtime', ['cpp', 'python'])
def test_a_mutated_buffer_is_each_modules_own_and_leaves_the_file(tmp_path, fmt, runtime):
    torch.manual_seed(0)
    x = torch.randn(2, 4)
    path = (_counter_fxpt if fmt == 'fxpt' else _pt2)(tmp_path, Counter(), x)
    with open(path, 'rb') as f:
        before = f.read()
    state = fxcpp.aten.load(path, runtime='python', mmap=False).state_dict()

    def eager():
        r = Counter().eval()
        r.load_state_dict(state)
        return r

    a = fxcpp.aten.load(path, runtime=runtime)
    b = fxcpp.aten.load(path, runtime=runtime)
    ra, rb = eager(), eager()
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(a(x), ra(x))
        torch.testing.assert_close(b(x), rb(x))
    calls = lambda m: dict(m.named_buffers())['calls']  # noqa: E731
    assert torch.equal(calls(a), state['calls'] + 3)
    assert torch.equal(calls(b), state['calls'] + 1)
    assert torch.equal(calls(fxcpp.aten.load(path, runtime=runtime)), state['calls'])
    with open(path, 'rb') as f:
        assert f.read() == before, 'running a mapped module changed its file'


def test_writing_into_a_loaded_parameter_leaves_the_file(tmp_path):
    torch.manual_seed(0)
    x = torch.randn(2, 4)
    path = _fxpt(tmp_path, Counter(), x)
    with open(path, 'rb') as f:
        before = f.read()
    gm = fxcpp.aten.load(path, runtime='python')
    with torch.no_grad():
        for p in gm.parameters():
            p.add_(1)
    with open(path, 'rb') as f:
        assert f.read() == before
    fresh = fxcpp.aten.load(path, mmap=False)
    for name, p in fresh.named_parameters():
        assert torch.equal(p + 1, dict(gm.named_parameters())[name])


def test_a_file_truncated_after_a_load_with_mmap_off_still_runs(tmp_path):
    torch.manual_seed(0)
    x = torch.randn(2, 4)
    path = _fxpt(tmp_path, Big_small(), x)
    ref = fxcpp.aten.load(path, runtime='cpp', mmap=False)
    m = fxcpp.aten.load(path, runtime='cpp', mmap=False)
    want = ref(x)
    os.truncate(path, 0)
    torch.testing.assert_close(m(x), want)


def Big_small():
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())


def test_a_missing_file_is_an_oserror_either_way(tmp_path):
    for mmap in (True, False):
        with pytest.raises(OSError):
            fxcpp.aten.load(str(tmp_path / 'nope.fxpt'), mmap=mmap)

"""Writing .pt2 archives that torch.export.load reads (issue 25, item 2).

Differential: a program exported by torch.export becomes an fxcpp GraphModule
(fxcpp.aten.from_exported_program), fxcpp's C++ writer saves it as .pt2, and
torch.export.load's program gives the same outputs as the original
``ep.module()`` (rtol = atol = 1e-4), at two batch sizes where the export is
dynamic; fxcpp's own loader reads the archive too. Needs torch.export (torch
2.x); the 1.13 leg skips the module.
"""
import zipfile

import pytest
import torch

from fxcpp import _torch_compat

pytestmark = pytest.mark.skipif(_torch_compat.EXPORT_SAVE is None,
                                reason='torch.export.save/load (.pt2 archives) need torch 2.5 or newer; this torch '
                                       f'is {torch.__version__}')

import fxcpp  # noqa: E402
import fxcpp.aten  # noqa: E402

from test_pt2 import TOL, LinConvRelu, MultiOut, WithBuffer, WithConstant, _close  # noqa: E402
from gpt2 import GPT2Decoder  # noqa: E402 -- examples/gpt2.py

try:
    import torchvision
except ImportError:  # pragma: no cover
    torchvision = None


def _roundtrip(tmp_path, model, args, arg_sets, dynamic_shapes=None, decompose=False, trusted=False, name='m'):
    """Exports `model`, converts, writes .pt2 with fxcpp, reads it back with torch and with fxcpp,
    and compares all against ep.module() for each set of inputs. Returns (gm, path)."""
    model.eval()
    ep = torch.export.export(model, args, dynamic_shapes=dynamic_shapes)
    if decompose:
        ep = ep.run_decompositions()
    gm = fxcpp.aten.from_exported_program(ep)
    assert isinstance(gm, fxcpp.GraphModule)
    path = str(tmp_path / f'{name}.pt2')
    fxcpp.aten.save(gm, path)
    back = torch.export.load(path)
    assert isinstance(back, torch.export.ExportedProgram)
    ref, theirs = ep.module(), back.module()
    mine = fxcpp.aten.load(path, runtime='cpp', trusted=trusted)
    for a in arg_sets:
        with torch.no_grad():
            want = ref(*a)
            _close(gm(*a), want)
            _close(theirs(*a), want)
            _close(mine(*a), want)
    return gm, path, back


def test_small_model_and_archive_layout(tmp_path):
    x = torch.randn(2, 3, 6, 6)
    gm, path, back = _roundtrip(tmp_path, LinConvRelu(), (x,), [(x,)])
    assert 'torch.ops.aten.conv2d.default' in gm.code
    names = [n[n.index('/') + 1:] for n in zipfile.ZipFile(path).namelist()]
    for record in ('archive_format', 'byteorder', 'models/model.json', 'data/weights/model_weights_config.json',
                   'data/constants/model_constants_config.json', 'data/sample_inputs/model.pt'):
        assert record in names
    # Nothing pickled: the sample inputs record is empty, every other record is JSON, text or raw bytes.
    with zipfile.ZipFile(path) as z:
        sample = [n for n in z.namelist() if n.endswith('sample_inputs/model.pt')][0]
        assert z.read(sample) == b''
    assert back.example_inputs is None
    # Parameters come back as parameters.
    assert {n for n, _ in back.named_parameters()} == {'conv.weight', 'conv.bias', 'lin.weight', 'lin.bias'}


def test_dynamic_batch(tmp_path):
    class Reshape(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(6, 4)

        def forward(self, x):
            n = x.shape[0]
            return self.lin(x).reshape(n * 2, -1).relu(), x.sum(0)

    b = torch.export.Dim('b', min=1, max=64)
    for decompose in (False, True):
        _, _, back = _roundtrip(tmp_path, Reshape(), (torch.randn(4, 6),), [(torch.randn(1, 6),), (torch.randn(7, 6),)],
                                dynamic_shapes=({0: b},), decompose=decompose, name=f'r{decompose}')
        assert [(r.lower, r.upper) for r in back.range_constraints.values()] == [(1, 64)]


def test_buffers_constants_and_nested_outputs(tmp_path):
    x = torch.randn(2, 3)
    _roundtrip(tmp_path, WithConstant(), (x,), [(x,)], name='c')
    a = (torch.randn(3, 4), torch.randn(3, 4))
    for decompose in (False, True):
        _roundtrip(tmp_path, MultiOut(), a, [a], decompose=decompose, name=f'o{decompose}')


@pytest.mark.parametrize('decompose', [False, True])
def test_buffer_mutation(tmp_path, decompose):
    # In place (training IR) or a BUFFER_MUTATION output (decomposed): torch's program counts like the original.
    model = WithBuffer().eval()
    ep = torch.export.export(model, (torch.randn(3, 4),))
    if decompose:
        ep = ep.run_decompositions()
    path = str(tmp_path / 'b.pt2')
    fxcpp.aten.save(fxcpp.aten.from_exported_program(ep), path)
    back = torch.export.load(path)
    if decompose:
        assert any(s.kind.name == 'BUFFER_MUTATION' for s in back.graph_signature.output_specs)
    ref, theirs = ep.module(), back.module()
    x = torch.randn(3, 4)
    for _ in range(2):
        with torch.no_grad():
            torch.testing.assert_close(theirs(x), ref(x), **TOL)
    torch.testing.assert_close(theirs.calls, ref.calls)


@pytest.mark.skipif(torchvision is None, reason='torchvision is not installed')
def test_resnet18_dynamic_batch(tmp_path):
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    b = torch.export.Dim('batch', min=1, max=16)
    _roundtrip(tmp_path, model, (torch.randn(2, 3, 64, 64),), [(torch.randn(1, 3, 64, 64),), (torch.randn(3, 3, 64, 64),)],
               dynamic_shapes=({0: b},))


def test_transformer_encoder_dynamic_batch(tmp_path):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    b = torch.export.Dim('b', min=1, max=8)
    _roundtrip(tmp_path, model, (torch.randn(2, 5, 16),), [(torch.randn(1, 5, 16),), (torch.randn(3, 5, 16),)],
               dynamic_shapes=({0: b},), trusted=True)


def test_gpt2_style_decoder_dynamic_batch_and_length(tmp_path):
    torch.manual_seed(0)
    b, t = torch.export.Dim('b', min=1, max=8), torch.export.Dim('t', min=2, max=15)
    _roundtrip(tmp_path, GPT2Decoder(), (torch.randint(0, 50, (2, 8)),),
               [(torch.randint(0, 50, (1, 5)),), (torch.randint(0, 50, (3, 15)),)], dynamic_shapes=({0: b, 1: t},))


def test_edited_graph_saves(tmp_path):
    # Editable: retarget relu to gelu (same metadata), save, torch runs the edit.
    x = torch.randn(2, 3, 6, 6)
    ep = torch.export.export(LinConvRelu().eval(), (x,))
    gm = fxcpp.aten.from_exported_program(ep)
    for n in gm.graph.nodes:
        if n.target is torch.ops.aten.relu.default:
            n.target = torch.ops.aten.gelu.default
    gm.recompile()
    path = str(tmp_path / 'e.pt2')
    fxcpp.aten.save(gm, path)
    back = torch.export.load(path)
    assert any(n.target is torch.ops.aten.gelu.default for n in back.graph.nodes)
    with torch.no_grad():
        torch.testing.assert_close(back.module()(x), gm(x), **TOL)
        assert not torch.allclose(back.module()(x), ep.module()(x))


def test_fxpt_fixture_round_trip(tmp_path):
    # A committed .fxpt fixture (static shapes, ShapeProp metadata, size arithmetic folded):
    # .fxpt -> .pt2 -> torch.export.load and fxcpp's load, equal to the .fxpt's run.
    import os
    fixture = os.path.join(os.path.dirname(__file__), '..', 'cpp_torch', 'fixtures', 'small_v1.fxpt')
    gm = fxcpp.aten.load(fixture)
    x = torch.randn(1, 3, 8, 8)
    path = str(tmp_path / 'small.pt2')
    fxcpp.aten.save(gm, path)
    with torch.no_grad():
        want = gm(x)
        _close(torch.export.load(path).module()(x), want)
        _close(fxcpp.aten.load(path, runtime='cpp')(x), want)
        _close(fxcpp.aten.load(path)(x), want)


@pytest.mark.parametrize('name', ['convnet', 'functional'])
def test_pt2_fixture_round_trip(tmp_path, name):
    # The committed archives torch.export.save wrote: loaded by fxcpp, written back by fxcpp,
    # loaded by torch: the same outputs as torch's load of the original (two batch sizes,
    # buffer mutations carried over call after call).
    import os
    src = os.path.join(os.path.dirname(__file__), '..', 'cpp_torch', 'fixtures', 'pt2', f'{name}.pt2')
    path = str(tmp_path / f'{name}.pt2')
    fxcpp.aten.save(fxcpp.aten.load(src), path)
    ref, theirs = torch.export.load(src).module(), torch.export.load(path).module()
    torch.manual_seed(0)
    if name == 'convnet':  # dynamic batch
        arg_sets = [(torch.randn(1, 3, 8, 8),), (torch.randn(3, 3, 8, 8),)]
    else:
        arg_sets = [(torch.randn(3, 4), torch.randn(3, 2)) for _ in range(2)]
    for a in arg_sets:
        with torch.no_grad():
            _close(theirs(*a), ref(*a))
    for (n, a), (m, b) in zip(sorted(ref.named_buffers()), sorted(theirs.named_buffers())):
        assert n == m
        torch.testing.assert_close(a, b)


def test_format_choice(tmp_path):
    x = torch.randn(2, 3, 6, 6)
    gm = fxcpp.aten.from_exported_program(torch.export.export(LinConvRelu().eval(), (x,)))
    fxcpp.aten.save(gm, str(tmp_path / 'a.fxpt'))
    fxcpp.aten.save(gm, str(tmp_path / 'b.bin'), format='pt2')
    fxcpp.aten.save(gm, str(tmp_path / 'c.pt2'), format='fxpt')
    kinds = {}
    for f in ('a.fxpt', 'b.bin', 'c.pt2'):
        names = zipfile.ZipFile(str(tmp_path / f)).namelist()
        kinds[f] = 'pt2' if any(n.endswith('/archive_format') for n in names) else 'fxpt'
        with torch.no_grad():
            torch.testing.assert_close(fxcpp.aten.load(str(tmp_path / f), runtime='cpp')(x), gm(x), **TOL)
    assert kinds == {'a.fxpt': 'fxpt', 'b.bin': 'pt2', 'c.pt2': 'fxpt'}
    with pytest.raises(ValueError, match="format must be"):
        fxcpp.aten.save(gm, str(tmp_path / 'd.pt2'), format='onnx')


# ---- what cannot be expressed --------------------------------------------------------------


def test_call_module_refused(tmp_path):
    gm = fxcpp.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(3, 3)))
    with pytest.raises(ValueError, match=r"call_module node.*lower the model first"):
        fxcpp.aten.save(gm, str(tmp_path / 'x.pt2'))
    assert not (tmp_path / 'x.pt2').exists()


def test_python_function_target_refused(tmp_path):
    x = torch.randn(2, 3, 6, 6)
    gm = fxcpp.aten.from_exported_program(torch.export.export(LinConvRelu().eval(), (x,)))
    for n in gm.graph.nodes:
        if n.target is torch.ops.aten.relu.default:
            n.target = torch.relu
    gm.recompile()
    with pytest.raises(ValueError, match=r"relu.*(ATen|aten)"):
        fxcpp.aten.save(gm, str(tmp_path / 'x.pt2'))


def test_value_without_metadata_refused(tmp_path):
    x = torch.randn(2, 3, 6, 6)
    gm = fxcpp.aten.from_exported_program(torch.export.export(LinConvRelu().eval(), (x,)))
    for n in gm.graph.nodes:
        if n.target is torch.ops.aten.relu.default:
            with gm.graph.inserting_after(n):
                extra = gm.graph.call_function(torch.ops.aten.neg.default, (n,))
            n.replace_all_uses_with(extra)
            extra.args = (n,)
    gm.recompile()
    with pytest.raises(ValueError, match=r"neg.*no metadata.*ShapeProp"):
        fxcpp.aten.save(gm, str(tmp_path / 'x.pt2'))
    # .fxpt needs none: it still saves.
    fxcpp.aten.save(gm, str(tmp_path / 'x.fxpt'))

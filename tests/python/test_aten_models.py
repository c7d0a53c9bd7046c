"""torchvision models through the whole pipeline: fxcpp.aten.lower at batch 1,
fxcpp.aten.save, then fxcpp::torch::load in a C++ process with no Python
(build/fxcpp_torch_run_model) at batch 1 and at batch 3 from the same file,
against eager PyTorch (rtol=atol=1e-4).

`make test` runs a representative subset; FXCPP_ALL_MODELS=1 runs every
torchvision 0.14 classification and segmentation model (slow: tens of
minutes and several GB of files; the closing notes report its results).
"""
import os
import subprocess

import pytest
import torch

from fxcpp import aten
from difftools import tensor_leaves

torchvision = pytest.importorskip('torchvision')

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DRIVER = os.path.join(os.environ.get('FXCPP_BUILD_DIR', os.path.join(ROOT, 'build')), 'fxcpp_torch_run_model')

# name -> input side; the subset `make test` runs (one of each family the
# lowering handles differently: plain convnet, hardswish/SE blocks, a
# segmentation model with a dict output and interpolation, SiLU and
# stochastic depth, layer norm over permuted channels, channel shuffle,
# window attention with padding: its batched matmuls caught the planner
# using composite ops' out= overloads, which round differently).
DEFAULT = {'resnet18': 64, 'mobilenet_v3_small': 64, 'lraspp_mobilenet_v3_large': 64, 'efficientnet_b0': 64,
           'convnext_tiny': 64, 'shufflenet_v2_x0_5': 64, 'swin_t': 64}




def _model_list():
    if not os.environ.get('FXCPP_ALL_MODELS'):
        return DEFAULT
    import inspect
    names = {}
    for mod in (torchvision.models, torchvision.models.segmentation):
        for name in dir(mod):
            fn = getattr(mod, name)
            if name.startswith('_') or not inspect.isfunction(fn) or name.startswith('get_'):
                continue
            params = inspect.signature(fn).parameters
            if 'weights' in params:  # a model builder
                # ViTs (and MaxViT's window partition) take 224 only; Inception needs 75 at least.
                names[name] = 224 if name.startswith(('vit_', 'maxvit')) else 96 if name == 'inception_v3' else 64
    return names


def _run_cpp(path, x, tmp_path):
    inp, out = tmp_path / 'in.bin', tmp_path / 'out.bin'
    inp.write_bytes(x.contiguous().numpy().tobytes())
    proc = subprocess.run([DRIVER, str(path), str(inp), ','.join(map(str, x.shape)), str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return torch.frombuffer(bytearray(out.read_bytes()), dtype=torch.float32)


@pytest.mark.skipif(not os.path.exists(DRIVER), reason='build/fxcpp_torch_run_model is not built (make build)')
@pytest.mark.parametrize('name', sorted(_model_list()))
def test_lower_save_and_run_in_cpp(name, tmp_path):
    side = _model_list()[name]
    builder = getattr(torchvision.models, name, None) or getattr(torchvision.models.segmentation, name)
    torch.manual_seed(0)
    try:  # never download: segmentation models also take weights_backbone
        model = builder(weights=None, weights_backbone=None).eval()
    except TypeError:
        model = builder(weights=None).eval()
    x1 = torch.randn(1, 3, side, side)
    gm = aten.lower(model, x1)
    aten.check_lowered(gm)
    path = tmp_path / f'{name}.fxpt'
    aten.save(gm, path)
    for x in (x1, torch.randn(3, 3, side, side)):
        with torch.no_grad():
            want = torch.cat(tensor_leaves(model(x)))
        got = _run_cpp(path, x, tmp_path)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


# ---- models outside torchvision: torchaudio (small configurations) ------------------------

torchaudio = None
try:
    import torchaudio
except ImportError:  # pragma: no cover - install_deps.sh installs python3-torchaudio
    pass


def _audio_models():
    M = torchaudio.models
    return {
        'wav2letter': (lambda: M.Wav2Letter(num_classes=10, input_type='waveform', num_features=1),
                       lambda b: (torch.randn(b, 1, 1600),)),
        'conv_tasnet': (lambda: M.ConvTasNet(num_sources=2, enc_kernel_size=16, enc_num_feats=32,
                                             msk_kernel_size=3, msk_num_feats=16, msk_num_hidden_feats=32,
                                             msk_num_layers=2, msk_num_stacks=1),
                        lambda b: (torch.randn(b, 1, 800),)),
        'deepspeech': (lambda: M.DeepSpeech(n_feature=16, n_hidden=32, n_class=5),
                       lambda b: (torch.randn(b, 1, 20, 16),)),
        'emformer': (lambda: M.Emformer(input_dim=16, num_heads=2, ffn_dim=32, num_layers=2, segment_length=4),
                     lambda b: (torch.randn(b, 12, 16), torch.full((b,), 8))),
        'wavernn': (lambda: M.WaveRNN(upsample_scales=[5, 5, 8], n_classes=16, hop_length=200, n_res_block=1,
                                      n_rnn=16, n_fc=16, kernel_size=5, n_freq=8, n_hidden=8, n_output=8),
                    lambda b: (torch.randn(b, 1, 1200), torch.randn(b, 1, 8, 10))),
    }


@pytest.mark.skipif(torchaudio is None, reason='torchaudio is not installed')
@pytest.mark.parametrize('name', ['wav2letter', 'conv_tasnet', 'deepspeech', 'emformer', 'wavernn'])
def test_torchaudio_models_run_in_cpp(name, tmp_path):
    make, inputs = _audio_models()[name]
    torch.manual_seed(0)
    model = make().eval()
    gm = aten.lower(model, *inputs(1))
    path = tmp_path / f'{name}.fxpt'
    aten.save(gm, path)
    m = aten.load(path, runtime='cpp')
    for b in (1, 3):
        x = inputs(b)
        with torch.no_grad():
            want = torch.cat(tensor_leaves(model(*x)))
        for _ in range(2):
            torch.testing.assert_close(torch.cat(tensor_leaves(m(*x))), want, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(torchaudio is None, reason='torchaudio is not installed')
def test_torchaudio_conformer_fails_with_a_clear_error():
    # Its padding mask reads tensor data into Python ints (data-dependent):
    # lowering refuses it, naming where and what to do.
    model = torchaudio.models.Conformer(input_dim=16, num_heads=2, ffn_dim=32, num_layers=2,
                                        depthwise_conv_kernel_size=3).eval()
    with pytest.raises(aten.LoweringError, match=r'_lengths_to_padding_mask.*data-dependent.*keep this part in Python'):
        aten.lower(model, torch.randn(1, 10, 16), torch.full((1,), 10))

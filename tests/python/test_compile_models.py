"""torch.compile(model, backend="fxcpp") on issue 25's model set: torchvision's classification
models, nn.TransformerEncoder and a dynamic batch. Each is compiled for inference, must run in
fxcpp's C++ runtime (no graph falls back to eager) and match eager (rtol=atol=1e-4).

`make test` runs a representative subset; FXCPP_ALL_MODELS=1 runs every torchvision
classification model (tens of minutes: Dynamo and AOTAutograd trace each one; the largest,
vit_h_14, takes about 30 s).
"""
import inspect
import logging
import os
import warnings

import pytest
import torch

from fxcpp._torch_compat import HAS_DYNAMO

pytestmark = pytest.mark.skipif(not HAS_DYNAMO, reason='torch.compile (Dynamo) needs torch 2.x')
torchvision = pytest.importorskip('torchvision')

TOL = dict(rtol=1e-4, atol=1e-4)

# One of each family the runtime meets differently: plain convnet with in-place ReLU and
# residual adds, hardswish/SE blocks, SiLU with stochastic depth, layer norm over permuted
# channels, channel shuffle, window attention (batched matmuls, rolled windows).
DEFAULT = ('resnet18', 'mobilenet_v3_small', 'efficientnet_b0', 'convnext_tiny', 'shufflenet_v2_x0_5', 'swin_t')

def _names():
    if not os.environ.get('FXCPP_ALL_MODELS'):
        return list(DEFAULT)
    return torchvision.models.list_models(module=torchvision.models)


def _side(name):
    if name.startswith(('vit_', 'maxvit')):
        return 224  # fixed patch grids and window partitions
    return 96 if name in ('inception_v3', 'googlenet') else 64


def _build(name):
    builder = torchvision.models.get_model_builder(name)
    kwargs = {'weights': None}
    if name in ('googlenet', 'inception_v3'):
        kwargs['init_weights'] = False
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return builder(**kwargs).eval()


# The backend fixtures (Dynamo reset around each test, the runtimes the backend made) and the
# fallback log reader are test_compile_backend's.
from test_compile_backend import dynamo, fallbacks, loads  # noqa: E402,F401 -- pytest fixtures


def _check(model, inputs_list, loads, caplog, **compile_kw):
    caplog.set_level(logging.WARNING, logger='fxcpp')
    compiled = torch.compile(model, backend='fxcpp', **compile_kw)
    with torch.no_grad():
        for inputs in inputs_list:
            torch.testing.assert_close(compiled(*inputs), model(*inputs), **TOL)
    assert fallbacks(caplog) == []
    assert loads, 'no graph reached the C++ runtime'


@pytest.mark.parametrize('name', _names())
def test_torchvision_model_matches_eager(name, loads, caplog):
    torch.manual_seed(0)
    model = _build(name)
    side = _side(name)
    _check(model, [(torch.randn(2, 3, side, side),)], loads, caplog)


def test_transformer_encoder_matches_eager(loads, caplog):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, batch_first=True,
                                             dropout=0.0)
    model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    _check(model, [(torch.randn(2, 10, 32),)], loads, caplog)


def test_dynamic_batch_serves_several_sizes(loads, caplog):
    torch.manual_seed(0)
    model = _build('resnet18')
    _check(model, [(torch.randn(n, 3, 32, 32),) for n in (2, 3, 5)], loads, caplog, dynamic=True)
    assert len(loads) == 1, 'one graph, symbolic in the batch, serves every size'


def test_default_selection_is_in_torchvision():
    # The subset names models torchvision still has (a renamed model would silently drop out).
    assert set(DEFAULT) <= set(torchvision.models.list_models(module=torchvision.models))
    for name in DEFAULT:
        assert 'weights' in inspect.signature(torchvision.models.get_model_builder(name)).parameters

"""torch.fx-based tools from outside torch.fx on fxcpp-traced models (issue 13):
torchvision's feature extraction and FX graph mode quantization give what they
give on the torch.fx-traced model."""
import pytest
import torch
import torch.fx

import fxcpp

torchvision = pytest.importorskip('torchvision')
from torchvision.models.feature_extraction import create_feature_extractor, get_graph_node_names  # noqa: E402

MODELS = ['resnet18', 'mobilenet_v3_small', 'efficientnet_b0', 'regnet_y_400mf', 'squeezenet1_0']


def _both(name):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval()
    return fxcpp.symbolic_trace(model), torch.fx.symbolic_trace(model)


@pytest.mark.parametrize('name', MODELS)
def test_feature_extraction_matches_torch_fx(name):
    ours, theirs = _both(name)
    names = get_graph_node_names(ours)
    assert names == get_graph_node_names(theirs)
    train, evaluation = names
    picks = [evaluation[len(evaluation) // 3], evaluation[2 * len(evaluation) // 3], evaluation[-1]]
    fe_ours = create_feature_extractor(ours, return_nodes=picks)
    fe_theirs = create_feature_extractor(theirs, return_nodes=picks)
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        a, b = fe_ours(x), fe_theirs(x)
    assert list(a) == list(b) == picks
    for k in picks:
        torch.testing.assert_close(a[k], b[k])
    assert fe_ours.code == fe_theirs.code


@pytest.mark.parametrize('name', ['resnet18', 'mobilenet_v3_small'])
def test_fx_graph_mode_quantization_matches_torch_fx(name):
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
    ours, theirs = _both(name)
    example = (torch.randn(1, 3, 64, 64),)
    mapping = get_default_qconfig_mapping('fbgemm')
    p_ours = prepare_fx(ours, mapping, example)
    p_theirs = prepare_fx(theirs, mapping, example)
    calibration = [torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(i)) for i in range(4)]
    with torch.no_grad():
        for x in calibration:
            p_ours(x)
            p_theirs(x)
    q_ours, q_theirs = convert_fx(p_ours), convert_fx(p_theirs)
    x = torch.randn(3, 3, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(q_ours(x), q_theirs(x), rtol=0, atol=0)
    assert q_ours.code == q_theirs.code

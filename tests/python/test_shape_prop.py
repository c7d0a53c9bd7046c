"""ShapeProp: node.meta['tensor_meta'] / ['type'] must equal torch.fx 1.13's."""
import operator

import pytest
import torch
import torch.fx as tfx
import torch.nn as nn
from torch.fx.passes.shape_prop import ShapeProp as TShapeProp

import fxcpp as fx
from fxcpp.passes.shape_prop import ShapeProp as FShapeProp, TensorMetadata


def metas(gm):
    # meta['type'] by qualified name: each library has its own immutable_dict/list classes.
    return [(n.name, n.op, n.meta.get('tensor_meta'), getattr(n.meta.get('type'), '__qualname__', None))
            for n in gm.graph.nodes]


def propagate_both(make, *inputs):
    out = []
    for lib, SP in ((tfx, TShapeProp), (fx, FShapeProp)):
        torch.manual_seed(0)
        gm = lib.symbolic_trace(make())
        with torch.no_grad():
            r = SP(gm).propagate(*inputs)
        out.append((metas(gm), r))
    return out


# A representative subset of torchvision classification models (suite stays fast).
MODELS = ['resnet18', 'mobilenet_v2', 'squeezenet1_0', 'mnasnet0_5', 'densenet121']


@pytest.mark.parametrize('name', MODELS)
def test_torchvision_models(name):
    torchvision = pytest.importorskip('torchvision')
    torch.manual_seed(0)
    x = torch.randn(1, 3, 64, 64)
    (a, ra), (b, rb) = propagate_both(lambda: getattr(torchvision.models, name)().eval(), x)
    assert a == b
    assert any(isinstance(m[2], TensorMetadata) for m in b)
    torch.testing.assert_close(ra, rb)


def test_structures_memory_formats_and_grad():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)

        def forward(self, x, n):
            y = self.conv(x)
            cl = y.contiguous(memory_format=torch.channels_last)
            t = y.transpose(1, 2)
            parts = torch.split(y, 2, dim=1)
            return {'cl': cl, 't': t, 'parts': parts, 'n': n + 1, 'size': y.size()}

    x = torch.randn(2, 3, 8, 8)
    (a, _), (b, _) = propagate_both(M, x, 3)
    assert a == b


def test_quantized_metadata():
    def f(x):
        return x.dequantize()

    q = torch.quantize_per_tensor(torch.randn(4), 0.1, 3, torch.quint8)
    qc = torch.quantize_per_channel(torch.randn(2, 3), torch.tensor([0.1, 0.2]), torch.tensor([0, 1]), 0,
                                    torch.qint8)
    for inp in (q, qc):
        (a, _), (b, _) = propagate_both(lambda: f, inp)
        assert a == b


def test_error_message():
    def f(x):
        return x + torch.zeros(5)

    errs = []
    for lib, SP in ((tfx, TShapeProp), (fx, FShapeProp)):
        gm = lib.symbolic_trace(f)
        with pytest.raises(RuntimeError) as ei:
            SP(gm).propagate(torch.zeros(3))
        errs.append(str(ei.value).split('\n\n')[0])
    assert errs[0] == errs[1]

"""The C++ library, headers and CMake package installed with the Python package (issue 21).

A C++ program finds them with -DCMAKE_PREFIX_PATH=fxcpp.cmake_prefix_path, links
fxcpp::fxcpp_torch (and through it the LibTorch fxcpp was built against), loads a model
saved from Python and computes what eager PyTorch computes, with no Python in its process.
"""
import os
import shutil
import subprocess

import pytest
import torch

import fxcpp
from fxcpp import aten

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONSUMER = os.path.join(ROOT, 'examples', 'cpp', 'consumer')
installed = os.path.exists(os.path.join(fxcpp.cmake_prefix_path, 'fxcpp', 'fxcppConfig.cmake'))

pytestmark = pytest.mark.skipif(
    not installed or shutil.which('cmake') is None,
    reason='fxcpp runs from a build tree here, not installed with pip: no CMake package beside it '
           '(make test checks it on the pip-installed 2.14 leg)')


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, stride=4)
        self.fc = torch.nn.Linear(4, 1000)

    def forward(self, x):
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(torch.relu(self.conv(x)), 1), 1))


def test_a_cpp_program_finds_links_and_runs_the_installed_fxcpp(tmp_path):
    build = tmp_path / 'build'
    subprocess.run(['cmake', '-S', CONSUMER, '-B', str(build), '-DCMAKE_BUILD_TYPE=Release',
                    f'-DCMAKE_PREFIX_PATH={fxcpp.cmake_prefix_path}'], check=True, capture_output=True, text=True)
    r = subprocess.run(['cmake', '--build', str(build), '-j2'], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]

    # The core alone: prints a graph and its code.
    out = subprocess.run([str(build / 'build_graph')], check=True, capture_output=True, text=True).stdout
    assert 'def forward' in out and 'placeholder' in out

    torch.manual_seed(0)
    m, x = Tiny().eval(), torch.randn(1, 3, 224, 224)
    model = tmp_path / 'tiny.fxpt'
    aten.save(aten.lower(m, x), str(model))
    (tmp_path / 'x.bin').write_bytes(x.numpy().tobytes())
    env = {k: v for k, v in os.environ.items() if k not in ('LD_LIBRARY_PATH', 'LD_PRELOAD', 'PYTHONPATH')}
    r = subprocess.run([str(build / 'classify'), str(model), str(tmp_path / 'x.bin'), '--repeat', '1',
                        '--output', str(tmp_path / 'y.bin')], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    y = torch.frombuffer(bytearray((tmp_path / 'y.bin').read_bytes()), dtype=torch.float32).reshape(1, 1000)
    torch.testing.assert_close(y, m(x), rtol=1e-4, atol=1e-4)

"""Note [One torch per build] (fxcpp/_build_check.py): a build of fxcpp imported beside another
torch, or another CPython, raises one ImportError naming both, before any extension loads; a
wheel pins the torch it was built against.

The builds are make's: build/pkg (Debian's torch 1.13, /usr/bin/python3) and build-214/pkg
(.venv's torch 2.14.1); each run imports one build with the other leg's interpreter, so the
check runs wherever both legs are built (make test builds both, the 2.14 leg first)."""
import importlib.metadata
import os
import re
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYENV = os.path.expanduser(os.environ.get('PYENV_ROOT', '~/.pyenv'))
BUILDS = [os.path.join(ROOT, b, 'pkg') for b in ('build', 'build-214', 'build-312')]
PYTHONS = [os.path.join(ROOT, '.venv', 'bin', 'python'), '/usr/bin/python3',
           os.path.join(ROOT, '.venv-312', 'bin', 'python')]


def _record(pkg):
    """(torch version, CPython version) a build records, or None."""
    path = os.path.join(pkg, 'fxcpp', '_build_config.py')
    if not os.path.exists(path):
        return None
    ns = {}
    exec(open(path).read(), ns)  # our own build's file
    return ns['TORCH_VERSION'], ns['PYTHON_VERSION']


def _versions(python):
    out = subprocess.run([python, '-c', 'import sys, torch; print(torch.__version__.split("+")[0]); '
                          'print(f"{sys.version_info[0]}.{sys.version_info[1]}")'],
                         capture_output=True, text=True, timeout=120)
    return tuple(out.stdout.split()) if out.returncode == 0 else None


def _pairs():
    """For each build: one interpreter with another torch, one with another CPython."""
    pairs = []
    have = {py: _versions(py) for py in PYTHONS if os.path.exists(py)}
    for pkg in BUILDS:
        rec = _record(pkg)
        if rec is None:
            continue
        for kind in (0, 1):  # another torch on the same CPython; another CPython
            for py, v in have.items():
                if v and v != rec and (v[1] == rec[1]) == (kind == 0):
                    pairs.append((pkg, py, rec, v))
                    break
    return pairs


PAIRS = _pairs()


@pytest.mark.skipif(not PAIRS, reason='needs two builds of fxcpp for different torches or Pythons (make test builds both legs)')
@pytest.mark.parametrize('pkg,python,built,have', PAIRS, ids=[f'{os.path.basename(os.path.dirname(p))}-{q}' for p, q, _, _ in PAIRS])
def test_a_build_imported_beside_another_torch_says_which(pkg, python, built, have):
    env = dict(os.environ, PYTHONPATH=pkg)
    env.pop('FXCPP_PACKAGE_ROOT', None)
    out = subprocess.run([python, '-c', 'import fxcpp'], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 1, out.stderr[-2000:]
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith('ImportError: this build of fxcpp '), out.stderr[-2000:]
    if built[1] != have[1]:
        assert f'is for CPython {built[1]}, but this process runs CPython {have[1]}' in last
    else:
        assert f'built against torch {built[0]}, but this process has torch {have[0]}' in last
        assert 'rebuild fxcpp against this torch' in last
    # one clear error: no undefined symbol, no crash, nothing from an extension
    assert 'undefined symbol' not in out.stderr and 'Segmentation' not in out.stderr


def test_the_running_build_matches_its_record():
    import fxcpp._build_config as rec
    from fxcpp._build_check import running_torch_version
    assert rec.TORCH_VERSION == running_torch_version()
    assert rec.PYTHON_VERSION == f'{sys.version_info[0]}.{sys.version_info[1]}'


def test_an_installed_wheel_pins_its_torch():
    try:
        requires = importlib.metadata.requires('fxcpp')
    except importlib.metadata.PackageNotFoundError:
        pytest.skip('fxcpp is not pip-installed here (make test installs it on the 2.14 leg)')
    pins = [r for r in requires or [] if re.match(r'torch\b', r)]
    assert pins == [f"torch=={torch.__version__.split('+')[0]}"], requires

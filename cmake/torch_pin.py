"""scikit-build-core metadata provider: a wheel's dependencies pin the torch it is built
against (Note [One torch per build] in python/fxcpp/_build_check.py)."""


def dynamic_metadata(field, settings=None):
    if field != 'dependencies':
        raise RuntimeError('torch_pin provides the dependencies field only')
    try:
        import torch
    except ImportError as e:
        raise RuntimeError('fxcpp builds against the torch installed in the Python that builds it: install torch '
                           'first, then build without isolation (pip install --no-build-isolation .)') from e
    return [f"torch=={torch.__version__.split('+')[0]}"]

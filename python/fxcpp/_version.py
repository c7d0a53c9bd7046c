"""fxcpp's version: the one place it is written. pyproject.toml reads it (scikit-build-core's
regex provider), CMakeLists.txt reads it (project VERSION), ``fxcpp.__version__`` is it."""
__version__ = "0.1.0"

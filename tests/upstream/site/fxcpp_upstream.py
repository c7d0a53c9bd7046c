"""pytest plugin for running PyTorch's own FX tests (`make test-upstream`); loaded with
`-p fxcpp_upstream` from tests/upstream/site, on both the torch.fx and the fxcpp side.

TestFX.setUp loads `libtorchbind_test.so` through common_utils.find_library_location, which
only looks inside the installed torch tree (or a PyTorch build folder). The harness builds the
library from the same source package (scripts/upstream/build_torchbind.sh) and names it in
FXCPP_TORCHBIND_LIB; this plugin points find_library_location at it. When the library could not
be built, the lookup raises unittest.SkipTest instead, so every test that needs it is skipped,
identically on both sides.
"""
import os
import unittest


def pytest_configure(config):
    from torch.testing._internal import common_utils

    original = common_utils.find_library_location
    lib = os.environ.get("FXCPP_TORCHBIND_LIB", "")

    def find_library_location(lib_name):
        if lib_name != "libtorchbind_test.so":
            return original(lib_name)
        if lib and os.path.exists(lib):
            from pathlib import Path
            return Path(lib)
        raise unittest.SkipTest("libtorchbind_test.so was not built (scripts/upstream/build_torchbind.sh)")

    common_utils.find_library_location = find_library_location

    # A stand-in suite from an older torch (UPSTREAM_214_VERSION, while Debian's 2.14.1 sources
    # cannot be fetched) may import torch.export.export_for_training, which later torch removed
    # in favour of torch.export.export (the same training-IR export). Without it test_fx.py does
    # not import on either side; with this alias it runs, the same on both sides.
    import torch
    export = getattr(torch, "export", None)
    if export is not None and hasattr(export, "export") and not hasattr(export, "export_for_training"):
        export.export_for_training = export.export

    # The stand-in's test_fx_experimental.py imports common_nn.new_module_tests, a list later
    # torch builds on demand (common_nn.get_new_module_tests()); the alias lets the file import,
    # the same on both sides.
    from torch.testing._internal import common_nn
    if not hasattr(common_nn, "new_module_tests") and hasattr(common_nn, "get_new_module_tests"):
        common_nn.new_module_tests = common_nn.get_new_module_tests()

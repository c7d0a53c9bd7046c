"""fxcpp.aten: lowering to ATen, the .fxpt file format and the LibTorch runtime.

* ``lower(model, *example_inputs)`` returns a GraphModule whose nodes are ATen
  operator overloads (``torch.ops.aten.conv2d.default``) or a few primitives
  (docs/fxpt_format.md), still runnable and editable in Python.
* ``save(gm, path)`` / ``load(path)`` write and read the versioned ``.fxpt``
  file, or a ``.pt2`` archive (``save(gm, 'm.pt2')``: what ``torch.export.load``
  reads; ``load`` reads torch's too); ``load(path, runtime='cpp')`` runs it in
  the C++ runtime, as ``fxcpp::torch::load`` does in a C++ program.
* ``from_exported_program(ep)`` makes a ``torch.export`` program a GraphModule.
* ``compile(model, *example_inputs)`` lowers and loads in one step.
"""
from ._capture import from_torchscript
from ._export import from_exported_program
from ._format import FORMAT_VERSION, save
from ._lower import LoweringError, check_lowered, lower, register_lowering
from ._runtime import CppModule, compile, load

__all__ = ['lower', 'register_lowering', 'LoweringError', 'check_lowered', 'save', 'load', 'compile',
           'CppModule', 'FORMAT_VERSION', 'from_torchscript', 'from_exported_program']

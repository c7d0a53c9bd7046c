"""The C++ runtime from Python: ``CppModule`` and ``compile``."""

import torch

__all__ = ['CppModule', 'compile']


class CppModule(torch.nn.Module):
    """An ``nn.Module`` whose forward runs a loaded graph in the C++ runtime.

    The forward converts its inputs, releases the GIL for the whole graph and
    converts the outputs back (Note [Runtime and the GIL] in
    src/bindings/torch/runtime_bindings.cpp), so several Python threads can
    run inferences on one module in parallel. Outputs are inference tensors,
    as under ``torch.inference_mode()``. The module's tensors are registered
    as buffers that share storage with the runtime: ``state_dict()`` shows
    them, and no second copy exists. Wrong inputs raise TypeError naming the
    input; a failing kernel raises RuntimeError naming the node.
    """

    def __init__(self, runtime):
        from ._format import _reserved_names, _set_attr
        super().__init__()
        self._runtime = runtime
        reserved = _reserved_names(type(self))
        for name, _kind, tensor in runtime.tensors():
            _set_attr(self, name, tensor, 'buffer', reserved)

    def forward(self, *inputs):
        return self._runtime.run(*inputs)

    def _apply(self, fn, *args, **kwargs):
        # .to(), .double(), .half(), .cuda(), ... come here. The runtime reads the
        # tensors it loaded, which the buffers share: a conversion that made new
        # tensors would change what state_dict() shows and not what runs. So
        # those are refused; conversions that give back the same tensors work.
        for name, t in self.named_buffers():
            out = fn(t)
            if out is not t:
                raise RuntimeError(
                    f'CppModule: this conversion would change the tensors the C++ runtime runs with (buffer '
                    f'{name!r}: {t.dtype} on {t.device} -> {out.dtype} on {out.device}), which a loaded module '
                    f'cannot do. Convert the inputs instead, or convert the model before fxcpp.aten.lower and '
                    f'save it again.')
        return self

    @property
    def input_names(self):
        """Placeholder names, in order."""
        return self._runtime.input_names()

    def extra_repr(self) -> str:
        return f'inputs={self._runtime.input_names()}, instructions={self._runtime.num_instructions()}'

    def graph_str(self) -> str:
        """The loaded graph, printed by the C++ core as torch.fx prints graphs."""
        return str(self._runtime)


def compile(model, *example_inputs) -> CppModule:
    """Lowers ``model`` (an nn.Module or GraphModule) with ``fxcpp.aten.lower``
    and loads the result into the C++ runtime: ``compile(m, x)(x)`` runs
    ``m`` with no Python per op."""
    from .. import _C_torch
    from ._format import _to_bytes
    from ._lower import lower
    gm = lower(model, *example_inputs)
    # Encoded in memory and loaded from those bytes: no temporary file. The caller's own
    # model: trusted.
    return CppModule(_C_torch.load(_to_bytes(gm), plan_memory=True, trusted=True))

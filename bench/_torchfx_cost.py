"""How the torch.fx being measured scales, for the benchmarks' time caps.

torch.fx 1.x's auto-naming (_Namespace.create_name) probes name_1, name_2, ...
until it finds a free one, so building N nodes that want the same name costs
O(N^2); torch.fx 2.x keeps a counter per base name (_Namespace._base_count)
and is linear. The benchmarks predict a torch.fx run's time from a smaller
size to skip runs over their cap: they scale by NAMING_EXPONENT.
"""
import torch.fx


def _naming_is_linear():
    try:
        return hasattr(torch.fx.graph._Namespace(), "_base_count")
    except Exception:  # noqa: BLE001 -- an unknown torch.fx: assume the worst case
        return False


NAMING_LINEAR = _naming_is_linear()
NAMING_EXPONENT = 1 if NAMING_LINEAR else 2
NAMING_WORDS = "linear" if NAMING_LINEAR else "quadratic"

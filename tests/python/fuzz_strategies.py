"""Shared pools and helpers of the fuzzers (test_fuzz_diff.py, test_fuzz_api.py).

Values here are shared by both libraries: constants are immutable objects
(containers are rebuilt for each side), targets are plain callables/strings.
"""
import math
import operator
import re

import torch


def user_function(x, y=None):
    """A module-level function target (qualified name: this module's)."""
    return x


# Names handed to create_node / node.name: keywords, builtins, custom
# builtins, suffix look-alikes, non-identifiers, non-ASCII, leading digits.
NAMES = [
    None, None, None, 'x', 'y', 'add', 'add_1', 'add_01', 'add_2', 'neg', 'foo', 'Foo', 'fooBar', '_', '__x__',
    'def', 'class', 'print', 'len', 'torch', 'inf', 'nan', 'self', 'output', 'forward', 'getattr',
    '1x', 'a.b', 'x y', 'name-with-dash', 'ñame', 'ƒ', '中文', 'emoji_\U0001F600', '', 'x_1', 'x_1_1',
]

# Targets of get_attr / call_module / call_method / placeholder.
STR_TARGETS = [
    'foo', 'bar', 'a.b', 'layer.0', 'layer.0.conv', '0', 'a-b', 'self', '__add__', 'add', 'relu', 'size',
    'def', 'ñ', 'x', 'output', '__getitem__', 'foo.bar.baz',
]

FUNCS = [
    operator.add, operator.mul, operator.neg, operator.getitem, operator.lt, torch.relu, torch.add,
    torch.cat, len, getattr, print, math.sqrt, user_function, torch.nn.functional.relu, torch._assert,
]

CONSTANTS = [
    0, 1, -1, 2 ** 70, -(2 ** 63), True, False, None, 1.5, -0.0, float('inf'), float('-inf'), float('nan'),
    1e300, complex(1, -2), 'a', '', "it's", 'x y', 'ñ', torch.float32, torch.int64, torch.device('cpu'),
    torch.contiguous_format, torch.strided, Ellipsis,
]

KWARG_KEYS = ['a', 'b', 'dim', 'x', 'out', 'self', 'ñ']

TYPES = [None, None, None, int, float, torch.Tensor, 'str', type(None), torch.Size]

_ADDR = re.compile(r' at 0x[0-9a-fA-F]+')
# an object's repr made a name (torch.fx 2.x's annotation of a non-type object): _torch_fx_graph_Graph_object_at_0x..._
_NAME_ADDR = re.compile(r'_at_0x[0-9a-fA-F]+')


def norm(text: str) -> str:
    """Normalize addresses and the library's module name so text compares across libraries."""
    text = _NAME_ADDR.sub('_at_0xADDR', _ADDR.sub(' at 0xADDR', text))
    return text.replace('torch.fx.', 'fxcpp.').replace('_torch_fx_', '_fxcpp_')

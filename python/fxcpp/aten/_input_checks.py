"""The C++ runtime's input checks for a GraphModule loaded from a ``.pt2`` archive or a ``.fxpt`` file.

``fxcpp.aten.load(path)`` (``runtime='python'``) gives a GraphModule whose user-input
placeholders carry what the program was exported for: ``meta['tensor_meta']`` and
``meta['input_spec']`` (Note [Exported input checks] in src/torch/pt2.cpp). The C++
runtime checks each forward's inputs against them (Plan::check_inputs and
Plan::check_exported_inputs in src/torch/run.cpp); this module does the same checks, in
the same order, raising the same TypeError with the same text, so that a wrong input
count, dtype, rank, static size, out-of-range or inconsistent symbolic size reads
alike from both runtimes (tests/python/test_pt2_models.py compares them). It is a
forward pre-hook (``install``) reading the placeholders at each call, so an edited
graph is checked against what it holds then.
"""
import torch

__all__ = ['install']


def _describe(v) -> str:
    """Plan::describe: the kind of a value as the C++ runtime names it."""
    if isinstance(v, torch.Tensor):
        return 'a Tensor'
    if v is None:
        return 'None'
    for kind, text in ((bool, 'a bool'), (int, 'an int'), (float, 'a float'), (str, 'a str'), (tuple, 'a tuple'),
                       (list, 'a list'), (dict, 'a GenericDict')):
        if isinstance(v, kind):
            return text
    return f'a {type(v).__name__}'


def _dtype_name(dtype) -> str:
    return str(dtype).replace('torch.', '')


def _shape_of(tensor_meta):
    shape = tensor_meta.get('shape') if isinstance(tensor_meta, dict) else getattr(tensor_meta, 'shape', None)
    return shape if isinstance(shape, (tuple, list, torch.Size)) else None


class _Input:
    __slots__ = ('name', 'has_default', 'tensor_meta', 'dtype', 'dims', 'has_spec')

    def __init__(self, node):
        self.name = node.name
        self.has_default = len(node.args) > 0
        self.tensor_meta = node.meta.get('tensor_meta')
        self.dtype = None
        self.dims = []  # ('static', size) | ('symbol', index, min, max) | ('poly', [(coef, [index...])])
        self.has_spec = False


def _inputs(gm):
    """The placeholders' checks, their symbols ([name, input, dim] in the order first seen), as the
    C++ compiler reads them."""
    inputs, symbols, index = [], [], {}
    for node in gm.graph.nodes:
        if node.op != 'placeholder':
            continue
        inp = _Input(node)
        spec = node.meta.get('input_spec')
        if isinstance(spec, dict):
            inp.dtype = spec.get('dtype')
            for size in spec.get('sizes') or ():
                if isinstance(size, int):
                    inp.dims.append(('static', size))
                elif isinstance(size, tuple) and len(size) == 3 and isinstance(size[0], str):
                    if size[0] not in index:
                        index[size[0]] = len(symbols)
                        symbols.append((size[0], len(inputs), len(inp.dims)))
                    lo = size[1] if isinstance(size[1], int) else 0
                    hi = size[2] if isinstance(size[2], int) else -1
                    inp.dims.append(('symbol', index[size[0]], lo, hi))
                elif isinstance(size, list):
                    poly = []
                    for coef, syms in size:
                        if any(s not in index for s in syms):
                            poly = None  # a symbol no earlier input binds: not checked
                            break
                        poly.append((coef, [index[s] for s in syms]))
                    inp.dims.append(('poly', poly) if poly is not None else ('static', -1))
                else:
                    inp.dims.append(('static', -1))  # an expression the check does not read
            inp.has_spec = True
        inputs.append(inp)
    return inputs, symbols


def check(gm, args) -> None:
    """Raises TypeError, in the C++ runtime's words, when `args` do not fit the exported program."""
    inputs, symbols = _inputs(gm)
    required = sum(not i.has_default for i in inputs)
    if not required <= len(args) <= len(inputs):
        count = str(required) if required == len(inputs) else f'{required} to {len(inputs)}'
        raise TypeError(f"fxcpp::torch: forward expects {count} inputs ({', '.join(i.name for i in inputs)}), "
                        f'got {len(args)}')

    def fail(i, what):
        raise TypeError(f"fxcpp::torch: input {i} ('{inputs[i].name}'): {what}")

    for i, v in enumerate(args):
        meta = inputs[i].tensor_meta
        if meta is None:
            continue
        if isinstance(meta, (list, tuple)) and not hasattr(meta, 'shape'):
            if not isinstance(v, (list, tuple)):
                fail(i, f'expected a sequence of {len(meta)} values, got {_describe(v)}')
            continue
        if not isinstance(v, torch.Tensor):
            fail(i, f'expected a Tensor, got {_describe(v)}')
        shape = _shape_of(meta)
        if shape is not None and len(shape) != v.dim():
            fail(i, f'expected a {len(shape)}-dimensional tensor, got one with {v.dim()} dimensions')
    if not symbols and not any(i.has_spec for i in inputs):
        return

    bound = [-1] * len(symbols)

    def at(i, d):
        return f'{inputs[i].name}.shape[{d}]'

    for pass_ in (0, 1):
        for i, v in enumerate(args):
            inp = inputs[i]
            if not inp.has_spec:
                continue
            if not isinstance(v, torch.Tensor):
                fail(i, f'expected a Tensor, got {_describe(v)}')
            if pass_ == 0:
                if inp.dtype is not None and v.dtype != inp.dtype:
                    fail(i, f'Expected input at {inp.name} to have dtype {_dtype_name(inp.dtype)} (the program was '
                            f'exported for it), but got {_dtype_name(v.dtype)}')
                if v.dim() != len(inp.dims):
                    fail(i, f'Expected input at {inp.name} to have {len(inp.dims)} dimensions, but got {v.dim()}')
            for d, dim in enumerate(inp.dims):
                got = v.shape[d]
                if dim[0] == 'static':
                    if pass_ == 0 and dim[1] >= 0 and got != dim[1]:
                        fail(i, f'Expected input at {at(i, d)} to be equal to {dim[1]}, but got {got} (the program '
                                'was exported with that size static)')
                elif dim[0] == 'symbol':
                    if pass_ != 0:
                        continue
                    _, s, lo, hi = dim
                    name = symbols[s][0]
                    if lo > 2 and got < lo:
                        fail(i, f'Expected input at {at(i, d)} to be >= {lo}, but got {got} (the range of {name} it '
                                'was exported with)')
                    if hi >= 0 and got > hi:
                        fail(i, f'Expected input at {at(i, d)} to be <= {hi}, but got {got} (the range of {name} it '
                                'was exported with)')
                    if bound[s] < 0:
                        bound[s] = got
                    elif bound[s] != got:
                        _, si, sd = symbols[s]
                        fail(i, f'Expected input at {at(i, d)} to be equal to {at(si, sd)} ({bound[s]}), but got '
                                f'{got} (both are the size {name} in the exported program)')
                elif pass_ == 1:
                    want, ok, expr = 0, True, ''
                    for coef, syms in dim[1]:
                        m = coef
                        term = '' if abs(coef) == 1 and syms else str(abs(coef))
                        for s in syms:
                            ok = ok and bound[s] >= 0
                            m *= bound[s]
                            term += ('*' if term else '') + at(symbols[s][1], symbols[s][2])
                        want += m
                        expr += (('-' if coef < 0 else '') + term) if not expr else \
                            (' - ' if coef < 0 else ' + ') + term
                    if ok and got != want:
                        fail(i, f'Expected input at {at(i, d)} to be equal to {expr} ({want}), but got {got}')


def _pre_hook(module, args) -> None:
    check(module, args)


def install(gm) -> None:
    """Checks `gm`'s inputs before each forward when a placeholder carries an exported
    program's ``input_spec`` (a GraphModule from a .pt2 archive) or the ``tensor_meta`` that
    ShapeProp recorded (a .fxpt file: a tensor where one was recorded, of its number of
    dimensions, as the C++ runtime checks them). The hook is a module-level function, so the
    module still pickles and deep-copies."""
    if any(n.op == 'placeholder' and ('input_spec' in n.meta or 'tensor_meta' in n.meta) for n in gm.graph.nodes):
        gm.register_forward_pre_hook(_pre_hook)

#!/usr/bin/env python3
"""Derives and checks src/torch/allowed_ops.inc: the operators a .fxpt file
from an untrusted source may call (Note [What a file may make the runtime do]
in include/fxcpp/torch/policy.h).

How the list is derived:
  1. The core ATen operator set: every overload that torch 2.x tags
     `torch.Tag.core` (torch 1.13 has no such tag; the committed list was
     derived with torch 2.14.1: `python3 -m venv /tmp/v && /tmp/v/bin/pip
     install torch==2.14.1 && /tmp/v/bin/python3 scripts/gen_allowed_ops.py --write`).
  2. Plus COMPOSITES below: the public functional composites that
     fxcpp.aten.lower emits for real models (found by lowering the models of
     tests/python/test_aten_models.py, test_aten_lower.py, test_aten_runtime.py
     and the tests/cpp_torch fixtures on torch 1.13 and 2.14), as base names:
     every overload of the name.
  3. Minus anything a hard refusal hits (refusal() below mirrors
     hard_refusal() in src/torch/policy.cpp; the C++ test
     Policy.ListAndHardRefusalsAgree checks the real one against every entry).
  3a. Plus GUARDED: operators allowed behind an argument guard that the
     sets above do not name (Note [Argument guards] in
     include/fxcpp/torch/policy.h; the comment after EXCLUDED says why each
     needs one and what it checks).
  4. Minus private operators (a leading underscore) unless CHECKED_PRIVATE
     names them: each was read and found to check its arguments.
  5. Minus EXCLUDED: operators that misbehaved when probed with hostile
     arguments (each with what it did).

--check (the default) regenerates the list in memory and compares it with
the committed file: with a torch that has torch.Tag.core the whole file must
match; with an older torch the core section is taken from the file, and the
rest (composites, refusals, privates) is checked. It also reports entries
this torch does not register (informational: the list serves torch 1.13 to 2.x).
"""
import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LIST = os.path.join(HERE, '..', 'src', 'torch', 'allowed_ops.inc')

# Public composites fxcpp.aten.lower emits (base names: every overload).
COMPOSITES = {
    'convolution and linear': [
        'conv1d', 'conv2d', 'conv3d', 'conv_transpose1d', 'conv_transpose2d', 'conv_transpose3d', 'linear',
        'matmul', 'bilinear', 'addmm', 'bmm', 'mm', 'baddbmm', 'einsum',
    ],
    'normalization and dropout': [
        'batch_norm', 'instance_norm', 'layer_norm', 'group_norm', 'dropout', 'dropout_',
        'feature_dropout', 'alpha_dropout', 'feature_alpha_dropout',
    ],
    'pooling': [
        'adaptive_avg_pool1d', 'adaptive_avg_pool2d', 'adaptive_avg_pool3d', 'adaptive_max_pool1d',
        'adaptive_max_pool2d', 'avg_pool1d', 'avg_pool2d', 'max_pool1d', 'max_pool2d', 'max_pool3d',
        'max_pool1d_with_indices', 'max_pool2d_with_indices',
    ],
    'activations': [
        'relu', 'relu_', 'relu6', 'hardtanh', 'hardtanh_', 'hardswish', 'hardswish_', 'hardsigmoid', 'hardsigmoid_',
        'sigmoid', 'tanh', 'gelu', 'silu', 'silu_', 'mish', 'elu', 'selu', 'celu', 'leaky_relu', 'prelu',
        'softplus', 'softmax', 'log_softmax', 'glu', 'log_sigmoid', 'threshold',
    ],
    'recurrent': ['lstm', 'gru', 'rnn_tanh', 'rnn_relu', 'lstm_cell', 'gru_cell', 'rnn_tanh_cell', 'rnn_relu_cell'],
    'shape and views': [
        'view', 'reshape', 'flatten', 'unflatten', 'contiguous', 'transpose', 't', 'permute', 'squeeze',
        'unsqueeze', 'expand', 'expand_as', 'view_as', 'reshape_as', 'select', 'slice', 'narrow', 'chunk', 'split',
        'split_with_sizes', 'unbind', 'cat', 'stack', 'flip', 'roll', 'repeat', 'repeat_interleave', 'tile',
        'size', 'numel', 'dim', 'movedim', 'swapaxes', 'pixel_shuffle', 'channel_shuffle', 'unfold',
    ],
    'arithmetic and comparison': [
        'add', 'sub', 'rsub', 'mul', 'div', 'neg', 'pow', 'sqrt', 'rsqrt', 'exp', 'log', 'abs', 'clamp',
        'clamp_min', 'clamp_max', 'floor_divide', 'remainder', 'eq', 'ne', 'lt', 'le', 'gt', 'ge', 'where',
        'masked_fill', 'minimum', 'maximum', 'sum', 'mean', 'amax', 'amin', 'max', 'min', 'argmax', 'argmin',
        'norm', 'cumsum', 'topk', 'sort', 'std', 'var', 'logsumexp', 'all', 'any', 'sign', 'round', 'floor',
        'ceil', 'trunc', 'reciprocal', 'erf', 'sin', 'cos', 'tanh_',
    ],
    "in-place arithmetic (on the graph's own values)": ['add_', 'sub_', 'mul_', 'div_', 'fill', 'fill_', 'zero_'],
    'what fxcpp.aten.from_torchscript records from TorchScript traces': ['_convolution', 'item'],
    'what torch.export emits for HF transformers (issue 35: text models, ViT, DINOv2, Swin, CLIP, '
    'wav2vec2, DeBERTa)': [
        '__and__', '__or__', '__xor__', 'scaled_dot_product_attention', 'lift_fresh_copy', '_weight_norm',
        # GPT-2 and Llama without an attention mask (masking_utils.find_packed_sequence_indices);
        # n is clamped to the dimension's size, prepend/append shapes are checked
        'diff',
    ],
    'construction and conversion': [
        'zeros', 'zeros_like', 'ones', 'ones_like', 'full', 'full_like', 'new_zeros', 'new_ones', 'new_full',
        'arange', 'scalar_tensor', 'to',
        'type_as', 'clone', 'detach', 'alias', 'copy', 'embedding', 'index_select', 'gather', 'index',
        'upsample_nearest2d', 'upsample_bilinear2d', 'constant_pad_nd', 'pad',
    ],
}

# Operators allowed (base names: every overload) behind an argument guard (the
# comment after EXCLUDED says what each guard checks) that neither set above names:
# native_batch_norm is not tagged core (its private forms are), and files that
# LibTorch 1.13 made (which has no _native_batch_norm_legit*) may call it.
GUARDED = ['native_batch_norm']

# Private operators that are allowed after checking their kernels validate
# their arguments (dims, the half_to_float flag, shapes). Anything private not
# named here is left off.
CHECKED_PRIVATE = {
    '_convolution',  # convolution's own checks (input/weight shapes, groups, padding) live in it
    '_adaptive_avg_pool2d', '_adaptive_avg_pool3d', '_cdist_forward', '_pdist_forward', '_log_softmax', '_softmax',
    '_to_copy',
    # behind a guard (below): the batch-norm kernels' private forms, which core-ATen exports
    # (ExportedProgram.run_decompositions()) call
    '_native_batch_norm_legit', '_native_batch_norm_legit_no_training',
    # behind a guard: wav2vec2's and HuBERT's weight-normed convolution (exports keep it whole)
    '_weight_norm',
}

# Operators (base names) left off although the sets above would admit them:
# each was probed with hostile arguments on torch 1.13 (a forked process per
# call) and misbehaved as said.
EXCLUDED = {
    'grid_sampler_2d': 'an out-of-range interpolation or padding mode int returns uninitialised memory',
    '_local_scalar_dense': 'an empty tensor crashes the process (SIGSEGV); item() checks and is allowed',
    '_embedding_bag': 'offsets and per-sample weights are not fully checked',
    '_fft_c2r': 'last_dim_size is trusted',
    '_fft_r2c': 'private FFT kernel, not needed by lowered models',
    'reflection_pad1d': 'an empty padding list crashes the process (SIGSEGV); pad and constant_pad_nd check it',
    'reflection_pad2d': 'an empty padding list crashes the process (SIGSEGV); pad and constant_pad_nd check it',
}

# Core-ATen exports (ExportedProgram.run_decompositions() of 16 torchvision models,
# nn.TransformerEncoder and two GPT-2-style decoders on torch 2.14.1; the survey in
# docs/design.md) need two operators the sets above refused: the batch-norm kernels
# (now allowed behind a guard, below) and as_strided (convnext and swin: adaptive_avg_pool2d
# of a channels-last tensor). as_strided is the one raw-offset operator refusal() admits: its
# guard, in both runtimes, keeps the view inside the elements its input spans (guard_view in
# src/torch/policy.cpp); as_strided_ and the rest of RAW_WORDS stay refused.

# Allowed behind a guard (Note [Argument guards] in include/fxcpp/torch/policy.h):
#   repeat_interleave: torch 1.13 crashes (SIGSEGV) on
#     repeat_interleave.self_int(zeros(3, 1, 4, 4), 2**62, -2) (the output size
#     overflows); the runtime checks the result size of all three overloads
#     before the kernel runs (torchaudio's WaveRNN lowers to self_int).
#   native_batch_norm, _native_batch_norm_legit (and .no_stats),
#   _native_batch_norm_legit_no_training: the kernel reads weight, bias,
#     running_mean and running_var as input.size(1) elements each through a raw
#     pointer, unchecked (torch 1.13 and 2.14: a short, empty or stride-0 one is
#     read out of bounds, an empty one of 65536 channels is a SIGSEGV; only the
#     batch_norm composite checks sizes), and in evaluation the running
#     statistics even when None (native_batch_norm(..., None, None, False, ...)
#     and _native_batch_norm_legit.no_stats(..., False, ...) are a SIGSEGV on
#     2.14). Dtypes and input ranks they check themselves. The runtime wants
#     each that is given to be a contiguous 1-D tensor of input.size(1)
#     elements, both statistics given when training is False, and the input to
#     have 2 dims or more. Core-ATen exports (run_decompositions()) of every
#     batch-norm model call _native_batch_norm_legit_no_training.
#   native_group_norm: its own size check compares N * C * HxW with the input's
#     elements after the product wrapped, and N = 0 with a non-empty input returns
#     uninitialised memory; lstm, gru, rnn_tanh, rnn_relu: initial states and weights
#     of the wrong shapes, empty or strided batch_sizes corrupt the heap; col2im
#     (padding 2**31: out-of-bounds writes) and max_pool1d (kernel 2**62 + 2: loops for
#     ever): window arguments; _weight_norm: g is read as v.size(dim) elements
#     unchecked, an empty v divides by zero (found by issue 35's probe; what each guard
#     checks is in Note [Argument guards]).
#   scaled_dot_product_attention, __and__/__or__/__xor__, lift_fresh_copy: probed with
#     mismatched, empty, stride-0 and rank-1/2/5 inputs, masks of the wrong shape, NaN and
#     huge scales, bad dropout and GQA head counts (run twice with different heap fill
#     bytes): clean errors or the same results; no guard.


FILE_WORDS = ('file', 'save', 'load', 'mmap')
RAW_WORDS = ('as_strided', 'unsafe', 'from_blob', 'storage', 'data_ptr')
OPAQUE_WORDS = ('sparse', 'quantiz', '_coo', 'csr', 'csc', 'bsr', 'bsc', 'coalesce', 'mkldnn', 'nested', 'fbgemm',
                'int_repr', 'to_padded', 'per_channel', 'per_tensor', 'qscheme')
OPAQUE_NAMES = {'indices', 'values', '_indices', '_values', 'crow_indices', 'col_indices', 'ccol_indices',
                'row_indices', '_nnz', 'dense_dim', 'sparse_dim', '_dimI', '_dimV'}


def refusal(base):
    """Mirror of refusal_by_name() in src/torch/policy.cpp: why `base` is refused, or None."""
    if any(w in base for w in FILE_WORDS):
        return 'it reads or writes files'
    if ((any(w in base for w in RAW_WORDS) and base != 'as_strided') or base in ('set', 'set_') or
            base.startswith(('set_', '_set_', '_make_'))):
        return 'it takes raw storages, pointers or offsets without checking them'
    if any(w in base for w in OPAQUE_WORDS) or base.startswith(('q_', '_q_')) or base in OPAQUE_NAMES:
        return 'it builds or reads sparse, quantized or opaque tensors without checking their invariants'
    if 'empty' in base or 'resize' in base:
        return 'it returns uninitialised memory'
    if 'backward' in base:
        return 'it is a backward kernel'
    return None


def private(base):
    """A leading underscore, except Python's operator names (__and__, ...), which are public."""
    return base.startswith('_') and not (base.startswith('__') and base.endswith('__'))


def admitted(base):
    return (refusal(base) is None and base not in EXCLUDED and
            (not private(base) or base in CHECKED_PRIVATE))


def core_overloads(torch):
    """'aten::name.overload' for every overload torch tags core."""
    out = []
    for name in dir(torch.ops.aten):
        try:
            packet = getattr(torch.ops.aten, name)
            overloads = packet.overloads()
        except Exception:
            continue
        for ov in overloads:
            if torch.Tag.core in getattr(packet, ov).tags:
                out.append(f'aten::{name}.{ov}')
    return sorted(set(out))


def base_of(entry):
    return entry.split('::', 1)[1].split('.', 1)[0]


def render(core):
    lines = [
        '// The operators a .fxpt file from an untrusted source may call: Note [What a',
        '// file may make the runtime do] in include/fxcpp/torch/policy.h. One entry a',
        '// line: "aten::name.overload" (".default" for the default overload) or',
        '// "aten::name" (every overload). Generated and checked by',
        '// scripts/gen_allowed_ops.py (its docstring says how); do not edit by hand.',
        '',
        '// ---- core ATen operators (torch 2.14.1, torch.Tag.core), minus refusals and unchecked privates ----',
    ]
    lines += [f'"{e}",' for e in core if admitted(base_of(e))]
    for group, names in COMPOSITES.items():
        lines.append('')
        lines.append(f'// ---- composites fxcpp.aten.lower emits: {group} ----')
        for n in names:
            if not admitted(n):
                why = refusal(n) or EXCLUDED.get(n) or 'private'
                raise SystemExit(f'gen_allowed_ops: composite {n!r} is refused: {why}')
            lines.append(f'"aten::{n}",')
    lines.append('')
    lines.append('// ---- allowed behind an argument guard (Note [Argument guards] in include/fxcpp/torch/policy.h) ----')
    for n in GUARDED:
        if not admitted(n):
            raise SystemExit(f'gen_allowed_ops: guarded {n!r} is refused: {refusal(n) or EXCLUDED.get(n) or "private"}')
        lines.append(f'"aten::{n}",')
    return '\n'.join(lines) + '\n'


def read_list():
    with open(LIST) as f:
        text = f.read()
    return text, re.findall(r'^"([^"]+)",$', text, re.M)


def committed_core(text):
    section = text.split('// ---- core ATen', 1)[1].split('\n\n', 1)[0]
    return re.findall(r'^"([^"]+)",$', section, re.M)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--write', action='store_true', help='regenerate the list (needs torch >= 2 with Tag.core)')
    ap.add_argument('--check', action='store_true', help='compare the committed list with the derived one (default)')
    args = ap.parse_args()
    import torch
    has_core = hasattr(torch, 'Tag') and hasattr(torch.Tag, 'core')
    if args.write:
        if not has_core:
            raise SystemExit(f'gen_allowed_ops: torch {torch.__version__} has no torch.Tag.core; use torch 2.x')
        with open(LIST, 'w') as f:
            f.write(render(core_overloads(torch)))
        print(f'wrote {LIST}')
        return 0
    text, entries = read_list()
    core = core_overloads(torch) if has_core else committed_core(text)
    want = render(core)
    problems = []
    if want != text:
        problems.append('the committed list differs from what the generator derives '
                        f'(torch {torch.__version__}); rerun with --write on torch 2.14.1 and review the diff')
    for e in entries:
        if refusal(base_of(e)):
            problems.append(f'{e} is on the list but refused: {refusal(base_of(e))}')
        if private(base_of(e)) and base_of(e) not in CHECKED_PRIVATE:
            problems.append(f'{e} is private and not in CHECKED_PRIVATE')
        if base_of(e) in EXCLUDED:
            problems.append(f'{e} is excluded: {EXCLUDED[base_of(e)]}')
    missing = [e for e in entries if not hasattr(torch.ops.aten, base_of(e))]
    if missing:
        print(f'note: torch {torch.__version__} registers none of: {" ".join(missing)}')
    for p in problems:
        print('gen_allowed_ops:', p, file=sys.stderr)
    print(f'{len(entries)} entries; {"OK" if not problems else "FAILED"}')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())

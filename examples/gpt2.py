"""A GPT-2-style decoder, KV-cache-free: token and position embeddings, pre-layer-norm blocks
with causal self-attention written out (no fused kernels), a GELU MLP and an output head tied to
the token embedding.

One definition for everything that exports or benchmarks a decoder (issue 25):
tests/python/test_pt2*.py use a tiny one (``GPT2Decoder()``), bench/bench_export.py a larger one
(``GPT2Decoder(vocab=4096, ctx=64, dim=256, heads=4, layers=6)``). Import it with ``examples/`` on
``sys.path``; torch is imported when a model is built, so a benchmark driver can import this file
without importing torch.
"""


def GPT2Decoder(vocab=50, ctx=16, dim=32, heads=4, layers=2):  # noqa: N802 -- builds a module
    """A fresh decoder over token ids of shape (batch, time), time <= ``ctx``; returns logits of
    shape (batch, time, vocab). Weights come from torch's default initialisers (seed first)."""
    return _decoder_class()(vocab, ctx, dim, heads, layers)


_CLASS = None


def _decoder_class():
    global _CLASS
    if _CLASS is not None:
        return _CLASS
    import torch

    class GPT2Decoder(torch.nn.Module):
        """GPT-2-style decoder (examples/gpt2.py)."""

        def __init__(self, vocab, ctx, dim, heads, layers):
            super().__init__()
            self.heads = heads
            self.wte = torch.nn.Embedding(vocab, dim)
            self.wpe = torch.nn.Embedding(ctx, dim)
            self.register_buffer('mask', torch.tril(torch.ones(ctx, ctx, dtype=torch.bool)), persistent=False)
            self.blocks = torch.nn.ModuleList(torch.nn.ModuleDict({
                'ln1': torch.nn.LayerNorm(dim), 'qkv': torch.nn.Linear(dim, 3 * dim),
                'proj': torch.nn.Linear(dim, dim), 'ln2': torch.nn.LayerNorm(dim),
                'fc': torch.nn.Linear(dim, 4 * dim), 'out': torch.nn.Linear(4 * dim, dim)}) for _ in range(layers))
            self.ln_f = torch.nn.LayerNorm(dim)

        def forward(self, tokens):
            b, t = tokens.shape
            h = self.wte(tokens) + self.wpe(torch.arange(t, device=tokens.device))
            for blk in self.blocks:
                q, k, v = blk['qkv'](blk['ln1'](h)).split(h.shape[-1], dim=2)
                q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
                att = (q @ k.transpose(-2, -1)) / (q.shape[-1] ** 0.5)
                att = att.masked_fill(~self.mask[:t, :t], float('-inf')).softmax(-1)
                h = h + blk['proj']((att @ v).transpose(1, 2).reshape(b, t, -1))
                h = h + blk['out'](torch.nn.functional.gelu(blk['fc'](blk['ln2'](h))))
            return self.ln_f(h) @ self.wte.weight.t()

    _CLASS = GPT2Decoder
    return _CLASS

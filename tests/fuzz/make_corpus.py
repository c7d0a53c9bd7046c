"""Writes the seed corpus of the .fxpt fuzzers (tests/fuzz/corpus).

    PYTHONPATH=build/pkg /usr/bin/python3 tests/fuzz/make_corpus.py

A file's name gives the outcome every reader must reach (FuzzCorpus.* in
tests/cpp_torch/fuzz_corpus_test.cpp replays them under ASan+UBSan):
`ok_*` loads and runs (inputs from the placeholders' tensor_meta), `bad_*` is
refused with a FormatError, `fail_*` loads and fails in forward with an Error. Valid files come from fxcpp.aten.save of small
lowered models; crafted ones break one container or tensor rule each (Note
[Strict zip container] in src/torch/zip_reader.cpp). Deterministic: the
weights come from a seeded generator; rerunning rewrites the same files.
"""
import os
import shutil
import struct
import sys
import warnings
import zipfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, '..', '..')
sys.path.insert(0, os.path.join(ROOT, 'build', 'pkg'))

import fxcpp.aten  # noqa: E402

OUT = os.path.join(HERE, 'corpus')


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(6, 8)
        self.b = torch.nn.Linear(8, 3)

    def forward(self, x):
        return torch.softmax(self.b(torch.relu(self.a(x))), -1)


class Primitives(torch.nn.Module):
    """Shape arithmetic through primitives: getattr shape, getitem, mul, floordiv, slices."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        n, c = x.shape[0], x.shape[1]
        y = x.reshape(n, c // 2, 2 * x.shape[2]).sum(-1)
        z = (x.flatten(1)[:, : x.shape[1]] @ self.w).tanh()
        return {'y': y, 'z': z[:, 1:3], 'k': (c - 1) % 3}


class Mixed(torch.nn.Module):
    """Integer and boolean inputs: an embedding lookup masked by a comparison."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)
        self.register_buffer('scale', torch.tensor([0.5, 1.0, 2.0, -1.0]))

    def forward(self, idx, mask):
        e = self.emb(idx) * self.scale
        return torch.where(mask.unsqueeze(-1), e, torch.zeros_like(e)).cumsum(1), idx.max()


class Conv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv2d(2, 3, 3, padding=1)
        self.n = torch.nn.BatchNorm2d(3).eval()

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(self.n(self.c(x)), 2)
        return torch.cat([y, y.transpose(2, 3)], 1).mean((2, 3))


def save(module, inputs, name):
    gm = fxcpp.aten.lower(module.eval(), *inputs)
    path = os.path.join(OUT, name)
    fxcpp.aten.save(gm, path)
    return path


def records(path):
    with zipfile.ZipFile(path) as z:
        return [(i.filename, z.read(i)) for i in z.infolist()]


def write_zip(path, recs, compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, 'w', compression) as z:
        for name, data in recs:
            z.writestr(zipfile.ZipInfo(name), data, compress_type=compression)


def patch(path, out, edit):
    with open(path, 'rb') as f:
        b = bytearray(f.read())
    edit(b)
    with open(os.path.join(OUT, out), 'wb') as f:
        f.write(bytes(b))


def crafted(base):
    recs = records(base)
    graph = [r for r in recs if r[0].endswith('/graph.json')][0]
    gi = recs.index(graph)
    # Compressed: really deflated, and stored with the method saying deflated.
    write_zip(os.path.join(OUT, 'bad_deflated.fxpt'), recs, zipfile.ZIP_DEFLATED)

    def declared_deflated(b):  # data/0's method field, in its local header and its directory entry
        for sig, at, name_at in ((b'PK\x03\x04', 8, 30), (b'PK\x01\x02', 10, 46)):
            p = b.find(sig)
            while not b[p + name_at:].startswith(recs[1][0].encode()):
                p = b.find(sig, p + 1)
            struct.pack_into('<H', b, p + at, 8)
    write_zip(os.path.join(OUT, 'bad_declared_deflated.fxpt'), recs)
    patch(os.path.join(OUT, 'bad_declared_deflated.fxpt'), 'bad_declared_deflated.fxpt', declared_deflated)
    # A data byte changed, the CRC not.
    def flip(b):
        p = b.find(b'PK\x03\x04', b.find(b'PK\x03\x04') + 1)  # the second record's header
        n, x = struct.unpack_from('<HH', b, p + 26)
        b[p + 30 + n + x] ^= 0x5a
    patch(base, 'bad_crc.fxpt', flip)
    # Two graph.json records (the second a different graph).
    other = graph[1].replace(b'"aten::relu"', b'"aten::tanh"')
    with zipfile.ZipFile(os.path.join(OUT, 'bad_duplicate_graph.fxpt'), 'w') as z:
        for name, data in recs:
            z.writestr(zipfile.ZipInfo(name), data)
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')  # "Duplicate name": the point
            z.writestr(zipfile.ZipInfo(graph[0]), other)
    # A second end record appended; the central directory cut short.
    with open(base, 'rb') as f:
        b = f.read()
    with open(os.path.join(OUT, 'bad_two_end_records.fxpt'), 'wb') as f:
        f.write(b + b[-22:])
    cd = b.rfind(b'PK\x01\x02')
    with open(os.path.join(OUT, 'bad_truncated.fxpt'), 'wb') as f:
        f.write(b[:cd + 20])
    # A 4-byte record backing 2^62 elements through stride 0.
    g = graph[1]
    at = g.index(b'"sizes":[')
    end = g.index(b'"strides":[', at)
    stop = g.index(b']', end)
    huge = g[:at] + b'"sizes":[4611686018427387904],"strides":[0]' + g[stop + 1:]
    write_zip(os.path.join(OUT, 'bad_stride0.fxpt'), recs[:gi] + [(graph[0], huge)] + recs[gi + 1:])
    # Names outside the top folder; an operator that does not exist.
    write_zip(os.path.join(OUT, 'bad_two_folders.fxpt'),
              [(('other/' + n.split('/', 1)[1]) if i == 1 else n, d) for i, (n, d) in enumerate(recs)])
    write_zip(os.path.join(OUT, 'bad_unknown_operator.fxpt'),
              recs[:gi] + [(graph[0], graph[1].replace(b'"aten::relu"', b'"aten::no_such_op"'))] + recs[gi + 1:])


def edited(base, name, old, new):
    """`base` with one edit of its graph.json."""
    recs = records(base)
    out = []
    for n, d in recs:
        if n.endswith('/graph.json'):
            assert old in d, (base, old)
            d = d.replace(old, new, 1)
        out.append((n, d))
    write_zip(os.path.join(OUT, name), out)


# Files the coverage-guided fuzzer found, committed as found (not made here).
FOUND = ('fail_int_sub_overflow.fxpt',)  # operator.sub(n, INT64_MIN): overflow in the runtime's primitives


def main():
    torch.manual_seed(0)
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.startswith(('ok_', 'bad_', 'fail_')) and f not in FOUND:
            os.remove(os.path.join(OUT, f))
    shutil.copy(os.path.join(ROOT, 'tests', 'cpp_torch', 'fixtures', 'small_v1.fxpt'),
                os.path.join(OUT, 'ok_small_v1.fxpt'))
    mlp = save(Mlp(), (torch.randn(2, 6),), 'ok_mlp.fxpt')
    save(Primitives(), (torch.randn(3, 4, 2),), 'ok_primitives.fxpt')
    save(Mixed(), (torch.tensor([[1, 2, 9], [0, 3, 3]]), torch.tensor([[True, False, True], [False, True, True]])),
         'ok_mixed.fxpt')
    save(Conv(), (torch.randn(1, 2, 6, 6),), 'ok_conv.fxpt')
    crafted(mlp)
    # Files that load and fail in forward (found by the fuzzers: kernels that throw
    # exceptions other than c10::Error, which forward must still report as Error).
    edited(os.path.join(OUT, 'ok_small_v1.fxpt'), 'fail_view_shape.fxpt',
           b'{"list":[{"node":"size_int"},{"node":"mul_1"}]}', b'{"list":[{"node":"size_int"},1]}')
    edited(os.path.join(OUT, 'ok_conv.fxpt'), 'fail_conv_stride.fxpt',
           b'{"node":"c_bias"},{"list":[1,1]', b'{"node":"c_bias"},{"list":[4294967296,1]')
    for f in sorted(os.listdir(OUT)):
        print(f, os.path.getsize(os.path.join(OUT, f)))


if __name__ == '__main__':
    main()

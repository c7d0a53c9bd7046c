"""The strict .fxpt container from Python (Note [Strict zip container] in
src/torch/zip_reader.cpp; docs/fxpt_format.md): archives other zip writers
make that an honest reader must refuse, each a ValueError that says what is
wrong, with either runtime; and the archives they make that must load.

The C++ tests (tests/cpp_torch/zip_test.cpp) craft archives field by field;
here Python's own zipfile makes them, as an attacker with the standard library
would.
"""
import io
import os
import warnings
import zipfile

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from fxcpp import aten

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, '..', 'cpp_torch', 'fixtures', 'small_v1.fxpt')


def _records():
    with zipfile.ZipFile(FIXTURE) as z:
        return [(i.filename, z.read(i)) for i in z.infolist()]


def _write(path, records, compression=zipfile.ZIP_STORED):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # "Duplicate name"
        with zipfile.ZipFile(path, 'w', compression) as z:
            for name, data in records:
                z.writestr(zipfile.ZipInfo(name), data, compress_type=compression)
    return path


def _edit_graph(records, old, new):
    out = []
    for name, data in records:
        if name.endswith('/graph.json'):
            assert old in data
            data = data.replace(old, new, 1)
        out.append((name, data))
    return out


def _input():
    return (torch.arange(3 * 8 * 8, dtype=torch.float32).reshape(1, 3, 8, 8) % 7 - 3) / 4


def _refused(path, message):
    for runtime in ('cpp', 'python'):
        with pytest.raises(ValueError, match=message):
            aten.load(path, runtime=runtime)


def test_zipfile_stored_archive_loads(tmp_path):
    path = _write(tmp_path / 'stored.fxpt', _records())
    want = aten.load(FIXTURE, runtime='cpp')(_input())
    for runtime in ('cpp', 'python'):
        got = aten.load(path, runtime=runtime)(_input())
        assert torch.equal(got['out'], want['out'])


def test_compressed_records_are_refused_without_inflating(tmp_path):
    # Really deflated (what `zip` makes by default), and a 1 GiB bomb: graph.json
    # padded with a gigabyte of spaces, deflated to a few megabytes.
    _refused(_write(tmp_path / 'deflated.fxpt', _records(), zipfile.ZIP_DEFLATED), r"is compressed \(deflate\)")
    records = _records()
    name, text = [r for r in records if r[0].endswith('/graph.json')][0]
    bomb = tmp_path / 'bomb.fxpt'
    with zipfile.ZipFile(bomb, 'w', zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        with z.open(name, 'w', force_zip64=True) as f:
            f.write(text)
            chunk = b' ' * (1 << 20)
            for _ in range(1024):
                f.write(chunk)
        for n, d in records:
            if n != name:
                z.writestr(zipfile.ZipInfo(n), d)
    assert os.path.getsize(bomb) < 8 << 20
    _refused(bomb, r"is compressed \(deflate\)")


def test_duplicate_graph_is_refused(tmp_path):
    # PyTorch's reader loads the last graph.json, `unzip -p` prints the first.
    records = _records()
    graph = [r for r in records if r[0].endswith('/graph.json')][0]
    other = (graph[0], graph[1].replace(b'"aten::relu"', b'"aten::tanh"', 1))
    _refused(_write(tmp_path / 'dup.fxpt', records + [other]), "two entries are named 'small_v1/graph.json'")


def test_altered_record_is_refused(tmp_path):
    path = _write(tmp_path / 'crc.fxpt', _records())
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.getinfo('small_v1/data/0')
    start = info.header_offset + 30 + len(info.filename.encode())
    data[start + 7] ^= 0x10  # a weight changes, the CRC does not
    path.write_bytes(bytes(data))
    _refused(path, r"record 'small_v1/data/0' has CRC-32 0x[0-9a-f]+, the archive says")


def test_appended_archives_and_end_records_are_refused(tmp_path):
    good = _write(tmp_path / 'good.fxpt', _records()).read_bytes()
    (tmp_path / 'twice.fxpt').write_bytes(good + good[-22:])
    _refused(tmp_path / 'twice.fxpt', 'more than one end-of-central-directory record')
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, 'w') as z:
        z.comment = good[-22:] + b'!'
        for name, data in _records():
            z.writestr(zipfile.ZipInfo(name), data)
    (tmp_path / 'comment.fxpt').write_bytes(buf.getvalue())
    _refused(tmp_path / 'comment.fxpt', 'comment holds another end-of-central-directory record')


def test_stride_zero_tensor_cannot_claim_a_huge_extent(tmp_path):
    # conv.bias: 16 bytes backing 2^62 elements through a stride of 0.
    records = _edit_graph(_records(), b'"sizes":[4],"strides":[1]', b'"sizes":[4611686018427387904],"strides":[0]')
    _refused(_write(tmp_path / 'stride0.fxpt', records),
             'more than the 281474976710656 bytes a tensor may have')


_GOOD = open(FIXTURE, 'rb').read()


@settings(max_examples=int(os.environ.get('FXCPP_HYPOTHESIS_MAX_EXAMPLES', 60)), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.integers(0, len(_GOOD) - 1), st.integers(1, 255)), min_size=1, max_size=4))
def test_altered_bytes_refuse_or_load_identically(tmp_path, edits):
    # Any change to the bytes the container checks (records by CRC, structure by
    # the rules) is refused; a change elsewhere (alignment padding) loads the same
    # model.
    data = bytearray(_GOOD)
    for at, x in edits:
        data[at] ^= x
    path = tmp_path / 'edited.fxpt'
    path.write_bytes(bytes(data))
    try:
        m = aten.load(path, runtime='cpp')
    except ValueError as e:
        assert str(e)
        return
    want = aten.load(FIXTURE, runtime='cpp')(_input())
    assert torch.equal(m(_input())['out'], want['out'])

"""mx.recordio: RecordIO files byte for byte as MXNet writes them, indexed access and the
image-record header."""

from __future__ import annotations

import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
import rsmx as mx
from rsmx import recordio

FIXTURES = Path(__file__).parent / "fixtures" / "recordio"
MAGIC = struct.pack("<I", 0xCED7230A)


def records():
    """The records of the fixtures (see make_recordio.py)."""
    out = [bytes(range(n)) for n in range(10)]
    out.append(MAGIC + b"abcd" + MAGIC + MAGIC + b"xy")
    out.append(MAGIC)
    out.append(recordio.pack(recordio.IRHeader(0, 3.5, 7, 0), b"payload"))
    out.append(recordio.pack(recordio.IRHeader(0, [1.0, 2.0, 3.0], 8, 1), b"more"))
    return out


def test_files_written_match_mxnets_bytes(tmp_path):
    w = recordio.MXRecordIO(str(tmp_path / "seq.rec"), "w")
    for r in records():
        w.write(r)
    w.close()
    assert (tmp_path / "seq.rec").read_bytes() == (FIXTURES / "seq.rec").read_bytes()
    w = recordio.MXIndexedRecordIO(str(tmp_path / "i.idx"), str(tmp_path / "i.rec"), "w")
    for i, r in enumerate(records()):
        w.write_idx(i * 3, r)
    w.close()
    assert (tmp_path / "i.rec").read_bytes() == (FIXTURES / "indexed.rec").read_bytes()
    assert (tmp_path / "i.idx").read_text() == (FIXTURES / "indexed.idx").read_text()


def test_mxnets_files_read_back_whole_records():
    r = mx.recordio.MXRecordIO(str(FIXTURES / "seq.rec"), "r")
    assert [r.read() for _ in records()] == records()
    assert r.read() is None
    r.reset()
    assert r.read() == b""
    r = mx.recordio.MXIndexedRecordIO(str(FIXTURES / "indexed.idx"), str(FIXTURES / "indexed.rec"), "r")
    assert r.keys == [i * 3 for i in range(len(records()))]
    for i in reversed(range(len(records()))):
        assert r.read_idx(i * 3) == records()[i]
    header, payload = recordio.unpack(r.read_idx(39))
    assert (header.flag, header.id, header.id2, payload) == (3, 8, 1, b"more")
    np.testing.assert_array_equal(header.label, [1.0, 2.0, 3.0])
    header, payload = recordio.unpack(r.read_idx(36))
    assert header == recordio.IRHeader(0, 3.5, 7, 0) and payload == b"payload"
    with pytest.raises(KeyError):
        r.read_idx(1)


def test_pack_label_round_trips():
    rng = np.random.RandomState(0)
    for n in (1, 2, 7):
        for length in (0, 1, 5, 33):
            content = bytes(rng.randint(0, 256, size=length).astype(np.uint8))
            label = rng.uniform(size=n).astype(np.float32)
            header, back = recordio.unpack(recordio.pack((0, label, 0, 0), content))
            assert header.flag == n and back == content
            np.testing.assert_array_equal(header.label, label)


def test_bad_files_and_misuse(tmp_path):
    with pytest.raises(ValueError, match="Invalid flag"):
        recordio.MXRecordIO(str(tmp_path / "x.rec"), "a")
    with pytest.raises(mx.MXNetError, match="cannot open"):
        recordio.MXRecordIO(str(tmp_path / "missing.rec"), "r")
    (tmp_path / "bad.rec").write_bytes(b"not a record file")
    with pytest.raises(mx.MXNetError, match="not a RecordIO file"):
        recordio.MXRecordIO(str(tmp_path / "bad.rec"), "r").read()
    (tmp_path / "cut.rec").write_bytes((FIXTURES / "seq.rec").read_bytes()[:38])
    r = recordio.MXRecordIO(str(tmp_path / "cut.rec"), "r")
    assert [r.read() for _ in range(3)] == records()[:3]
    with pytest.raises(mx.MXNetError, match="ends inside a record"):
        r.read()
    w = recordio.MXRecordIO(str(tmp_path / "w.rec"), "w")
    with pytest.raises(mx.MXNetError, match="open for writing"):
        w.read()
    with pytest.raises(mx.MXNetError, match="header"):
        recordio.unpack(b"short")


def test_pickled_reader_reopens_where_the_file_is(tmp_path):
    path = str(tmp_path / "p.rec")
    w = recordio.MXRecordIO(path, "w")
    w.write(b"one")
    w.write(b"two")
    w.close()
    r = recordio.MXRecordIO(path, "r")
    assert r.read() == b"one"
    clone = pickle.loads(pickle.dumps(r))
    assert clone.read() == b"one" and clone.read() == b"two"

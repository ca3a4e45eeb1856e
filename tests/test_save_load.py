"""mx.nd.save / mx.nd.load: MXNet's NDArray file format, checked against files MXNet 1.9.1 wrote.

The fixtures in tests/fixtures/ were written by MXNet 1.9.1 (see make_fixtures.py there); each
`X.params` has its expected contents in `X.npz`. Set RSMX_TEST_AGAINST_MXNET=1 to run these tests
against MXNet 1.9.1 itself (a check of the tests); tests of behaviour where rsmx deliberately
goes beyond MXNet are skipped then.
"""

import os
import pathlib
import struct

import numpy as np
import pytest

AGAINST_MXNET = os.environ.get("RSMX_TEST_AGAINST_MXNET") == "1"
if AGAINST_MXNET:
    import mxnet as mx
else:
    import rsmx as mx

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"

# What each fixture holds: a dict (npz keys are the names, in file order) or a list (npz keys
# arr_0, arr_1, ...).
KIND = {
    "dict_all_dtypes": dict,
    "list": list,
    "single": list,
    "legacy_v1": dict,
    "gpu_ctx": dict,
    "zero_d": list,
    "npx_v3": dict,
}
DENSE_FIXTURES = ["dict_all_dtypes", "list", "single", "legacy_v1", "gpu_ctx"]
LIST_CTX = [mx.cpu(0), mx.cpu(1), mx.cpu(0)]
ALL_DTYPES = [np.float32, np.float64, np.float16, np.uint8, np.int32, np.int8, np.int64, np.bool_]
LIST_MAGIC = 0x112
V2_MAGIC = 0xF993FAC9

skip_mxnet = pytest.mark.skipif(AGAINST_MXNET, reason="rsmx behaviour beyond MXNet 1.9.1")


def expected(name):
    """The arrays fixture `name` holds: a dict in file order, or a list."""
    with np.load(FIXTURES / f"{name}.npz") as z:
        if KIND[name] is list:
            return [z[f"arr_{i}"] for i in range(len(z.files))]
        return {k: z[k] for k in z.files}


def assert_same(nd, want):
    """`nd` has `want`'s dtype, shape and exact bytes."""
    assert isinstance(nd, mx.nd.NDArray)
    assert np.dtype(nd.dtype) == want.dtype, (nd.dtype, want.dtype)
    assert tuple(nd.shape) == want.shape
    got = nd.asnumpy()
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    # bit-exact: NaN payloads and -0.0 survive
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()


def assert_loaded(got, want):
    if isinstance(want, dict):
        assert isinstance(got, dict)
        assert list(got.keys()) == list(want.keys())
        for k, v in want.items():
            assert_same(got[k], v)
    else:
        assert isinstance(got, list)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=False):
            assert_same(g, w)


def nd(a, ctx=None):
    # A `ctx` fixture context is rsmx's; against MXNet it is rebuilt as MXNet's own.
    ctx = mx.cpu(0) if ctx is None else mx.Context(ctx.device_type, ctx.device_id)
    return mx.nd.array(a, dtype=a.dtype, ctx=ctx)


def save_bytes(tmp_path, data, name="out.params"):
    path = tmp_path / name
    mx.nd.save(str(path), data)
    return path.read_bytes()


# ---------------------------------------------------------------------------------------------
# Loading MXNet's files


@pytest.mark.parametrize("name", DENSE_FIXTURES)
def test_load_fixture(name):
    want = expected(name)
    got = mx.nd.load(str(FIXTURES / f"{name}.params"))
    assert_loaded(got, want)


def test_fixture_contents_cover_every_dtype():
    want = expected("dict_all_dtypes")
    assert {np.dtype(d) for d in ALL_DTYPES} <= {v.dtype for v in want.values()}
    ndims = {v.ndim for v in want.values()}
    assert {1, 2, 3, 4} <= ndims
    assert any(v.size == 0 for v in want.values())


def test_load_single_is_a_list_of_one():
    got = mx.nd.load(str(FIXTURES / "single.params"))
    assert isinstance(got, list) and len(got) == 1


def test_load_names_keep_file_order_and_unicode():
    got = mx.nd.load(str(FIXTURES / "dict_all_dtypes.params"))
    keys = list(got.keys())
    assert keys[0] == "arg:w_float32"
    assert "aux:i64" in keys
    assert "n\u00e4me \u00fcnicode" in keys


@skip_mxnet  # MXNet 1.9.1 writes 0-d arrays but its reader cannot read them back
def test_load_zero_d():
    got = mx.nd.load(str(FIXTURES / "zero_d.params"))
    assert_loaded(got, expected("zero_d"))
    assert got[0].shape == ()


def test_load_npx_v3():
    path = str(FIXTURES / "npx_v3.params")
    # V3 records load only under numpy shape semantics, as in MXNet.
    with pytest.raises(mx.base.MXNetError, match="np shape"):
        mx.nd.load(path)
    with mx.np_shape(True):
        got = mx.nd.load(path)
        got = {k: (v.shape, v.asnumpy()) for k, v in got.items()}
    want = expected("npx_v3")
    assert list(got.keys()) == list(want.keys())
    for k, v in want.items():
        shape, arr = got[k]
        assert tuple(shape) == v.shape
        assert arr.dtype == v.dtype
        np.testing.assert_array_equal(arr, v)


def test_load_gpu_context_values():
    # Saved from gpu(0): loads onto a GPU if there is one, else onto the CPU; values equal.
    got = mx.nd.load(str(FIXTURES / "gpu_ctx.params"))
    assert_loaded(got, expected("gpu_ctx"))


@skip_mxnet  # MXNet loads sparse arrays; rsmx does not support sparse storage
@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_load_sparse_is_not_supported(stype):
    with pytest.raises(mx.base.MXNetError, match=stype):
        mx.nd.load(str(FIXTURES / f"{stype}.params"))


def test_load_missing_file(tmp_path):
    with pytest.raises(mx.base.MXNetError):
        mx.nd.load(str(tmp_path / "does_not_exist.params"))


# ---------------------------------------------------------------------------------------------
# Saving: the same bytes as MXNet


def test_save_dict_byte_identical(tmp_path):
    want = expected("dict_all_dtypes")
    data = {k: nd(v) for k, v in want.items()}
    assert save_bytes(tmp_path, data) == (FIXTURES / "dict_all_dtypes.params").read_bytes()


def test_save_list_byte_identical(tmp_path):
    want = expected("list")
    data = [nd(v, c) for v, c in zip(want, LIST_CTX, strict=False)]
    assert save_bytes(tmp_path, data) == (FIXTURES / "list.params").read_bytes()


def test_save_single_byte_identical(tmp_path):
    (want,) = expected("single")
    assert save_bytes(tmp_path, nd(want)) == (FIXTURES / "single.params").read_bytes()


def test_save_zero_d_byte_identical(tmp_path):
    want = expected("zero_d")
    data = [nd(w) for w in want]
    assert data[0].shape == ()
    assert save_bytes(tmp_path, data) == (FIXTURES / "zero_d.params").read_bytes()


@pytest.mark.gpu
def test_save_gpu_byte_identical(tmp_path):
    want = expected("gpu_ctx")
    data = {k: nd(v, mx.gpu(0)) for k, v in want.items()}
    assert save_bytes(tmp_path, data) == (FIXTURES / "gpu_ctx.params").read_bytes()


def test_save_loaded_fixture_again(tmp_path):
    # load then save gives the file back (all its arrays were on cpu(0))
    for name in ("dict_all_dtypes", "single"):
        raw = (FIXTURES / f"{name}.params").read_bytes()
        loaded = mx.nd.load(str(FIXTURES / f"{name}.params"))
        assert save_bytes(tmp_path, loaded) == raw


def test_save_empty(tmp_path):
    empty = struct.pack("<QQQQ", LIST_MAGIC, 0, 0, 0)
    assert save_bytes(tmp_path, [], "a.params") == empty
    assert save_bytes(tmp_path, {}, "b.params") == empty
    # no names: an empty dict comes back as an empty list, as in MXNet
    assert mx.nd.load(str(tmp_path / "b.params")) == []


def test_save_layout(tmp_path):
    raw = save_bytes(tmp_path, {"ab": nd(np.array([[1, 2, 3]], dtype=np.int32))})
    head = struct.pack("<QQQ", LIST_MAGIC, 0, 1)
    rec = struct.pack("<Iiiqqiii", V2_MAGIC, 0, 2, 1, 3, 1, 0, 4) + struct.pack("<3i", 1, 2, 3)
    names = struct.pack("<QQ", 1, 2) + b"ab"
    assert raw == head + rec + names


# ---------------------------------------------------------------------------------------------
# Round trips

SHAPES = [(0,), (4,), (3, 1), (2, 0, 3), (2, 3, 4), (1, 2, 3, 2), (2, 1, 1, 1, 1, 3)]


def sample(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype) == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    return (rng.standard_normal(size=shape) * 100).astype(dtype)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_round_trip_every_dtype(tmp_path, dtype, ctx):
    arrays = {f"a{i}": sample(dtype, s, i) for i, s in enumerate(SHAPES)}
    path = str(tmp_path / "d.params")
    mx.nd.save(path, {k: nd(v, ctx) for k, v in arrays.items()})
    loaded = mx.nd.load(path)
    assert_loaded(loaded, arrays)
    first = (tmp_path / "d.params").read_bytes()
    mx.nd.save(path, loaded)
    assert (tmp_path / "d.params").read_bytes() == first

    lst = list(arrays.values())
    mx.nd.save(path, [nd(v, ctx) for v in lst])
    assert_loaded(mx.nd.load(path), lst)


@skip_mxnet  # MXNet 1.9.1 cannot load the 0-d arrays it saves
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_round_trip_zero_d(tmp_path, dtype, ctx):
    a = sample(dtype, (), 3)
    path = str(tmp_path / "z.params")
    mx.nd.save(path, {"s": nd(a, ctx)})
    got = mx.nd.load(path)
    assert_loaded(got, {"s": a})


def test_round_trip_special_floats(tmp_path, ctx):
    a = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45, 3.4e38], dtype=np.float32)
    h = np.array([np.nan, np.inf, -0.0, 6.0e-8, 65504.0], dtype=np.float16)
    d = np.array([np.nan, -0.0, 5e-324, 1.7e308], dtype=np.float64)
    path = str(tmp_path / "f.params")
    mx.nd.save(path, [nd(a, ctx), nd(h, ctx), nd(d, ctx)])
    assert_loaded(mx.nd.load(path), [a, h, d])


def test_round_trip_context(tmp_path):
    a = np.arange(4, dtype=np.float32)
    path = str(tmp_path / "c.params")
    mx.nd.save(path, [nd(a, mx.cpu(2))])
    raw = (tmp_path / "c.params").read_bytes()
    # the record stores the context it was saved from: cpu(2) = (dev_type 1, dev_id 2)
    ctx_at = 24 + 4 + 4 + 4 + 8
    assert struct.unpack_from("<ii", raw, ctx_at) == (1, 2)
    assert_loaded(mx.nd.load(path), [a])


# ---------------------------------------------------------------------------------------------
# Corrupt and truncated files


def write(tmp_path, raw, name="bad.params"):
    path = tmp_path / name
    path.write_bytes(raw)
    return str(path)


def test_truncated_at_every_offset(tmp_path):
    raw = (FIXTURES / "list.params").read_bytes()
    for cut in range(len(raw)):
        with pytest.raises(mx.base.MXNetError):
            mx.nd.load(write(tmp_path, raw[:cut]))
    assert len(mx.nd.load(write(tmp_path, raw))) == 3


def test_truncated_dict(tmp_path):
    raw = (FIXTURES / "dict_all_dtypes.params").read_bytes()
    for cut in list(range(0, 64)) + list(range(64, len(raw), 7)) + [len(raw) - 1]:
        with pytest.raises(mx.base.MXNetError):
            mx.nd.load(write(tmp_path, raw[:cut]))


def patched(raw, offset, fmt, value):
    b = bytearray(raw)
    struct.pack_into(fmt, b, offset, value)
    return bytes(b)


# Offsets in single.params: header 24, magic 24, stype 28, ndim 32, dims 36 and 44, ctx 52,
# dtype flag 60, data 64.
CORRUPTIONS = {
    "bad_file_magic": (0, "<Q", 0x113),
    "bad_record_magic": (24, "<I", 0xDEADBEEF),
    "unknown_dtype_flag": (60, "<i", 99),
    "unknown_storage_type": (28, "<i", 7),
    "huge_ndim": (32, "<i", 0x7FFFFFFF),
    "huge_dim": (36, "<q", 1 << 40),
    "huge_array_count": (16, "<Q", 1 << 62),
}


@pytest.mark.parametrize("what", sorted(CORRUPTIONS))
def test_corrupted(tmp_path, what):
    raw = (FIXTURES / "single.params").read_bytes()
    assert struct.unpack_from("<Ii", raw, 24) == (V2_MAGIC, 0)
    assert struct.unpack_from("<i", raw, 60) == (1,)
    offset, fmt, value = CORRUPTIONS[what]
    with pytest.raises(mx.base.MXNetError):
        mx.nd.load(write(tmp_path, patched(raw, offset, fmt, value)))


@skip_mxnet  # MXNet gives no offsets (or, for some, a C++ library message)
@pytest.mark.parametrize("what", sorted(CORRUPTIONS))
def test_corrupted_message_says_where(tmp_path, what):
    raw = (FIXTURES / "single.params").read_bytes()
    offset, fmt, value = CORRUPTIONS[what]
    with pytest.raises(mx.base.MXNetError, match="byte offset"):
        mx.nd.load(write(tmp_path, patched(raw, offset, fmt, value)))


def test_names_do_not_match_arrays(tmp_path):
    raw = (FIXTURES / "list.params").read_bytes()
    assert raw.endswith(struct.pack("<Q", 0))
    bad = raw[:-8] + struct.pack("<QQ", 1, 1) + b"x"
    with pytest.raises(mx.base.MXNetError):
        mx.nd.load(write(tmp_path, bad))


@pytest.mark.parametrize(
    "raw",
    [b"", b"\x12\x01", b"not an ndarray file at all, just some text" * 3, bytes(range(256)) * 4],
    ids=["empty", "short", "text", "binary"],
)
def test_garbage(tmp_path, raw):
    with pytest.raises(mx.base.MXNetError):
        mx.nd.load(write(tmp_path, raw))


# ---------------------------------------------------------------------------------------------
# Saving what is not an NDArray


@pytest.mark.parametrize(
    "data",
    [
        [1, 2],
        np.ones(3),
        "text",
        None,
        {1: "not an array"},
        {"a": np.ones(2)},
        [np.ones(2)],
    ],
    ids=["ints", "numpy", "str", "none", "int_key", "numpy_value", "numpy_in_list"],
)
def test_save_rejects_non_ndarray(tmp_path, data):
    with pytest.raises((mx.base.MXNetError, TypeError, ValueError)):
        mx.nd.save(str(tmp_path / "x.params"), data)


def test_save_rejects_non_str_key(tmp_path):
    with pytest.raises((mx.base.MXNetError, TypeError)):
        mx.nd.save(str(tmp_path / "x.params"), {1: nd(np.ones(2, dtype=np.float32))})

"""mx.io: DataDesc, DataBatch, NDArrayIter (against MXNet 1.9.1's batches), ResizeIter and
PrefetchingIter."""

from __future__ import annotations

import json
import pickle
import threading
from pathlib import Path

import numpy as np
import pytest
import rsmx as mx
from rsmx.base import MXNetError, MXNetTypeError, MXNetValueError

FIXTURES = Path(__file__).parent / "fixtures" / "training"
IO_CASES = json.loads((FIXTURES / "io.json").read_text())


def _epochs(it, n_epochs: int, manual: bool = False) -> list:
    out = []
    for _ in range(n_epochs):
        batches = []
        if manual:
            while it.iter_next():
                batches.append({
                    "data": [d.asnumpy().tolist() for d in it.getdata()],
                    "label": [lab.asnumpy().tolist() for lab in it.getlabel()],
                    "pad": it.getpad(),
                })
        else:
            for b in it:
                assert isinstance(b, mx.io.DataBatch)
                for arr in b.data + b.label:
                    assert isinstance(arr, mx.nd.NDArray)
                    assert arr.context == mx.cpu()
                batches.append({
                    "data": [d.asnumpy().tolist() for d in b.data],
                    "label": [lab.asnumpy().tolist() for lab in b.label],
                    "pad": b.pad,
                })
        out.append(batches)
        it.reset()
    return out


@pytest.mark.parametrize(
    "case",
    IO_CASES["cases"],
    ids=lambda c: f"n{c['n']}-bs{c['batch_size']}-{c['handle']}-{'shuf' if c['shuffle'] else 'seq'}",
)
def test_ndarrayiter_batches_match_mxnet(case: dict) -> None:
    np.random.seed(case["seed"])
    n = case["n"]
    it = mx.io.NDArrayIter(
        np.arange(2 * n).reshape(n, 2),
        np.arange(n),
        batch_size=case["batch_size"],
        shuffle=case["shuffle"],
        last_batch_handle=case["handle"],
    )
    if case.get("error"):
        with pytest.raises(MXNetError):
            _epochs(it, 3)
    else:
        assert _epochs(it, 3) == case["epochs"]


@pytest.mark.parametrize("case", IO_CASES["multi"], ids=lambda c: c["handle"])
def test_ndarrayiter_several_sources(case: dict) -> None:
    def make():
        data = {"b": np.arange(7) + 100, "a": np.arange(14).reshape(7, 2)}
        label = [np.arange(7), -np.arange(7)]
        return mx.io.NDArrayIter(data, label, batch_size=3, last_batch_handle=case["handle"])

    it = make()
    assert [[d.name, list(d.shape)] for d in it.provide_data] == case["provide_data"]
    assert [[d.name, list(d.shape)] for d in it.provide_label] == case["provide_label"]
    assert _epochs(it, 3) == case["epochs"]
    assert _epochs(make(), 2, manual=True) == case["manual"]


def test_ndarrayiter_names_dtypes_and_descs() -> None:
    data = mx.nd.array(np.arange(12).reshape(6, 2), dtype="int32")
    it = mx.io.NDArrayIter(data, np.ones(6), batch_size=4, data_name="x", label_name="y")
    (dd,) = it.provide_data
    (ld,) = it.provide_label
    assert (dd.name, dd.shape, dd.dtype, dd.layout) == ("x", (4, 2), np.int32, "NCHW")
    assert (ld.name, ld.shape, ld.dtype) == ("y", (4,), np.float32)
    batch = it.next()
    assert batch.data[0].dtype == np.int32
    assert batch.index is None and batch.pad == 0
    assert str(batch) == "DataBatch: data shapes: [(4, 2)] label shapes: [(4,)]"
    # As in MXNet 1.x, shuffling copies the arrays into float32.
    np.random.seed(1)
    shuffled = mx.io.NDArrayIter(data, batch_size=2, shuffle=True)
    assert shuffled.provide_data[0].dtype == np.float32
    rows = np.concatenate([b.data[0].asnumpy() for b in shuffled])
    assert sorted(map(tuple, rows.tolist())) == [(2 * i, 2 * i + 1) for i in range(6)]
    assert rows.tolist() != np.arange(12).reshape(6, 2).tolist()


def test_ndarrayiter_without_label() -> None:
    it = mx.io.NDArrayIter(mx.nd.ones((5, 3)), batch_size=2)
    assert it.provide_label == []
    batches = list(it)
    assert len(batches) == 3 and batches[-1].pad == 1
    assert batches[0].label == []
    assert str(batches[0]) == "DataBatch: data shapes: [(2, 3)] label shapes: None"


def test_ndarrayiter_hard_reset_drops_rolled_over_examples() -> None:
    it = mx.io.NDArrayIter(np.arange(5), batch_size=2, last_batch_handle="roll_over")
    assert [b.data[0].asnumpy().tolist() for b in it] == [[0, 1], [2, 3]]
    it.hard_reset()
    first = it.next()
    assert first.data[0].asnumpy().tolist() == [0, 1] and first.pad == 0


def test_ndarrayiter_bad_input() -> None:
    with pytest.raises(MXNetValueError, match="'softmax_label' has 8 examples but 'data' has 10"):
        mx.io.NDArrayIter(np.arange(10), np.arange(8), batch_size=3)
    with pytest.raises(MXNetValueError, match="has 4 examples"):
        mx.io.NDArrayIter({"a": np.ones(5), "b": np.ones(4)}, batch_size=2)
    with pytest.raises(ValueError, match="last_batch_handle"):
        mx.io.NDArrayIter(np.arange(10), batch_size=3, last_batch_handle="keep")
    with pytest.raises(MXNetValueError, match="batch_size"):
        mx.io.NDArrayIter(np.arange(10), batch_size=0)
    with pytest.raises(MXNetTypeError, match="input must be"):
        mx.io.NDArrayIter("abc", batch_size=1)
    with pytest.raises(MXNetTypeError, match="'data'"):
        mx.io.NDArrayIter({"data": object()}, batch_size=1)
    with pytest.raises(MXNetValueError):
        mx.io.NDArrayIter(None, batch_size=1)


def test_ndarrayiter_needs_reset_after_epoch() -> None:
    it = mx.io.NDArrayIter(np.arange(4), batch_size=2)
    assert len(list(it)) == 2
    with pytest.raises(StopIteration):
        it.next()
    with pytest.raises(MXNetValueError, match="reset"):
        it.getdata()
    it.reset()
    assert len(list(it)) == 2


def test_datadesc() -> None:
    d = mx.io.DataDesc("data", (2, 3))
    assert d == ("data", (2, 3))
    name, shape = d
    assert (name, shape, d.dtype, d.layout) == ("data", (2, 3), np.float32, "NCHW")
    assert repr(d) == "DataDesc[data,(2, 3),<class 'numpy.float32'>,NCHW]"
    assert str(d) == repr(d)
    e = mx.io.DataDesc("x", (4, 5, 6), np.int32, layout="TNC")
    assert mx.io.DataDesc.get_batch_axis(e.layout) == 1
    assert mx.io.DataDesc.get_batch_axis(None) == 0
    assert mx.io.DataDesc.get_batch_axis("TC") == -1
    back = pickle.loads(pickle.dumps(e))
    assert back == e and back.dtype == np.int32 and back.layout == "TNC"
    lst = mx.io.DataDesc.get_list([("a", (1,)), ("b", (2,))], [("b", np.int8), ("a", np.float16)])
    assert [(x.name, x.shape, x.dtype) for x in lst] == [("a", (1,), np.float16), ("b", (2,), np.int8)]
    assert [x.dtype for x in mx.io.DataDesc.get_list([("a", (1,))], None)] == [np.float32]
    with pytest.raises(MXNetValueError, match="'b'"):
        mx.io.DataDesc.get_list([("a", (1,)), ("b", (2,))], [("a", np.int8)])


def test_databatch() -> None:
    b = mx.io.DataBatch([mx.nd.ones((2, 3))], [mx.nd.ones((2,))], pad=1, index=np.arange(2), bucket_key=5)
    assert (b.pad, b.bucket_key, b.provide_data, b.provide_label) == (1, 5, None, None)
    assert str(b) == "DataBatch: data shapes: [(2, 3)] label shapes: [(2,)]"
    with pytest.raises(MXNetTypeError, match="data must be a list"):
        mx.io.DataBatch(mx.nd.ones((2,)))
    with pytest.raises(MXNetTypeError, match="label must be a list"):
        mx.io.DataBatch([mx.nd.ones((2,))], label=mx.nd.ones((2,)))


class _CountIter(mx.io.DataIter):
    """A DataIter that gives ``n`` batches through the iter_next/get* protocol."""

    def __init__(self, n: int) -> None:
        super().__init__(batch_size=2)
        self.n, self.i = n, 0
        self.provide_data = [mx.io.DataDesc("data", (2,))]
        self.provide_label = [mx.io.DataDesc("softmax_label", (2,))]

    def reset(self) -> None:
        self.i = 0

    def iter_next(self) -> bool:
        self.i += 1
        return self.i <= self.n

    def getdata(self) -> list:
        return [mx.nd.full((2,), self.i)]

    def getlabel(self) -> list:
        return [mx.nd.zeros((2,))]

    def getpad(self) -> int:
        return 0


def test_dataiter_protocol() -> None:
    it = _CountIter(3)
    assert iter(it) is it
    assert [b.data[0].asnumpy()[0] for b in it] == [1, 2, 3]
    with pytest.raises(StopIteration):
        next(it)
    base = mx.io.DataIter(batch_size=7)
    assert base.batch_size == 7 and base.getindex() is None
    with pytest.raises(StopIteration):
        base.next()


def test_resizeiter() -> None:
    inner = mx.io.NDArrayIter(np.arange(6), batch_size=2)
    longer = mx.io.ResizeIter(inner, 5)
    assert longer.provide_data == inner.provide_data and longer.batch_size == 2
    got = [b.data[0].asnumpy().tolist() for b in longer]
    assert got == [[0, 1], [2, 3], [4, 5], [0, 1], [2, 3]]
    longer.reset()
    assert [b.data[0].asnumpy().tolist() for b in longer][0] == [0, 1]
    shorter = mx.io.ResizeIter(mx.io.NDArrayIter(np.arange(6), batch_size=2), 2, reset_internal=False)
    assert [b.data[0].asnumpy().tolist() for b in shorter] == [[0, 1], [2, 3]]
    shorter.reset()
    assert [b.data[0].asnumpy().tolist() for b in shorter] == [[4, 5], [0, 1]]
    assert shorter.getpad() == 0 and shorter.getindex() is None


def test_prefetchingiter_single_and_reset() -> None:
    inner = mx.io.NDArrayIter(np.arange(10), np.arange(10) * 2, batch_size=4)
    it = mx.io.PrefetchingIter(inner)
    assert it.batch_size == 4 and it.provide_data == inner.provide_data
    assert all(t.daemon and t.is_alive() for t in it.prefetch_threads)
    got = [(b.data[0].asnumpy().tolist(), b.label[0].asnumpy().tolist(), b.pad) for b in it]
    assert got == [
        ([0, 1, 2, 3], [0, 2, 4, 6], 0),
        ([4, 5, 6, 7], [8, 10, 12, 14], 0),
        ([8, 9, 0, 1], [16, 18, 0, 2], 2),
    ]
    it.reset()
    assert it.next().data[0].asnumpy().tolist() == [0, 1, 2, 3]
    it.reset()  # in the middle of an epoch
    assert len(list(it)) == 3
    threads = it.prefetch_threads
    it.close()
    assert not any(t.is_alive() for t in threads)


def test_prefetchingiter_several_renamed() -> None:
    a = mx.io.NDArrayIter({"data": np.arange(8)}, {"lab": np.zeros(8)}, batch_size=4)
    b = mx.io.NDArrayIter({"data": np.arange(8) + 10}, {"lab": np.ones(8)}, batch_size=4)
    it = mx.io.PrefetchingIter(
        [a, b], rename_data=[{"data": "d1"}, {"data": "d2"}], rename_label=[{"lab": "l1"}, {"lab": "l2"}]
    )
    assert [d.name for d in it.provide_data] == ["d1", "d2"]
    assert [d.name for d in it.provide_label] == ["l1", "l2"]
    assert repr(it.provide_data[0]) == "DataDesc[d1,(4,),<class 'numpy.float32'>,NCHW]"
    batch = it.next()
    assert [d.asnumpy().tolist() for d in batch.data] == [[0, 1, 2, 3], [10, 11, 12, 13]]
    assert [d.asnumpy().tolist() for d in batch.label] == [[0] * 4, [1] * 4]
    assert batch.provide_data == it.provide_data
    assert it.getdata() is batch.data and it.getpad() == 0
    assert len(list(it)) == 1
    with pytest.raises(MXNetValueError, match="'data'"):
        mx.io.PrefetchingIter([a], rename_data=[{"x": "y"}])
    with pytest.raises(MXNetValueError, match="2 maps for 1"):
        mx.io.PrefetchingIter([a], rename_data=[{}, {}])


def test_prefetchingiter_mismatched_lengths() -> None:
    a = mx.io.NDArrayIter(np.arange(8), batch_size=4)
    b = mx.io.NDArrayIter(np.arange(4), batch_size=4)
    it = mx.io.PrefetchingIter([a, b])
    it.next()
    with pytest.raises(MXNetValueError, match="different numbers of batches"):
        it.next()


def test_prefetchingiter_passes_on_errors() -> None:
    class Broken(_CountIter):
        def getdata(self) -> list:
            if self.i == 2:
                raise MXNetValueError("bad record")
            return super().getdata()

    it = mx.io.PrefetchingIter(Broken(3))
    assert it.next().data[0].asnumpy()[0] == 1
    with pytest.raises(MXNetValueError, match="bad record"):
        it.next()
    assert it.next().data[0].asnumpy()[0] == 3


def test_prefetchingiter_threads_end_when_collected() -> None:
    it = mx.io.PrefetchingIter(mx.io.NDArrayIter(np.arange(4), batch_size=2))
    threads = it.prefetch_threads
    before = threading.active_count()
    del it
    for t in threads:
        t.join(timeout=5)
    assert not any(t.is_alive() for t in threads)
    assert threading.active_count() <= before - len(threads)


def _mnist_files(tmp_path, count=10, gz=False):
    import gzip
    import struct

    images = np.random.RandomState(1).randint(0, 256, size=(count, 28, 28)).astype(np.uint8)
    labels = (np.arange(count) % 10).astype(np.uint8)
    opener = gzip.open if gz else open
    suffix = ".gz" if gz else ""
    with opener(tmp_path / f"img{suffix}", "wb") as f:
        f.write(struct.pack(">IIII", 2051, count, 28, 28) + images.tobytes())
    with opener(tmp_path / f"lbl{suffix}", "wb") as f:
        f.write(struct.pack(">II", 2049, count) + labels.tobytes())
    return str(tmp_path / f"img{suffix}"), str(tmp_path / f"lbl{suffix}"), images, labels


def test_mnist_iter_gives_whole_batches_scaled_as_mxnet(tmp_path):
    img, lbl, images, labels = _mnist_files(tmp_path)
    it = mx.io.MNISTIter(image=img, label=lbl, batch_size=4, shuffle=False, silent=True)
    assert it.provide_data[0].name == "data" and it.provide_data[0].shape == (4, 1, 28, 28)
    assert it.provide_label[0].name == "softmax_label" and it.provide_label[0].shape == (4,)
    batches = list(it)
    assert len(batches) == 2  # the last two examples do not fill a batch
    np.testing.assert_array_equal(batches[1].label[0].asnumpy(), labels[4:8])
    np.testing.assert_allclose(batches[0].data[0].asnumpy()[2, 0], images[2] / 256.0)
    it.reset()
    np.testing.assert_array_equal(next(it).label[0].asnumpy(), labels[:4])
    flat = mx.io.MNISTIter(image=img, label=lbl, batch_size=5, flat=True, shuffle=False, silent=True)
    assert next(flat).data[0].shape == (5, 784)


def test_mnist_iter_parts_shuffle_once_and_read_gzip(tmp_path):
    img, lbl, _, labels = _mnist_files(tmp_path, gz=True)
    it = mx.io.MNISTIter(image=img, label=lbl, batch_size=3, num_parts=3, part_index=1, seed=5, silent=True)
    first = [b.label[0].asnumpy().tolist() for b in it]
    assert len(first) == 1 and sorted(first[0]) == labels[3:6].tolist()
    it.reset()
    assert [b.label[0].asnumpy().tolist() for b in it] == first


def test_mnist_iter_bad_files_and_arguments(tmp_path):
    img, lbl, _, _ = _mnist_files(tmp_path)
    with pytest.raises(mx.MXNetError, match="cannot open 'missing'"):
        mx.io.MNISTIter(image="missing", label=lbl)
    with pytest.raises(mx.MXNetError, match="not an MNIST image file"):
        mx.io.MNISTIter(image=lbl, label=lbl)
    with pytest.raises(mx.MXNetError, match="part_index"):
        mx.io.MNISTIter(image=img, label=lbl, num_parts=2, part_index=2)
    with pytest.raises(mx.MXNetError, match="batch_size"):
        mx.io.MNISTIter(image=img, label=lbl, batch_size=0)


def _csv(tmp_path):
    (tmp_path / "d.csv").write_text("1,2,3\n2,3,4\n3,4,5\n4,5,6\n")
    (tmp_path / "l.csv").write_text("1\n2\n3\n4\n")
    return str(tmp_path / "d.csv"), str(tmp_path / "l.csv")


def _csv_epochs(it, count=3):
    out = []
    for _ in range(count):
        out.append([(b.data[0].asnumpy()[:, 0].tolist(), b.label[0].asnumpy().tolist(), b.pad) for b in it])
        it.reset()
    return out


def test_csv_iter_round_batch_carries_into_the_next_epoch_as_mxnet(tmp_path):
    data, label = _csv(tmp_path)
    it = mx.io.CSVIter(data_csv=data, data_shape=(3,), label_csv=label, batch_size=3)
    assert it.provide_data[0].shape == (3, 3) and it.provide_label[0].shape == (3,)
    # The batches MXNet 1.9.1 gives for these files.
    assert _csv_epochs(it) == [
        [([1, 2, 3], [1, 2, 3], 0), ([4, 1, 2], [4, 1, 2], 2)],
        [([3, 4, 1], [3, 4, 1], 1)],
        [([2, 3, 4], [2, 3, 4], 0)],
    ]


def test_csv_iter_without_round_batch_restarts_and_keeps_stale_rows(tmp_path):
    data, label = _csv(tmp_path)
    it = mx.io.CSVIter(data_csv=data, data_shape=(3,), label_csv=label, batch_size=3, round_batch=False)
    assert _csv_epochs(it) == [[([1, 2, 3], [1, 2, 3], 0), ([4, 2, 3], [4, 2, 3], 2)]] * 3


def test_csv_iter_shapes_dtypes_directories_and_errors(tmp_path):
    data, _ = _csv(tmp_path)
    it = mx.io.CSVIter(data_csv=data, data_shape=(3,), batch_size=2, dtype="int32")
    batch = next(it)
    assert batch.data[0].dtype == np.int32 and batch.label[0].asnumpy().tolist() == [0, 0]
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "a.csv").write_text("1,2,3,4,5,6\n")
    (tmp_path / "dir" / "b.csv").write_text("7,8,9,10,11,12\n")
    it = mx.io.CSVIter(data_csv=str(tmp_path / "dir"), data_shape=(3, 2), batch_size=2)
    np.testing.assert_array_equal(next(it).data[0].asnumpy()[1], [[7, 8], [9, 10], [11, 12]])
    with pytest.raises(mx.MXNetError, match="have 3 values; the shape asks for 4"):
        mx.io.CSVIter(data_csv=data, data_shape=(4,))
    with pytest.raises(mx.MXNetError, match="does not exist"):
        mx.io.CSVIter(data_csv=str(tmp_path / "none.csv"), data_shape=(3,))
    with pytest.raises(mx.MXNetError, match="dtype"):
        mx.io.CSVIter(data_csv=data, data_shape=(3,), dtype="float16")


def test_native_style_iterators_give_one_array_from_getdata(tmp_path):
    img, lbl, _, labels = _mnist_files(tmp_path)
    it = mx.io.MNISTIter(image=img, label=lbl, batch_size=2, shuffle=False, silent=True)
    assert it.iter_next()
    assert isinstance(it.getdata(), mx.nd.NDArray) and it.getlabel().asnumpy().tolist() == labels[:2].tolist()
    data, _ = _csv(tmp_path)
    it = mx.io.CSVIter(data_csv=data, data_shape=(3,), batch_size=2)
    assert it.iter_next() and it.getdata().shape == (2, 3)

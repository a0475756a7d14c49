"""Out of core: gpufilt.dask.filter_zarr (zarr 2 and 3, sharded or not,
resumable) and the `gpufilt filter` command line (.npy, .tif, zarr)."""
import concurrent.futures
import itertools
import os
import pickle
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from gpufilt import ndimage

zarr = pytest.importorskip("zarr")
pytest.importorskip("dask.array")
tifffile = pytest.importorskip("tifffile")
import dask  # noqa: E402
from gpufilt.dask import filter_zarr  # noqa: E402
from gpufilt import _zarr as gz  # noqa: E402 - after gpufilt.dask, which it builds on

from _helpers import CUDA_USABLE  # noqa: E402

rng = np.random.default_rng(3)
VOLUME = rng.standard_normal((23, 18, 11)).astype(np.float32)
STEPS = [("gaussian_filter", {"sigma": 1.5, "mode": "wrap"}), ("median_filter", {"size": 3, "mode": "wrap"})]


def expected_chain(data, steps):
    for name, kwargs in steps:
        data = getattr(ndimage, name)(data, **kwargs)
    return data


def make_source(path, zarr_format=3, chunks=(5, 7, 4), shards=None, data=VOLUME):
    source = zarr.create_array(str(path), shape=data.shape, dtype=data.dtype, chunks=chunks, shards=shards,
                               zarr_format=zarr_format)
    source[:] = data
    return source


@pytest.mark.parametrize("zarr_format, shards", [(3, None), (3, (10, 14, 8)), (2, None)])
@pytest.mark.parametrize("steps", [STEPS, [("uniform_filter", {"size": (9, 1, 3), "mode": "mirror"}),
                                           ("sobel", {"axis": 2, "mode": "nearest"})]])
def test_zarr_to_zarr_equals_in_memory(tmp_path, zarr_format, shards, steps):
    source = make_source(tmp_path / "in.zarr", zarr_format, shards=shards)
    out = filter_zarr(source, str(tmp_path / "out.zarr"), steps)
    assert out.chunks == source.chunks and out.shards == source.shards
    assert out.metadata.zarr_format == zarr_format
    np.testing.assert_allclose(out[:], expected_chain(VOLUME, steps), rtol=1e-6, atol=1e-6)


def test_zarr_target_chunks_and_dtype(tmp_path):
    source = make_source(tmp_path / "in.zarr")
    out = filter_zarr(str(tmp_path / "in.zarr"), str(tmp_path / "out.zarr"),
                      [("gaussian_filter", {"sigma": 2.0, "output": np.float64})], chunks=(4, 4, 4))
    assert out.chunks == (4, 4, 4) and out.dtype == np.float64
    np.testing.assert_allclose(out[:], ndimage.gaussian_filter(source[:], 2.0, output=np.float64), rtol=1e-12)


def stored_chunk_files(path):
    return sorted(os.path.relpath(os.path.join(d, f), path) for d, _, files in os.walk(path) for f in files
                  if not f.startswith("zarr.json") and not f.startswith(".z"))


def test_resume_writes_only_the_missing_units(tmp_path):
    source = make_source(tmp_path / "in.zarr")
    target = str(tmp_path / "out.zarr")
    filter_zarr(source, target, STEPS)
    files = stored_chunk_files(target)
    for name in files[::3]:  # an interrupted run: a third of the chunks missing
        os.remove(os.path.join(target, name))
    pending = filter_zarr(source, target, STEPS, resume=True, compute=False, task_bytes=0)
    assert len(pending.__dask_graph__()) == 1 + len(files[::3])  # one task per missing unit, and the last
    out = pending.compute()
    assert stored_chunk_files(target) == files
    np.testing.assert_allclose(out[:], expected_chain(VOLUME, STEPS), rtol=1e-6, atol=1e-6)


def test_resume_with_tasks_of_many_chunks(tmp_path):
    source = make_source(tmp_path / "in.zarr")
    target = str(tmp_path / "out.zarr")
    filter_zarr(source, target, STEPS)
    files = stored_chunk_files(target)
    assert len(filter_zarr(source, target, STEPS, resume=True, compute=False).__dask_graph__()) == 1
    os.remove(os.path.join(target, files[len(files) // 2]))
    pending = filter_zarr(source, target, STEPS, resume=True, compute=False)
    assert len(pending.__dask_graph__()) == 2  # the task that holds the missing chunk
    np.testing.assert_allclose(pending.compute()[:], expected_chain(VOLUME, STEPS), rtol=1e-6, atol=1e-6)
    assert stored_chunk_files(target) == files


@pytest.mark.parametrize("zarr_format, shards", [(3, None), (3, (10, 14, 8))])
def test_one_chunk_per_task_equals_in_memory(tmp_path, zarr_format, shards):
    source = make_source(tmp_path / "in.zarr", zarr_format, shards=shards)
    out = filter_zarr(source, str(tmp_path / "out.zarr"), STEPS, task_bytes=0)
    np.testing.assert_allclose(out[:], expected_chain(VOLUME, STEPS), rtol=1e-6, atol=1e-6)


def test_a_chain_cuts_each_result_to_what_the_later_steps_read(tmp_path):
    # As gpufilt.dask's chains: each step's result is cut to the task's own
    # elements plus the later steps' reach (what their modes reflect at the ends included).
    source = make_source(tmp_path / "in.zarr", chunks=(3, 4, 11))
    seen = []

    def record(block):
        seen.append(block.shape)
        return block
    steps = [("gaussian_filter", {"sigma": 1.0, "mode": "mirror"}),
             ("uniform_filter", {"size": (6, 3, 1), "origin": (2, 1, 0), "mode": "reflect"}), (record, {}, 0)]
    with dask.config.set(scheduler="sync"):
        out = filter_zarr(source, str(tmp_path / "out.zarr"), steps, task_bytes=0)
    np.testing.assert_allclose(out[:], expected_chain(VOLUME, steps[:2]), rtol=1e-6, atol=1e-6)
    assert (3, 4, 11) in seen  # a task inside the volume: its last step sees only its own elements


def test_filter_zarr_refusals(tmp_path):
    source = make_source(tmp_path / "in.zarr")
    for bad in (-5, "x", 1.5, True):
        with pytest.raises(ValueError, match="task_bytes must be a non-negative int"):
            filter_zarr(source, str(tmp_path / "o.zarr"), STEPS, task_bytes=bad)
    with pytest.raises(ValueError, match="one halo exchange"):
        filter_zarr(source, str(tmp_path / "o.zarr"), [("binary_fill_holes", {})])
    with pytest.raises(ValueError, match="one halo exchange"):
        filter_zarr(source, str(tmp_path / "o.zarr"), [("uniform_filter", {"mode": "wrap"}),
                                                       ("uniform_filter", {"mode": "reflect"})])
    with pytest.raises(ValueError, match="device"):
        filter_zarr(source, str(tmp_path / "o.zarr"), STEPS, device="tpu")
    filter_zarr(source, str(tmp_path / "o.zarr"), STEPS)
    with pytest.raises(ValueError, match="dtype"):
        filter_zarr(source, str(tmp_path / "o.zarr"), [("gaussian_filter", {"sigma": 1, "output": "f8"})],
                    resume=True)


# ------------------------------------------------ the cache of decoded chunks

class CountingSource:
    """A source as _ChunkCache reads it (chunks, dtype, [region]), counting
    its reads; `gate`, where given, holds each read until it is set."""

    def __init__(self, data, chunks, gate=None):
        self.data, self.chunks, self.dtype, self.gate = data, chunks, data.dtype, gate
        self.reads = []  # appended to from several threads: list.append is atomic

    def __getitem__(self, region):
        self.reads.append(tuple((s.start, s.stop) for s in region))
        if self.gate is not None:
            assert self.gate.wait(10)
        return self.data[region].copy()


def chunk_of(data, index, chunks):
    return data[tuple(slice(i * c, (i + 1) * c) for i, c in zip(index, chunks))]


def test_cache_gives_each_chunk_and_drops_it_after_its_last_reader():
    source = CountingSource(VOLUME, (5, 7, 4))
    readers = [[2, 2, 2, 2, 1], [1] * 3, [1] * 3]  # two tasks read each chunk, one the last layer's
    cache = gz._ChunkCache(source, readers, max_bytes=VOLUME.nbytes)
    indices = list(itertools.product(range(5), range(3), range(3)))
    for index in indices:
        np.testing.assert_array_equal(cache.take(index), chunk_of(VOLUME, index, source.chunks))
    assert cache.kept() == indices[:4 * 9]  # not those whose one reader has taken them
    for index in reversed(indices[:4 * 9]):  # the second readers: from the cache, then dropped
        np.testing.assert_array_equal(cache.take(index), chunk_of(VOLUME, index, source.chunks))
    assert len(source.reads) == len(indices) and cache.kept() == []


def test_cache_keeps_at_most_max_bytes_least_recently_used_first():
    source = CountingSource(VOLUME, (5, 7, 4))
    chunk_bytes = 5 * 7 * 4 * VOLUME.itemsize
    cache = gz._ChunkCache(source, [[3] * 5, [1] * 3, [1] * 3], max_bytes=2 * chunk_bytes)
    for index in [(0, 0, 0), (1, 0, 0), (0, 0, 0), (2, 0, 0)]:  # (0, 0, 0) used again: (1, 0, 0) goes
        cache.take(index)
    assert cache.kept() == [(0, 0, 0), (2, 0, 0)]
    np.testing.assert_array_equal(cache.take((1, 0, 0)), chunk_of(VOLUME, (1, 0, 0), source.chunks))
    assert len(source.reads) == 4  # (1, 0, 0) decoded again


def test_cache_readers_of_a_chunk_being_decoded_wait_for_it():
    gate = threading.Event()
    source = CountingSource(VOLUME, (5, 7, 4), gate)
    cache = gz._ChunkCache(source, [[8] * 5, [1] * 3, [1] * 3], max_bytes=VOLUME.nbytes)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        taking = [pool.submit(cache.take, (1, 2, 0)) for _ in range(7)]
        deadline = time.monotonic() + 10
        while not source.reads and time.monotonic() < deadline:
            time.sleep(0.001)
        assert cache.take((1, 2, 0), wait=False) is None  # another task is decoding it
        gate.set()
        chunks = [t.result(timeout=10) for t in taking]
    assert len(source.reads) == 1
    for chunk in chunks:
        np.testing.assert_array_equal(chunk, chunk_of(VOLUME, (1, 2, 0), source.chunks))
    assert cache.take((1, 2, 0)) is chunks[0] and cache.kept() == []  # the eighth reader: the last


def test_cache_a_failed_decode_fails_its_waiters_and_is_tried_again():
    class Failing(CountingSource):
        def __getitem__(self, region):
            if not self.reads:
                super().__getitem__(region)
                raise OSError("store unreachable")
            return super().__getitem__(region)
    cache = gz._ChunkCache(Failing(VOLUME, (5, 7, 4)), [[2] * 5, [1] * 3, [1] * 3], max_bytes=VOLUME.nbytes)
    with pytest.raises(OSError, match="unreachable"):
        cache.take((0, 0, 0))
    np.testing.assert_array_equal(cache.take((0, 0, 0)), VOLUME[:5, :7, :4])


def test_cache_pickles_empty_and_shared_by_the_tasks_of_a_process():
    cache = gz._ChunkCache(CountingSource(VOLUME, (5, 7, 4)), [[2] * 5, [1] * 3, [1] * 3], VOLUME.nbytes)
    cache.take((0, 0, 0))
    copy = pickle.loads(pickle.dumps(cache))
    assert copy.kept() == [] and len(copy.source.reads) == 1
    np.testing.assert_array_equal(copy.take((4, 2, 2)), VOLUME[20:, 14:, 8:])
    # Tasks of the same call unpickled in this process share the copy
    # while one holds it; another call's tasks get their own.
    assert pickle.loads(pickle.dumps(cache)) is copy
    other = gz._ChunkCache(cache.source, [[2] * 5, [1] * 3, [1] * 3], VOLUME.nbytes)
    assert pickle.loads(pickle.dumps(other)) is not copy


@pytest.fixture
def caches(monkeypatch):
    """The chunk caches that filter_zarr makes, each recording the most
    bytes it kept and how many chunks it decoded."""
    made = []

    class Recording(gz._ChunkCache):
        def __init__(self, *args):
            super().__init__(*args)
            self.decoded, self.most_kept = 0, 0
            made.append(self)

        def _decode(self, index, future):
            with self._lock:
                self.decoded += 1
            return super()._decode(index, future)

        def _keep(self, index, chunk):
            super()._keep(index, chunk)
            self.most_kept = max(self.most_kept, self._kept_bytes)
    monkeypatch.setattr(gz, "_ChunkCache", Recording)
    return made


@pytest.mark.parametrize("zarr_format, shards", [(3, None), (3, (10, 14, 8)), (2, None)])
def test_filter_zarr_decodes_each_source_chunk_once(tmp_path, caches, zarr_format, shards):
    source = make_source(tmp_path / "in.zarr", zarr_format, shards=shards)
    out = filter_zarr(source, str(tmp_path / "out.zarr"), STEPS)
    np.testing.assert_allclose(out[:], expected_chain(VOLUME, STEPS), rtol=1e-6, atol=1e-6)
    (cache,) = caches
    assert cache.decoded == 5 * 3 * 3  # the inner chunks of a sharded source
    assert cache.kept() == []  # each dropped after its last reader


@pytest.mark.parametrize("shape, chunks, steps, task_bytes", [
    # Tiles of one chunk, whose halo reaches the neighbouring chunks on every side.
    ((16, 32, 32), (8, 8, 8), [("uniform_filter", {"size": 5})], 0),
    # Slabs one chunk thick, whose halo reaches two chunks each way: the
    # volume is more than the cache may keep.
    ((64, 8, 16), (4, 8, 8), [("gaussian_filter", {"sigma": 2.0})], 4 * 8 * 16 * 4),
])
def test_filter_zarr_thin_tasks_decode_each_chunk_once(tmp_path, caches, monkeypatch, shape, chunks, steps,
                                                       task_bytes):
    # The cache holds two tasks' reads (halo chunks included) per core. With
    # one core and one thread running the tasks in order, no chunk goes
    # before its last reader: the tiles' bound (36 chunks) holds the whole
    # volume, and the slabs keep at most 18 chunks of their 24 (the first
    # slab also reads the 9 layers that its mode reflects). Counting only
    # the task's region, the bounds were 2 and 4 chunks: 398 and 188 decodes.
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    data = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    source = make_source(tmp_path / "in.zarr", chunks=chunks, data=data)
    with dask.config.set(scheduler="threads", num_workers=1):
        out = filter_zarr(source, str(tmp_path / "out.zarr"), steps, task_bytes=task_bytes)
    np.testing.assert_allclose(out[:], expected_chain(data, steps), rtol=1e-6, atol=1e-6)
    (cache,) = caches
    assert cache.decoded == 32 and cache.kept() == []


@pytest.mark.parametrize("length", [40, 160])
def test_filter_zarr_cache_is_bounded_whatever_the_volume(tmp_path, caches, length):
    # One chunk a task: tiles, whose halo chunks along the first axis are
    # read by tasks many apart: what the cache keeps stays within its bound,
    # which does not grow with the volume.
    data = np.random.default_rng(5).standard_normal((length, 18, 11)).astype(np.float32)
    source = make_source(tmp_path / "in.zarr", data=data)
    out = filter_zarr(source, str(tmp_path / "out.zarr"), STEPS, task_bytes=0)
    np.testing.assert_allclose(out[:], expected_chain(data, STEPS), rtol=1e-6, atol=1e-6)
    (cache,) = caches
    assert 0 < cache.most_kept <= cache._max_bytes == gz._cache_bytes((5, 7, 4), [(7, 7)] * 3, source)  # reach 6 + 1


def test_filter_zarr_runs_neighbours_one_after_another(tmp_path, monkeypatch):
    # dask runs independent tasks in the order of their names: named in
    # order, each task's neighbours (which share its halo chunks) run next.
    source = make_source(tmp_path / "in.zarr", data=np.zeros((60, 8, 8), np.float32), chunks=(4, 8, 8))
    started = []
    run = gz._Unit.__call__
    monkeypatch.setattr(gz._Unit, "__call__", lambda unit: (started.append(unit.region[0].start), run(unit)))
    with dask.config.set(scheduler="threads", num_workers=1):
        filter_zarr(source, str(tmp_path / "out.zarr"), [("uniform_filter", {"size": 3})], task_bytes=0)
    assert len(started) == 15 and started in (sorted(started), sorted(started, reverse=True))


def cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "gpufilt", "filter", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("src, dst", [("a.npy", "b.npy"), ("a.tif", "b.zarr"), ("a.zarr", "b.tif"),
                                      ("a.zarr", "b.zarr")])
def test_cli_round_trips(tmp_path, src, dst):
    np.save(tmp_path / "a.npy", VOLUME)
    tifffile.imwrite(tmp_path / "a.tif", VOLUME)
    make_source(tmp_path / "a.zarr")
    done = cli(src, dst, "gaussian_filter:sigma=1.5,mode=wrap", "median_filter:size=3,mode=wrap", "--chunks", "6",
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "100.0%" in done.stderr and "MiB/s" in done.stderr
    path = tmp_path / dst
    result = np.load(path) if dst.endswith(".npy") else tifffile.imread(path) if dst.endswith(".tif") \
        else zarr.open_array(str(path), mode="r")[:]
    np.testing.assert_allclose(result, expected_chain(VOLUME, STEPS), rtol=1e-6, atol=1e-6)
    assert not os.path.exists(str(path) + ".partial")


@pytest.mark.parametrize("args, message", [
    (["nope.npy", "x.npy", "sobel"], "does not exist"),
    (["a.npy", "x.png", "sobel"], "formats are"),
    (["a.npy", "x.npy", "gauss:sigma=1"], "unknown filter 'gauss'"),
    (["a.npy", "x.npy", "gaussian_filter:sigmaa=1"], "no parameter 'sigmaa'"),
    (["a.npy", "x.npy", "gaussian_filter:sigma=1,mode=bogus"], "boundary mode"),
    (["a.npy", "x.npy", "gaussian_filter:sigma=(1,"], "NAME=VALUE"),
    (["a.npy", "a.npy", "sobel"], "exists"),
    (["bad.npy", "x.npy", "sobel"], "cannot read"),
    (["a.npy", "x.npy", "sobel", "--chunks", "0"], "--chunks"),
    (["a.npy", "x.npy", "sobel", "--resume"], "zarr to zarr"),
])
def test_cli_fails_cleanly(tmp_path, args, message):
    np.save(tmp_path / "a.npy", VOLUME)
    (tmp_path / "bad.npy").write_bytes(b"not a numpy file")
    done = cli(*args, cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not os.path.exists(tmp_path / "x.npy")


def test_cli_full_disk_leaves_no_complete_looking_output(tmp_path):
    np.save(tmp_path / "a.npy", VOLUME)
    # A destination under a file cannot be created: the write fails as on a full disk.
    done = cli("a.npy", "a.npy/x.npy", "sobel", cwd=tmp_path)
    assert done.returncode == 2 and "failed" in done.stderr and "Traceback" not in done.stderr


def test_cli_help_lists_the_filters(tmp_path):
    done = subprocess.run([sys.executable, "-m", "gpufilt", "filter", "--help"], capture_output=True, text=True)
    assert done.returncode == 0
    for name in ("gaussian_filter: sigma", "median_filter: size=None", "binary_erosion", "fourier_gaussian"):
        assert name in done.stdout


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
def test_zarr_to_zarr_on_the_gpu(tmp_path):
    source = make_source(tmp_path / "in.zarr")
    out = filter_zarr(source, str(tmp_path / "out.zarr"), STEPS, device="gpu")
    np.testing.assert_allclose(out[:], expected_chain(VOLUME, STEPS), rtol=1e-6, atol=1e-6)

"""Out of core: gpufilt.dask.filter_zarr (zarr 2 and 3, sharded or not,
resumable) and the `gpufilt filter` command line (.npy, .tif, zarr)."""
import os
import subprocess
import sys

import numpy as np
import pytest

from gpufilt import ndimage

zarr = pytest.importorskip("zarr")
pytest.importorskip("dask.array")
tifffile = pytest.importorskip("tifffile")
from gpufilt.dask import filter_zarr  # noqa: E402

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


def test_filter_zarr_refusals(tmp_path):
    source = make_source(tmp_path / "in.zarr")
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

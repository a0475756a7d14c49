"""Filters over several GPUs (gpufilt.dask.to_gpus, chain(gpus=),
filter_zarr(gpus=), `gpufilt filter --gpus`): the results equal the
single-GPU in-memory results. Tests that need two GPUs skip on fewer; the
placement and the refusals run everywhere."""
import importlib.util
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

from gpufilt import _gpus, ndimage

from _helpers import CUDA_USABLE

da = pytest.importorskip("dask.array")
gdask = pytest.importorskip("gpufilt.dask")

rng = np.random.default_rng(35)
VOLUME = rng.standard_normal((23, 18, 13)).astype(np.float32)
FOOTPRINT = rng.random((3, 2, 3)) > 0.4

# (function, kwargs) per case: separable, footprint, rank, derivative and
# morphology filters, in modes that read across the ends and that don't.
CASES = [
    ("gaussian_filter", dict(sigma=1.5, mode="wrap")),
    ("gaussian_filter", dict(sigma=(2.0, 0.8, 1.0), mode="reflect")),
    ("uniform_filter", dict(size=(5, 3, 4), mode="constant", cval=0.5)),
    ("median_filter", dict(size=3, mode="mirror")),
    ("maximum_filter", dict(footprint=FOOTPRINT, mode="grid-wrap", origin=(1, 0, 0))),
    ("sobel", dict(axis=0, mode="nearest")),
    ("gaussian_gradient_magnitude", dict(sigma=1.2, mode="reflect")),
    ("grey_opening", dict(size=(3, 3, 2), mode="wrap")),
    ("correlate1d", dict(weights=[1.0, -2.0, 0.5, 3.0], axis=0, origin=1, mode="reflect")),
]
CHAIN = [("gaussian_filter", {"sigma": 1.0}), ("sobel", {"axis": 1}), (np.abs, {}, 0)]
# Chunks along axis 0 smaller than some halos, uneven elsewhere.
CHUNKS = ((4, 2, 7, 1, 9), (10, 8), (13,))



def gpu_count():
    return _gpus._cupy().cuda.runtime.getDeviceCount() if CUDA_USABLE else 0


TWO_GPUS = pytest.mark.skipif(gpu_count() < 2, reason="needs two GPUs")


def in_memory(name, data, kwargs):
    return getattr(ndimage, name)(data, **kwargs)


def assert_same(got, expected):
    np.testing.assert_allclose(got, expected, rtol=2e-6, atol=2e-6)


def expected_chain(data):
    return np.abs(ndimage.sobel(ndimage.gaussian_filter(data, 1.0), axis=1))


# ---------------------------------------------------------- everywhere

@pytest.mark.parametrize("count, gpus", [(1, (0,)), (5, (0, 1)), (7, (3, 1, 2)), (64, (0, 1, 2, 3)), (3, (0, 1, 2, 3))])
def test_placement_is_contiguous_and_balanced(count, gpus):
    on = _gpus.placement(count, gpus)
    assert len(on) == count
    runs = [g for k, g in enumerate(on) if k == 0 or on[k - 1] != g]
    assert runs == list(dict.fromkeys(runs)), "each GPU gets one contiguous run"
    assert runs == list(gpus[:len(runs)]), "in the order given"
    counts = [on.count(g) for g in gpus]
    if count >= len(gpus):
        assert max(counts) - min(counts) <= 1


def test_finished_marks_a_result_and_its_views_not_its_inputs():
    """to_device's rule for whether a copy from another GPU waits for that
    GPU's other work (numpy stand-ins: views and weak references alike)."""
    import gc
    chunk = np.arange(24.0).reshape(4, 6)
    result = chunk * 2
    assert _gpus.finished(result[1:], inputs=(chunk,)) is not None
    assert _gpus._is_finished(result) and _gpus._is_finished(result[:, 2:][1:])
    assert not _gpus._is_finished(chunk) and not _gpus._is_finished(result.copy())
    _gpus.finished(chunk[1:3], inputs=(chunk,))  # a view of an input: its producer is not known
    assert not _gpus._is_finished(chunk)
    marked = len(_gpus._finished)
    del result
    gc.collect()
    assert len(_gpus._finished) == marked - 1, "a dead array is forgotten"


def test_gpus_refusals_before_any_gpu_is_needed():
    x = da.from_array(VOLUME, chunks=8)
    with pytest.raises(ValueError, match="Fourier|whole-array"):
        gdask.chain(x, [("fourier_gaussian", {"sigma": 1})], gpus=0)
    with pytest.raises(ValueError, match="whole-array"):
        gdask.chain(x > 0, [("binary_fill_holes", {})], gpus=0)
    with pytest.raises(TypeError, match="to_gpus takes a dask array"):
        gdask.to_gpus(VOLUME)


def test_cli_gpus_needs_the_gpu_device(tmp_path):
    np.save(tmp_path / "a.npy", VOLUME)
    done = subprocess.run([sys.executable, "-m", "gpufilt", "filter", "a.npy", "b.npy", "gaussian_filter:sigma=1",
                           "--gpus", "all"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--gpus is for --device gpu" in done.stderr
    assert not os.path.exists(tmp_path / "b.npy")
    done = subprocess.run([sys.executable, "-m", "gpufilt", "filter", "a.npy", "b.npy", "fourier_gaussian:sigma=1",
                           "--device", "gpu", "--gpus", "0"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and "--gpus: " in done.stderr and "Fourier" in done.stderr, done.stderr
    assert not os.path.exists(tmp_path / "b.npy")
    if importlib.util.find_spec("cupy") is None:  # one line, not a traceback
        done = subprocess.run([sys.executable, "-m", "gpufilt", "filter", "a.npy", "b.npy", "gaussian_filter:sigma=1",
                               "--device", "gpu", "--gpus", "all"], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 2 and "ImportError: gpus= needs CuPy" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr and not os.path.exists(tmp_path / "b.npy")


# ------------------------------------------------------------ one GPU

@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
def test_gpus_argument():
    assert _gpus.devices(0) == _gpus.devices([0]) == (0,)
    assert _gpus.devices("all") == tuple(range(gpu_count()))
    for bad in ["every", [0, 0], [], [-1], [10**6], [0.5], [True]]:
        with pytest.raises(ValueError, match="gpus"):
            _gpus.devices(bad)
    with pytest.raises(TypeError, match="gpus"):
        _gpus.devices(0.5)


@pytest.fixture
def small_stages(monkeypatch):
    """Pinned buffers of 256 bytes: every block crosses in many slabs, and
    rows wider than a buffer are cut along the next axis."""
    monkeypatch.setattr(_gpus, "STAGE_BYTES", 256)


@pytest.mark.parametrize("name, kwargs", CASES, ids=[c[0] for c in CASES])
@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
def test_host_chunks_streamed_through_one_gpu(name, kwargs, small_stages):
    x = da.from_array(VOLUME, chunks=CHUNKS)
    got = gdask.chain(x, [(name, kwargs)], gpus=[0]).compute()
    assert isinstance(got, np.ndarray)
    assert_same(got, in_memory(name, VOLUME, kwargs))


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
def test_chunks_copied_to_the_gpu_outside_gpufilt():
    """Chunks that map_blocks(cupy.asarray) copies on CuPy's default stream
    (asynchronously, from pinned memory) are complete before a task reads
    them; results freed while other work still runs are not reused early."""
    cp = _gpus._cupy()
    volume = rng.standard_normal((64, 256, 256)).astype(np.float32)
    x = da.from_array(volume, chunks=(16, 256, 256)).map_blocks(cp.asarray)
    for _ in range(3):
        got = ndimage.gaussian_filter(ndimage.median_filter(x, 3), 2.0).map_blocks(cp.asnumpy).compute()
        assert_same(got, ndimage.gaussian_filter(ndimage.median_filter(volume, 3), 2.0))


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
def test_gpus_refused_for_cupy_chunks():
    x = gdask.to_gpus(da.from_array(VOLUME, chunks=CHUNKS), gpus=0)
    with pytest.raises(ValueError, match="cupy chunks run on the GPU that holds them"):
        gdask.chain(x, CHAIN, gpus=0)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
def test_chunks_placed_on_one_gpu_and_a_chain():
    cp = pytest.importorskip("cupy")
    x = gdask.to_gpus(da.from_array(VOLUME, chunks=CHUNKS), gpus=0).persist()
    got = gdask.chain(x, CHAIN).compute()
    assert isinstance(got, cp.ndarray)
    assert_same(cp.asnumpy(got), expected_chain(VOLUME))


# ---------------------------------------------------------- two GPUs

def spread(data, chunks, gpus="all"):
    return gdask.to_gpus(da.from_array(data, chunks=chunks), gpus).persist()


def block_devices(x):
    return [block.compute().device.id for block in x.to_delayed().ravel()]


def on_host(x):
    """A dask array of cupy chunks on any GPUs, computed into numpy."""
    return x.map_blocks(_gpus._cupy().asnumpy, meta=np.empty((0,) * x.ndim, x.dtype)).compute()


@pytest.mark.cuda
@TWO_GPUS
def test_to_gpus_spreads_the_chunks_in_runs():
    x = spread(VOLUME, CHUNKS)
    devices = block_devices(x)
    count = _gpus._cupy().cuda.runtime.getDeviceCount()
    assert devices == _gpus.placement(len(devices), tuple(range(count)))
    assert len(set(devices)) == min(count, len(devices))


@pytest.mark.parametrize("name, kwargs", CASES, ids=[c[0] for c in CASES])
@pytest.mark.cuda
@TWO_GPUS
def test_each_block_runs_on_its_gpu_with_halos_from_the_others(name, kwargs):
    cp = _gpus._cupy()
    x = spread(VOLUME, CHUNKS)
    lazy = getattr(ndimage, name)(x, **kwargs)
    result = lazy.persist()
    assert block_devices(result) == block_devices(x), "each block stays on its chunk's GPU"
    with cp.cuda.Device(0):
        expected = cp.asnumpy(in_memory(name, cp.asarray(VOLUME), kwargs))
    assert_same(on_host(result), expected)


@pytest.mark.cuda
@TWO_GPUS
def test_a_chain_over_every_gpu_and_back():
    cp = _gpus._cupy()
    with warnings.catch_warnings():  # CuPy may warn that it reads the other GPUs' blocks peer to peer
        warnings.simplefilter("ignore", cp._util.PerformanceWarning)
        got = gdask.chain(spread(VOLUME, CHUNKS), CHAIN).compute()  # dask joins the blocks of several GPUs
    assert isinstance(got, cp.ndarray)
    assert_same(cp.asnumpy(got), expected_chain(VOLUME))
    x = da.from_array(VOLUME, chunks=CHUNKS)
    assert_same(gdask.chain(x, CHAIN, gpus="all").compute(), expected_chain(VOLUME))
    assert_same(gdask.chain(x, CHAIN, gpus=[1, 0]).compute(), expected_chain(VOLUME))


@pytest.mark.cuda
@TWO_GPUS
def test_repeated_runs_agree():
    """Many small blocks over every GPU and stream: no block reads a halo
    before its producer has finished it."""
    volume = rng.standard_normal((64, 48, 40)).astype(np.float32)
    x = spread(volume, (4, 24, 40))
    expected = ndimage.gaussian_filter(ndimage.median_filter(volume, 3), 2.0)
    for _ in range(3):
        assert_same(on_host(ndimage.gaussian_filter(ndimage.median_filter(x, 3), 2.0)), expected)


@pytest.mark.cuda
@TWO_GPUS
def test_halos_of_chunks_that_work_outside_gpufilt_put_on_several_gpus():
    """Chunks copied to several GPUs by map_blocks (on each GPU's default
    stream, asynchronously) are complete before another GPU copies a halo
    of them; the second filter's halos (gpufilt's results) take the copies
    that wait for nothing, contiguous slabs and strided corners alike."""
    cp = _gpus._cupy()
    count = gpu_count()
    volume = rng.standard_normal((64, 96, 80)).astype(np.float32)

    def place(block, block_id=None):
        with cp.cuda.Device(block_id[0] % count):
            return cp.asarray(block)

    x = da.from_array(volume, chunks=(16, 48, 80)).map_blocks(place, meta=cp.empty((0, 0, 0), np.float32))
    expected = ndimage.gaussian_filter(ndimage.median_filter(volume, 3), 2.0)
    for _ in range(3):
        assert_same(on_host(ndimage.gaussian_filter(ndimage.median_filter(x, 3), 2.0)), expected)
    placed = gdask.to_gpus(x).persist()  # kept or moved, and known complete
    assert all(_gpus._is_finished(block.compute()) for block in placed.to_delayed().ravel())
    assert_same(on_host(ndimage.gaussian_filter(ndimage.median_filter(placed, 3), 2.0)), expected)


@pytest.mark.cuda
@TWO_GPUS
def test_fourier_filters_of_chunks_on_several_gpus_stay_there():
    cp = _gpus._cupy()
    spectrum = np.fft.fftn(VOLUME).astype(np.complex64)
    x = spread(spectrum, CHUNKS)
    result = ndimage.fourier_gaussian(x, 1.5).persist()
    assert block_devices(result) == block_devices(x)
    with cp.cuda.Device(0):
        expected = cp.asnumpy(ndimage.fourier_gaussian(cp.asarray(spectrum), 1.5))
    np.testing.assert_allclose(on_host(result), expected, rtol=1e-5, atol=1e-4)


@pytest.mark.cuda
@TWO_GPUS
def test_zarr_to_zarr_over_every_gpu(tmp_path, small_stages):
    zarr = pytest.importorskip("zarr")
    source = zarr.create_array(str(tmp_path / "in.zarr"), shape=VOLUME.shape, chunks=(4, 9, 13), dtype="f4")
    source[:] = VOLUME
    steps = [("gaussian_filter", {"sigma": 1.0}), ("sobel", {"axis": 1})]
    out = gdask.filter_zarr(source, str(tmp_path / "out.zarr"), steps, device="gpu", gpus="all", task_bytes=0)
    assert_same(out[:], ndimage.sobel(ndimage.gaussian_filter(VOLUME, 1.0), axis=1))


@pytest.mark.cuda
@TWO_GPUS
def test_cli_gpus_all(tmp_path):
    np.save(tmp_path / "a.npy", VOLUME)
    done = subprocess.run([sys.executable, "-m", "gpufilt", "filter", "a.npy", "b.npy", "gaussian_filter:sigma=1",
                           "sobel:axis=1", "--device", "gpu", "--gpus", "all", "--chunks", "5"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert_same(np.load(tmp_path / "b.npy"), ndimage.sobel(ndimage.gaussian_filter(VOLUME, 1.0), axis=1))

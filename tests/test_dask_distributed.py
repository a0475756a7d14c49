"""gpufilt.dask and filter_zarr on a dask.distributed cluster (worker
processes, as users run it): the in-memory results, and halos that travel
between workers as thin pieces, not whole chunks."""
import asyncio

import numpy as np
import pytest

from gpufilt import ndimage

from _helpers import CUDA_USABLE

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
gdask = pytest.importorskip("gpufilt.dask")

rng = np.random.default_rng(11)
VOLUME = rng.standard_normal((36, 41, 30)).astype(np.float32)
CHUNKS = ((10, 9, 17), (20, 21), (4, 26))  # uneven, one chunk thinner than the halos


@pytest.fixture(scope="module")
def client():
    # Without work stealing a task runs where most of its input is, which
    # test_halos_of_large_chunks_travel_as_pieces counts on.
    with dask.config.set({"distributed.scheduler.work-stealing": False}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True, dashboard_address=":0",
                                     silence_logs=40) as cluster, distributed.Client(cluster) as client:
        yield client


def transferred(client):
    """(key, bytes) of each piece of data a worker fetched from another
    since the last call."""
    def fetched(dask_worker):
        keys = [(key, n) for entry in dask_worker.transfer_incoming_log for key, n in entry["keys"].items()]
        dask_worker.transfer_incoming_log.clear()
        return keys
    return [item for keys in client.run(fetched).values() for item in keys]


CASES = [
    ("gaussian_filter", dict(sigma=2.0, mode="wrap")),
    ("median_filter", dict(size=3, mode="mirror")),
    ("uniform_filter", dict(size=(9, 1, 4), origin=(1, 0, -1))),
    ("sobel", dict(axis=2, mode="nearest")),
    ("grey_opening", dict(size=(3, 2, 3))),
    ("fourier_gaussian", dict(sigma=1.5)),
]


@pytest.mark.parametrize("cut_apart_bytes", [0, gdask.CUT_APART_BYTES])  # every piece cut apart; none here
@pytest.mark.parametrize("name, kwargs", CASES, ids=[name for name, _ in CASES])
def test_filters_on_a_cluster_equal_in_memory(client, name, kwargs, cut_apart_bytes, monkeypatch):
    monkeypatch.setattr(gdask, "CUT_APART_BYTES", cut_apart_bytes)
    function = getattr(ndimage, name)
    result = client.compute(function(da.from_array(VOLUME, chunks=CHUNKS), **kwargs)).result()
    np.testing.assert_allclose(result, function(VOLUME, **kwargs), rtol=1e-5, atol=1e-5)


def test_binary_morphology_with_a_mask_on_a_cluster(client):
    binary, mask = VOLUME > 0, VOLUME > -1
    lazy = ndimage.binary_erosion(da.from_array(binary, chunks=CHUNKS), iterations=3,
                                  mask=da.from_array(mask, chunks=CHUNKS), border_value=1)
    expected = ndimage.binary_erosion(binary, iterations=3, mask=mask, border_value=1)
    np.testing.assert_array_equal(client.compute(lazy).result(), expected)


def test_a_chain_on_a_cluster(client):
    def threshold(block):  # defined here: pickled by value for the workers
        return block > 0.5
    steps = [("gaussian_filter", {"sigma": 1.0}), ("sobel", {"axis": 0}), (threshold, {}, 0)]
    result = client.compute(gdask.chain(da.from_array(VOLUME, chunks=CHUNKS), steps)).result()
    np.testing.assert_array_equal(result, ndimage.sobel(ndimage.gaussian_filter(VOLUME, 1.0), axis=0) > 0.5)


def test_halos_of_large_chunks_travel_as_pieces(client, monkeypatch):
    # Eight chunks of 1 MiB, on the two workers as a checkerboard: each block
    # needs a halo of 2 elements from its seven neighbours, four of them
    # (its faces' and its corner's) on the other worker.
    volume = rng.random((128, 128, 128), dtype=np.float32)
    workers = sorted(client.scheduler_info()["workers"])
    corners = range(2)
    x = da.block([[[da.from_delayed(client.scatter(volume[64 * i:64 * i + 64, 64 * j:64 * j + 64, 64 * k:64 * k + 64],
                                                   workers=[workers[(i + j + k) % 2]]), (64, 64, 64), volume.dtype)
                    for k in corners] for j in corners] for i in corners])
    x = client.persist(x)
    distributed.wait(x)
    expected = ndimage.gaussian_filter(volume, 1.0, radius=2)
    transferred(client)
    for cut_apart_bytes in (2**20 - 1, 2**20):  # just below the chunks' bytes: cut apart; at them: whole
        monkeypatch.setattr(gdask, "CUT_APART_BYTES", cut_apart_bytes)
        result = client.persist(ndimage.gaussian_filter(x, 1.0, radius=2))
        distributed.wait(result)
        fetched = transferred(client)
        pieces = [n for key, n in fetched if key[0].startswith("piece-")]
        if cut_apart_bytes < 2**20:
            # Halos 2 elements thick: a face's piece is 64 x 64 x 2 elements.
            # (The total is not checked: where the scheduler runs a block
            # away from its own chunk, that chunk travels too.)
            assert pieces and max(pieces) <= 64 * 64 * 2 * 4, pieces
        else:
            # A worker that runs any block fetches the other's four chunks.
            assert not pieces and sum(n for _, n in fetched) >= volume.nbytes // 2
        np.testing.assert_allclose(result.compute(), expected, rtol=1e-5, atol=1e-6)
        del result
        transferred(client)


def test_a_graph_built_while_an_asynchronous_client_is_the_default(monkeypatch):
    # dask.compute refuses an asynchronous Client (client.compute runs the
    # graph); building a graph must not ask it to compute.
    monkeypatch.setattr(gdask, "CUT_APART_BYTES", 0)

    async def filtered():
        async with distributed.LocalCluster(n_workers=1, processes=False, asynchronous=True, dashboard_address=":0",
                                            silence_logs=40) as cluster, \
                distributed.Client(cluster, asynchronous=True) as client:
            lazy = ndimage.gaussian_filter(da.from_array(VOLUME, chunks=CHUNKS), 1.0)
            assert any(key[0].startswith("piece-") for key in lazy.__dask_graph__())
            return await client.compute(lazy)
    np.testing.assert_allclose(asyncio.run(filtered()), ndimage.gaussian_filter(VOLUME, 1.0), rtol=1e-5, atol=1e-5)


def test_filter_zarr_on_a_cluster(client, tmp_path):
    zarr = pytest.importorskip("zarr")
    source = zarr.create_array(str(tmp_path / "in.zarr"), shape=VOLUME.shape, dtype=VOLUME.dtype, chunks=(8, 16, 16))
    source[:] = VOLUME
    steps = [("gaussian_filter", {"sigma": 1.5, "mode": "wrap"}), ("median_filter", {"size": 3, "mode": "wrap"})]
    written = gdask.filter_zarr(source, str(tmp_path / "out.zarr"), steps, task_bytes=0, compute=False)
    target = client.compute(written).result()
    expected = ndimage.median_filter(ndimage.gaussian_filter(VOLUME, 1.5, mode="wrap"), 3, mode="wrap")
    np.testing.assert_allclose(target[:], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
# numba-cuda (which distributed imports for device arrays) with numpy 2.5 warns as it imports
@pytest.mark.filterwarnings("ignore:The 'generic' unit for NumPy timedelta:DeprecationWarning")
@pytest.mark.parametrize("cut_apart_bytes", [0, gdask.CUT_APART_BYTES])
def test_cupy_chunks_on_a_dask_cuda_cluster(cut_apart_bytes, monkeypatch):
    # dask-cuda's LocalCUDACluster: a worker process on each GPU, each
    # filtering the cupy chunks it holds on its GPU.
    monkeypatch.setattr(gdask, "CUT_APART_BYTES", cut_apart_bytes)
    cp = pytest.importorskip("cupy")
    dask_cuda = pytest.importorskip("dask_cuda")
    steps = [("gaussian_filter", {"sigma": 1.5, "mode": "wrap"}), ("sobel", {"axis": 0}),
             ("median_filter", {"size": 3})]
    with dask_cuda.LocalCUDACluster(dashboard_address=":0", silence_logs=40) as cluster, \
            distributed.Client(cluster) as client:
        x = client.persist(da.from_array(VOLUME, chunks=CHUNKS).map_blocks(cp.asarray))
        distributed.wait(x)
        lazy = gdask.chain(x, steps)
        assert isinstance(lazy._meta, cp.ndarray)
        result = client.compute(lazy).result()
        masked = client.compute(ndimage.binary_dilation(x > 0, iterations=2, mask=x > -1)).result()
    expected = cp.asarray(VOLUME)
    for name, kwargs in steps:
        expected = getattr(ndimage, name)(expected, **kwargs)
    assert isinstance(result, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(result), cp.asnumpy(expected), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(cp.asnumpy(masked), ndimage.binary_dilation(VOLUME > 0, iterations=2,
                                                                              mask=VOLUME > -1))

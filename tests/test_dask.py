"""gpufilt.ndimage on dask arrays (gpufilt.dask): every filter, every mode,
random chunkings (1-element chunks and chunks smaller than the halo among
them) give the in-memory result; chains; the refusals."""
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gpufilt import ndimage

from _helpers import CUDA_USABLE

da = pytest.importorskip("dask.array")
gdask = pytest.importorskip("gpufilt.dask")

rng = np.random.default_rng(7)
WEIGHTS_1D = rng.standard_normal(5)
WEIGHTS_2D = rng.standard_normal((3, 4))
FOOTPRINT = np.array([[1, 0, 1, 1], [0, 1, 1, 0], [1, 1, 0, 1]], bool)
HEIGHTS = rng.integers(0, 3, (3, 3)).astype(float)
STRUCTURE = np.array([[0, 1, 0], [1, 1, 1], [0, 1, 1]], bool)


def second_derivative(x, axis, output, mode, cval):
    return ndimage.correlate1d(x, [1.0, -2.0, 1.0], axis, output, mode, cval)


def first_derivative(x, axis, output, mode, cval):
    return ndimage.correlate1d(x, [-1.0, 0.0, 1.0], axis, output, mode, cval)


# (function, kwargs): the filters with a `mode`, each run in every mode.
MODE_CASES = [
    ("correlate1d", dict(weights=WEIGHTS_1D, axis=0, origin=1)),
    ("convolve1d", dict(weights=WEIGHTS_1D[:4], axis=-1, origin=-1)),
    ("correlate", dict(weights=WEIGHTS_2D, origin=(0, 1))),
    ("convolve", dict(weights=WEIGHTS_2D.T, origin=(1, -1))),
    ("gaussian_filter1d", dict(sigma=1.5, axis=0, order=1)),
    ("gaussian_filter", dict(sigma=(1.2, 2.0))),
    ("gaussian_filter", dict(sigma=0.7, radius=(2, 5), order=(0, 2))),
    ("gaussian_filter", dict(sigma=2.5, axes=1)),
    ("uniform_filter1d", dict(size=4, axis=1, origin=1)),
    ("uniform_filter", dict(size=(3, 6))),
    ("minimum_filter1d", dict(size=3)),
    ("maximum_filter1d", dict(size=6, axis=0, origin=-2)),
    ("minimum_filter", dict(size=4)),
    ("maximum_filter", dict(footprint=FOOTPRINT, origin=(1, 0))),
    ("median_filter", dict(size=3)),
    ("rank_filter", dict(rank=2, size=(3, 2))),
    ("percentile_filter", dict(percentile=30, footprint=FOOTPRINT)),
    ("sobel", dict(axis=0)),
    ("prewitt", dict(axis=1)),
    ("laplace", dict()),
    ("gaussian_laplace", dict(sigma=1.3)),
    ("gaussian_gradient_magnitude", dict(sigma=(1.0, 2.0), truncate=3.0)),
    ("generic_laplace", dict(derivative2=second_derivative, depth=1)),
    ("generic_gradient_magnitude", dict(derivative=first_derivative, depth=(1, 1))),
    ("grey_erosion", dict(size=(3, 2))),
    ("grey_dilation", dict(footprint=FOOTPRINT, origin=(0, -1))),
    ("grey_dilation", dict(structure=HEIGHTS)),
    ("grey_opening", dict(size=3)),
    ("grey_closing", dict(size=(2, 3))),
    ("morphological_gradient", dict(size=3)),
    ("morphological_laplace", dict(size=3)),
    ("white_tophat", dict(size=3)),
    ("black_tophat", dict(footprint=FOOTPRINT)),
]
MODES = ["reflect", "constant", "nearest", "mirror", "wrap", "grid-wrap", "grid-mirror", "grid-constant"]
# grey morphology with a non-flat structure takes the modes numpy.pad has.
PAD_MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]


def chunkings(shape):
    """Random chunks per axis: any partition, 1-element chunks included."""
    def axis(n):
        return st.sets(st.integers(1, n - 1), max_size=n - 1).map(
            lambda cuts: tuple(np.diff([0, *sorted(cuts), n]).tolist()))
    return st.tuples(*(axis(n) for n in shape))


def assert_same(result, expected):
    assert type(result) is type(expected) and result.dtype == expected.dtype and result.shape == expected.shape
    if expected.dtype.kind in "fc":
        # A block's lines start elsewhere: running sums (uniform filters in
        # double, as scipy's) and SIMD lanes that fuse multiply-adds round
        # differently in the last bits.
        tolerance = 1e-12 if expected.dtype.itemsize >= 8 and expected.dtype.kind == "f" or \
            expected.dtype == np.complex128 else 2e-6
        np.testing.assert_allclose(result, expected, rtol=tolerance, atol=tolerance)
    else:
        np.testing.assert_array_equal(result, expected)


def run_both(name, data, chunks, **kwargs):
    function = getattr(ndimage, name)
    lazy = function(da.from_array(data, chunks=chunks), **kwargs)
    assert isinstance(lazy, da.Array) and lazy.chunks == da.from_array(data, chunks=chunks).chunks
    kwargs.pop("depth", None)
    assert_same(lazy.compute(), function(data, **kwargs))
    return lazy


SHAPE = (13, 11)
DATA = {
    "float64": rng.standard_normal(SHAPE),
    "float32": rng.standard_normal(SHAPE).astype(np.float32),
    "uint8": rng.integers(0, 256, SHAPE).astype(np.uint8),
}
FAST = settings(max_examples=4, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name, kwargs", MODE_CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(MODE_CASES)])
@FAST
@given(chunks=chunkings(SHAPE), dtype=st.sampled_from(sorted(DATA)))
def test_every_filter_in_every_mode_equals_the_in_memory_result(name, kwargs, mode, chunks, dtype):
    if "structure" in kwargs and mode not in PAD_MODES:
        return
    data = DATA[dtype]
    if name in ("gaussian_laplace", "gaussian_gradient_magnitude", "generic_laplace", "laplace",
                "generic_gradient_magnitude", "sobel", "prewitt") and dtype == "uint8":
        data = data.astype(np.int16)
    run_both(name, data, chunks, mode=mode, cval=0.5, **kwargs)


def test_a_sequence_of_modes_and_axes():
    data = DATA["float64"]
    for chunks in [(1, 2), (4, 3), (13, 11)]:
        run_both("uniform_filter", data, chunks, size=(5, 3), mode=["wrap", "mirror"])
        run_both("gaussian_filter", data, chunks, sigma=(1.0, 3.0), mode=["nearest", "grid-wrap"])
        run_both("minimum_filter", data, chunks, size=(4, 2), mode=["wrap", "constant"], cval=-1.0)
        run_both("uniform_filter", data, chunks, size=4, axes=(1,), mode="wrap")


def test_windows_over_axes_listed_out_of_order():
    # scipy places a footprint's or structure's lengths on the listed axes in
    # increasing order (a size, or an all-ones min/max footprint: in the given
    # order; origins with the given axes): the halos cover every placement.
    volume = rng.standard_normal((9, 8, 10))
    footprint = np.array([[1, 0], [1, 1], [0, 0], [0, 1], [1, 0]], bool)  # 5 x 2, not all ones
    heights = rng.integers(-2, 3, (5, 2)).astype(float)
    for chunks in [(3, 2, 4), (9, 8, 3), (2, 8, 10)]:
        for axes in [(2, 0), (1, 0), (2, 1)]:
            for origin in (0, (2, 0), (-2, 0), (0, 1)):
                for name, kwargs in [("minimum_filter", dict(footprint=footprint, mode="wrap")),
                                     ("minimum_filter", dict(footprint=np.ones((5, 2), bool))),
                                     ("correlate", dict(weights=heights, mode="mirror")),
                                     ("convolve", dict(weights=heights)),
                                     ("grey_dilation", dict(structure=heights)),
                                     ("grey_closing", dict(footprint=footprint)),
                                     ("uniform_filter", dict(size=(5, 2)))]:
                    try:
                        getattr(ndimage, name)(volume, axes=axes, origin=origin, **kwargs)
                    except ValueError:  # an origin beyond the length placed on its axis, as scipy
                        continue
                    run_both(name, volume, chunks, axes=axes, origin=origin, **kwargs)
        run_both("median_filter", volume, chunks, footprint=np.ones((5, 2, 1), bool), axes=(2, 1, 0),
                 origin=(2, 0, 0))


def test_a_mode_for_each_axis_listed_out_of_order():
    # modes[k] goes with axes[k] (scipy's order): the wrapped axis gets the halo across the ends.
    data = DATA["float64"]
    for chunks in [(2, 2), (1, 3), (13, 4)]:
        run_both("minimum_filter", data, chunks, size=(3, 1), axes=(1, 0), mode=["mirror", "wrap"])
        run_both("uniform_filter", data, chunks, size=(4, 3), axes=(1, 0), mode=["wrap", "nearest"])
        run_both("gaussian_filter", data, chunks, sigma=(1.0, 2.0), axes=(1, 0), mode=["grid-wrap", "reflect"])


def test_a_halo_wider_than_the_array():
    data = DATA["float32"]
    for mode in MODES:
        run_both("uniform_filter", data, (2, 3), size=(30, 25), mode=mode)
        run_both("gaussian_filter", data, (1, 4), sigma=9.0, mode=mode)


def test_chunks_of_length_zero():
    data = DATA["float32"]
    for chunks in [((6, 0, 7, 0), (0, 8, 3)), ((0, 13), (11, 0)), ((13,), (2, 0, 0, 9))]:
        for mode in MODES:
            run_both("uniform_filter", data, chunks, size=3, mode=mode)
            run_both("uniform_filter", data, chunks, size=1, mode=mode)
            run_both("gaussian_filter", data, chunks, sigma=1.5, mode=mode)


def test_zero_dimensions_and_empty_arrays():
    assert_same(ndimage.gaussian_filter(da.from_array(np.array(3.0)), 1.0).compute(),
                ndimage.gaussian_filter(np.array(3.0), 1.0))
    assert_same(ndimage.uniform_filter(da.from_array(np.zeros((0, 5)), chunks=2), 3).compute(),
                ndimage.uniform_filter(np.zeros((0, 5)), 3))


def test_three_dimensions_and_output_dtypes():
    data = rng.standard_normal((7, 6, 5))
    run_both("gaussian_filter", data, (2, 3, 1), sigma=1.0, mode="wrap", output=np.float32)
    run_both("median_filter", data, (3, 1, 2), size=(3, 2, 3), mode="mirror")
    run_both("uniform_filter", data.astype(np.float32), (4, 4, 4), size=3, output=np.float64)


BINARY = rng.random(SHAPE) > 0.4
MASK = rng.random(SHAPE) > 0.2


@pytest.mark.parametrize("name, kwargs", [
    ("binary_erosion", dict()),
    ("binary_erosion", dict(iterations=2, border_value=1)),
    ("binary_dilation", dict(structure=STRUCTURE, origin=(0, 1), iterations=3)),
    ("binary_dilation", dict(iterations=2, mask=MASK)),
    ("binary_opening", dict(structure=STRUCTURE, iterations=2)),
    ("binary_closing", dict(iterations=2, border_value=1)),
])
@FAST
@given(chunks=chunkings(SHAPE))
def test_binary_morphology(name, kwargs, chunks):
    run_both(name, BINARY, chunks, **kwargs)


@pytest.mark.parametrize("name, kwargs", [
    ("binary_fill_holes", dict()),
    ("binary_propagation", dict(mask=MASK)),
    ("binary_erosion", dict(iterations=0)),
])
def test_whole_array_operations_warn_and_are_exact(name, kwargs):
    with pytest.warns(gdask.WholeArrayWarning, match="whole array"):
        run_both(name, BINARY, (4, 5), **kwargs)


@pytest.mark.parametrize("name, parameter", [
    ("fourier_gaussian", 1.5), ("fourier_uniform", (3.0, 2.0)), ("fourier_ellipsoid", 2.5), ("fourier_shift", (1, -2)),
])
@pytest.mark.parametrize("n", [-1, 21])
def test_fourier_filters_blockwise(name, parameter, n):
    transform = np.fft.fft2(DATA["float64"]) if n < 0 else np.fft.rfft(rng.standard_normal((13, 21)), axis=1)
    function = getattr(ndimage, name)
    for chunks in [(1, 1), (5, 4), transform.shape]:
        lazy = function(da.from_array(transform, chunks=chunks), parameter, n=n, axis=1)
        assert_same(lazy.compute(), function(transform, parameter, n=n, axis=1))


@FAST
@given(chunks=chunkings(SHAPE), modes=st.lists(st.sampled_from(MODES), min_size=3, max_size=3))
def test_a_chain_equals_the_filters_one_after_the_other(chunks, modes):
    data = DATA["float64"]
    steps = [("gaussian_filter", dict(sigma=1.2, mode=modes[0])),
             (ndimage.sobel, dict(axis=1, mode=modes[1])),
             (np.abs, {}, 0),
             ("maximum_filter", dict(size=(2, 3), mode=modes[2], origin=(0, 1)))]
    expected = data
    for function, kwargs, *_ in steps:
        expected = (getattr(ndimage, function) if isinstance(function, str) else function)(expected, **kwargs)
    assert_same(gdask.chain(da.from_array(data, chunks=chunks), steps).compute(), expected)


@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=3, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(chunks=chunkings(SHAPE), case=st.sampled_from(MODE_CASES))
def test_halos_cut_apart_as_for_a_cluster_give_the_same_results(mode, chunks, case, monkeypatch):
    # With a dask.distributed Client, each halo piece is cut out of its chunk
    # by a task of its own (test_dask_distributed.py runs a cluster): here
    # that graph runs on dask's threads, over every filter, mode and chunking.
    monkeypatch.setattr(gdask, "_cuts_halos_apart", lambda: True)
    monkeypatch.setattr(gdask, "CUT_APART_BYTES", 0)  # however small the chunks
    name, kwargs = case
    if "structure" in kwargs and mode not in PAD_MODES:
        return
    run_both(name, DATA["float32"], chunks, mode=mode, cval=0.5, **kwargs)
    lazy = run_both("uniform_filter", DATA["float32"], (5, 4), size=3, mode=mode)
    assert any(key[0].startswith("piece-") for key in lazy.__dask_graph__())
    for extremes in [((6, 0, 7, 0), (0, 8, 3)), (1, 4)]:  # chunks of length 0, a halo wider than the array
        run_both("gaussian_filter", DATA["float32"], extremes, sigma=4.0, mode=mode)
    run_both("binary_dilation", BINARY, chunks, iterations=2, mask=MASK)
    steps = [("gaussian_filter", dict(sigma=1.2, mode=mode)), ("maximum_filter", dict(size=(2, 3), origin=(0, 1)))]
    assert_same(gdask.chain(da.from_array(DATA["float64"], chunks=chunks), steps).compute(),
                ndimage.maximum_filter(ndimage.gaussian_filter(DATA["float64"], 1.2, mode=mode), (2, 3),
                                       origin=(0, 1)))


def test_a_graph_built_before_its_distributed_client_starts(monkeypatch):
    # scheduler="distributed" configured, the Client not started yet: dask
    # builds graphs then and refuses only to compute them; gpufilt asked
    # the scheduler as it built, which raised. A Client will run the
    # graph, so its halos are cut apart.
    pytest.importorskip("distributed")
    dask = pytest.importorskip("dask")
    monkeypatch.setattr(gdask, "CUT_APART_BYTES", 0)  # cut every piece apart, however small its chunk
    with dask.config.set(scheduler="distributed"):
        lazy = ndimage.uniform_filter(da.from_array(DATA["float32"], chunks=(5, 4)), 3)
    assert any(key[0].startswith("piece-") for key in lazy.__dask_graph__())
    assert_same(lazy.compute(scheduler="threads"), ndimage.uniform_filter(DATA["float32"], 3))


@pytest.mark.parametrize("group", [1, 4])
def test_a_chain_cuts_each_result_to_what_the_later_steps_read(group, monkeypatch):
    # After each step a block is cut to its own elements plus the later
    # steps' reach (and what their modes reflect at the array's ends); on a
    # GPU rounded out to whole groups along the last axis (group 4 here).
    monkeypatch.setattr(gdask, "_alignment_group", lambda x, gpus: group)
    data = np.random.default_rng(3).standard_normal((40, 45))
    mask = data > -1.0
    seen = []

    def record(block):
        seen.append(block.shape)
        return block
    smooth = [("gaussian_filter", dict(sigma=1.0, mode="mirror")),
              ("uniform_filter", dict(size=(6, 3), origin=(2, 1), mode="reflect"))]
    erode = [("uniform_filter", dict(size=3)),
             ("binary_erosion", dict(structure=np.ones((3, 2), bool), origin=(1, 0), mask=mask))]
    smoothed = ndimage.uniform_filter(ndimage.gaussian_filter(data, 1.0, mode="mirror"), size=(6, 3),
                                      origin=(2, 1), mode="reflect")
    eroded = ndimage.binary_erosion(ndimage.uniform_filter(data, 3), np.ones((3, 2), bool), origin=(1, 0), mask=mask)
    # blocks shorter than the reach at the ends (the modes reflect what lies past them), and longer ones
    for chunks in [((1, 2, 30, 7), (1, 3, 38, 3)), ((12, 7, 11, 10), (15, 9, 13, 8))]:
        x = da.from_array(data, chunks=chunks)
        for steps, expected in [(smooth, smoothed), (erode, eroded)]:
            seen.clear()
            assert_same(gdask.chain(x, steps + [(record, {}, 0)]).compute(scheduler="sync"), expected)
    # The middle blocks of the last chunking: the last step sees only their
    # own elements, e.g. [12, 19) x [15, 24) (with groups of 4: [12, 24) along the last axis).
    widths = (9, 13) if group == 1 else (12, 16)
    assert {(7, widths[0]), (7, widths[1]), (11, widths[0]), (11, widths[1])} <= set(seen)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
def test_a_chain_on_cupy_chunks_cut_and_aligned():
    # On the GPU the last axis's halo and cuts are rounded out to GPU_ALIGNMENT.
    cp = pytest.importorskip("cupy")
    data = np.random.default_rng(4).standard_normal((40, 45)).astype(np.float32)
    steps = [("gaussian_filter", dict(sigma=1.5)), ("sobel", dict(axis=1, mode="nearest")),
             ("maximum_filter", dict(size=(2, 5), origin=(0, 1)))]
    expected = ndimage.maximum_filter(ndimage.sobel(ndimage.gaussian_filter(data, 1.5), axis=1, mode="nearest"),
                                      size=(2, 5), origin=(0, 1))
    for chunks in [((12, 7, 11, 10), (15, 9, 13, 8)), (5, 6)]:
        x = da.from_array(cp.asarray(data), chunks=chunks, asarray=False)
        assert_same(cp.asnumpy(gdask.chain(x, steps).compute()), expected)


def test_a_chain_reads_each_block_once():
    x = da.from_array(DATA["float64"], chunks=(4, 4))
    chained = gdask.chain(x, [("gaussian_filter", dict(sigma=1.0)), ("sobel", dict(axis=0)),
                              ("median_filter", dict(size=3))])
    layers = chained.__dask_graph__().layers
    assert len(layers) == 2  # the input and one layer of filter tasks
    assert len(layers[chained.name]) == x.npartitions
    wrapped = gdask.chain(x, [("gaussian_filter", dict(sigma=1.0, mode="wrap")), ("sobel", dict(axis=0))])
    assert len(wrapped.__dask_graph__().layers) == 3  # a wrapped step, then one cut at the ends


def test_pieces_of_one_array_join_without_a_copy():
    from gpufilt.dask import _cut_and_join
    a = np.arange(60.0).reshape(6, 10)
    chunks = [[a[0:3, 0:4], a[0:3, 4:10]], [a[3:6, 0:4], a[3:6, 4:10]]]
    pieces = [[(0, 1, 3), (1, 0, 3)], [(0, 2, 4), (1, 0, 5)]]
    joined = _cut_and_join(chunks, pieces)
    assert np.shares_memory(joined, a) and np.array_equal(joined, a[1:6, 2:9])
    wrapped = _cut_and_join([[a[3:6, 0:4]], [a[0:3, 0:4]]], [[(1, 1, 3), (0, 0, 2)], [(0, 0, 4)]])
    assert not np.shares_memory(wrapped, a) and np.array_equal(wrapped, a[[4, 5, 0, 1], 0:4])
    copies = [[chunk.copy() for chunk in row] for row in chunks]
    assert np.array_equal(_cut_and_join(copies, pieces), a[1:6, 2:9])


def test_depth_of():
    assert gdask.depth_of("gaussian_filter", 2, sigma=2) == [(8, 8), (8, 8)]
    assert gdask.depth_of(ndimage.uniform_filter, 2, size=4, axes=1) == [(0, 0), (2, 1)]
    assert gdask.depth_of("convolve1d", 1, [1, 2, 3, 4]) == [(1, 2)]
    assert gdask.depth_of("grey_opening", 3, size=(3, 1, 5)) == [(2, 2), (0, 0), (4, 4)]
    assert gdask.depth_of("binary_erosion", 2, iterations=3) == [(3, 3), (3, 3)]


def test_refusals():
    x = da.from_array(DATA["float64"], chunks=5)
    with pytest.raises(ValueError, match="immutable"):
        ndimage.gaussian_filter(x, 1.0, output=np.empty(SHAPE))
    with pytest.raises(ValueError, match="stream"):
        ndimage.uniform_filter(x, 3, stream=0)
    with pytest.raises(ValueError, match="depth="):
        ndimage.generic_laplace(x, second_derivative)
    with pytest.raises(ValueError, match="depth"):
        ndimage.generic_laplace(x, second_derivative, depth=-1)
    with pytest.raises(ValueError, match="not a gpufilt.ndimage function"):
        gdask.chain(x, [(np.abs, {})])
    with pytest.raises(ValueError, match="unknown filter"):
        gdask.chain(x, [("gaussian", {"sigma": 1})])
    with pytest.raises(TypeError, match="dask array"):
        gdask.chain(DATA["float64"], [])
    with pytest.raises(ValueError, match="must keep its block's shape"):
        gdask.chain(x, [("gaussian_filter", {"sigma": 1}), (lambda b: b[:1], {}, 0)]).compute()
    with pytest.raises(TypeError, match="gaussian_filter"):
        ndimage.gaussian_filter(x, 1.0, sigmaa=2)
    # argument errors surface when the graph is built, as in memory
    with pytest.raises(RuntimeError, match="sequence argument"):
        ndimage.uniform_filter(x, size=(3, 3, 3))
    with pytest.raises(ValueError, match="shape"):
        ndimage.binary_erosion(x > 0, mask=np.ones((3, 3), bool))


def test_no_warnings_on_plain_calls():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ndimage.gaussian_filter(da.from_array(DATA["float32"], chunks=4), 1.0).compute()


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
@pytest.mark.parametrize("mode", ["reflect", "wrap", "constant"])
@pytest.mark.parametrize("name, kwargs", [c for c in MODE_CASES if "derivative" not in str(c[1])][:24],
                         ids=[n for n, k in MODE_CASES if "derivative" not in str(k)][:24])
def test_cupy_chunks_run_on_the_gpu(name, kwargs, mode):
    cp = pytest.importorskip("cupy")
    data = DATA["float32"]
    function = getattr(ndimage, name)
    lazy = function(da.from_array(cp.asarray(data), chunks=(4, 5), asarray=False), mode=mode, cval=0.5, **kwargs)
    result = lazy.compute()
    assert isinstance(result, cp.ndarray)
    expected = function(cp.asarray(data), mode=mode, cval=0.5, **kwargs)
    np.testing.assert_allclose(cp.asnumpy(result), cp.asnumpy(expected), rtol=2e-6, atol=2e-6)

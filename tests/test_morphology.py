"""gpufilt.ndimage's grey and binary morphology against scipy.ndimage on
random data: dtypes, modes, flat windows (size, footprint) and non-flat
structures, origins, axes, masks, iterations, output arrays; bit for bit
(bool results compared as their bytes, which scipy stores as computed).
SciPy's own test_morphology.py runs too (test_scipy_suite.py)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage as snd

import gpufilt
from gpufilt import ndimage as gnd

from _helpers import CUDA_USABLE

GREY = ["grey_erosion", "grey_dilation", "grey_opening", "grey_closing", "morphological_gradient",
        "morphological_laplace", "white_tophat", "black_tophat"]
DTYPES = ["bool", "uint8", "int8", "uint16", "int16", "int32", "uint32", "int64", "float32", "float64"]
MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]


def same(ours, theirs, case=""):
    """Bit for bit, bools by their bytes; or the same exception type.
    `case` names the random case in a failure's message."""
    if isinstance(theirs, Exception):
        assert isinstance(ours, type(theirs)), (ours, theirs, case)
        return
    assert not isinstance(ours, Exception), (ours, case)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, case
    view = (lambda a: a.view(np.uint8)) if theirs.dtype == bool else (lambda a: a)
    np.testing.assert_array_equal(view(ours), view(theirs), err_msg=str(case))


def outcome(func, *args, **kwargs):
    try:
        return func(*args, **kwargs)
    except Exception as exc:  # compared with scipy's
        return exc


def random_image(rng, shape, dtype):
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    return rng.integers(0, 60, shape).astype(dtype)


WINDOWS = {
    "size": {"size": (3, 2), "origin": (0, -1)},
    "footprint": {"footprint": np.array([[1, 0, 1], [1, 1, 0]], bool), "origin": (0, 1)},
    "integer heights": {"structure": np.array([[1.0, -2.0], [0.0, 3.0], [-1.0, 2.0]])},
    "real heights": {"structure": np.array([[0.3, -1.7, 0.5], [2.2, 0.0, -0.6]])},
    "heights and footprint": {"structure": np.array([[0.5, 1.5], [-2.5, 0.0]]),
                              "footprint": np.array([[1, 0], [1, 1]], bool)},
}


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", GREY)
def test_grey_morphology_matches_scipy(name, dtype, window, rng):
    image = random_image(rng, (7, 9), dtype)
    for mode in MODES:
        kwargs = dict(WINDOWS[window], mode=mode, cval=2.5)
        same(outcome(getattr(gnd, name), image, **kwargs), outcome(getattr(snd, name), image, **kwargs))


@pytest.mark.parametrize("name", GREY)
def test_grey_morphology_on_a_volume_with_axes_and_output_array(name, rng):
    volume = random_image(rng, (5, 6, 7), "float32")
    kwargs = dict(size=(3, 2), axes=(0, 2), mode="nearest")
    out_ours, out_theirs = np.zeros_like(volume), np.zeros_like(volume)
    assert getattr(gnd, name)(volume, output=out_ours, **kwargs) is out_ours
    getattr(snd, name)(volume, output=out_theirs, **kwargs)
    same(out_ours, out_theirs)
    strided = np.asfortranarray(volume)[::-1]
    footprint = np.eye(3, dtype=bool)[:, :, None] | np.eye(3, dtype=bool)[None]
    same(getattr(gnd, name)(strided, footprint=footprint), getattr(snd, name)(strided, footprint=footprint))
    with pytest.raises(gpufilt.ArgumentError, match="must match len"):
        getattr(gnd, name)(volume, footprint=np.eye(3, dtype=bool))


def full_range_image(rng, shape, dtype):
    """Values across the dtype's whole range (integer sums then wrap), with
    NaN, infinities and signed zeros among floats."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    image = (rng.standard_normal(shape) * 1e3).astype(dtype)
    flat = image.reshape(-1)
    for k, value in enumerate([np.nan, np.inf, -np.inf, -0.0, 0.0]):
        flat[rng.integers(0, flat.size, 3)] = value
    return image


@pytest.mark.parametrize("dtype", [*DTYPES, "uint64"])
@pytest.mark.parametrize("name", ["grey_erosion", "grey_dilation"])
def test_nonflat_morphology_whole_range_layouts_and_threads(name, dtype, rng, cpu_isa):
    """The non-flat C++ pass, each vector width's copy: wrapping integer
    sums, NaN, large and fractional heights, 3-d with axes, strided and
    Fortran-order inputs, several threads; bit for bit with scipy."""
    volume = full_range_image(rng, (9, 8, 11), dtype)
    heights = rng.integers(-300, 300, (3, 2, 4)).astype(float) + rng.choice([0.0, 0.5, 0.25], (3, 2, 4))
    footprint = rng.random((3, 2, 4)) < 0.7
    footprint[0, 0, 0] = True
    for mode in MODES:
        for image in (volume, np.asfortranarray(volume), volume[::-1, :, ::2]):
            kwargs = dict(structure=heights, footprint=footprint, mode=mode, cval=-7.5, origin=(1, 0, -1))
            same(outcome(getattr(gnd, name), image, threads=2, **kwargs),
                 outcome(getattr(snd, name), image, **kwargs))
    kwargs = dict(structure=heights[:, 0], axes=(0, 2), mode="wrap")
    same(outcome(getattr(gnd, name), volume, **kwargs), outcome(getattr(snd, name), volume, **kwargs))
    # Rows of several vectors of any width (64 bytes of uint8), NaN and wrapping sums among them.
    long_rows = full_range_image(rng, (3, 4, 203), dtype)
    for mode in ("reflect", "constant"):
        kwargs = dict(structure=heights, footprint=footprint, mode=mode, cval=-7.5)
        same(outcome(getattr(gnd, name), long_rows, **kwargs), outcome(getattr(snd, name), long_rows, **kwargs))
    line = volume[0, 0]
    same(outcome(getattr(gnd, name), line, structure=heights[0, 0]),
         outcome(getattr(snd, name), line, structure=heights[0, 0]))


@pytest.mark.parametrize("name", ["grey_erosion", "grey_dilation"])
def test_nonflat_float32_terms_between_floats_as_scipy(name, rng, cpu_isa):
    """float32 data keeps its running extremum in floats against the first
    term rounded outwards: first terms that fall between two floats, beyond
    the float range, at signed zeros, subnormals and NaN, bit for bit."""
    tiny, big = np.float32(1e-45), np.finfo(np.float32).max
    values = np.array([0.0, -0.0, tiny, -tiny, 1.0, np.nextafter(np.float32(1), np.float32(2)), big, -big,
                       np.inf, -np.inf, np.nan, 3.5], np.float32)
    heights_pool = [0.0, -0.0, 1e-9, -1e-9, 0.5, -0.5, 1e38, -1e38, 3e38, -3e38, 1e-300, -1e-300]
    for _ in range(20):
        image = rng.choice(values, (7, 9, 10))
        heights = rng.choice(heights_pool, (3, 2, 3))
        for mode in ("reflect", "constant"):
            kwargs = dict(structure=heights, mode=mode, cval=float(rng.choice(values[:-2])))
            same(outcome(getattr(gnd, name), image, **kwargs), outcome(getattr(snd, name), image, **kwargs),
                 (heights, mode))


def _nonflat_outputs_written_directly(xp, name, rng):
    """Non-flat results the kernels write as they are (float64 outputs, and
    float32 ones of float32 data) go into the caller's output array, or into
    a temporary and then into it (views, other layouts), or into the input
    itself; each as scipy's, the output returned. A wrong shape is scipy's
    error and writes nothing."""
    heights = rng.integers(-9, 9, (3, 3)).astype(float) + 0.5
    for dtype, out_dtype in (("float32", "float32"), ("float32", "float64"), ("int16", "float64"),
                             ("float64", "float64")):
        image = rng.standard_normal((13, 17)).astype(dtype) * 50
        expected = getattr(snd, name)(image, structure=heights, output=np.dtype(out_dtype))
        for layout in ("C", "F", "view"):
            shape, order = ((13, 34), "C") if layout == "view" else ((13, 17), layout)
            target = xp.full(shape, 7, out_dtype, order=order)
            out = target[:, ::2] if layout == "view" else target
            assert getattr(gnd, name)(xp.asarray(image), structure=heights, output=out) is out
            same(np.asarray(out.get() if xp is not np else out), expected, (dtype, out_dtype, layout))
            if layout == "view":
                assert (target[:, 1::2] == 7).all()
        if dtype == out_dtype:
            data = xp.asarray(image)
            assert getattr(gnd, name)(data, structure=heights, output=data) is data
            same(np.asarray(data.get() if xp is not np else data), expected, (dtype, "in place"))
    image = xp.asarray(rng.standard_normal((13, 17)).astype(np.float32))
    wrong = xp.full((13, 16), 7, np.float32)
    with pytest.raises(RuntimeError, match="output shape"):
        getattr(gnd, name)(image, structure=heights, output=wrong)
    assert (wrong == 7).all()


@pytest.mark.parametrize("name", ["grey_erosion", "grey_dilation"])
def test_nonflat_results_written_into_output_arrays(name, rng):
    _nonflat_outputs_written_directly(np, name, rng)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
@pytest.mark.parametrize("name", ["grey_erosion", "grey_dilation"])
def test_nonflat_results_written_into_cupy_output_arrays(name, rng):
    _nonflat_outputs_written_directly(pytest.importorskip("cupy"), name, rng)


@pytest.mark.parametrize("name", GREY)
def test_nonflat_edge_inputs_as_scipy(name):
    """0-d and empty inputs give scipy's results; a complex output raises
    scipy's RuntimeError before anything is written."""
    for image, heights in [(np.array(3.0), np.array(1.0)), (np.array(3, np.int8), np.array(2.5)),
                           (np.zeros((0, 5)), np.ones((2, 2))), (np.zeros((4, 0), np.uint8), np.ones((2, 3)))]:
        for mode in ("reflect", "constant"):
            same(outcome(getattr(gnd, name), image, structure=heights, mode=mode),
                 outcome(getattr(snd, name), image, structure=heights, mode=mode))
    image = np.arange(12.0).reshape(3, 4)
    out = np.full((3, 4), 7 + 1j, np.complex64)
    same(outcome(getattr(gnd, name), image, structure=np.ones((2, 2)), output=out),
         outcome(getattr(snd, name), image, structure=np.ones((2, 2)), output=out.copy()))
    assert (out == 7 + 1j).all()


NONFLAT = ["grey_erosion", "grey_dilation", "grey_opening", "white_tophat", "morphological_gradient"]


def _axes_cases(rng):
    """(image, heights, axes, origin): elements over some axes of the input,
    listed in any order (scipy: the element's axes land on them in increasing
    order; origin k goes with axes[k], or with axis k when every axis is listed)."""
    volume, plane = rng.random((5, 6, 7)), rng.random((6, 7))
    heights = rng.integers(-3, 4, (3, 2)).astype(float)
    for axes in [(2, 0), (0, 2), (1, 0), (2, 1)]:
        for origin in (0, (1, 0), (0, -1)):
            yield volume, heights, axes, origin
    for origin in (0, (1, 0), (-1, 0)):
        yield plane, heights, (1, 0), origin


@pytest.mark.parametrize("name", NONFLAT)
def test_nonflat_morphology_over_axes_in_any_order_as_scipy(name, rng):
    for image, heights, axes, origin in _axes_cases(rng):
        kwargs = dict(structure=heights, axes=axes, origin=origin)
        same(outcome(getattr(gnd, name), image, **kwargs), outcome(getattr(snd, name), image, **kwargs),
             (axes, origin))


@pytest.mark.parametrize("name", NONFLAT)
def test_nonflat_morphology_of_big_endian_data_as_scipy(name, rng):
    """Non-native byte order: scipy's values, in the native dtype."""
    heights = rng.integers(-3, 4, (3, 3)).astype(float)
    for dtype in (">f8", ">i2", ">u4", ">f4"):
        image = rng.integers(0, 100, (6, 7)).astype(dtype)
        ours, theirs = getattr(gnd, name)(image, structure=heights), getattr(snd, name)(image, structure=heights)
        assert ours.dtype == theirs.dtype and ours.dtype.isnative
        same(ours, theirs, dtype)


@pytest.mark.parametrize("name", ["binary_erosion", "binary_dilation", "grey_erosion", "grey_dilation"])
def test_morphology_refuses_float_origins_and_bad_threads(name):
    image = np.arange(42.0).reshape(6, 7) > 20
    window = {"structure": np.ones((3, 3))} if name.startswith("grey") else {}
    for origin in (0.5, 1.0, (0, 0.7)):
        with pytest.raises(TypeError, match="origin"):
            getattr(gnd, name)(image, origin=origin, **window)
    assert isinstance(outcome(getattr(snd, name), image, origin=0.5, **window), Exception)
    for threads, error in ((0, ValueError), (-3, ValueError), ("a", TypeError), (1.5, TypeError)):
        with pytest.raises(error, match="threads"):
            getattr(gnd, name)(image, threads=threads, **window)


@pytest.mark.parametrize("name", ["binary_erosion", "binary_dilation"])
def test_binary_outputs_as_scipy(name, rng):
    """An output dtype still gives bool (scipy's rule); an output array of
    another shape raises scipy's RuntimeError before anything is written."""
    image = rng.random((8, 9)) > 0.4
    for dtype in (np.float32, np.int64, bool):
        ours, theirs = getattr(gnd, name)(image, output=dtype), getattr(snd, name)(image, output=dtype)
        assert ours.dtype == theirs.dtype == np.bool_
        same(ours, theirs)
    for shape in ((4, 9), (9, 8), (1, 9), (8, 9, 1)):
        out = np.full(shape, True)
        with pytest.raises(RuntimeError, match="output shape"):
            getattr(gnd, name)(image, output=out)
        assert out.all()


@pytest.mark.parametrize("name", ["binary_erosion", "binary_dilation"])
def test_binary_iteration_counts_scipys_c_code_cannot_take(name):
    """scipy's C code takes the steps after the first as a C int when the
    element's centre is set and brute_force is off: OverflowError beyond,
    and any count otherwise."""
    image = np.zeros((6, 7), bool)
    image[2:4, 2:5] = True
    corner = np.array([[1, 0, 0], [0, 0, 0], [0, 0, 0]], bool)  # centre unset
    for kwargs in ({"iterations": 2**31}, {"iterations": 2**31 + 1}, {"iterations": 2**32 + 1},
                   {"iterations": -2**31 + 1}, {"iterations": -2**31}):
        same(outcome(getattr(gnd, name), image, **kwargs), outcome(getattr(snd, name), image, **kwargs), kwargs)
    # (scipy would run every one of these steps in Python; 40 already change nothing.)
    for kwargs in ({"brute_force": True}, {"structure": corner}):
        same(getattr(gnd, name)(image, iterations=2**32 + 1, **kwargs),
             getattr(snd, name)(image, iterations=40, **kwargs), kwargs)


BINARY = ["binary_erosion", "binary_dilation", "binary_opening", "binary_closing"]


@pytest.mark.parametrize("structure", ["all-zero", "default"])
@pytest.mark.parametrize("name", [*BINARY, "binary_propagation", "binary_fill_holes"])
def test_binary_arguments_and_all_zero_structures_as_scipy(name, structure, rng):
    """scipy's results for an all-zero structure (an erosion holds
    everywhere, a dilation nowhere; the mask still keeps the input), and its
    exceptions for border values and iteration counts its C code cannot
    take, and for complex masks."""
    image = rng.random((6, 7)) > 0.5
    mask = rng.random((6, 7)) > 0.5
    element = np.zeros((3, 3), bool) if structure == "all-zero" else None
    cases = [{}, {"mask": mask}, {"border_value": 1}, {"border_value": 0.5}, {"border_value": None},
             {"border_value": 2**40}, {"border_value": -2**40}, {"mask": np.ones((6, 7), complex)},
             {"iterations": 3}, {"iterations": 0}, {"iterations": -10**30}]
    if structure == "default":
        cases.append({"iterations": 10**30})  # (scipy loops for ever there with an all-zero structure)
    for kwargs in cases:
        if name == "binary_fill_holes" and kwargs or name == "binary_propagation" and "iterations" in kwargs:
            continue
        same(outcome(getattr(gnd, name), image, structure=element, **kwargs),
             outcome(getattr(snd, name), image, structure=element, **kwargs))


@pytest.mark.parametrize("iterations", [1, 2, 0])
@pytest.mark.parametrize("border_value", [0, 1])
@pytest.mark.parametrize("name", BINARY)
def test_binary_morphology_matches_scipy(name, border_value, iterations, rng):
    image = rng.random((12, 13)) < 0.6
    for structure in (None, np.array([[0, 1, 1], [1, 1, 0]], bool), snd.generate_binary_structure(2, 2)):
        for origin in (0, (0, -1)):
            kwargs = dict(structure=structure, iterations=iterations, border_value=border_value, origin=origin)
            same(outcome(getattr(gnd, name), image, **kwargs), outcome(getattr(snd, name), image, **kwargs))


@pytest.mark.parametrize("name", ["binary_erosion", "binary_dilation"])
def test_binary_morphology_with_a_mask_matches_scipy(name, rng):
    image = rng.integers(0, 3, (10, 11)).astype(np.int16)  # not 0/1: any non-zero value is foreground
    mask = rng.random((10, 11)) < 0.7
    for iterations in (1, 3, -1):
        kwargs = dict(mask=mask, iterations=iterations)
        same(gnd.__getattribute__(name)(image, **kwargs), getattr(snd, name)(image, **kwargs))


def test_binary_propagation_and_fill_holes_match_scipy(rng):
    image = rng.random((20, 21)) < 0.45
    marker = np.zeros_like(image)
    marker[0, :] = True
    same(gnd.binary_propagation(marker, mask=image), snd.binary_propagation(marker, mask=image))
    same(gnd.binary_fill_holes(image), snd.binary_fill_holes(image))
    same(gnd.binary_fill_holes(image, structure=np.ones((3, 3))),
         snd.binary_fill_holes(image, structure=np.ones((3, 3))))
    out = np.zeros_like(image)
    assert gnd.binary_fill_holes(image, output=out) is out
    same(out, snd.binary_fill_holes(image))


def _repeated_steps(name, image, **kwargs):
    """scipy's single step (iterations=1) repeated until nothing changes:
    the oracle of iterations < 1 with structures scipy's own repetition
    reads past its buffers on (origins: scipy issues 11400 and 22533)."""
    values = np.asarray(image, dtype=bool)
    while True:
        step = getattr(snd, name)(values, iterations=1, **kwargs)
        if np.array_equal(step, values):
            return step
        values = step


def _steps(name, image, iterations, **kwargs):
    """scipy's single step repeated `iterations` times: the oracle where
    scipy's own repetition differs from it (an element that does not hold
    its centre, with origins: the same scipy issues; its C code then also
    wrote past its buffers here, and glibc aborted the process)."""
    values = np.asarray(image, dtype=bool)
    for _ in range(iterations):
        values = getattr(snd, name)(values, iterations=1, **kwargs)
    return values


@pytest.mark.parametrize("seed", range(8))
def test_repeating_until_nothing_changes_matches_scipy(seed):
    # iterations < 1, binary_propagation and binary_fill_holes: on the CPU one
    # breadth-first spread (_core._propagate_binary), checked here over random
    # ranks, shapes (the window wider than the array too), structures,
    # origins, masks, border values and layouts. The structure holds its own
    # centre: without it a repetition may never end.
    rng = np.random.default_rng(seed)
    for _ in range(25):
        ndim = int(rng.integers(1, 4))
        shape = tuple(int(n) for n in rng.integers(1, 11, ndim))
        image = rng.random(shape) < rng.uniform(0.2, 0.8)
        if ndim > 1 and rng.random() < 0.3:
            image = np.asfortranarray(image)
        structure = rng.random(tuple(int(n) for n in rng.integers(1, 5, ndim))) < 0.5
        origin = [int(rng.integers(-(n // 2), (n - 1) // 2 + 1)) for n in structure.shape]
        structure[tuple(n // 2 + o for n, o in zip(structure.shape, origin))] = True
        mask = None if rng.random() < 0.4 else rng.random(shape) < 0.7
        kwargs = dict(structure=structure, mask=mask, border_value=int(rng.integers(0, 2)), origin=origin)
        for name in ("binary_erosion", "binary_dilation"):
            same(getattr(gnd, name)(image, iterations=0, **kwargs), _repeated_steps(name, image, **kwargs))
        if mask is not None:
            same(gnd.binary_propagation(image, structure, mask, origin=origin),
                 _repeated_steps("binary_dilation", image, structure=structure, mask=mask, origin=origin))
        outside = _repeated_steps("binary_dilation", np.zeros(shape, bool), structure=structure, mask=~image,
                                  border_value=1, origin=origin)
        same(gnd.binary_fill_holes(image, structure, origin=origin), ~outside)


def test_fill_holes_output_rules_are_scipys():
    image = np.zeros((5, 5), bool)
    image[1:4, 1:4] = True
    image[2, 2] = False
    for output in (np.float32, np.int32):  # a dtype is ignored: bool comes back
        same(gnd.binary_fill_holes(image, output=output), snd.binary_fill_holes(image, output=output))
    for bad in (np.zeros((4, 5), bool), np.zeros((5, 5), complex)):
        same(outcome(gnd.binary_fill_holes, image, output=bad.copy()),
             outcome(snd.binary_fill_holes, image, output=bad.copy()))


@pytest.mark.parametrize("shape", [(64, 80), (9, 40, 33)])
def test_fill_holes_and_propagation_match_scipy_on_larger_images(shape, rng):
    # scipy's own repetition where it reads no memory it should not: the
    # default structure, no origin.
    image = rng.random(shape) < 0.55
    same(gnd.binary_fill_holes(image), snd.binary_fill_holes(image))
    marker = rng.random(shape) < 0.01
    same(gnd.binary_propagation(marker, mask=image), snd.binary_propagation(marker, mask=image))
    same(gnd.binary_erosion(image, iterations=0, border_value=1),
         snd.binary_erosion(image, iterations=0, border_value=1))


@pytest.mark.parametrize("rank, connectivity", [(0, 1), (1, 1), (2, 1), (2, 2), (3, 1), (3, 2), (3, 3), (2, 0)])
def test_generate_binary_structure_matches_scipy(rank, connectivity):
    same(gnd.generate_binary_structure(rank, connectivity), snd.generate_binary_structure(rank, connectivity))


@pytest.mark.parametrize("iterations", [1, 2, 3])
def test_iterate_structure_matches_scipy(iterations):
    structure = snd.generate_binary_structure(2, 1)
    same(gnd.iterate_structure(structure, iterations), snd.iterate_structure(structure, iterations))
    ours = gnd.iterate_structure(structure, iterations, origin=(1, -1))
    theirs = snd.iterate_structure(structure, iterations, origin=(1, -1))
    if iterations < 2:  # as scipy: the structure alone
        same(ours, theirs)
        return
    same(ours[0], theirs[0])
    assert list(ours[1]) == list(theirs[1])


@pytest.mark.parametrize("call", [
    lambda m: m.grey_erosion(np.ones((4, 4))),                                   # no window
    lambda m: m.binary_erosion(np.ones((4, 4)), iterations=1.5),                 # not an integer
    lambda m: m.binary_erosion(np.ones((4, 4)), structure=np.ones(3)),           # wrong rank
    lambda m: m.binary_erosion(np.ones((4, 4)), mask=np.ones((3, 4))),           # mask shape
    lambda m: m.grey_erosion(np.ones((4, 4)) + 1j, size=3),                      # complex
    lambda m: m.morphological_gradient(np.ones((4, 4), bool), size=3),           # bool arithmetic
])
def test_bad_arguments_raise_scipys_exception_types(call):
    theirs = outcome(call, snd)
    assert isinstance(theirs, Exception)
    ours = outcome(call, gnd)
    assert isinstance(ours, type(theirs)), (ours, theirs)


def test_morphology_is_listed_and_documented():
    for name in GREY + BINARY + ["binary_propagation", "binary_fill_holes", "generate_binary_structure",
                                 "iterate_structure"]:
        assert name in gnd.__all__
        assert getattr(gnd, name).__doc__
    with pytest.raises(AttributeError, match="does not provide scipy.ndimage.binary_hit_or_miss"):
        gnd.binary_hit_or_miss  # noqa: B018
    assert gpufilt.ndimage.grey_erosion is gnd.grey_erosion


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
@pytest.mark.parametrize("window", ["size", "footprint", "real heights"])
@pytest.mark.parametrize("name", GREY + BINARY + ["binary_fill_holes"])
def test_morphology_on_cupy_arrays_matches_scipy(name, window, rng):
    cupy = pytest.importorskip("cupy")
    if name.startswith("binary"):
        if window != "size":
            pytest.skip("one window is enough for the binary ones")
        image = rng.random((30, 31)) < 0.55
        ours, theirs = getattr(gnd, name)(cupy.asarray(image)), getattr(snd, name)(image)
    else:
        image = random_image(rng, (30, 31), "float32")
        kwargs = {k: cupy.asarray(v) if isinstance(v, np.ndarray) else v for k, v in WINDOWS[window].items()}
        ours = getattr(gnd, name)(cupy.asarray(image), **kwargs)
        theirs = getattr(snd, name)(image, **WINDOWS[window])
    assert isinstance(ours, cupy.ndarray)
    same(ours.get(), theirs)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
@pytest.mark.parametrize("name", ["grey_opening", "binary_closing", "binary_fill_holes"])
def test_morphology_runs_on_the_given_stream(name, rng):
    cupy = pytest.importorskip("cupy")
    image = rng.random((64, 65)) < 0.5 if name.startswith("binary") else random_image(rng, (64, 65), "float32")
    data = cupy.asarray(image)
    cupy.cuda.get_current_stream().synchronize()
    stream = cupy.cuda.Stream(non_blocking=True)
    kwargs = {} if name.startswith("binary") else {"size": 3}
    ours = getattr(gnd, name)(data, stream=stream, **kwargs)
    stream.synchronize()
    same(ours.get(), getattr(snd, name)(image, **kwargs))



@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
@pytest.mark.parametrize("name", ["binary_erosion", "binary_closing", "binary_opening", "binary_fill_holes",
                                  "grey_erosion", "grey_dilation"])
def test_morphology_waits_for_work_queued_on_its_stream(name, rng):
    """The input is written by work still queued on `stream`: every step,
    cupy's own (binary: input != 0, the mask, the output's copy; grey with
    a non-flat structure: every step) included, runs on that stream behind
    it (binary_closing's erosion had read its input on cupy's current
    stream, before the dilation wrote it)."""
    cupy = pytest.importorskip("cupy")
    binary = name.startswith("binary")
    image = rng.random((256, 257)) < 0.5 if binary else random_image(rng, (256, 257), "float32")
    kwargs = {} if binary else {"structure": rng.random((3, 3))}
    data = cupy.zeros(image.shape, image.dtype)
    busy = cupy.ones((2048, 2048), cupy.float32)
    cupy.cuda.get_current_stream().synchronize()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        for _ in range(200):  # milliseconds of work ahead of the input's copy
            busy *= 1.0001
        data.set(image, stream=stream)
    ours = getattr(gnd, name)(data, stream=stream, **kwargs)
    stream.synchronize()
    same(ours.get(), getattr(snd, name)(image, **kwargs))

def test_morphology_takes_lists_as_scipy_does():
    image, structure = [[1, 2, 3, 0], [4, 8, 6, 5], [7, 2, 9, 1]], [[0, 1, 0], [1, 1, 1], [0, 1, 0]]
    for name, kwargs in (("grey_erosion", {"structure": [[0, 1]]}), ("white_tophat", {"size": 2}),
                         ("binary_erosion", {"structure": structure}), ("binary_fill_holes", {})):
        same(getattr(gnd, name)(image, **kwargs), getattr(snd, name)(image, **kwargs))
    same(gnd.iterate_structure(structure, 2), snd.iterate_structure(structure, 2))


def test_a_huge_iteration_count_ends_once_nothing_changes(rng):
    # (brute_force: scipy's C code would refuse a count beyond a C int otherwise, as gpufilt does)
    image = rng.random((30, 31)) < 0.6
    same(gnd.binary_erosion(image, iterations=10**12, brute_force=True), snd.binary_erosion(image, iterations=0))


def _random_binary_case(rng, repeat_until_stable):
    """A random image (dtype and layout), structuring element, origin, mask
    and border value for binary_erosion/dilation; with a centre in the
    element when the steps repeat until nothing changes (else they may not
    end)."""
    ndim = int(rng.integers(1, 5))
    shape = tuple(int(n) for n in rng.integers(1, 12 if ndim < 4 else 6, ndim))
    dtype = rng.choice(["bool", "uint8", "int8", "int16", "float32"])
    image = (rng.integers(0, 4, shape) * (rng.random(shape) < rng.uniform(0.2, 0.9))).astype(dtype)
    layout = rng.integers(0, 3)
    if layout == 1 and ndim > 1:
        image = np.asfortranarray(image)
    structure = rng.random(tuple(int(n) for n in rng.integers(1, 5, ndim))) < 0.5
    origin = [int(rng.integers(-(n // 2), (n - 1) // 2 + 1)) for n in structure.shape]
    if repeat_until_stable or not structure.any():
        structure[tuple(n // 2 + o for n, o in zip(structure.shape, origin))] = True
    mask = None if rng.random() < 0.4 else (rng.random(shape) < 0.7).astype(rng.choice(["bool", "uint8", "int32"]))
    kwargs = dict(structure=structure, mask=mask, border_value=int(rng.integers(0, 2)), origin=origin)
    return image, layout, kwargs


def _on_cupy(cupy, array, layout=0):
    """`array` copied to the GPU, as a strided view when layout is 2."""
    if array is None or not isinstance(array, np.ndarray):
        return array
    if layout != 2:
        return cupy.asarray(array, order="F" if array.flags.f_contiguous and not array.flags.c_contiguous else "C")
    padded = cupy.zeros(tuple(2 * n for n in array.shape), array.dtype)
    view = padded[tuple(slice(None, None, 2) for _ in array.shape)]
    view[...] = cupy.asarray(array)
    return view


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
@pytest.mark.parametrize("seed", range(4))
def test_binary_steps_on_rows_of_whole_groups_match_scipy(seed):
    """Rows of 16, 32 or 48 elements: every group of 16 in one row takes the
    word path, the border value put in where a tap leaves the row (the
    groups at its ends) or the array across it (the first and last rows,
    planes...); 2-4 dimensions, elements up to 7 long with origins, masks,
    border values, 1-3 steps and steps until nothing changes."""
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(100 + seed)
    for _ in range(12):
        ndim = int(rng.integers(2, 5))
        shape = (*(int(n) for n in rng.integers(1, 10 if ndim < 4 else 5, ndim - 1)), int(rng.choice([16, 32, 48])))
        image = rng.random(shape) < rng.uniform(0.3, 0.95)
        structure = rng.random(tuple(int(n) for n in rng.integers(1, 8, ndim))) < 0.5
        origin = [int(rng.integers(-(n // 2), (n - 1) // 2 + 1)) for n in structure.shape]
        iterations = int(rng.choice([1, 2, 3, 0]))
        if iterations < 1 or not structure.any():
            structure[tuple(n // 2 + o for n, o in zip(structure.shape, origin))] = True
        mask = None if rng.random() < 0.5 else rng.random(shape) < 0.8
        kwargs = dict(structure=structure, mask=mask, border_value=int(rng.integers(0, 2)), origin=origin)
        gpu_kwargs = {k: _on_cupy(cupy, v) for k, v in kwargs.items()}
        for name in ("binary_erosion", "binary_dilation"):
            ours = getattr(gnd, name)(cupy.asarray(image), iterations=iterations, **gpu_kwargs)
            theirs = _repeated_steps(name, image, **kwargs) if iterations < 1 else \
                _steps(name, image, iterations, **kwargs)
            same(ours.get(), theirs, (name, shape, iterations, kwargs))


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
@pytest.mark.parametrize("seed", range(6))
def test_binary_steps_on_cupy_arrays_match_scipy(seed):
    """The GPU's step kernel (one launch a step, a device counter that ends
    repeated steps) against scipy: ranks 1-4, one-byte and wider dtypes,
    C, Fortran and strided inputs, random elements and origins, masks of
    several dtypes, border values, 1-5 steps and steps until nothing
    changes (scipy's single step repeated: _steps and _repeated_steps)."""
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(seed)
    for _ in range(20):
        iterations = int(rng.choice([1, 2, 3, 5, 0]))
        image, layout, kwargs = _random_binary_case(rng, iterations < 1)
        gpu_kwargs = {k: _on_cupy(cupy, v) for k, v in kwargs.items()}
        for name in ("binary_erosion", "binary_dilation"):
            ours = getattr(gnd, name)(_on_cupy(cupy, image, layout), iterations=iterations, **gpu_kwargs)
            assert isinstance(ours, cupy.ndarray)
            theirs = _repeated_steps(name, image, **kwargs) if iterations < 1 else \
                _steps(name, image, iterations, **kwargs)
            same(ours.get(), theirs, (name, image.dtype, image.shape, layout, iterations, kwargs))
        if kwargs["mask"] is not None and iterations < 1:
            ours = gnd.binary_propagation(_on_cupy(cupy, image, layout), kwargs["structure"],
                                          gpu_kwargs["mask"], origin=kwargs["origin"])
            same(ours.get(), _repeated_steps("binary_dilation", image, structure=kwargs["structure"],
                                             mask=kwargs["mask"], origin=kwargs["origin"]))


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
@pytest.mark.parametrize("case", ["1089 taps", "5 axes", "taps 150 away"])
def test_binary_elements_beyond_the_step_kernel_take_the_filters(case, rng):
    """Elements the step kernel's parameters cannot hold (over 1024 taps,
    over 4 axes, offsets over 127) give scipy's results all the same."""
    cupy = pytest.importorskip("cupy")
    if case == "1089 taps":
        image, structure = rng.random((70, 71)) < 0.9, np.ones((33, 33), bool)
    elif case == "5 axes":
        image, structure = rng.random((4, 5, 4, 3, 5)) < 0.7, snd.generate_binary_structure(5, 1)
    else:
        image, structure = rng.random(400) < 0.1, np.zeros(301, bool)
        structure[[0, 150, 300]] = True
    for name in ("binary_erosion", "binary_dilation"):
        for iterations in (1, 2):
            same(getattr(gnd, name)(cupy.asarray(image), structure, iterations=iterations).get(),
                 getattr(snd, name)(image, structure, iterations=iterations))


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
@pytest.mark.parametrize("seed", range(6))
def test_full_boxes_take_the_box_kernel_as_scipy(seed):
    """Full boxes with a side of 10 or more (the box kernel): lengths 1 to
    40 along the other axes, origins, 1-4 dimensions, rows of whole 16-byte
    vectors and not, rows shorter and longer than a block's run, 0/nonzero
    inputs of several dtypes and layouts (unaligned views too), border
    values, masks and 1-3 steps; the bytes of scipy's single step repeated."""
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(300 + seed)
    for _ in range(10):
        ndim = int(rng.integers(1, 5))
        shape = [int(n) for n in rng.integers(1, 40 if ndim < 3 else 14, ndim)]
        shape[-1] = int(rng.choice([shape[-1], 16, 48, 5000 if ndim == 1 else 64]))
        box = [int(n) for n in rng.integers(1, 41 if ndim < 3 else 9, ndim)]
        box[int(rng.integers(ndim))] = max(box[0], 10)  # (more than 9 elements)
        structure = np.ones(box, bool)
        origin = [int(rng.integers(-(n // 2), (n - 1) // 2 + 1)) for n in box]
        dtype = rng.choice(["bool", "uint8", "int8", "float32"])
        image = ((rng.random(shape) < rng.uniform(0.5, 0.99)) * rng.integers(1, 4, shape)).astype(dtype)
        border_value = int(rng.integers(0, 2))
        iterations = int(rng.choice([1, 1, 2, 3]))
        kwargs = dict(structure=structure, border_value=border_value, origin=origin,
                      mask=None if rng.random() < 0.6 else rng.random(shape) < 0.8)
        layout = int(rng.integers(0, 3))
        data = _on_cupy(cupy, image, layout)
        if layout == 1:  # an unaligned C-contiguous view
            data = cupy.concatenate([cupy.zeros(1, image.dtype), cupy.asarray(image).ravel()])[1:].reshape(shape)
        gpu_kwargs = {**kwargs, "mask": _on_cupy(cupy, kwargs["mask"])}
        for name in ("binary_erosion", "binary_dilation"):
            # (scipy's own repetition, with origins, reads and writes past its buffers: _steps)
            same(getattr(gnd, name)(data, iterations=iterations, **gpu_kwargs).get(),
                 _steps(name, image, iterations, **kwargs),
                 (name, shape, box, origin, dtype, layout, border_value, iterations))


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
def test_binary_box_binding_refuses_what_it_cannot_run():
    """_cuda.binary_box, called directly: a ValueError naming the argument
    for wrong dtypes, layouts, shapes, overlaps and boxes; nothing written."""
    cupy = pytest.importorskip("cupy")
    from gpufilt import _dispatch
    cuda = _dispatch.cuda_module()
    image = cupy.ones((8, 9), bool)
    out, scratch = cupy.zeros((8, 9), bool), cupy.zeros((8, 9), bool)
    stream = cupy.cuda.get_current_stream().ptr

    def run(source=image, a=out, b=scratch, lo=(-1, -2), hi=(1, 2)):
        cuda.binary_box(source, a, b, list(lo), list(hi), False, False, stream)

    for kwargs, match in [({"source": image.astype(np.int16)}, "source must be a C-contiguous"),
                          ({"source": cupy.ones((9, 8), bool).T}, "source must be a C-contiguous"),
                          ({"a": cupy.zeros((8, 10), bool)[:, :9]}, "out must be a C-contiguous"),
                          ({"b": cupy.zeros((8, 9), np.int32)}, "scratch must be a C-contiguous"),
                          ({"a": image}, "must not share memory"),
                          ({"b": out}, "must not share memory"),
                          ({"b": None}, "scratch may be None for a box of one pass only"),
                          ({"lo": (-1,)}, "one value per axis"),
                          ({"lo": (1, -2)}, "lo <= 0 <= hi"),
                          ({"hi": (1, 300)}, "at most 255 elements"),
                          ({"lo": (0, 0), "hi": (0, 0)}, "longer than 1")]:
        with pytest.raises(ValueError, match=match):
            run(**kwargs)
    cupy.cuda.get_current_stream().synchronize()
    assert not out.any() and not scratch.any()
    run(b=None, lo=(0, -2), hi=(0, 2))
    same(out.get(), snd.binary_erosion(np.ones((8, 9), bool), np.ones((1, 5), bool), border_value=0))


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
def test_steps_until_nothing_changes_over_many_batches(rng):
    """A spread of thousands of steps (a snake-shaped corridor, one element
    a step): batches of 8, 16, ... 256 steps until the counter says the
    last changed nothing; also a given count that stops early and one that
    ends mid-way."""
    cupy = pytest.importorskip("cupy")
    corridor = np.zeros((41, 101), bool)
    corridor[::2, :] = True  # rows joined at alternate ends: about 2,500 steps end to end
    corridor[1::4, -1] = True
    corridor[3::4, 0] = True
    marker = np.zeros_like(corridor)
    marker[0, 0] = True
    same(gnd.binary_propagation(cupy.asarray(marker), mask=cupy.asarray(corridor)).get(),
         snd.binary_propagation(marker, mask=corridor))
    for iterations in (300, 1000, 5000):
        kwargs = dict(mask=corridor, iterations=iterations)
        same(gnd.binary_dilation(cupy.asarray(marker), mask=cupy.asarray(corridor), iterations=iterations).get(),
             snd.binary_dilation(marker, **kwargs))
    image = rng.random((50, 60)) < 0.8  # (brute_force: scipy's C code would refuse the count otherwise)
    same(gnd.binary_erosion(cupy.asarray(image), iterations=10**12, brute_force=True).get(),
         snd.binary_erosion(image, iterations=0))


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
def test_binary_steps_binding_refuses_what_it_cannot_run():
    """_cuda.binary_steps, called directly: a ValueError naming the argument
    for wrong dtypes, layouts, shapes, overlaps and taps; nothing written."""
    cupy = pytest.importorskip("cupy")
    from gpufilt import _dispatch
    cuda = _dispatch.cuda_module()
    image = cupy.ones((8, 9), bool)
    first, second, counter = cupy.zeros((8, 9), bool), cupy.zeros((8, 9), bool), cupy.zeros(1, np.int64)
    stream = cupy.cuda.get_current_stream().ptr
    taps = [0, 0, 0, 1]

    def run(source=image, a=first, b=second, keep=None, offsets=taps, count=2, last=counter):
        cuda.binary_steps(source, a, b, keep, offsets, False, False, 1, count, last, stream)

    for kwargs, match in [({"source": image.astype(np.int16)}, "source must be a C-contiguous"),
                          ({"source": cupy.ones((9, 8), bool).T}, "source must be a C-contiguous"),
                          ({"a": cupy.zeros((8, 10), bool)[:, :9]}, "first must be a C-contiguous"),
                          ({"b": cupy.zeros((8, 9), np.int32)}, "second must be a C-contiguous"),
                          ({"keep": cupy.ones((8, 8), bool)}, "changeable must be a C-contiguous"),
                          ({"last": cupy.zeros(1, np.int32)}, "last_change must be an int64"),
                          ({"a": image}, "first must share memory with neither"),
                          ({"b": first}, "first must share memory with neither"),
                          ({"b": None}, "second may be None for one step only"),
                          ({"offsets": [0, 0, 1]}, "taps of 2 offsets each"),
                          ({"offsets": [0, 200]}, "at most 127 elements away"),
                          ({"offsets": [0, 0] * 1025}, "1 to 1024 taps")]:
        with pytest.raises(ValueError, match=match):
            run(**kwargs)
    cupy.cuda.get_current_stream().synchronize()
    assert not first.any() and not second.any() and int(counter[0]) == 0
    run(count=1, b=None)
    same(first.get(), snd.binary_erosion(np.ones((8, 9), bool), np.array([[0, 1, 1]], bool), border_value=0))


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
@pytest.mark.parametrize("dtype", [*DTYPES, "uint64"])
@pytest.mark.parametrize("name", ["grey_erosion", "grey_dilation"])
def test_nonflat_morphology_on_cupy_arrays_whole_range_and_layouts(name, dtype, rng):
    """The non-flat CUDA pass (over 1024 taps: cupy's passes):
    wrapping integer sums, NaN, large and fractional heights, every mode,
    3-d with axes, strided and Fortran-order inputs, an output array of
    another dtype; bit for bit with scipy."""
    cupy = pytest.importorskip("cupy")
    volume = full_range_image(rng, (9, 8, 11), dtype)
    heights = rng.integers(-300, 300, (3, 2, 4)).astype(float) + rng.choice([0.0, 0.5, 0.25], (3, 2, 4))
    footprint = rng.random((3, 2, 4)) < 0.7
    footprint[0, 0, 0] = True
    for mode in MODES:
        for layout in range(3):
            image = volume if layout == 0 else np.asfortranarray(volume) if layout == 1 else volume[::-1, :, ::2]
            kwargs = dict(structure=heights, footprint=footprint, mode=mode, cval=-7.5, origin=(1, 0, -1))
            data = cupy.asarray(volume)
            data = data if layout == 0 else cupy.asfortranarray(data) if layout == 1 else data[::-1, :, ::2]
            ours = outcome(getattr(gnd, name), data, **kwargs)
            theirs = outcome(getattr(snd, name), image, **kwargs)
            same(ours.get() if isinstance(ours, cupy.ndarray) else ours, theirs, (mode, layout))
    kwargs = dict(structure=heights[:, 0], axes=(0, 2), mode="wrap")
    same(getattr(gnd, name)(cupy.asarray(volume), **kwargs).get(), getattr(snd, name)(volume, **kwargs))
    out = cupy.zeros(volume.shape, np.float64)
    assert getattr(gnd, name)(cupy.asarray(volume), structure=heights, output=out) is out
    same(out.get(), getattr(snd, name)(volume, structure=heights, output=np.float64))
    # 1-d rows; 4-d planes; taps 150 away; 5 axes
    for shape, element in (((1000,), (5,)), ((4, 5, 6, 37), (2, 3, 1, 3)), ((3, 400), (1, 300)),
                           ((2, 3, 4, 3, 5), (1, 2, 3, 1, 2))):
        image = full_range_image(rng, shape, dtype)
        kwargs = dict(structure=rng.integers(-9, 9, element).astype(float), mode="mirror")
        same(getattr(gnd, name)(cupy.asarray(image), **kwargs).get(), getattr(snd, name)(image, **kwargs), shape)
    # elements longer than the array: the modes' extensions repeat
    tiny, long_element = full_range_image(rng, (2, 3), dtype), rng.integers(-9, 9, (5, 8)).astype(float)
    for mode in MODES + ["grid-wrap", "grid-mirror", "grid-constant"]:
        kwargs = dict(structure=long_element, mode=mode, cval=3.0, origin=(1, -2))
        same(getattr(gnd, name)(cupy.asarray(tiny), **kwargs).get(), getattr(snd, name)(tiny, **kwargs), mode)
    if dtype == "float32":  # 35^2 = 1225 taps: beyond the kernel's parameters, cupy's passes
        plane, big = volume[0].astype(np.float32), rng.random((35, 35))
        same(getattr(gnd, name)(cupy.asarray(plane), structure=big).get(), getattr(snd, name)(plane, structure=big))


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
@pytest.mark.parametrize("shape", [(64, 80), (9, 40, 33), (3000,), (5, 6, 7, 8), (300, 257), (30, 41, 62)])
def test_union_find_propagation_matches_scipy(shape, rng):
    """Steps until nothing changes by symmetric elements (the GPU's
    union-find): binary_propagation, binary_fill_holes, binary_dilation and
    binary_erosion with iterations=0, with masks of several densities and
    both border values; against scipy's own repetition."""
    cupy = pytest.importorskip("cupy")
    ndim = len(shape)
    random_element = rng.random((3,) * ndim) < 0.4
    elements = [None, snd.generate_binary_structure(ndim, ndim),
                random_element | random_element[(slice(None, None, -1),) * ndim]]
    elements[-1][(1,) * ndim] = True
    for density in (0.45, 0.6, 0.9):
        image = rng.random(shape) < density
        marker = rng.random(shape) < 0.002
        for element in elements:
            same(gnd.binary_fill_holes(cupy.asarray(image), element).get(), snd.binary_fill_holes(image, element))
            same(gnd.binary_propagation(cupy.asarray(marker), element, cupy.asarray(image)).get(),
                 snd.binary_propagation(marker, element, image))
            for border in (0, 1):
                for name in ("binary_dilation", "binary_erosion"):
                    kwargs = dict(structure=element, iterations=0, border_value=border)
                    mask = rng.random(shape) < 0.8
                    same(getattr(gnd, name)(cupy.asarray(image), mask=cupy.asarray(mask), **kwargs).get(),
                         getattr(snd, name)(image, mask=mask, **kwargs))
                    same(getattr(gnd, name)(cupy.asarray(marker), **kwargs).get(),
                         getattr(snd, name)(marker, **kwargs))


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
@pytest.mark.parametrize("offset", [1, 2, 3])
def test_binary_steps_read_unaligned_inputs_in_place(offset, rng):
    """C-contiguous inputs and masks that start off a word boundary (read in
    place, word by word) give scipy's results, through every group of the
    step kernel: the first and last groups of the array too."""
    cupy = pytest.importorskip("cupy")
    shape = (37, 41)
    image = rng.random(shape) < 0.6
    mask = rng.random(shape) < 0.8
    data = cupy.zeros(offset + image.size, bool)
    data[offset:] = cupy.asarray(image.ravel())
    gpu_mask = cupy.zeros(offset + mask.size, np.uint8)
    gpu_mask[offset:] = cupy.asarray(mask.ravel())
    element = np.array([[0, 1, 1], [1, 1, 0], [1, 0, 1]], bool)
    for name in ("binary_erosion", "binary_dilation"):
        for iterations in (1, 3):
            kwargs = dict(structure=element, iterations=iterations, border_value=1, origin=(0, -1))
            ours = getattr(gnd, name)(data[offset:].reshape(shape), mask=gpu_mask[offset:].reshape(shape), **kwargs)
            same(ours.get(), _steps(name, image, iterations, mask=mask, structure=element, border_value=1,
                                    origin=(0, -1)))

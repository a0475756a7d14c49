"""Property tests: gpufilt.ndimage's N-D filters agree with scipy.ndimage on
arrays, footprints, modes, origins, axes and dtypes drawn by hypothesis.

Data are bounded finite floats (no NaN or inf: scipy's NaN order in min/max/
rank filters is implementation-defined) and integers; integer data are
filtered with non-negative weights and cvals, so no negative value reaches
an unsigned output (an undefined C cast in scipy).

Two SciPy 1.17 defects are kept out of reach of the oracle:
- its 1-D rank filter path (rank/median/percentile of 1-D input) reads
  outside the line when the footprint is about as long as the line: the
  oracle runs those on a (1, n) view, which takes scipy's N-D path;
- its N-D extension in 'reflect'/'grid-mirror' mode is wrong for lines of
  2 elements with footprints of 9 or more and large origins: footprints
  here are at most 6 long.
"""
from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gpufilt import ndimage as gnd

from _helpers import MODES, assert_matches, scipy_reference

INT_DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
FLOAT_DTYPES = ["float16", "float32", "float64"]
MAX_TAPS = 6  # per axis; see the module docstring

SETTINGS = settings(max_examples=120, deadline=None)


# -------------------------------------------------------------- strategies


def elements(dtype):
    """Bounded, finite, representable elements of `dtype`."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return st.complex_numbers(max_magnitude=1e3, allow_nan=False, allow_infinity=False,
                                  width=8 * dtype.itemsize)
    if dtype.kind == "f":
        # float16: small enough that squared derivatives stay finite (see
        # test_filters_nd's float16 gradient magnitude test).
        bound = {2: 1e2, 4: 1e4, 8: 1e6}[dtype.itemsize]
        return st.floats(-bound, bound, allow_nan=False, allow_infinity=False,
                         width=8 * dtype.itemsize)
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    if info.bits == 64:  # a double holds every value and every weighted sum
        lo, hi = max(lo, -(2 ** 40)), 2 ** 40
    return st.integers(lo, hi)


@st.composite
def arrays(draw, dtypes, min_dims=1, max_dims=3, max_side=8):
    """A non-zero array of one of `dtypes`, 1 to 3-D, each side 1 to 8, in
    C order or as a reversed or transposed view."""
    dtype = np.dtype(draw(st.sampled_from(dtypes)))
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=1,
                                  max_side=max_side))
    x = draw(hnp.arrays(dtype, shape, elements=elements(dtype)))
    assume(np.any(x != 0))
    layout = draw(st.sampled_from(["C", "reversed", "transposed"]))
    if layout == "reversed":
        x = x[(slice(None, None, -1),) * x.ndim]
    elif layout == "transposed":
        x = np.ascontiguousarray(x.T).T
    return x


@st.composite
def axes_for(draw, ndim, ordered=False):
    """None (every axis) or a non-empty subset of the axes, maybe negative,
    in any order or (ordered=True) in increasing order.

    Footprint filters take ordered axes: scipy lays a footprint's (or
    weights') dimensions on the axes in increasing order but origins (and
    sizes, for the rank filters) in the order of `axes`, which gpufilt
    follows, and with all the axes permuted scipy applies origins to the
    array's axes in order while gpufilt follows `axes` (test_filters_nd's
    test_*_with_all_axes_permuted_follow_scipy)."""
    if draw(st.booleans()):
        return None
    axes = draw(st.permutations(range(ndim)))[:draw(st.integers(1, ndim))]
    if ordered:
        axes = sorted(axes)
    return tuple(ax - ndim if draw(st.booleans()) else ax for ax in axes)


def n_axes(axes, ndim):
    return ndim if axes is None else len(axes)


@st.composite
def footprints(draw, ndim, box=False):
    """A boolean footprint of `ndim` dimensions with at least one True."""
    shape = draw(hnp.array_shapes(min_dims=ndim, max_dims=ndim, min_side=1, max_side=MAX_TAPS))
    if box:
        return np.ones(shape, bool)
    fp = draw(hnp.arrays(np.bool_, shape))
    assume(fp.any())
    return fp


@st.composite
def origins_for(draw, shape):
    """Valid per-axis origins for a footprint of `shape` (an int when equal)."""
    origins = tuple(draw(st.integers(-(n // 2), (n - 1) // 2)) for n in shape)
    if len(set(origins)) == 1 and draw(st.booleans()):
        return origins[0]
    return origins


def modes():
    return st.sampled_from(MODES)


def cvals(dtype):
    """cval: within the range of every dtype, non-negative for unsigned data."""
    if np.dtype(dtype).kind == "u":
        return st.floats(0, 100)
    return st.floats(-100, 100)


def check(name, x, *args, scale=None, **kwargs):
    """gpufilt's `name` equals scipy's (on a copy) and leaves x untouched;
    `scale` as assert_matches takes it."""
    before = x.copy()
    got = getattr(gnd, name)(x, *args, **kwargs)
    want = scipy_reference(name, x, *args, **kwargs)
    assert type(got) is np.ndarray and got.dtype == want.dtype
    assert_matches(got, want, scale=scale, err_msg=name)
    np.testing.assert_array_equal(x, before)


# ---------------------------------------------------------------- filters


@SETTINGS
@given(data=st.data(), x=arrays(INT_DTYPES + FLOAT_DTYPES),
       name=st.sampled_from(["correlate", "convolve"]), mode=modes())
def test_correlate_and_convolve_match_scipy(data, x, name, mode):
    axes = data.draw(axes_for(x.ndim, ordered=True), label="axes")
    shape = data.draw(hnp.array_shapes(min_dims=n_axes(axes, x.ndim),
                                       max_dims=n_axes(axes, x.ndim), min_side=1,
                                       max_side=MAX_TAPS), label="weights shape")
    if x.dtype.kind in "iu":  # convex weights: integer results stay in range
        w = data.draw(hnp.arrays(np.float64, shape, elements=st.floats(0, 1)), label="weights")
        assume(w.sum() > 0.1)
        w = w / w.sum()
    else:
        w = data.draw(hnp.arrays(np.float64, shape, elements=st.floats(-2, 2)), label="weights")
    origin = data.draw(origins_for(shape), label="origin")
    cval = data.draw(cvals(x.dtype), label="cval")
    check(name, x, w, mode=mode, cval=cval, origin=origin, axes=axes)


@SETTINGS
@given(data=st.data(), x=arrays(["complex64", "complex128"], max_dims=2),
       name=st.sampled_from(["correlate", "convolve"]), mode=modes(),
       complex_weights=st.booleans())
def test_complex_correlate_and_convolve_match_scipy(data, x, name, mode, complex_weights):
    shape = data.draw(hnp.array_shapes(min_dims=x.ndim, max_dims=x.ndim, min_side=1,
                                       max_side=4), label="weights shape")
    w = data.draw(hnp.arrays(np.complex128 if complex_weights else np.float64, shape,
                             elements=st.complex_numbers(max_magnitude=2, allow_nan=False,
                                                         allow_infinity=False)
                             if complex_weights else st.floats(-2, 2)), label="weights")
    cval = data.draw(st.complex_numbers(max_magnitude=10, allow_nan=False, allow_infinity=False),
                     label="cval")
    check(name, x, w, mode=mode, cval=cval, origin=data.draw(origins_for(shape)))


@SETTINGS
@given(data=st.data(), x=arrays(INT_DTYPES + FLOAT_DTYPES),
       name=st.sampled_from(["minimum_filter", "maximum_filter"]))
def test_minimum_and_maximum_filters_match_scipy(data, x, name):
    axes = data.draw(axes_for(x.ndim, ordered=True), label="axes")
    n = n_axes(axes, x.ndim)
    box = data.draw(st.booleans(), label="box")
    fp = data.draw(footprints(n, box=box), label="footprint")
    origin = data.draw(origins_for(fp.shape), label="origin")
    if box and data.draw(st.booleans(), label="per-axis modes"):
        mode = data.draw(st.lists(modes(), min_size=n, max_size=n), label="modes")
    else:
        mode = data.draw(modes(), label="mode")
    cval = data.draw(cvals(x.dtype), label="cval")
    kwargs = dict(mode=mode, cval=cval, origin=origin, axes=axes)
    if box and data.draw(st.booleans(), label="as size"):
        check(name, x, size=fp.shape, **kwargs)
    else:
        check(name, x, footprint=fp, **kwargs)


@SETTINGS
@given(data=st.data(), x=arrays(INT_DTYPES + FLOAT_DTYPES),
       name=st.sampled_from(["minimum_filter1d", "maximum_filter1d"]), mode=modes())
def test_minimum_and_maximum_filter1d_match_scipy(data, x, name, mode):
    size = data.draw(st.integers(1, 10), label="size")
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1), label="axis")
    origin = data.draw(st.integers(-(size // 2), (size - 1) // 2), label="origin")
    check(name, x, size, axis=axis, mode=mode, cval=data.draw(cvals(x.dtype)), origin=origin)


def rank_reference(name, x, *args, footprint, origin, axes, **kwargs):
    """scipy's rank/median/percentile filter; 1-D input through a (1, n) view
    (scipy's N-D path; see the module docstring)."""
    if x.ndim > 1:
        return scipy_reference(name, x, *args, footprint=footprint, origin=origin, axes=axes,
                               **kwargs)
    origin = origin if np.ndim(origin) == 0 else origin[0]
    return scipy_reference(name, x[None], *args, footprint=footprint[None], origin=(0, origin),
                           **kwargs)[0]


@SETTINGS
@given(data=st.data(), x=arrays(INT_DTYPES + FLOAT_DTYPES),
       name=st.sampled_from(["median_filter", "rank_filter", "percentile_filter"]),
       mode=modes())
def test_median_rank_and_percentile_filters_match_scipy(data, x, name, mode):
    axes = data.draw(axes_for(x.ndim, ordered=True), label="axes")
    fp = data.draw(footprints(n_axes(axes, x.ndim)), label="footprint")
    taps = int(fp.sum())
    origin = data.draw(origins_for(fp.shape), label="origin")
    if name == "rank_filter":
        args = (data.draw(st.integers(-taps, taps - 1), label="rank"),)
    elif name == "percentile_filter":
        args = (data.draw(st.floats(-100, 100), label="percentile"),)
    else:
        args = ()
    kwargs = dict(mode=mode, cval=data.draw(cvals(x.dtype), label="cval"))
    before = x.copy()
    got = getattr(gnd, name)(x, *args, footprint=fp, origin=origin, axes=axes, **kwargs)
    want = rank_reference(name, x, *args, footprint=fp, origin=origin, axes=axes, **kwargs)
    assert got.dtype == want.dtype
    # An order statistic picks one input value: exact.
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(x, before)


@SETTINGS
@given(data=st.data(), x=arrays(["float32", "float64"]),
       name=st.sampled_from(["sobel", "prewitt"]), mode=modes())
def test_sobel_and_prewitt_match_scipy(data, x, name, mode):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1), label="axis")
    check(name, x, axis=axis, mode=mode, cval=data.draw(cvals(x.dtype), label="cval"))


@SETTINGS
@given(data=st.data(), x=arrays(["float16", "float32", "float64"]),
       name=st.sampled_from(["laplace", "gaussian_laplace", "gaussian_gradient_magnitude"]))
def test_laplace_and_gaussian_derivatives_match_scipy(data, x, name):
    axes = data.draw(axes_for(x.ndim), label="axes")
    n = n_axes(axes, x.ndim)
    if data.draw(st.booleans(), label="per-axis modes"):
        mode = data.draw(st.lists(modes(), min_size=n, max_size=n), label="modes")
    else:
        mode = data.draw(modes(), label="mode")
    # Derivatives cancel to results far below the data, whose rounding
    # (float16: every pass's result is stored as float16, as scipy stores it)
    # is of the data's size: judged against the data's magnitude, a
    # constant mode's cval included.
    cval = data.draw(cvals(x.dtype), label="cval")
    extends_with_cval = "constant" in ([mode] if isinstance(mode, str) else mode)
    scale = max(float(np.max(np.abs(x), initial=0)), abs(cval) if extends_with_cval else 0.0)
    kwargs = dict(mode=mode, cval=cval, axes=axes, scale=scale)
    if name == "laplace":
        check(name, x, **kwargs)
        return
    sigma = data.draw(st.floats(0.3, 3.0) | st.lists(st.floats(0.3, 3.0), min_size=n,
                                                    max_size=n), label="sigma")
    if name == "gaussian_gradient_magnitude" and np.ndim(sigma):
        # scipy passes sigma straight to gaussian_filter (every axis), not per filtered axis.
        assume(axes is None)
    if np.ndim(sigma) and axes is not None and len(axes) == x.ndim:
        # All the axes permuted: scipy gives sigma[k] to array axis k, gpufilt
        # to axes[k] (test_filters_nd: ..._with_all_axes_permuted_follow_scipy).
        kwargs["axes"] = tuple(sorted(ax % x.ndim for ax in axes))
    check(name, x, sigma, **kwargs)


@SETTINGS
@given(data=st.data(), x=arrays(["uint8", "int16", "float32", "float64"], max_dims=2),
       name=st.sampled_from(["correlate", "median_filter", "maximum_filter", "laplace"]),
       out_dtype=st.sampled_from(["float32", "float64", "int32"]),
       where=st.sampled_from(["new", "array", "in-place"]))
def test_output_forms_match_scipy(data, x, name, out_dtype, where):
    """Output as a dtype, as an array, or the input itself."""
    assume(not (name == "laplace" and x.dtype.kind == "u"))  # negative into unsigned
    if name == "correlate":
        shape = data.draw(hnp.array_shapes(min_dims=x.ndim, max_dims=x.ndim, max_side=4))
        args, kwargs = (np.full(shape, 1.0 / np.prod(shape)),), {}
    elif name == "laplace":
        args, kwargs = (), {}
    else:
        args, kwargs = (), {"footprint": data.draw(footprints(x.ndim), label="footprint")}
    if name == "median_filter" and x.ndim == 1:
        # scipy's 1-D rank path cannot write another dtype (crashes): N-D view.
        x = x[None]
        kwargs["footprint"] = kwargs["footprint"][None]
    if where == "in-place":
        want = scipy_reference(name, x, *args, **kwargs)
        assert getattr(gnd, name)(x, *args, output=x, **kwargs) is x
        assert_matches(x, want)
        return
    want = scipy_reference(name, x, *args, output=np.dtype(out_dtype), **kwargs)
    if where == "new":
        got = getattr(gnd, name)(x, *args, output=out_dtype, **kwargs)
    else:
        out = np.full(x.shape, 3, dtype=out_dtype)
        assert getattr(gnd, name)(x, *args, output=out, **kwargs) is out
        got = out
    assert got.dtype == np.dtype(out_dtype)
    assert_matches(got, want)


@SETTINGS
@given(x=arrays(["float32", "float64"]), mode=modes(), shift=st.integers(1, 3))
def test_overlapping_output_matches_scipy_on_a_copy(x, mode, shift):
    """Output a shifted view of the input's own buffer."""
    flat = np.concatenate([x.ravel(), np.resize(x.ravel(), shift) + 1])
    src, out = flat[:x.size].reshape(x.shape), flat[shift:].reshape(x.shape)
    fp = np.ones((3,) * x.ndim, bool)
    fp.flat[0] = False  # non-box: the N-D path
    want = rank_reference("median_filter", src, footprint=fp, origin=0, axes=None, mode=mode)
    assert gnd.median_filter(src, footprint=fp, mode=mode, output=out) is out
    np.testing.assert_array_equal(out, want)


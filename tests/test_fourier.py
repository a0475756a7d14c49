"""gpufilt.ndimage's Fourier filters against scipy.ndimage on the output of
numpy's FFTs (and cupy's on the GPU): complex and real FFTs (n, axis),
dtypes, output dtypes and arrays. SciPy's own test_fourier.py runs too
(test_scipy_suite.py)."""
from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest
from scipy import ndimage as snd

import gpufilt
from gpufilt import ndimage as gnd

from _helpers import CUDA_USABLE

FILTERS = {"fourier_gaussian": 1.7, "fourier_uniform": 3.0, "fourier_ellipsoid": 2.5, "fourier_shift": 1.25}


def transform(rng, shape, real_axis=None):
    data = rng.normal(size=shape)
    if real_axis is None:
        return np.fft.fftn(data), -1
    return np.fft.rfft(data, axis=real_axis), shape[real_axis]


@pytest.mark.parametrize("shape", [(17,), (12, 9), (6, 7, 8)])
@pytest.mark.parametrize("real_axis", [None, 0, -1])
@pytest.mark.parametrize("name", FILTERS)
def test_fourier_filters_match_scipy(name, shape, real_axis, rng):
    spectrum, n = transform(rng, shape, real_axis)
    axis = -1 if real_axis is None else real_axis
    parameter = FILTERS[name]
    for data in (spectrum, spectrum.astype(np.complex64), spectrum.real.copy(), spectrum.real.astype(np.float32)):
        ours = getattr(gnd, name)(data, parameter, n=n, axis=axis)
        theirs = getattr(snd, name)(data, parameter, n=n, axis=axis)
        assert ours.dtype == theirs.dtype
        np.testing.assert_allclose(ours, theirs, rtol=1e-12 if ours.dtype.itemsize >= 8 and
                                   ours.dtype != np.complex64 else 1e-6, atol=1e-12)


@pytest.mark.parametrize("name", FILTERS)
def test_fourier_filters_per_axis_parameters_and_outputs(name, rng):
    spectrum, _ = transform(rng, (10, 11))
    parameters = (1.5, 0.5)
    out_ours, out_theirs = np.zeros_like(spectrum), np.zeros_like(spectrum)
    assert getattr(gnd, name)(spectrum, parameters, output=out_ours) is out_ours
    getattr(snd, name)(spectrum, parameters, output=out_theirs)
    np.testing.assert_allclose(out_ours, out_theirs, rtol=1e-12, atol=1e-12)
    for dtype in (np.complex64, np.complex128):
        ours = getattr(gnd, name)(spectrum.real.astype(np.int16), parameters, output=dtype)
        theirs = getattr(snd, name)(spectrum.real.astype(np.int16), parameters, output=dtype)
        assert ours.dtype == theirs.dtype
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", FILTERS)
def test_fourier_filters_on_any_layout_and_in_place(name, rng):
    # numpy data of the float dtypes runs in one C++ pass (_core._fourier_multiply)
    # over any strides; an output that is the input itself is written in place,
    # one that overlaps it otherwise goes through the library's path.
    spectrum, _ = transform(rng, (9, 10, 12))
    parameter = FILTERS[name]
    views = [spectrum, np.asfortranarray(spectrum), spectrum[::-2, 1:, ::3], spectrum.transpose(2, 0, 1),
             spectrum.astype(np.complex64)[:, ::-1], spectrum.real[1::2], spectrum.real.astype(">f8")]
    for data in views:
        want = getattr(snd, name)(data.copy(), parameter)
        got = getattr(gnd, name)(data, parameter)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6 if got.dtype.itemsize <= 8 else 1e-12, atol=1e-12)
    for data in (spectrum.copy(), np.asfortranarray(spectrum)):
        want = getattr(snd, name)(data.copy(), parameter)
        assert getattr(gnd, name)(data, parameter, output=data) is data
        np.testing.assert_allclose(data, want, rtol=1e-12, atol=1e-12)
    data = spectrum.copy()
    want = getattr(snd, name)(data[:, :, :-1].copy(), parameter)
    got = getattr(gnd, name)(data[:, :, :-1], parameter, output=data[:, :, 1:])  # overlapping, shifted by one
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    for dtype in (np.complex64, np.complex128):
        out = np.empty(spectrum.shape, dtype)
        getattr(gnd, name)(spectrum, parameter, output=out)
        np.testing.assert_allclose(out, getattr(snd, name)(spectrum, parameter, output=dtype),
                                   rtol=1e-6 if dtype == np.complex64 else 1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [(128, 128, 65), (600, 1800)])
@pytest.mark.parametrize("name", FILTERS)
def test_fourier_filters_on_transforms_large_enough_for_threads(name, shape, rng):
    # The C++ pass shares rows among threads from about a million element-operations.
    spectrum = np.fft.rfftn(rng.normal(size=shape[:-1] + (2 * shape[-1] - 2,))).astype(np.complex64)
    n = 2 * shape[-1] - 2
    ours = getattr(gnd, name)(spectrum, FILTERS[name], n=n)
    theirs = getattr(snd, name)(spectrum, FILTERS[name], n=n)
    assert ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5 * np.abs(theirs).max())


@pytest.mark.parametrize("shape, size", [((12, 9), 2.5), ((64, 33), 7.0), ((300, 200), 0.3), ((128, 96), 40.0),
                                         ((1200, 900), 3.0)])
def test_ellipsoid_of_2d_numpy_data_is_scipys_to_the_bit(shape, size, rng):
    # Cephes' J1 (core/fourier.hpp) as scipy's ni_fourier.c computes it: arguments on both
    # sides of its split at 5, every dtype (int16 takes the factor grid), threads on the last.
    spectrum, _ = transform(rng, shape)
    for data in (spectrum, spectrum.astype(np.complex64), spectrum.real.copy(), spectrum.real.astype(np.float32),
                 spectrum.real.astype(np.int16), spectrum.T):
        got, want = gnd.fourier_ellipsoid(data, size), snd.fourier_ellipsoid(data, size)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_ellipsoid_of_numpy_data_needs_no_scipy():
    # The Bessel function J1 is the core's own: numpy is the only dependency.
    code = ("import sys; sys.modules['scipy'] = sys.modules['scipy.special'] = None\n"
            "import numpy as np; from gpufilt import ndimage\n"
            "x = np.fft.fft2(np.arange(48.0).reshape(6, 8))\n"
            "for data in (x, x.real.astype(np.int16)):\n"
            "    assert np.isfinite(ndimage.fourier_ellipsoid(data, 2.0)).all()\n")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("name", FILTERS)
def test_outputs_whose_elements_overlap_are_refused_before_any_write(name, rng):
    spectrum, _ = transform(rng, (6, 7))
    buffer = np.zeros(60, complex)
    for output in (np.lib.stride_tricks.as_strided(np.zeros(1, complex), (6, 7), (0, 0)),
                   np.lib.stride_tricks.as_strided(buffer, (6, 7), (48, 16))):
        before = output.copy()
        with pytest.raises(ValueError, match="output"):
            getattr(gnd, name)(spectrum, FILTERS[name], output=output)
        np.testing.assert_array_equal(output, before)


@pytest.mark.parametrize("name", FILTERS)
def test_fourier_filters_with_n_zero_and_complex_data_into_real_dtypes_as_scipy(name, rng):
    # n=0 divides by zero as scipy's C code does (inf and NaN, no warning); a complex
    # transform asked for a real output dtype is refused with scipy's RuntimeError on
    # every path (the C++ pass, numpy's, big-endian data).
    data = rng.normal(size=7) + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = getattr(gnd, name)(data, FILTERS[name], n=0)
    np.testing.assert_allclose(ours, getattr(snd, name)(data, FILTERS[name], n=0), equal_nan=True)
    spectrum, _ = transform(rng, (6, 5))
    for data in (spectrum, spectrum.astype(">c16"), spectrum.astype(np.complex64)):
        if name == "fourier_shift":
            continue  # (its outputs are complex only: its own refusal)
        with pytest.raises(RuntimeError, match="data type not supported"):
            getattr(gnd, name)(data, FILTERS[name], output=np.float64)
        assert isinstance(outcome_of(getattr(snd, name), data, FILTERS[name], output=np.float64), RuntimeError)


def outcome_of(func, *args, **kwargs):
    try:
        return func(*args, **kwargs)
    except Exception as exc:  # compared with ours
        return exc


@pytest.mark.parametrize("call", [
    lambda m: m.fourier_gaussian(np.ones((4, 4)), 1.0, output=np.int32),           # output type
    lambda m: m.fourier_shift(np.ones((4, 4)), 1.0, output=np.float64),            # shift: complex only
    lambda m: m.fourier_uniform(np.ones((4, 4)), (1.0, 2.0, 3.0)),                 # sequence length
    lambda m: m.fourier_gaussian(np.ones((4, 4)), 1.0, output=np.ones((4, 5))),    # output shape
    lambda m: m.fourier_ellipsoid(np.ones((2, 2, 2, 2)), 1.0),                     # rank 4
    *[lambda m, name=name: getattr(m, name)(np.array(1.0 + 0j), 2.0) for name in FILTERS],  # 0-d: no axis
])
def test_bad_arguments_raise_scipys_exception_types(call):
    try:
        call(snd)
    except Exception as theirs:
        with pytest.raises(type(theirs)):
            call(gnd)
    else:
        pytest.fail("scipy accepted it")


def test_fourier_filters_are_listed():
    for name in FILTERS:
        assert name in gnd.__all__ and getattr(gnd, name).__doc__
    assert gpufilt.ndimage.fourier_shift is gnd.fourier_shift


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
@pytest.mark.parametrize("shape", [(17,), (12, 9), (6, 7, 8)])
@pytest.mark.parametrize("name", FILTERS)
def test_fourier_filters_on_cupy_ffts_match_scipy(name, shape, rng):
    cupy = pytest.importorskip("cupy")
    spectrum, _ = transform(rng, shape)
    ours = getattr(gnd, name)(cupy.fft.fftn(cupy.asarray(np.fft.ifftn(spectrum))), FILTERS[name])
    assert isinstance(ours, cupy.ndarray)
    np.testing.assert_allclose(ours.get(), getattr(snd, name)(spectrum, FILTERS[name]), rtol=1e-9, atol=1e-9)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
@pytest.mark.parametrize("name", FILTERS)
def test_fourier_filters_run_on_the_given_stream(name, rng):
    cupy = pytest.importorskip("cupy")
    spectrum, _ = transform(rng, (32, 33))
    data = cupy.asarray(spectrum)
    cupy.cuda.get_current_stream().synchronize()
    stream = cupy.cuda.Stream(non_blocking=True)
    ours = getattr(gnd, name)(data, FILTERS[name], stream=stream)
    stream.synchronize()
    np.testing.assert_allclose(ours.get(), getattr(snd, name)(spectrum, FILTERS[name]), rtol=1e-9, atol=1e-9)


def _cupy_or_skip():
    return pytest.importorskip("cupy")


def _tolerance(dtype):
    return 1e-6 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-9


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
@pytest.mark.parametrize("shape", [(17,), (12, 9), (6, 7, 8), (3, 4, 5, 6)])
@pytest.mark.parametrize("real_axis", [None, 0, -1])
@pytest.mark.parametrize("name", FILTERS)
def test_fourier_filters_on_cupy_match_scipy_across_dtypes(name, shape, real_axis, rng):
    # float and complex data run in one CUDA pass (_cuda._fourier_multiply);
    # integers take cupy's operations.
    cupy = _cupy_or_skip()
    if name == "fourier_ellipsoid" and len(shape) > 3:
        return
    spectrum, n = transform(rng, shape, real_axis)
    axis = -1 if real_axis is None else real_axis
    for data in (spectrum, spectrum.astype(np.complex64), spectrum.real.copy(), spectrum.real.astype(np.float32),
                 (spectrum.real * 10).astype(np.int16)):
        ours = getattr(gnd, name)(cupy.asarray(data), FILTERS[name], n=n, axis=axis)
        theirs = getattr(snd, name)(data, FILTERS[name], n=n, axis=axis)
        assert isinstance(ours, cupy.ndarray) and ours.dtype == theirs.dtype
        np.testing.assert_allclose(ours.get(), theirs, rtol=_tolerance(theirs.dtype), atol=1e-9)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
@pytest.mark.parametrize("name", FILTERS)
def test_fourier_filters_on_cupy_any_layout_output_and_in_place(name, rng):
    cupy = _cupy_or_skip()
    spectrum, _ = transform(rng, (9, 10, 11))
    parameters = (1.5, 0.5, 2.0)
    # A strided view with a reversed axis, into a Fortran-order output of another dtype.
    view = spectrum[::2, ::-1, 1:]
    out = cupy.zeros(view.shape, np.complex64, order="F")
    got = getattr(gnd, name)(cupy.asarray(spectrum)[::2, ::-1, 1:], parameters, output=out)
    assert got is out
    want = getattr(snd, name)(view, parameters, output=np.complex64)
    np.testing.assert_allclose(out.get(), want, rtol=1e-6, atol=1e-6)
    # The input itself as the output: written in place.
    data = cupy.asarray(spectrum)
    assert getattr(gnd, name)(data, parameters, output=data) is data
    np.testing.assert_allclose(data.get(), getattr(snd, name)(spectrum, parameters), rtol=1e-9, atol=1e-9)
    # An output overlapping the input otherwise still gets scipy's values.
    data = cupy.asarray(spectrum)
    shifted = data[:, :, 1:]
    getattr(gnd, name)(data[:, :, :-1], parameters, output=shifted)
    np.testing.assert_allclose(shifted.get(), getattr(snd, name)(spectrum[:, :, :-1], parameters), rtol=1e-9,
                               atol=1e-9)
    if name != "fourier_shift":
        real = cupy.asarray(spectrum.real)
        for dtype in (np.float32, np.float64, np.complex128):
            got = getattr(gnd, name)(real, parameters, output=dtype)
            want = getattr(snd, name)(spectrum.real, parameters, output=dtype)
            assert got.dtype == want.dtype
            np.testing.assert_allclose(got.get(), want, rtol=_tolerance(dtype), atol=1e-9)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
def test_cuda_fourier_pass_refuses_what_it_cannot_write(rng):
    cupy = _cupy_or_skip()
    cuda = gpufilt._dispatch.cuda_module()
    data = cupy.asarray(transform(rng, (8, 9))[0])
    tables = cupy.ones(17)
    stream = cupy.cuda.get_current_stream().ptr
    with pytest.raises(ValueError, match="inside tables"):
        cuda._fourier_multiply(data, cupy.empty_like(data), tables, [0, 9], "product", stream)
    with pytest.raises(ValueError, match="share no memory"):
        cuda._fourier_multiply(data[:, :-1], data[:, 1:], tables, [0, 8], "product", stream)
    with pytest.raises(ValueError, match="factor"):
        cuda._fourier_multiply(data, cupy.empty_like(data), tables, [0, 8], "cosine", stream)
    with pytest.raises(ValueError, match="phase"):
        cuda._fourier_multiply(data.real.copy(), cupy.empty(data.shape), tables, [0, 8], "phase", stream)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
def test_fourier_filters_refuse_cupy_data_not_aligned_to_its_item_size(rng):
    # complex64 elements at odd multiples of 4 bytes, which cupy's own kernels cannot read
    # either (a misaligned-address fault): a ValueError, the data untouched, the device usable.
    cupy = _cupy_or_skip()
    spectrum = transform(rng, (6, 8))[0].astype(np.complex64)
    floats = cupy.zeros(spectrum.size * 2 + 1, np.float32)
    floats[1:] = cupy.asarray(spectrum.view(np.float32).ravel())
    shifted = floats[1:].view(np.complex64).reshape(spectrum.shape)
    assert shifted.data.ptr % 8 == 4
    for name in FILTERS:
        with pytest.raises(ValueError, match="aligned"):
            getattr(gnd, name)(shifted, FILTERS[name])
    np.testing.assert_array_equal(floats[1:].get(), spectrum.view(np.float32).ravel())
    np.testing.assert_allclose(gnd.fourier_gaussian(cupy.asarray(spectrum), 1.0).get(),
                               snd.fourier_gaussian(spectrum, 1.0), rtol=1e-6, atol=1e-6)

"""Zero-copy hand-off of foreign memory (issue #7): gpufilt.from_pointer and
ExternalArray (numpy, DLPack, CAI views of the same memory), bad inputs,
owner lifetime, the installed C++ headers and CMake package, and the
examples/embed C++ program built and run with CMake."""
from __future__ import annotations

import ctypes
import gc
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import weakref

import numpy as np
import pytest

import gpufilt
from gpufilt import ndimage

EMBED_DIR = pathlib.Path(__file__).resolve().parents[1] / "examples" / "embed"


def data_ptr(a):
    return a.__array_interface__["data"][0]


def wrap(a, **kw):
    """An ExternalArray over numpy array `a`'s memory, owned by `a`."""
    return gpufilt.from_pointer(a.ctypes.data, a.shape, a.dtype, strides=a.strides, owner=a, **kw)


# ------------------------------------------------------------- host views


def test_numpy_view_shares_memory_both_ways(rng):
    a = rng.random((4, 5, 6)).astype(np.float32)
    e = gpufilt.from_pointer(a.ctypes.data, a.shape, "float32", owner=a)
    v = np.asarray(e)
    assert data_ptr(v) == data_ptr(a) and v.base is e
    v[1, 2, 3] = 42.0
    assert a[1, 2, 3] == 42.0
    a[0, 0, 0] = -1.0
    assert v[0, 0, 0] == -1.0


def test_ctypes_pointer_accepted():
    buf = (ctypes.c_double * 6)(*range(6))
    e = gpufilt.from_pointer(ctypes.cast(buf, ctypes.POINTER(ctypes.c_double)), (2, 3), np.float64, owner=buf)
    np.testing.assert_array_equal(np.asarray(e), np.arange(6.0).reshape(2, 3))
    e2 = gpufilt.from_pointer(ctypes.c_void_p(ctypes.addressof(buf)), 6, "float64", owner=buf)
    assert data_ptr(np.asarray(e2)) == ctypes.addressof(buf)


def test_fortran_order_strides(rng):
    a = np.asfortranarray(rng.random((3, 4, 5)))
    e = gpufilt.from_pointer(a.ctypes.data, a.shape, a.dtype, strides=(8, 24, 96), owner=a)
    v = np.asarray(e)
    assert v.flags.f_contiguous and data_ptr(v) == data_ptr(a)
    np.testing.assert_array_equal(v, a)
    assert gpufilt.describe(e)["strides"] == (8, 24, 96)


def test_negative_and_zero_strides(rng):
    a = rng.random(10)
    e = gpufilt.from_pointer(a.ctypes.data + 9 * 8, (10,), "float64", strides=(-8,), owner=a)
    np.testing.assert_array_equal(np.asarray(e), a[::-1])
    b = gpufilt.from_pointer(a.ctypes.data, (3, 4), "float64", strides=(0, 8), owner=a)
    np.testing.assert_array_equal(np.asarray(b), np.broadcast_to(a[:4], (3, 4)))


def test_readonly_refuses_writes(rng):
    a = rng.random((3, 3))
    e = wrap(a, readonly=True)
    v = np.asarray(e)
    assert not v.flags.writeable
    with pytest.raises(ValueError):
        v[0, 0] = 1.0
    assert not np.from_dlpack(e).flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        ndimage.uniform_filter(a, 3, output=e)
    with pytest.raises(BufferError, match="read-only"):
        e.__dlpack__()  # a legacy capsule cannot carry the flag


def test_empty_array_with_null_pointer():
    e = gpufilt.from_pointer(0, (0, 3), "float32")
    assert np.asarray(e).shape == (0, 3)
    assert e.size == 0 and e.ndim == 2


# ------------------------------------------------------------------ DLPack


def test_dlpack_numpy(rng):
    a = rng.random((4, 6)).astype(np.float32)
    e = wrap(a)
    assert e.__dlpack_device__() == (1, 0)
    d = np.from_dlpack(e)
    assert data_ptr(d) == data_ptr(a) and d.flags.writeable
    np.testing.assert_array_equal(d, a)


def test_dlpack_capsules_versioned_and_legacy(rng):
    a = rng.random(5)
    e = wrap(a)
    capsule = e.__dlpack__(max_version=(1, 1))
    assert '"dltensor_versioned"' in repr(capsule)
    assert '"dltensor"' in repr(e.__dlpack__())
    seen = gpufilt.describe(capsule)  # consumes it
    assert seen["data"] == data_ptr(a) and seen["protocol"] == "dlpack"
    with pytest.raises(ValueError, match="already consumed"):
        gpufilt.describe(capsule)
    with pytest.raises(BufferError, match="copy"):
        e.__dlpack__(max_version=(1, 0), copy=True)
    with pytest.raises(BufferError, match="device"):
        e.__dlpack__(max_version=(1, 0), dl_device=(2, 0))


def test_dlpack_torch(rng):
    torch = pytest.importorskip("torch")
    a = rng.random((3, 4, 5)).astype(np.float32)
    t = torch.from_dlpack(wrap(a))
    assert t.data_ptr() == data_ptr(a) and tuple(t.shape) == a.shape
    t[0, 0, 0] = 7.0
    assert a[0, 0, 0] == 7.0
    f = np.asfortranarray(a)
    tf = torch.from_dlpack(wrap(f))
    assert tf.data_ptr() == data_ptr(f) and tf.stride() == (1, 3, 12)


def aligned_array(shape, dtype, alignment=64):
    """A C-contiguous array whose data starts on an `alignment`-byte boundary
    (importers such as XLA copy less-aligned buffers instead of viewing them)."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(nbytes + alignment, np.uint8)
    start = -raw.ctypes.data % alignment
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def test_dlpack_jax_views_host_memory(rng):
    jnp = pytest.importorskip("jax.numpy")
    a = aligned_array((3, 4, 5), np.float32)
    a[...] = rng.random(a.shape)
    j = jnp.from_dlpack(wrap(a))
    assert j.unsafe_buffer_pointer() == data_ptr(a)
    np.testing.assert_array_equal(np.asarray(j), a)


def test_dtypes_round_trip():
    for name in ("bool", "int8", "uint16", "int32", "uint64", "float16", "float64", "complex64"):
        a = np.ones((2, 3), dtype=name)
        assert np.from_dlpack(wrap(a)).dtype == a.dtype
        assert np.asarray(wrap(a)).dtype == a.dtype


# --------------------------------------------------------- gpufilt filters


@pytest.mark.parametrize("order", ["C", "F"])
def test_filters_take_external_arrays(rng, order):
    a = np.asarray(rng.random((6, 7, 8)), dtype=np.float32, order=order)
    out = np.zeros_like(a)
    expected = ndimage.gaussian_filter(a, 1.5)
    np.testing.assert_array_equal(ndimage.gaussian_filter(wrap(a), 1.5), expected)
    result = ndimage.gaussian_filter(wrap(a, readonly=True), 1.5, output=wrap(out))
    assert isinstance(result, gpufilt.ExternalArray)
    np.testing.assert_array_equal(out, expected)


# ------------------------------------------------------------- bad inputs


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(ptr=0, shape=(2, 2)), ValueError, "NULL"),
    (dict(shape=(2, -1)), ValueError, "negative"),
    (dict(strides=(8, 3)), ValueError, "multiple of the item size"),
    (dict(strides=(8,)), ValueError, "entries for 2 dimensions"),
    (dict(dtype="float33"), TypeError, "unknown dtype"),
    (dict(dtype=object), TypeError, "unsupported dtype"),
    (dict(dtype="U4"), TypeError, "unsupported dtype"),
    (dict(dtype=">f4"), TypeError, "byte order"),
    (dict(device="gpu"), ValueError, "device must be"),
    (dict(device="cuda:x"), ValueError, "device must be"),
    (dict(device=0), TypeError, "device must be"),
    (dict(device="cuda:999"), ValueError, "CUDA device 999"),
    (dict(ptr=-5), ValueError, "not a valid address"),
    (dict(ptr=1.5), TypeError, "ptr must be"),
    (dict(shape="ab"), TypeError, "shape must be"),
    (dict(stream=5), ValueError, "stream is for device memory"),
    (dict(readonly="yes"), TypeError, "readonly"),
])
def test_bad_input(kwargs, error, match):
    a = np.zeros((2, 2), dtype=np.float32)
    args = dict(ptr=a.ctypes.data, shape=(2, 2), dtype="float32")
    args.update(kwargs)
    ptr, shape, dtype = args.pop("ptr"), args.pop("shape"), args.pop("dtype")
    with pytest.raises(error, match=match):
        gpufilt.from_pointer(ptr, shape, dtype, owner=a, **args)


# ---------------------------------------------------------------- lifetime


class Owner:
    """Owns a buffer; counts how many are alive."""
    alive = 0

    def __init__(self, n):
        self.buf = np.arange(n, dtype=np.float64)
        Owner.alive += 1

    def __del__(self):
        Owner.alive -= 1


def test_owner_lives_while_any_view_does():
    owner = Owner(1000)
    ref = weakref.ref(owner)
    e = gpufilt.from_pointer(owner.buf.ctypes.data, 1000, "float64", owner=owner)
    views = [np.asarray(e), np.from_dlpack(e), e.__dlpack__(max_version=(1, 1))]
    del owner, e
    for view in views:
        gc.collect()
        assert ref() is not None, "owner freed while a view exists"
        if isinstance(view, np.ndarray):
            assert view[999] == 999.0
    del views, view
    gc.collect()
    assert ref() is None, "owner still alive after every view was dropped"


def test_no_use_after_free_over_many_cycles():
    Owner.alive = 0
    for i in range(300):
        owner = Owner(4096)
        e = gpufilt.from_pointer(owner.buf.ctypes.data, (64, 64), "float64", owner=owner)
        del owner
        kept = [np.asarray(e), np.from_dlpack(e)]
        capsule = e.__dlpack__(max_version=(1, 1))  # dropped unconsumed: its destructor frees it
        del e, capsule
        for v in kept:
            assert v[63, 63] == 4095.0 and v[1, 0] == 64.0
        del kept, v  # the loop variable holds a view too
    gc.collect()
    assert Owner.alive == 0


# ----------------------------------------------- installed headers, CMake


def test_installed_headers_and_cmake_package():
    include = pathlib.Path(gpufilt.get_include())
    assert (include / "gpufilt" / "external_array.hpp").is_file()
    out = subprocess.run([sys.executable, "-m", "gpufilt", "--cmake-dir"], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert (pathlib.Path(out) / "gpufiltConfig.cmake").is_file()
    assert out == gpufilt.get_cmake_dir()


def _embed_tools():
    """(cmake, generator args) or a reason to skip."""
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake is not installed")
    if not (shutil.which("c++") or shutil.which("g++") or shutil.which("clang++") or os.environ.get("CXX")):
        pytest.skip("no C++ compiler found (c++, g++, clang++ or $CXX)")
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    library = sysconfig.get_config_var("LDLIBRARY") or ""
    if not (pathlib.Path(libdir) / library).exists() and not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        pytest.skip(f"Python's embed library ({library}) is not installed in {libdir}")
    return cmake, (["-G", "Ninja"] if shutil.which("ninja") else [])


# Generous: under tools/sanitize_cuda.sh, compute-sanitizer follows cmake and
# nvcc too, beside dozens of other test processes (120 s timed out there).
BUILD_TIMEOUT = 900


def _build_and_run_embed(tmp_path, *extra):
    cmake, generator = _embed_tools()
    build = tmp_path / "build"
    configure = subprocess.run(
        [cmake, "-S", str(EMBED_DIR), "-B", str(build), *generator, f"-DPython_EXECUTABLE={sys.executable}",
         "-DCMAKE_BUILD_TYPE=Release", *extra], capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    assert configure.returncode == 0, configure.stdout + configure.stderr
    built = subprocess.run([cmake, "--build", str(build), "--parallel", "2"], capture_output=True, text=True,
                           timeout=BUILD_TIMEOUT)
    assert built.returncode == 0, built.stdout + built.stderr
    exe = build / ("embed.exe" if os.name == "nt" else "embed")
    # The embedded interpreter must find gpufilt and numpy where this one does.
    paths = {str(pathlib.Path(m.__file__).parents[1]) for m in (gpufilt, np)}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0 and "ALL PASSED" in run.stdout, run.stdout + run.stderr
    return run.stdout


def test_embed_example_host(tmp_path):
    out = _build_and_run_embed(tmp_path)
    assert out.count("ok   host") == 24 and "FAIL" not in out


# ------------------------------------------------------------------ CUDA


def _device_wrap(x, **kw):
    """An ExternalArray over cupy array `x`'s device memory. Without a
    stream= the wrapper says the data is ready (from_pointer's contract), so
    the stream that wrote it is synchronised first: under compute-sanitizer
    racecheck, jax read cupy.arange's memory before the kernel had run."""
    if "stream" not in kw:
        cupy = pytest.importorskip("cupy")
        cupy.cuda.get_current_stream().synchronize()
    return gpufilt.from_pointer(x.data.ptr, x.shape, x.dtype, strides=x.strides,
                                device=f"cuda:{x.device.id}", owner=x, **kw)


@pytest.mark.cuda
def test_cuda_views_share_memory():
    cupy = pytest.importorskip("cupy")
    x = cupy.arange(60, dtype=cupy.float32).reshape(3, 4, 5)
    e = _device_wrap(x)
    assert e.__dlpack_device__() == (2, x.device.id)
    y = cupy.asarray(e)
    assert y.data.ptr == x.data.ptr
    y[0, 0, 0] = 42
    assert float(x[0, 0, 0]) == 42
    assert cupy.from_dlpack(e).data.ptr == x.data.ptr
    f = cupy.asfortranarray(x)
    assert cupy.asarray(_device_wrap(f)).flags.f_contiguous
    torch = pytest.importorskip("torch")
    assert torch.from_dlpack(_device_wrap(x)).data_ptr() == x.data.ptr


@pytest.mark.cuda
def test_cuda_view_taken_by_jax_without_copy(jax_gpu):
    cupy = pytest.importorskip("cupy")
    jax, _ = jax_gpu
    x = cupy.arange(60, dtype=cupy.float32).reshape(3, 4, 5)
    j = jax.numpy.from_dlpack(_device_wrap(x))
    assert j.unsafe_buffer_pointer() == x.data.ptr
    np.testing.assert_array_equal(np.asarray(j), cupy.asnumpy(x))


@pytest.mark.cuda
def test_cuda_stream_in_cai_and_filters():
    cupy = pytest.importorskip("cupy")
    x = cupy.random.random((8, 9, 10)).astype(cupy.float32)
    stream = cupy.cuda.Stream(non_blocking=True)
    e = _device_wrap(x, stream=stream)
    assert e.__cuda_array_interface__["stream"] == stream.ptr
    assert not hasattr(e, "__array_interface__")
    out = cupy.empty_like(x)
    ndimage.uniform_filter(e, 3, output=_device_wrap(out))
    cupy.testing.assert_allclose(out, ndimage.uniform_filter(x, 3), rtol=1e-6)


@pytest.mark.cuda
def test_embed_example_device(tmp_path):
    if shutil.which("nvcc") is None and not os.environ.get("CUDAToolkit_ROOT"):
        pytest.skip("the CUDA toolkit (nvcc, headers, cudart) is not installed")
    out = _build_and_run_embed(tmp_path, "-DGPUFILT_EMBED_CUDA=ON")
    assert "device path ran" in out, out

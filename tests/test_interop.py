"""Arrays of every kind in and out, on the CPU: numpy layouts, plain Python
buffers (bytearray, memoryview, array.array), raw DLPack capsules, fake CUDA
Array Interface producers (described, never dereferenced), torch and jax CPU
arrays. What gpufilt.describe() reports for each protocol."""
from __future__ import annotations

import array
import ast
import ctypes
import gc
import subprocess
import sys

import numpy as np
import pytest

import gpufilt
from gpufilt import ndimage as gnd

from _helpers import CUDA_BUILT, assert_matches, random_array, scipy_reference

# ------------------------------------------------------------------- numpy


def _numpy_layouts(rng):
    grid = random_array(rng, (8, 12), np.float64)
    return {
        "C": grid,
        "F": np.asfortranarray(grid),
        "strided": grid[::2, 1::3],
        "negative": grid[::-1],
        "negative-both": grid[::-2, ::-3],
        "transposed": grid.T,
    }


NUMPY_LAYOUTS = list(_numpy_layouts(np.random.default_rng(0)))


@pytest.mark.parametrize("layout", NUMPY_LAYOUTS)
def test_numpy_layout_result_is_a_new_numpy_array_matching_scipy(layout, rng):
    x = _numpy_layouts(rng)[layout]
    before = x.copy()
    got = gnd.gaussian_filter(x, 1.3, mode="wrap")
    assert type(got) is np.ndarray and got.shape == x.shape
    assert not np.shares_memory(got, x)
    assert_matches(got, scipy_reference("gaussian_filter", x, 1.3, mode="wrap"))
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("layout", NUMPY_LAYOUTS)
def test_describe_numpy_layout_reports_pointer_shape_and_byte_strides(layout, rng):
    x = _numpy_layouts(rng)[layout]
    seen = gpufilt.describe(x)
    assert seen["protocol"] == "numpy"  # read from its fields (interop.cpp import_numpy)
    assert (seen["device"], seen["device_id"]) == ("cpu", 0)
    assert seen["data"] == x.__array_interface__["data"][0]
    assert seen["shape"] == x.shape
    assert seen["strides"] == x.strides
    assert (seen["dtype"], seen["itemsize"]) == ("float64", 8)
    assert seen["readonly"] is False
    assert seen["stream"] is None


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32",
                                   "int64", "uint64", "float16", "float32", "float64",
                                   "complex64", "complex128"])
def test_describe_names_numpy_dtype(dtype):
    x = np.zeros((2, 3), dtype)
    seen = gpufilt.describe(x)
    assert seen["dtype"] == np.dtype(dtype).name
    assert seen["itemsize"] == np.dtype(dtype).itemsize


def test_describe_zero_dimensional_numpy_array():
    x = np.array(2.5, np.float32)
    seen = gpufilt.describe(x)
    assert (seen["shape"], seen["strides"]) == ((), ())
    assert seen["data"] == x.__array_interface__["data"][0]


def test_read_only_numpy_input_is_filtered_and_left_unchanged(rng):
    x = random_array(rng, (6, 7), np.float32)
    x.flags.writeable = False
    before = x.copy()
    assert gpufilt.describe(x)["readonly"] is True
    got = gnd.uniform_filter(x, 3)
    assert got.flags.writeable
    assert_matches(got, scipy_reference("uniform_filter", x, 3))
    np.testing.assert_array_equal(x, before)
    assert not x.flags.writeable


def test_broadcast_numpy_input_with_zero_strides_matches_scipy(rng):
    x = np.broadcast_to(random_array(rng, (7,), np.float64), (5, 7))
    assert gpufilt.describe(x)["strides"] == (0, 8)
    assert_matches(gnd.gaussian_filter(x, 1.0), scipy_reference("gaussian_filter", x, 1.0))


def test_numpy_calls_do_not_leak_references(rng):
    x = random_array(rng, (5, 6), np.float64)
    out = np.empty_like(x)
    gnd.gaussian_filter(x, 1.0, output=out)  # warm up caches
    x_refs, out_refs = sys.getrefcount(x), sys.getrefcount(out)
    for _ in range(20):
        gnd.gaussian_filter(x, 1.0, output=out)
        gnd.uniform_filter1d(x, 3, output=out)
        gpufilt.describe(x)
    gc.collect()
    assert (sys.getrefcount(x), sys.getrefcount(out)) == (x_refs, out_refs)


# ----------------------------------------------------------- plain buffers


def test_bytearray_input_returns_numpy_uint8_matching_scipy(rng):
    data = random_array(rng, (40,), np.uint8)
    buf = bytearray(data.tobytes())
    got = gnd.uniform_filter1d(buf, 5)
    assert type(got) is np.ndarray and got.dtype == np.uint8
    assert_matches(got, scipy_reference("uniform_filter1d", data, 5))
    assert bytes(buf) == data.tobytes()


def test_bytearray_output_is_written_and_returned_itself(rng):
    x = random_array(rng, (40,), np.uint8)
    out = bytearray(40)
    assert gnd.gaussian_filter1d(x, 2.0, output=out) is out
    assert_matches(np.frombuffer(out, np.uint8), scipy_reference("gaussian_filter1d", x, 2.0))


def test_bytes_input_is_read_only_and_works(rng):
    data = random_array(rng, (30,), np.uint8)
    seen = gpufilt.describe(data.tobytes())
    assert (seen["protocol"], seen["dtype"], seen["readonly"]) == ("buffer", "uint8", True)
    got = gnd.uniform_filter1d(data.tobytes(), 3)
    assert_matches(got, scipy_reference("uniform_filter1d", data, 3))


def test_describe_bytearray_reports_buffer_protocol():
    buf = bytearray(range(12))
    seen = gpufilt.describe(buf)
    expected = np.frombuffer(buf, np.uint8)
    assert seen == {"protocol": "buffer", "device": "cpu", "device_id": 0,
                    "data": expected.__array_interface__["data"][0], "shape": (12,),
                    "strides": (1,), "dtype": "uint8", "itemsize": 1, "readonly": False,
                    "stream": None}


def _nd_memoryview(rng, shape, fmt="d"):
    """A C-contiguous N-D memoryview (over a bytearray) filled with random data."""
    dtype = np.dtype(fmt)
    view = memoryview(bytearray(int(np.prod(shape)) * dtype.itemsize)).cast(fmt, shape)
    np.asarray(view)[...] = random_array(rng, shape, dtype)
    return view


@pytest.mark.parametrize("shape", [(24,), (4, 6), (2, 3, 4)])
def test_nd_memoryview_input_matches_scipy(shape, rng):
    view = _nd_memoryview(rng, shape)
    data = np.array(view)
    got = gnd.gaussian_filter(view, 0.8, mode="mirror")
    assert type(got) is np.ndarray and got.shape == shape
    assert_matches(got, scipy_reference("gaussian_filter", data, 0.8, mode="mirror"))
    np.testing.assert_array_equal(np.asarray(view), data)


def test_nd_memoryview_output_is_written_and_returned_itself(rng):
    x = random_array(rng, (4, 6), np.float32)
    out = _nd_memoryview(rng, (4, 6), "f")
    assert gnd.uniform_filter(x, 3, output=out) is out
    assert_matches(np.asarray(out), scipy_reference("uniform_filter", x, 3))


def test_describe_nd_memoryview_reports_its_shape_and_strides(rng):
    view = _nd_memoryview(rng, (2, 3, 4), "f")
    seen = gpufilt.describe(view)
    assert seen["protocol"] == "buffer"
    assert (seen["shape"], seen["strides"]) == ((2, 3, 4), (48, 16, 4))
    assert (seen["dtype"], seen["readonly"]) == ("float32", False)
    assert seen["data"] == np.asarray(view).__array_interface__["data"][0]


@pytest.mark.parametrize("layout", ["strided", "negative-both", "transposed"])
def test_strided_memoryview_of_numpy_matches_scipy(layout, rng):
    x = _numpy_layouts(rng)[layout]
    view = memoryview(x)
    seen = gpufilt.describe(view)
    assert seen["protocol"] == "buffer"
    assert (seen["shape"], seen["strides"]) == (x.shape, x.strides)
    assert_matches(gnd.uniform_filter(view, (3, 2)), scipy_reference("uniform_filter", x, (3, 2)))


ARRAY_TYPECODES = ["b", "B", "h", "H", "i", "I", "l", "L", "q", "Q", "f", "d"]


@pytest.mark.parametrize("typecode", ARRAY_TYPECODES)
def test_array_array_input_matches_scipy(typecode, rng):
    dtype = np.dtype(typecode)
    data = random_array(rng, (25,), dtype)
    arr = array.array(typecode, data.tolist())
    seen = gpufilt.describe(arr)
    assert (seen["protocol"], seen["dtype"], seen["shape"]) == ("buffer", dtype.name, (25,))
    got = gnd.uniform_filter1d(arr, 4, mode="nearest")
    assert type(got) is np.ndarray and got.dtype == dtype
    assert_matches(got, scipy_reference("uniform_filter1d", data, 4, mode="nearest"))
    assert arr.tolist() == data.tolist()


@pytest.mark.parametrize("typecode", ["h", "f", "d"])
def test_array_array_output_is_written_and_returned_itself(typecode, rng):
    x = random_array(rng, (25,), np.float64) * 100
    out = array.array(typecode, [0] * 25)
    assert gnd.gaussian_filter1d(x, 1.5, output=out) is out
    expected = scipy_reference("gaussian_filter1d", x, 1.5, output=np.dtype(typecode))
    assert_matches(np.asarray(out), expected)


def test_array_array_in_place(rng):
    arr = array.array("d", random_array(rng, (30,), np.float64).tolist())
    expected = scipy_reference("gaussian_filter1d", np.asarray(arr), 2.0, mode="constant")
    assert gnd.gaussian_filter1d(arr, 2.0, mode="constant", output=arr) is arr
    assert_matches(np.asarray(arr), expected)


# ------------------------------------------------------------ DLPack capsules


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_describe_raw_capsule_consumes_it_once(max_version):
    x = np.arange(6.0)
    capsule = x.__dlpack__() if max_version is None else x.__dlpack__(max_version=max_version)
    name = "dltensor" if max_version is None else "dltensor_versioned"
    assert f'"{name}"' in repr(capsule)
    seen = gpufilt.describe(capsule)
    assert seen["protocol"] == "dlpack"
    assert seen["data"] == x.__array_interface__["data"][0]
    assert (seen["shape"], seen["strides"], seen["dtype"]) == ((6,), (8,), "float64")
    assert f'"used_{name}"' in repr(capsule)
    with pytest.raises(ValueError, match="already"):
        gpufilt.describe(capsule)


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_consumed_capsule_releases_its_array(max_version):
    # gpufilt renames the capsule "used_*" and must then call the deleter
    # itself, which drops the producer's reference to the array.
    x = np.arange(6.0)
    refs = sys.getrefcount(x)
    capsule = x.__dlpack__() if max_version is None else x.__dlpack__(max_version=max_version)
    assert sys.getrefcount(x) > refs
    gpufilt.describe(capsule)
    del capsule
    gc.collect()
    assert sys.getrefcount(x) == refs


def test_describe_versioned_capsule_of_read_only_array_is_read_only():
    x = np.arange(6.0)
    x.flags.writeable = False
    assert gpufilt.describe(x.__dlpack__(max_version=(1, 0)))["readonly"] is True


# ------------------------------------------------ other buffer exporters


def test_ctypes_array_input_and_output(rng):
    data = random_array(rng, (12,), np.int16)
    src = (ctypes.c_int16 * 12)(*data.tolist())
    got = gnd.uniform_filter1d(src, 3)
    assert type(got) is np.ndarray and got.dtype == np.int16
    assert_matches(got, scipy_reference("uniform_filter1d", data, 3))
    out = (ctypes.c_double * 12)()
    assert gnd.gaussian_filter1d(data, 1.0, output=out) is out
    assert_matches(np.asarray(out), scipy_reference("gaussian_filter1d", data, 1.0,
                                                     output=np.float64))


def _run_isolated(code):
    """Runs `code` in a fresh interpreter, so that a crash fails one test
    instead of ending the run."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("ctype,shape,expected", [
    ("ctypes.c_int16 * 6", (6,), {"dtype": "int16", "strides": (2,)}),
    ("(ctypes.c_float * 3) * 2", (2, 3), {"dtype": "float32", "strides": (12, 4)}),
])
def test_describe_ctypes_array_with_null_strides_is_c_contiguous(ctype, shape, expected):
    run = _run_isolated(f"import ctypes, gpufilt; print(gpufilt.describe(({ctype})()))")
    assert run.returncode == 0, f"crashed with return code {run.returncode}: {run.stderr[-500:]}"
    seen = ast.literal_eval(run.stdout.strip())
    assert (seen["protocol"], seen["shape"]) == ("buffer", shape)
    assert {k: seen[k] for k in expected} == expected


@pytest.fixture
def testbuffer():
    return pytest.importorskip("_testbuffer")  # CPython's buffer-protocol test exporter


@pytest.mark.parametrize("case", ["C", "F", "negative"])
def test_describe_testbuffer_exporter_layouts(testbuffer, case):
    items = [float(i) for i in range(12)]
    if case == "C":
        x = testbuffer.ndarray(items, shape=[3, 4], format="d")
        shape, strides = (3, 4), (32, 8)
    elif case == "F":
        x = testbuffer.ndarray(items, shape=[3, 4], format="d", flags=testbuffer.ND_FORTRAN)
        shape, strides = (3, 4), (8, 24)
    else:
        x = testbuffer.ndarray(items, shape=[12], strides=[-8], offset=88, format="d")
        shape, strides = (12,), (-8,)
    seen = gpufilt.describe(x)
    view = np.asarray(memoryview(x))
    assert seen["protocol"] == "buffer"
    assert (seen["shape"], seen["strides"]) == (shape, strides)
    assert seen["data"] == view.__array_interface__["data"][0]
    assert seen["readonly"] is True
    assert_matches(gnd.uniform_filter(x, 3), scipy_reference("uniform_filter", view, 3))


def test_indirect_buffer_is_refused_with_type_error(testbuffer):
    x = testbuffer.ndarray([float(i) for i in range(12)], shape=[3, 4], format="d",
                           flags=testbuffer.ND_PIL)  # suboffsets: not a strided array
    with pytest.raises(TypeError):
        gpufilt.describe(x)


# -------------------------------------------------- DLPack-only producers


class OldDLPack:
    """A producer with the pre-1.0 signature __dlpack__(stream=None)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        assert stream is None, "a CPU producer must get stream=None"
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


class NewDLPack(OldDLPack):
    """A DLPack 1.x producer that records how it was asked."""

    def __init__(self, array):
        super().__init__(array)
        self.calls = []

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append({"stream": stream, "max_version": max_version, "copy": copy})
        return self.array.__dlpack__(stream=stream, max_version=max_version, copy=copy)


@pytest.mark.parametrize("producer", [OldDLPack, NewDLPack])
def test_dlpack_only_producer_input_returns_numpy(producer, rng):
    data = random_array(rng, (5, 7), np.float64)
    x = producer(data)
    assert gpufilt.describe(x)["protocol"] == "dlpack"
    got = gnd.gaussian_filter(x, 1.0)
    assert type(got) is np.ndarray
    assert_matches(got, scipy_reference("gaussian_filter", data, 1.0))


def test_dlpack_producer_is_asked_for_versioned_capsule_without_copy(rng):
    x = NewDLPack(random_array(rng, (5, 7), np.float32))
    gnd.uniform_filter(x, 3)
    assert x.calls
    assert all(c == {"stream": None, "max_version": (1, 1), "copy": False} for c in x.calls)


@pytest.mark.parametrize("producer", [OldDLPack, NewDLPack])
def test_dlpack_only_producer_output_is_written_and_returned_itself(producer, rng):
    data = random_array(rng, (5, 7), np.float64)
    out = producer(np.zeros((5, 7)))
    assert gnd.uniform_filter(data, 3, output=out) is out
    assert_matches(out.array, scipy_reference("uniform_filter", data, 3))


def test_read_only_versioned_dlpack_output_raises_value_error(rng):
    data = random_array(rng, (5, 7), np.float64)
    target = np.zeros((5, 7))
    target.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        gnd.uniform_filter(data, 3, output=NewDLPack(target))
    assert not target.any()


class FailingDLPack:
    def __dlpack__(self, **kwargs):
        raise BufferError("cannot export")

    def __dlpack_device__(self):
        return (1, 0)


def test_dlpack_export_failure_raises_type_error_with_producer_message():
    with pytest.raises(TypeError, match="cannot export"):
        gpufilt.describe(FailingDLPack())
    with pytest.raises(TypeError, match="cannot export"):
        gnd.uniform_filter(FailingDLPack(), 3)


class NotACapsule:
    """A producer whose __dlpack__ returns something other than a capsule."""

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, **kwargs):
        return "not a capsule"


def test_dlpack_returning_a_non_capsule_raises_type_error_naming_it():
    with pytest.raises(TypeError, match="returned a str, not a DLPack capsule"):
        gpufilt.describe(NotACapsule())


# ------------------------------------------------ CUDA Array Interface (fake)


class FakeCAI:
    """A producer that only exports __cuda_array_interface__ (like numba's
    device arrays); its pointer is made up and must never be dereferenced."""

    def __init__(self, **cai):
        self._cai = cai

    @property
    def __cuda_array_interface__(self):
        return dict(self._cai)


FAKE_PTR = 0x7F00DEAD0000
_DROP = object()  # fake_cai(key=_DROP) leaves the key out


def fake_cai(**overrides):
    cai = {"shape": (3, 4), "typestr": "<f4", "data": (FAKE_PTR, False), "version": 3}
    cai.update(overrides)
    return FakeCAI(**{k: v for k, v in cai.items() if v is not _DROP})


def _assert_cuda_device(seen):
    assert seen["protocol"] == "cuda_array_interface"
    assert seen["device"] == "cuda"
    if not CUDA_BUILT:  # no runtime to ask which device owns the pointer
        assert seen["device_id"] == -1


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("strides", [pytest.param(_DROP, id="no-strides-key"),
                                     pytest.param(None, id="strides-None")])
def test_describe_fake_cai_without_strides_is_c_contiguous(version, strides):
    seen = gpufilt.describe(fake_cai(version=version, strides=strides))
    _assert_cuda_device(seen)
    assert seen["data"] == FAKE_PTR
    assert (seen["shape"], seen["strides"]) == ((3, 4), (16, 4))
    assert (seen["dtype"], seen["itemsize"]) == ("float32", 4)
    assert seen["readonly"] is False
    assert seen["stream"] is None


@pytest.mark.parametrize("typestr,dtype", [("<f8", "float64"), ("|u1", "uint8"), ("<i2", "int16"),
                                           ("<c8", "complex64"), ("|b1", "bool"), ("<f2", "float16")])
def test_describe_fake_cai_reads_typestr(typestr, dtype):
    seen = gpufilt.describe(fake_cai(typestr=typestr))
    assert (seen["dtype"], seen["itemsize"]) == (dtype, np.dtype(typestr).itemsize)


def test_describe_fake_cai_keeps_explicit_strides():
    seen = gpufilt.describe(fake_cai(strides=(4, 12)))  # Fortran order
    assert seen["strides"] == (4, 12)


def test_describe_fake_cai_negative_strides():
    seen = gpufilt.describe(fake_cai(strides=(-16, -4)))
    assert seen["strides"] == (-16, -4)
    assert seen["data"] == FAKE_PTR


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 0, 2)])
def test_describe_fake_cai_null_pointer_with_zero_size_is_valid(shape):
    seen = gpufilt.describe(fake_cai(shape=shape, data=(0, False)))
    _assert_cuda_device(seen)
    assert (seen["data"], seen["shape"]) == (0, shape)


def test_describe_fake_cai_reports_read_only_flag_and_stream():
    seen = gpufilt.describe(fake_cai(data=(FAKE_PTR, True), stream=0x5000))
    assert seen["readonly"] is True
    assert seen["stream"] == 0x5000


def test_describe_fake_cai_with_none_mask_and_stream_is_accepted():
    seen = gpufilt.describe(fake_cai(mask=None, stream=None))
    _assert_cuda_device(seen)
    assert seen["stream"] is None


def test_describe_fake_cai_zero_dimensional():
    seen = gpufilt.describe(fake_cai(shape=()))
    assert (seen["shape"], seen["strides"]) == ((), ())


# ---------------------------------------------------------------- torch CPU


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def test_torch_cpu_tensor_input_returns_tensor_matching_scipy(torch, rng):
    x = torch.from_numpy(random_array(rng, (6, 7), np.float32))
    before = x.clone()
    got = gnd.gaussian_filter(x, 1.2)
    assert isinstance(got, torch.Tensor)
    assert (got.device.type, got.dtype, tuple(got.shape)) == ("cpu", torch.float32, (6, 7))
    assert_matches(got.numpy(), scipy_reference("gaussian_filter", x.numpy(), 1.2))
    assert torch.equal(x, before)


@pytest.mark.parametrize("dtype", ["uint8", "int16", "int32", "int64", "float64", "complex64"])
def test_torch_cpu_dtypes_match_scipy(torch, dtype, rng):
    data = random_array(rng, (5, 8), dtype)
    got = gnd.uniform_filter(torch.from_numpy(data), 3)
    assert isinstance(got, torch.Tensor) and got.dtype == getattr(torch, dtype)
    assert_matches(got.numpy(), scipy_reference("uniform_filter", data, 3))


def test_torch_cpu_output_tensor_is_written_and_returned_itself(torch, rng):
    data = random_array(rng, (6, 7), np.float32)
    out = torch.empty(6, 7, dtype=torch.float64)
    assert gnd.uniform_filter(torch.from_numpy(data), 3, output=out) is out
    assert_matches(out.numpy(), scipy_reference("uniform_filter", data, 3, output=np.float64))


def test_torch_cpu_in_place(torch, rng):
    data = random_array(rng, (6, 7), np.float64)
    x = torch.from_numpy(data.copy())
    assert gnd.gaussian_filter(x, 1.0, output=x) is x
    assert_matches(x.numpy(), scipy_reference("gaussian_filter", data, 1.0))


@pytest.mark.parametrize("output", ["torch.float64", np.float64, "float64"])
def test_torch_cpu_output_dtype_gives_torch_tensor(torch, output, rng):
    if output == "torch.float64":
        output = torch.float64
    data = random_array(rng, (5, 6), np.float32)
    got = gnd.gaussian_filter1d(torch.from_numpy(data), 1.0, output=output)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
    assert_matches(got.numpy(), scipy_reference("gaussian_filter1d", data, 1.0, output=np.float64))


def test_torch_tensor_requiring_grad_is_accepted_under_no_grad(torch, rng):
    # With grad mode on it is refused (no gradient would flow): test_torch_autograd.py.
    data = random_array(rng, (5, 6), np.float32)
    x = torch.tensor(data, requires_grad=True)
    with torch.no_grad():
        got = gnd.gaussian_filter(x, 1.0)
    assert isinstance(got, torch.Tensor)
    assert_matches(got.detach().numpy(), scipy_reference("gaussian_filter", data, 1.0))


@pytest.mark.parametrize("view", ["transposed", "sliced", "narrowed"])
def test_torch_cpu_non_contiguous_view_matches_scipy(torch, view, rng):
    base = torch.from_numpy(random_array(rng, (8, 10), np.float64))
    x = {"transposed": base.t(), "sliced": base[1::2, ::3], "narrowed": base[:, 2:7]}[view]
    assert not x.is_contiguous()
    seen = gpufilt.describe(x)
    assert seen["strides"] == tuple(s * 8 for s in x.stride())
    got = gnd.uniform_filter(x, 3, mode="wrap")
    assert_matches(got.numpy(), scipy_reference("uniform_filter", x.numpy(), 3, mode="wrap"))


def test_describe_torch_cpu_tensor(torch):
    x = torch.zeros(3, 5, dtype=torch.int16)
    seen = gpufilt.describe(x)
    assert (seen["protocol"], seen["device"], seen["dtype"]) == ("dlpack", "cpu", "int16")
    assert (seen["data"], seen["shape"], seen["strides"]) == (x.data_ptr(), (3, 5), (10, 2))


# ------------------------------------------------------------------ jax CPU


@pytest.fixture
def jax_cpu():
    jax = pytest.importorskip("jax")
    return jax, jax.devices("cpu")[0]


def test_jax_cpu_array_input_returns_jax_array_matching_scipy(jax_cpu, rng):
    jax, cpu = jax_cpu
    data = random_array(rng, (6, 7), np.float32)
    x = jax.device_put(data, cpu)
    got = gnd.gaussian_filter(x, 1.1, mode="nearest")
    assert isinstance(got, jax.Array)
    assert got.dtype == np.float32 and got.shape == (6, 7)
    assert_matches(np.asarray(got), scipy_reference("gaussian_filter", data, 1.1, mode="nearest"))
    np.testing.assert_array_equal(np.asarray(x), data)


def test_describe_jax_cpu_array_is_read_only(jax_cpu):
    jax, cpu = jax_cpu
    seen = gpufilt.describe(jax.device_put(np.ones((2, 3), np.float32), cpu))
    assert (seen["protocol"], seen["device"], seen["readonly"]) == ("dlpack", "cpu", True)


def test_jax_array_as_output_raises_value_error(jax_cpu, rng):
    jax, cpu = jax_cpu
    x = random_array(rng, (4, 5), np.float32)
    out = jax.device_put(np.ones((4, 5), np.float32), cpu)
    with pytest.raises(ValueError, match="read-only"):
        gnd.uniform_filter(x, 3, output=out)
    np.testing.assert_array_equal(np.asarray(out), np.ones((4, 5), np.float32))


def test_describe_numpy_fast_path_and_what_it_leaves_to_the_protocols():
    # An exact, aligned, native-order ndarray is read from its fields; a
    # subclass, big-endian or unaligned data go through the protocols as before.
    x = np.arange(12.0).reshape(3, 4)
    x.flags.writeable = False
    seen = gpufilt.describe(x)
    assert (seen["protocol"], seen["readonly"], seen["strides"]) == ("numpy", True, (32, 8))

    class Sub(np.ndarray):
        pass
    assert gpufilt.describe(np.arange(3.0).view(Sub))["protocol"] == "dlpack"
    with pytest.raises(TypeError, match="byte order"):  # the protocols' own error
        gpufilt.describe(np.arange(3.0).astype(">f8"))
    unaligned = np.frombuffer(bytearray(33), np.uint8)[1:].view(np.float64)
    assert not unaligned.flags.aligned
    assert gpufilt.describe(unaligned)["protocol"] != "numpy"

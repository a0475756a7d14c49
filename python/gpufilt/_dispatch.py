"""Where a call runs and what it hands back.

One place decides, for any array-like: which library it belongs to, where it
lives (CPU or a CUDA device), how an output is allocated with that library,
and which CUDA stream the work is enqueued on. The kernels themselves are
reached through one binding function per kernel family (``_core`` for the
CPU, ``_cuda`` for CUDA).
"""
from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
from typing import Any

import numpy as np

from . import _core, _docs
from ._errors import ArgumentError

_cuda = None
_cuda_error = None
if importlib.util.find_spec("gpufilt._cuda") is None:  # built only where nvcc was found
    _cuda_error = "gpufilt was built without CUDA (no nvcc at build time, or GPUFILT_CUDA=OFF)"
else:
    try:
        _cuda = importlib.import_module("gpufilt._cuda")
    except ImportError as exc:  # pragma: no cover - a broken install
        _cuda_error = f"gpufilt's CUDA module failed to load ({exc})"


def cuda_module():
    """The CUDA extension module, or a clear error saying why there is none."""
    if _cuda is None:
        raise ValueError(f"a CUDA array was passed but {_cuda_error}; "
                         "rebuild with nvcc on PATH (GPUFILT_CUDA=ON) or pass CPU arrays")
    reason = _cuda.unusable_reason()
    if reason:
        raise ValueError(f"a CUDA array was passed but no CUDA device is usable: {reason}")
    return _cuda


@_docs.numpy_sections(
    [("array : array", "Any array gpufilt can import.")],
    ("facts : dict", "What the importer saw."), """
    >>> import numpy as np
    >>> import gpufilt
    >>> d = gpufilt.describe(np.zeros((2, 3), dtype=np.float32))
    >>> d["protocol"], d["device"], d["shape"], d["strides"], d["dtype"]
    ('numpy', 'cpu', (2, 3), (12, 4), 'float32')
    """)
def describe(array: Any) -> dict:
    """What gpufilt's importer sees of ``array``.

    Returns a dict with the protocol used (``dlpack``,
    ``cuda_array_interface`` or ``buffer``), ``device`` (``cpu``/``cuda``),
    ``device_id``, the data pointer, ``shape``, byte ``strides``, ``dtype``,
    ``itemsize``, ``readonly`` and the producer's CAI ``stream`` (if any).
    Importing a DLPack capsule consumes it.
    """
    module = _cuda if _cuda is not None else _core
    return module.describe(array)


def check_writable_output(output, name="output"):
    """The importer's rule for every output, for outputs that the input's
    library writes rather than gpufilt's kernels (morphology's last step): a
    ValueError naming `name` for a read-only array or one whose elements
    overlap each other in memory, before anything is computed."""
    module = _cuda if _cuda is not None else _core
    module.describe(output, True, name)


# ----------------------------------------------------------------- libraries

_CUPY_NDARRAY = []  # [cupy.ndarray], once cupy is imported


def _is_cupy_ndarray(obj):
    """True for an array of cupy.ndarray's exact class. gpufilt never imports
    cupy to ask: an object cannot be one of its arrays before it is imported."""
    if not _CUPY_NDARRAY:
        cupy = sys.modules.get("cupy")
        if cupy is None or not isinstance(getattr(cupy, "ndarray", None), type):
            return False
        _CUPY_NDARRAY.append(cupy.ndarray)
    return type(obj) is _CUPY_NDARRAY[0]


def _library(obj):
    """Short name of the library that produced ``obj``."""
    if isinstance(obj, np.ndarray):
        return "numpy"
    module = type(obj).__module__.split(".", 1)[0]
    if module in ("cupy", "torch", "numpy"):
        return module
    if module in ("jax", "jaxlib"):
        return "jax"
    if hasattr(obj, "__dlpack_device__") or hasattr(obj, "__cuda_array_interface__"):
        return "other"
    return "buffer"


def on_host(parameter, name):
    """A filter's small parameter array (weights, footprint) where numpy can
    read it. cupyx code passes these as device arrays: cupy arrays, torch
    CUDA tensors and other CUDA Array Interface producers are copied to the
    host here, explicitly; the copy waits for the work queued on their
    stream (as cupyx's own reads of footprints do). The kernels take them as
    parameters, so this is the one device-to-host copy a filter makes, of a
    few taps, never of the data. Anything else is returned as it is."""
    library = _library(parameter)
    if library == "cupy":
        return parameter.get()
    if library == "torch":
        return parameter.detach().resolve_conj().cpu().numpy()
    if hasattr(parameter, "__cuda_array_interface__"):
        if hasattr(parameter, "copy_to_host"):  # numba
            return parameter.copy_to_host()
        try:
            import cupy
        except ImportError:
            raise TypeError(f"{name} is a CUDA array of {type(parameter).__name__}; gpufilt reads such "
                            "parameters to the host with cupy (pip install gpufilt[cuda]), or pass a "
                            "numpy array") from None
        return cupy.asarray(parameter).get()
    return parameter


def importable(obj):
    """True when gpufilt's importer reads `obj` as it is: arrays of the
    known libraries, DLPack and CAI producers, the buffer protocol."""
    if _library(obj) != "buffer":
        return True
    try:
        memoryview(obj)
    except TypeError:
        return False
    return True


class NamedDType:
    """A dtype numpy lacks (bfloat16 without ml_dtypes), known by its name.
    Has the attributes gpufilt reads of a numpy dtype: name, kind, itemsize."""

    __slots__ = ("name", "kind", "itemsize")

    def __init__(self, name, kind, itemsize):
        self.name, self.kind, self.itemsize = name, kind, itemsize

    def __eq__(self, other):
        return getattr(other, "name", other) == self.name

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f"dtype('{self.name}')"

    def __str__(self):
        return self.name


def _bfloat16():
    """numpy's bfloat16 dtype where ml_dtypes provides one (jax does), else a
    NamedDType. Either way it compares equal to "bfloat16"."""
    if importlib.util.find_spec("ml_dtypes") is not None:
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return NamedDType("bfloat16", "f", 2)


BFLOAT16 = _bfloat16()


def is_bfloat16(dtype):
    if isinstance(dtype, np.dtype):  # .kind first: numpy's .name is slow Python code
        return dtype.kind == "V" and dtype.name == "bfloat16"
    return getattr(dtype, "name", None) == "bfloat16"


def dtype_kind(dtype):
    """numpy's kind letter, 'f' for bfloat16 too (ml_dtypes says 'V')."""
    return "f" if is_bfloat16(dtype) else dtype.kind


_TORCH_DTYPES = {}


def _torch_dtype(dtype):
    import torch
    if not _TORCH_DTYPES:
        for name in ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
                     "uint64", "float16", "float32", "float64", "complex64", "complex128", "bfloat16"):
            if hasattr(torch, name):
                _TORCH_DTYPES[name] = getattr(torch, name)
    name = dtype.name if is_bfloat16(dtype) else np.dtype(dtype).name
    try:
        return _TORCH_DTYPES[name]
    except KeyError:
        raise TypeError(f"torch has no dtype matching {name}") from None


def _numpy_dtype(dtype):
    """numpy dtype of a numpy, cupy, jax or torch dtype (BFLOAT16 for bfloat16)."""
    if isinstance(dtype, np.dtype) and dtype.kind != "V":  # numpy and cupy: the common case
        return dtype
    if type(dtype).__module__ == "torch":
        name = str(dtype).rsplit(".", 1)[-1]
        if name == "bfloat16":
            return BFLOAT16
        try:
            return np.dtype(name)
        except TypeError:
            raise TypeError(f"input has unsupported dtype {dtype}; gpufilt accepts bool, integer, "
                            "float16/32/64, bfloat16 and complex64/128 tensors") from None
    if is_bfloat16(dtype):
        return BFLOAT16
    return np.dtype(dtype)


class Operand:
    """An input array as a call sees it: the object handed to the kernels,
    its library, shape, numpy dtype, and device."""

    __slots__ = ("obj", "library", "shape", "ndim", "dtype", "device", "device_id")

    def __init__(self, obj, name="input"):
        if type(obj) is np.ndarray and obj.dtype.kind != "V" and obj.dtype.isnative:  # the common case
            self.obj, self.library, self.shape, self.ndim, self.dtype = obj, "numpy", obj.shape, obj.ndim, obj.dtype
            self.device, self.device_id = "cpu", 0
            return
        if _is_cupy_ndarray(obj) and obj.dtype.kind != "V":  # the common GPU case, read directly too
            self.obj, self.library, self.shape, self.ndim, self.dtype = obj, "cupy", obj.shape, obj.ndim, obj.dtype
            self.device, self.device_id = "cuda", obj.data.device_id
            return
        self._import(obj, name)
        self.ndim = len(self.shape)
        self._accept_dtype(name)

    def _accept_dtype(self, name):
        """Where a subclass refuses a dtype. Not called for numpy arrays of
        numpy's own dtypes (kind "V" aside) or cupy arrays: every caller
        takes those."""

    def _import(self, obj, name):
        """The attributes of anything but a plain numpy or cupy array."""
        self.library = _library(obj)
        if self.library == "buffer":
            obj = _buffer_as_numpy(obj, name)
            self.library = "numpy"
        elif self.library == "torch" and obj.requires_grad:
            obj = _untracked(obj, name)
        self.obj = obj
        if self.library in ("numpy", "cupy", "torch", "jax"):
            self.shape = tuple(obj.shape)
            self.dtype = _numpy_dtype(obj.dtype)
            self.device, self.device_id = _device_of(obj, self.library)
        else:
            seen = describe(obj) if not hasattr(obj, "__cuda_array_interface__") else _cai_view(obj)
            self.shape, self.dtype = seen["shape"], _numpy_dtype(seen["dtype"])
            self.device, self.device_id = seen["device"], seen["device_id"]


def _untracked(tensor, name):
    """A detached view of a tensor that requires grad (DLPack refuses those),
    where dropping its autograd history loses nothing: under torch.no_grad()
    (or inside an autograd Function). With grad mode on the result would
    silently carry no gradient, so that is refused."""
    import torch
    if torch.is_grad_enabled():
        raise ValueError(f"{name} is a torch tensor that requires grad, and gpufilt's kernels do not "
                         "record autograd history: use gpufilt.torch's functions to get gradients, "
                         f"or pass {name}.detach() (or call under torch.no_grad()) to drop them")
    return tensor.detach()


def _buffer_as_numpy(obj, name):
    """A zero-copy numpy view of a plain buffer (bytearray, memoryview, ...)."""
    try:
        return np.asarray(memoryview(obj))
    except TypeError:
        raise TypeError(f"{name} of type {type(obj).__name__} is not an array: gpufilt accepts objects "
                        "with __dlpack__, __cuda_array_interface__ or the buffer protocol") from None
    except (ValueError, NotImplementedError) as exc:
        raise TypeError(f"{name} exposes a buffer gpufilt cannot read: {exc}") from None


def _cai_view(obj):
    """Shape, dtype and device of a CAI-only producer (numba), without importing it twice."""
    cai = obj.__cuda_array_interface__
    try:
        dtype = np.dtype(cai["typestr"])
        shape = tuple(int(s) for s in cai["shape"])
    except (KeyError, TypeError, ValueError):
        return describe(obj)  # let the importer raise its precise error
    device_id = -1
    if _cuda is not None and not _cuda.unusable_reason():
        device_id = describe(obj)["device_id"]  # CAI has no device id: ask the driver
    return {"shape": shape, "dtype": dtype.name, "device": "cuda", "device_id": device_id}


def _device_of(obj, library):
    if library == "numpy":
        return "cpu", 0
    if library == "cupy":
        return "cuda", obj.device.id
    if library == "torch":
        dev = obj.device
        if dev.type == "cuda":
            return "cuda", dev.index
        if dev.type == "cpu":
            return "cpu", 0
        raise ValueError(f"input is a torch tensor on {dev}; gpufilt runs on cpu and cuda devices")
    kind, index = obj.__dlpack_device__()
    if int(kind) in (2, 13):
        return "cuda", int(index)
    return "cpu", 0


# ------------------------------------------------------------------- padding

def pad(xp, array, pad_width, mode, **kwargs):
    """numpy.pad's result, for a numpy or cupy `array` (xp its library),
    `pad_width` one (before, after) per axis. 'wrap' is an index take on
    both: cupy.pad (14.2) repeats the wrong elements where a width exceeds
    its axis's length (a window longer than the array)."""
    if mode != "wrap" or 0 in array.shape:  # (an empty axis: xp.pad's own error)
        return xp.pad(array, pad_width, mode=mode, **kwargs)
    for axis, (before, after) in enumerate(pad_width):
        if before or after:
            index = xp.arange(-int(before), array.shape[axis] + int(after)) % array.shape[axis]
            array = xp.take(array, index, axis=axis)
    return array


# -------------------------------------------------------------------- output

def numpy_empty(shape, dtype):
    """np.empty(shape, dtype) for a CPU result: results of
    _core.POOL_MIN_BYTES and up are views of a block of gpufilt's CPU result
    pool (src/core/host_pool.hpp). When the array and every view of it are
    dropped, the block's pages serve the next large result as they are,
    without the operating system faulting them in and zeroing them again."""
    return _core.empty(shape, np.dtype(dtype))


def allocate_like(src: Operand, dtype, shape=None):
    """An uninitialised array of `shape` (default src's) and `dtype`, by src's
    own library on src's device (cupy for CUDA arrays of other producers,
    numpy for plain buffers and for jax, whose arrays are immutable)."""
    shape = src.shape if shape is None else tuple(shape)
    if src.library == "torch":
        import torch
        return torch.empty(shape, dtype=_torch_dtype(dtype), device=src.obj.device)
    if isinstance(dtype, NamedDType):
        raise TypeError(f"{src.library} has no {dtype.name} arrays here (numpy needs ml_dtypes for "
                        "bfloat16); pass out= an array, or use torch tensors")
    dtype = np.dtype(dtype)
    if src.device == "cuda":
        cupy = _import_cupy(src)
        current = cupy.cuda.runtime.getDevice()
        if src.device_id < 0 or src.device_id == current:  # no device switch (a microsecond or two)
            return cupy.empty(shape, dtype=dtype)
        with cupy.cuda.Device(src.device_id):
            return cupy.empty(shape, dtype=dtype)
    return numpy_empty(shape, dtype)


def _import_cupy(src):
    try:
        import cupy
    except ImportError:
        raise ValueError(f"allocating the output for a CUDA {src.library} array needs cupy "
                         "(pip install gpufilt[cuda]); or pass output= an array") from None
    return cupy


def hand_back(out, src: Operand):
    """A freshly written result in the caller's library."""
    library = src.library
    if library == "jax":  # immutable arrays: the result is handed over whole
        import jax.numpy as jnp
        return jnp.from_dlpack(out)
    return out


def has_uint8_views(src: Operand):
    """True where src's library (numpy, cupy, torch) views a bool array's
    memory as uint8 (uint8_view)."""
    return src.library in ("numpy", "cupy", "torch")


def uint8_view(out, src: Operand):
    """The bool array `out`, of src's library, viewed as uint8: where the
    kernels store scipy's bytes into bool outputs."""
    if src.library == "torch":
        import torch
        return out.view(torch.uint8)
    return out.view(np.uint8)


def _is_dtype_like(output):
    return isinstance(output, (type, np.dtype, str)) or (
        type(output).__module__ == "torch" and not hasattr(output, "shape"))


def resolve_output(output, src: Operand, default_dtype):
    """(kernel array, caller's array or None) for scipy's ``output`` argument:
    None -> a new array of `default_dtype`; a dtype -> a new array of it;
    an array -> that very array, written in place and returned as itself."""
    if output is None:
        return allocate_like(src, default_dtype), None
    if _is_dtype_like(output):
        return allocate_like(src, output_dtype_of(output)), None
    dst = Operand(output, "output")
    check_output_shape(dst, src)
    return dst.obj, output


def check_output_shape(output, src: Operand):
    """scipy's RuntimeError for an output array of another shape than the input's."""
    if tuple(output.shape) != tuple(src.shape):
        raise ArgumentError(f"output shape not correct: {tuple(output.shape)} where the input's is "
                            f"{tuple(src.shape)}")


def is_swapped_numpy(output):
    """True for a numpy output array of non-native byte order."""
    return isinstance(output, np.ndarray) and not output.dtype.isnative


def output_dtype_of(output):
    """The dtype `output` asks for (array or dtype), or None."""
    if output is None:
        return None
    if _is_dtype_like(output):
        if type(output).__module__ == "torch":
            return _numpy_dtype(output)
        try:
            dtype = np.dtype(output)
        except TypeError as exc:
            raise TypeError(f"output must be an array or a dtype, not {output!r}") from exc
        if dtype.kind not in "biufc":
            raise TypeError(f"output dtype {dtype} is not supported; gpufilt accepts bool, integer, "
                            "float and complex dtypes")
        return dtype
    if hasattr(output, "dtype"):
        return _numpy_dtype(output.dtype)
    return Operand(output, "output").dtype


# -------------------------------------------------------------------- stream

def resolve_stream(stream, src: Operand):
    """The CUDA stream (as an int) a GPU call is enqueued on: `stream` if
    given (int, cupy or torch stream), else the current stream of the input's
    library, else the legacy default stream (0)."""
    if stream is not None:
        for attr in ("ptr", "cuda_stream"):
            if hasattr(stream, attr):
                return int(getattr(stream, attr))
        if isinstance(stream, int) and not isinstance(stream, bool) and stream >= 0:
            return stream
        raise TypeError("stream must be None, a non-negative int (cudaStream_t), "
                        f"or a cupy/torch stream, not {stream!r}")
    if src.library == "cupy":
        import cupy
        return cupy.cuda.get_current_stream().ptr
    if src.library == "torch":
        import torch
        return torch.cuda.current_stream(src.device_id).cuda_stream
    return 0


# ------------------------------------------------------------------- running

def _backend(src: Operand, stream):
    """(kernel module, stream int) for a call on src's device."""
    if src.device == "cpu":
        if stream is not None:
            resolve_stream(stream, src)  # still reject malformed values
        return _core, 0
    return cuda_module(), resolve_stream(stream, src)


def _run_kernel(kernel_name, src: Operand, output, work, cval, default_dtype, stream=None):
    """Runs the binding `kernel_name` ('separable' or 'footprint') of src's
    device on `work` from src into `output` (scipy's output argument);
    returns the caller's result object."""
    if output is None and stream is None:
        if src.library == "numpy":
            return _new_numpy_result(getattr(_core, kernel_name), src, work, cval, default_dtype)
        if on_current_cupy_device(src):
            return new_cupy_result(kernel_name, src, work, cval, default_dtype)
    module, stream = _backend(src, stream)
    out, result = resolve_output(output, src, default_dtype)
    getattr(module, kernel_name)(src.obj, out, work, *_real_and_imag(cval), stream)
    return hand_back(out, src) if result is None else result


# run_separable(src, output, passes, cval, default_dtype, stream=None): 1-D
# passes (axis, kind, weights, size, origin, mode).
run_separable = functools.partial(_run_kernel, "separable")
# run_footprint(src, output, spec, cval, default_dtype, stream=None): a
# footprint filter (see _core.footprint).
run_footprint = functools.partial(_run_kernel, "footprint")


def _new_numpy_result(kernel, src: Operand, work, cval, dtype):
    """The common call, kept short (tiny arrays pay for every step): a numpy
    input filtered by `kernel` of _core into a new numpy array of `dtype`;
    what _backend, resolve_output and hand_back would do for it."""
    out = numpy_empty(src.shape, dtype)
    kernel(src.obj, out, work, *_real_and_imag(cval), 0)
    return out


def on_current_cupy_device(src: Operand):
    """True for a cupy input on cupy's current device (no device switch)."""
    return src.library == "cupy" and src.device_id == sys.modules["cupy"].cuda.runtime.getDevice()


def into_cupy_output(kernel_name, src: Operand, output, work, cval):
    """The kernel `kernel_name` of _cuda from a cupy input on the current
    device into the cupy array `output`, on cupy's current stream; returns
    `output`."""
    kernel = getattr(cuda_module(), kernel_name)
    return kernel(src.obj, output, work, *_real_and_imag(cval), sys.modules["cupy"].cuda.get_current_stream().ptr)


def new_cupy_result(kernel_name, src: Operand, work, cval, dtype):
    """_new_numpy_result for a cupy input on the current device: into_cupy_output
    into a new cupy array of `dtype`."""
    out = sys.modules["cupy"].ndarray(src.shape, dtype)  # cupy.empty, without its Python frame
    return into_cupy_output(kernel_name, src, out, work, cval)


class CupyBinding:
    """_core's calling convention for an exact cupy array on cupy's current
    device (what ndimage's _plain_binding hands out for one): called as
    ``separable(input, None, work, cval, 0.0, 0)``, it fills a new cupy array
    of the input's dtype on cupy's current stream and returns it. The
    `output`, `cval_imag` and `stream` arguments are those constants."""

    @staticmethod
    def _run(kernel_name, input, work, cval):
        cupy = sys.modules["cupy"]
        out = cupy.ndarray(input.shape, input.dtype)  # cupy.empty, without its Python frame
        return getattr(_cuda, kernel_name)(input, out, work, cval, 0.0, cupy.cuda.get_current_stream().ptr)

    @staticmethod
    def separable(input, output, work, cval, cval_imag, stream):
        return CupyBinding._run("separable", input, work, cval)

    @staticmethod
    def footprint(input, output, work, cval, cval_imag, stream):
        return CupyBinding._run("footprint", input, work, cval)


_CUDA_USABLE = []  # [True] once cuda_module() has answered


def plain_cupy(obj):
    """True for an exact cupy array of a real non-bool dtype on cupy's current device,
    with gpufilt's CUDA module usable (asked once: the answer does not change
    within a process)."""
    if not _is_cupy_ndarray(obj) or obj.dtype.kind not in "iuf":  # (bool results: ndimage._into_bool)
        return False
    if not _CUDA_USABLE:
        cuda_module()  # raises its clear error when CUDA is not usable
        _CUDA_USABLE.append(True)
    return obj.data.device_id == sys.modules["cupy"].cuda.runtime.getDevice()


def _real_and_imag(cval):
    """cval's real and imaginary parts as floats (a float without complex())."""
    if type(cval) is float:
        return cval, 0.0
    cval = complex(cval)
    return cval.real, cval.imag


def complex_unary(op, a, out, src: Operand, stream=None):
    """out = a * a ('square') or sqrt(a) ('sqrt') for complex arrays, by
    the input's own library (numpy, cupy or torch), as scipy computes them
    for complex gradient magnitudes; gpufilt's elementwise kernels add and
    subtract complex arrays only."""
    library = src.library if src.library in ("numpy", "cupy", "torch") else None
    if library is None:
        raise TypeError(f"complex data of {src.library} arrays: gpufilt squares and square-roots "
                        "complex values with numpy, cupy or torch; pass one of those")
    xp = importlib.import_module(library)
    with stream_made_current(src, stream):
        if op == "square":
            xp.multiply(a, a, out=out)
        else:
            xp.sqrt(a, out=out)


def stream_current_for(input, stream):
    """stream_made_current for a filter's `input` argument as the caller
    passed it: nothing to do without a stream or for numpy data (whose
    arguments, lists included, need no Operand here)."""
    if stream is None or isinstance(input, np.ndarray):
        return stream_made_current(None, None)
    return stream_made_current(Operand(input, "input"), stream)


class _StreamHandle:
    """A raw cudaStream_t as the CUDA stream protocol presents one."""

    def __init__(self, ptr):
        self.ptr = ptr

    def __cuda_stream__(self):
        return (0, self.ptr)


class stream_made_current:
    """A context in which `stream` (a filter's stream= argument) is the
    current stream of src's library (cupy or torch), so that work a filter
    hands to that library or to the caller's own function (generic_laplace's
    derivative) lands on it. Nothing to do for CPU arrays or stream=None."""

    def __init__(self, src: Operand | None, stream):
        self._context = None
        if stream is None or src is None or src.device != "cuda" or src.library not in ("cupy", "torch"):
            return
        ptr = resolve_stream(stream, src)
        if src.library == "cupy":
            import cupy
            if isinstance(stream, cupy.cuda.Stream):
                self._context = stream
            elif hasattr(cupy.cuda.Stream, "from_external"):  # CuPy 14 (ExternalStream is deprecated)
                with cupy.cuda.Device(src.device_id):
                    self._context = cupy.cuda.Stream.from_external(_StreamHandle(ptr))
            else:
                self._context = cupy.cuda.ExternalStream(ptr, src.device_id)
        else:
            import torch
            self._context = torch.cuda.stream(torch.cuda.ExternalStream(ptr, device=src.device_id))

    def __enter__(self):
        if self._context is not None:
            self._context.__enter__()
        return self

    def __exit__(self, *exc):
        if self._context is not None:
            return self._context.__exit__(*exc)
        return False


def elementwise(op, a, b, out, src: Operand, stream=None):
    """out = op(a, b) on src's device ('add', 'subtract', 'square', 'sqrt')."""
    module, stream = _backend(src, stream)
    module.elementwise(op, a, b, out, stream)


def copy_into(a, out, src: Operand, stream=None):
    """out[...] = a, converting the dtype, on src's device."""
    module, stream = _backend(src, stream)
    module.separable(a, out, [], 0.0, 0.0, stream)


def may_share_memory(a, b):
    """True when the memory ranges of two arrays intersect (conservative)."""
    ranges = []
    for x in (a, b):
        d = describe(x)
        if 0 in d["shape"]:
            return False
        lo = d["data"] + sum(min(0, (n - 1) * s) for n, s in zip(d["shape"], d["strides"]))
        hi = d["data"] + d["itemsize"] + sum(max(0, (n - 1) * s) for n, s in zip(d["shape"], d["strides"]))
        ranges.append((d["device"], d["device_id"], lo, hi))
    (dev_a, id_a, lo_a, hi_a), (dev_b, id_b, lo_b, hi_b) = ranges
    return dev_a == dev_b and id_a == id_b and lo_a < hi_b and lo_b < hi_a

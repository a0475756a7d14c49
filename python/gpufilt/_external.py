"""Foreign memory as Python arrays, without copying.

``from_pointer`` wraps a raw pointer (from ctypes, Cython, or a C++ program
through ``include/gpufilt/external_array.hpp``) with its shape, byte
strides, dtype and device into an :class:`ExternalArray`. That object exposes

- host memory: ``__array_interface__`` v3 (``numpy.asarray`` views it; the
  view's ``base`` is the ExternalArray, which keeps ``owner`` alive);
- device memory: ``__cuda_array_interface__`` v3 (``cupy.asarray``, numba);
- both: ``__dlpack__`` / ``__dlpack_device__`` with versioned (1.x) and
  legacy capsules (``np.from_dlpack``, ``cupy.from_dlpack``,
  ``torch.from_dlpack``, ``jax.dlpack``); each capsule holds a reference to
  the ExternalArray until its consumer deletes it.

gpufilt filters take it as input and as ``output=``.
"""
from __future__ import annotations

import ctypes
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _core, _docs

# DLPack type codes of the numpy kinds gpufilt handles.
_DLPACK_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}
_DLPACK_CPU, _DLPACK_CUDA = 1, 2


class ExternalArray:
    """A view of foreign memory; made by :func:`from_pointer`.

    Attributes
    ----------
    ptr : int
        The address of the first element.
    shape : tuple of ints
    strides : tuple of ints or None
        The strides in bytes; None for C order.
    dtype : numpy.dtype
    device : str
        ``'cpu'`` or ``'cuda'``.
    device_id : int
    readonly : bool
    stream : int or None
        The CUDA stream the data is ready on.
    owner : object
        Kept alive as long as this object or any view of it is.

    Examples
    --------
    >>> import numpy as np
    >>> import gpufilt
    >>> data = np.arange(6.0)
    >>> view = gpufilt.from_pointer(data.ctypes.data, (2, 3), "float64", owner=data)
    >>> view.shape, view.strides, view.device
    ((2, 3), None, 'cpu')
    >>> np.asarray(view)[1]
    array([3., 4., 5.])
    """

    __slots__ = ("ptr", "shape", "strides", "dtype", "device", "device_id", "readonly", "stream",
                 "owner", "__weakref__")

    def __init__(self, ptr, shape, strides, dtype, device, device_id, readonly, stream, owner):
        self.ptr, self.shape, self.strides, self.dtype = ptr, shape, strides, dtype
        self.device, self.device_id = device, device_id
        self.readonly, self.stream, self.owner = readonly, stream, owner

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return _size(self.shape)

    def __repr__(self):
        where = "cpu" if self.device == "cpu" else f"cuda:{self.device_id}"
        return (f"ExternalArray(ptr=0x{self.ptr:x}, shape={self.shape}, strides={self.strides}, "
                f"dtype={self.dtype}, device='{where}', readonly={self.readonly})")

    # ----------------------------------------------------- protocols: numpy, CAI

    def _interface(self, version):
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, self.readonly),
                "strides": self.strides, "version": version}

    @property
    def __array_interface__(self):
        if self.device != "cpu":
            raise AttributeError("__array_interface__: this ExternalArray is in CUDA device memory")
        return self._interface(3)

    @property
    def __cuda_array_interface__(self):
        if self.device != "cuda":
            raise AttributeError("__cuda_array_interface__: this ExternalArray is in host memory")
        cai = self._interface(3)
        cai["stream"] = self.stream
        return cai

    # -------------------------------------------------------------- DLPack

    def __dlpack_device__(self):
        return (_DLPACK_CPU, 0) if self.device == "cpu" else (_DLPACK_CUDA, self.device_id)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if copy:
            raise BufferError("ExternalArray exports its memory only (copy=True is not supported)")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"ExternalArray lives on DLPack device {self.__dlpack_device__()}, "
                              f"not {tuple(dl_device)}; it does not copy across devices")
        versioned = max_version is not None and tuple(max_version) >= (1, 0)
        if self.readonly and not versioned:
            raise BufferError("this ExternalArray is read-only and a legacy DLPack capsule cannot say so; "
                              "ask with max_version=(1, 0) or later")
        if self.device == "cuda":
            _order_streams(self.stream, stream)
        item = self.dtype.itemsize
        strides = [] if self.strides is None else [s // item for s in self.strides]
        minor = 1 if versioned and tuple(max_version) >= (1, 1) else 0
        return _core.dlpack_capsule(self, self.ptr, list(self.shape), strides,
                                    _DLPACK_CODES[self.dtype.kind], item * 8,
                                    self.__dlpack_device__()[0], self.device_id, self.readonly,
                                    minor if versioned else -1)


def _order_streams(producer, consumer):
    """Makes `consumer` (a DLPack stream value) wait for the data's `producer`
    stream: an event on one, a wait on the other, the host never blocks."""
    if consumer is None:
        consumer = 1  # DLPack: None means the legacy default stream
    if producer is None or consumer == -1 or consumer == producer:
        return
    try:
        import cupy
    except ImportError:
        raise BufferError(f"this ExternalArray is ready on CUDA stream {producer} and the consumer asked "
                          f"for stream {consumer}; ordering them needs cupy (pip install gpufilt[cuda]), "
                          "or synchronise the producer stream before wrapping and pass stream=None") from None
    event = cupy.cuda.Event(disable_timing=True)
    event.record(cupy.cuda.ExternalStream(producer))
    cupy.cuda.ExternalStream(consumer).wait_event(event)


# ------------------------------------------------------------- from_pointer


@_docs.numpy_sections(
    [("ptr : int or ctypes pointer", "The address of the first element."),
     ("shape : int or sequence of ints", "The array's shape."),
     ("dtype : dtype", "Anything numpy.dtype takes, of native byte order."),
     ("strides : sequence of ints, optional", "Byte strides; default C order."),
     ("device : str, optional", "'cpu' (default), 'cuda' or 'cuda:N'."),
     ("readonly : bool, optional", "Consumers see the memory as read-only."),
     ("owner : object, optional", "Kept alive while the view or any view made from it lives."),
     ("stream : int, optional", "For device memory, the CUDA stream the data is ready on.")],
    ("view : ExternalArray", "The memory, exported through DLPack, the CUDA Array Interface (device memory) "
     "or the buffer protocol (host memory): gpufilt's filters take it, and numpy.asarray, cupy.asarray "
     "or torch.from_dlpack view it without copying."), """
    >>> import numpy as np
    >>> import gpufilt
    >>> data = np.arange(6.0)
    >>> view = gpufilt.from_pointer(data.ctypes.data, (2, 3), "float64", owner=data)
    >>> gpufilt.ndimage.uniform_filter1d(view, 3)
    array([[0.33333333, 1.        , 1.66666667],
           [3.33333333, 4.        , 4.66666667]])
    """)
def from_pointer(ptr: Any, shape: int | Sequence[int], dtype: Any, *, strides: Sequence[int] | None = None,
                 device: str = "cpu", readonly: bool = False, owner: Any = None,
                 stream: int | None = None) -> ExternalArray:
    """Wraps memory at `ptr` as an :class:`ExternalArray`, without copying.

    ptr: the address of the first element: an int, a ctypes pointer or
    ``c_void_p``. shape: an int or a sequence of ints. dtype: anything
    ``numpy.dtype`` takes (bool, ints, float16/32/64, complex64/128, native
    byte order). strides: byte strides, one per dimension, each a multiple of
    the item size (may be negative or zero); None means C order; Fortran
    order is ``(item, item*n0, item*n0*n1, ...)``.
    device: ``'cpu'``, ``'cuda'`` (device 0) or ``'cuda:N'``; a CUDA device is
    checked to exist (through gpufilt's CUDA module, else cupy or torch; if
    none of them can tell, ``ValueError``). readonly: consumers see the
    memory as read-only (numpy refuses writes, gpufilt refuses it as output).
    owner: any object, kept alive while the ExternalArray or any view made
    from it lives. stream: for device memory, the CUDA stream (int) the data
    is ready on; exposed as CAI's ``stream`` and waited on for DLPack.

    Raises ValueError for a null pointer with a non-empty shape, negative
    dimensions, strides that are not multiples of the item size or do not
    match the shape, bad device strings and devices that do not exist;
    TypeError for unknown or unsupported dtypes and wrongly typed arguments.
    """
    address = _address(ptr)
    dt = _dtype(dtype)
    dims = _shape(shape)
    byte_strides = _strides(strides, dims, dt.itemsize)
    kind, device_id = _device(device)
    if address == 0 and _size(dims) > 0:
        raise ValueError(f"ptr is NULL but shape {dims} has {_size(dims)} elements")
    if not isinstance(readonly, (bool, np.bool_)):
        raise TypeError(f"readonly must be a bool, not {type(readonly).__name__}")
    if stream is not None:
        if kind != "cuda":
            raise ValueError("stream is for device memory; host arrays take stream=None")
        stream = _stream(stream)
    return ExternalArray(address, dims, byte_strides, dt, kind, device_id, bool(readonly), stream, owner)


def _address(ptr):
    if isinstance(ptr, bool):
        raise TypeError("ptr must be an int address or a ctypes pointer, not bool")
    if ptr is None:
        return 0
    if isinstance(ptr, (ctypes._Pointer, ctypes.c_void_p, ctypes.c_char_p, ctypes.Array)):
        return ctypes.cast(ptr, ctypes.c_void_p).value or 0
    try:
        address = operator.index(ptr)
    except TypeError:
        raise TypeError(f"ptr must be an int address or a ctypes pointer, not {type(ptr).__name__}") from None
    if address < 0 or address >= 1 << 64:
        raise ValueError(f"ptr {address} is not a valid address (0 <= ptr < 2**64)")
    return address


def _dtype(dtype):
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"unknown dtype {dtype!r}; gpufilt wraps bool, int8..int64, uint8..uint64, "
                        "float16/32/64 and complex64/128") from None
    if dt.kind not in _DLPACK_CODES or dt.fields is not None or dt.subdtype is not None:
        raise TypeError(f"unsupported dtype {dt}; gpufilt wraps bool, int8..int64, uint8..uint64, "
                        "float16/32/64 and complex64/128")
    if not dt.isnative:
        raise TypeError(f"dtype {dt.str} has non-native byte order; gpufilt wraps native byte order only")
    return dt


def _shape(shape):
    try:
        dims = (operator.index(shape),)
    except TypeError:
        try:
            dims = tuple(operator.index(n) for n in shape)
        except TypeError:
            raise TypeError(f"shape must be an int or a sequence of ints, not {shape!r}") from None
    for n in dims:
        if n < 0:
            raise ValueError(f"shape {dims} has a negative dimension {n}")
    if len(dims) > 32:
        raise ValueError(f"shape has {len(dims)} dimensions; gpufilt handles at most 32")
    if _size(dims) >= 1 << 63:
        raise ValueError(f"shape {dims} has more elements than 64-bit indexing allows")
    return dims


def _size(dims):
    size = 1
    for n in dims:
        size *= n
    return size


def _strides(strides, dims, itemsize):
    if strides is None:
        return None
    try:
        st = tuple(operator.index(s) for s in strides)
    except TypeError:
        raise TypeError(f"strides must be None or a sequence of ints (bytes), not {strides!r}") from None
    if len(st) != len(dims):
        raise ValueError(f"strides {st} have {len(st)} entries for {len(dims)} dimensions")
    for s in st:
        if s % itemsize:
            raise ValueError(f"stride {s} bytes is not a multiple of the item size {itemsize}")
    return st


def _device(device):
    if not isinstance(device, str):
        raise TypeError(f"device must be 'cpu', 'cuda' or 'cuda:N', not {device!r}")
    text = device.strip().lower()
    if text == "cpu":
        return "cpu", 0
    head, _, index = text.partition(":")
    if head != "cuda" or (index and not index.isdigit()):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', not {device!r}")
    device_id = int(index) if index else 0
    count, source = _cuda_device_count()
    if count is None:
        raise ValueError(f"cannot check that CUDA device {device_id} exists: {source}")
    if device_id >= count:
        raise ValueError(f"CUDA device {device_id} does not exist ({source} reports {count} device(s))")
    return "cuda", device_id


def _cuda_device_count():
    """(number of CUDA devices, who said so), or (None, why nobody can)."""
    from . import _dispatch
    if _dispatch._cuda is not None:
        facts = _dispatch._cuda.runtime_info()
        return len(facts.get("devices", ())), "gpufilt's CUDA runtime"
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount(), "cupy"
    except ImportError:
        pass
    except Exception:  # cupy without a driver: no devices
        return 0, "cupy"
    try:
        import torch
        return torch.cuda.device_count(), "torch"
    except ImportError:
        pass
    return None, (f"{_dispatch._cuda_error}, and neither cupy nor torch is installed to count devices")


def _stream(stream):
    from ._dispatch import resolve_stream
    stream = resolve_stream(stream, None)  # int, cupy or torch stream -> int; TypeError otherwise
    if stream == 0:
        raise ValueError("stream 0 is ambiguous in the CUDA array interface; pass 1 for the legacy "
                         "default stream, 2 for the per-thread default stream, or None")
    return stream

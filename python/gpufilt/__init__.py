"""gpufilt: scipy.ndimage filters on CPU and CUDA, on any array, zero-copy.

Arrays come in through DLPack, ``__cuda_array_interface__`` or the buffer
protocol; work runs where the data lives; results come back as arrays of the
caller's own library sharing gpufilt's output memory.
"""
from . import _core
from ._errors import ArgumentError, CudaError
from ._dispatch import describe
from ._external import ExternalArray, from_pointer
from ._info import info
from . import ndimage

__version__ = _core.__version__


def _check_environment():
    """Warns of gpufilt's environment variables set to values it ignores."""
    import os
    import warnings
    isa = os.environ.get("GPUFILT_CPU_ISA", "")
    if isa and isa.lower() not in ("baseline", "sse2", "avx2", "avx512"):
        warnings.warn(f"GPUFILT_CPU_ISA={isa!r} is not 'baseline' (or 'sse2'), 'avx2' or 'avx512'; "
                      "ignored: the CPU kernels use the widest instructions the CPU has", RuntimeWarning,
                      stacklevel=3)
    pool = os.environ.get("GPUFILT_CPU_POOL_BYTES", "")
    if pool and not pool.isdigit():
        warnings.warn(f"GPUFILT_CPU_POOL_BYTES={pool!r} is not a whole number of bytes; ignored: the CPU "
                      "result pool keeps up to its default (gpufilt.info()['cpu']['pool'])", RuntimeWarning,
                      stacklevel=3)


_check_environment()


def free_cpu_pool() -> None:
    """Returns the CPU result pool's free blocks to the system.

    Large CPU results (8 MiB and up) are views of blocks of gpufilt's result
    pool; once dropped, a block is kept (up to ``GPUFILT_CPU_POOL_BYTES``,
    default 1 GiB) to serve the next large result without page faults.

    Returns
    -------
    None

    Examples
    --------
    >>> import gpufilt
    >>> gpufilt.free_cpu_pool()
    >>> gpufilt.info()["cpu"]["pool"]["free_bytes"]
    0
    """
    _core.free_cpu_pool()


def get_include():
    """The folder holding gpufilt's C++ headers (``gpufilt/external_array.hpp``),
    for C++ programs that embed Python; CMake users ``find_package(gpufilt)``
    with ``gpufilt_DIR`` from ``python -m gpufilt --cmake-dir``.

    Returns
    -------
    path : str

    Examples
    --------
    >>> import os, gpufilt
    >>> os.path.basename(gpufilt.get_include())
    'include'
    """
    import os
    return os.path.join(os.path.dirname(__file__), "include")


def get_cmake_dir():
    """The folder holding ``gpufiltConfig.cmake`` (target ``gpufilt::headers``).

    Returns
    -------
    path : str

    Examples
    --------
    >>> import os, gpufilt
    >>> os.path.basename(gpufilt.get_cmake_dir())
    'gpufilt'
    """
    import os
    return os.path.join(os.path.dirname(__file__), "share", "cmake", "gpufilt")


__all__ = ["ArgumentError", "CudaError", "ExternalArray", "describe", "free_cpu_pool", "from_pointer",
           "get_cmake_dir", "get_include", "info", "ndimage", "__version__"]

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
from ._core import free_cpu_pool
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


def get_include():
    """The folder holding gpufilt's C++ headers (``gpufilt/external_array.hpp``),
    for C++ programs that embed Python; CMake users ``find_package(gpufilt)``
    with ``gpufilt_DIR`` from ``python -m gpufilt --cmake-dir``."""
    import os
    return os.path.join(os.path.dirname(__file__), "include")


def get_cmake_dir():
    """The folder holding ``gpufiltConfig.cmake`` (target ``gpufilt::headers``)."""
    import os
    return os.path.join(os.path.dirname(__file__), "share", "cmake", "gpufilt")


__all__ = ["ArgumentError", "CudaError", "ExternalArray", "describe", "free_cpu_pool", "from_pointer", "get_cmake_dir",
           "get_include", "info", "ndimage", "__version__"]

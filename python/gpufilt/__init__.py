"""gpufilt: scipy.ndimage filters on CPU and CUDA, on any array, zero-copy.

Arrays come in through DLPack, ``__cuda_array_interface__`` or the buffer
protocol; work runs where the data lives; results come back as arrays of the
caller's own library sharing gpufilt's output memory.
"""
from . import _core
from ._errors import CudaError
from ._dispatch import describe
from ._info import info
from . import ndimage

__version__ = _core.__version__

__all__ = ["CudaError", "describe", "info", "ndimage", "__version__"]

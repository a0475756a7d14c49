"""Exceptions gpufilt raises beyond the builtin ones."""


class CudaError(RuntimeError):
    """A CUDA runtime call or kernel launch failed.

    Carries the CUDA error ``name`` (e.g. ``cudaErrorMemoryAllocation``), its
    numeric ``code`` and the C++ source location that detected it.
    """

    def __init__(self, message, name=None, code=None, file=None, line=None):
        super().__init__(message)
        self.name = name
        self.code = code
        self.file = file
        self.line = line


class ArgumentError(ValueError, RuntimeError):
    """A bad argument where scipy.ndimage raises RuntimeError.

    scipy.ndimage raises RuntimeError for some argument mistakes (a sequence
    of the wrong length, a footprint of the wrong rank, a real output for a
    complex result, a mode sequence where one mode is needed) and ValueError
    for others. This class derives from both, so code written for scipy
    (``except RuntimeError``) and code written for gpufilt's own rule that a
    bad value raises ValueError both catch it.
    """

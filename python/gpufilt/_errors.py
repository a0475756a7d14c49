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

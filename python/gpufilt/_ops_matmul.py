"""gpufilt.ops.matmul: matrix products on BLAS, on CPU and CUDA arrays.

No GEMM is written here. The CPU runs on the BLAS numpy itself has loaded
(numpy's wheels bundle scipy-openblas64) and CUDA on cuBLAS
(``libcublas.so.13``); both are found at run time, so neither is a dependency
of gpufilt, which imports where there is no GPU, driver or toolkit.
"""
from __future__ import annotations

import glob
import importlib
import os
import sys
from typing import Any

from . import _dispatch, _docs
from ._dispatch import Operand
from ._range_errors import ops_backend

__all__ = ["matmul"]

_CUBLAS = "libcublas.so.13"
_blas_by_module = {}  # kernel module name -> what blas_load found


@_docs.numpy_sections(
    [("a, b : array", "2-D matrices or 3-D stacks of them, of one dtype and device."),
     ("trans_a, trans_b : bool, optional", "Multiply by the transpose of a or b (of their last two axes)."),
     "out", "stream"],
    ("result : array", "op(a) @ op(b), of a's library on a's device; out itself when given."), """
    >>> import numpy as np
    >>> from gpufilt import ops
    >>> a = np.arange(6.0).reshape(2, 3)
    >>> ops.matmul(a, a, trans_b=True)
    array([[ 5., 14.],
           [14., 50.]])
    """)
def matmul(a: Any, b: Any, trans_a: bool = False, trans_b: bool = False, out: Any = None, *,
           stream: Any = None) -> Any:
    """Matrix product ``op(a) @ op(b)``, as ``numpy.matmul`` computes it.

    ``a`` and ``b`` are 2-D matrices or 3-D stacks of matrices; ``op``
    transposes the last two axes when ``trans_a`` / ``trans_b`` is true
    (BLAS reads the transpose, nothing is copied). A 2-D operand, or a stack
    of one, broadcasts against the other's stack.

    Dtypes: float32 and float64 on the CPU; float16, bfloat16 (torch),
    float32 and float64 on CUDA, where 16-bit types accumulate in float32 and
    float32 runs without TF32 (cupy's and numpy's results, not
    ``torch.backends.cuda.matmul.allow_tf32``'s). ``a``, ``b`` and ``out``
    share one dtype.

    Layouts: any strides BLAS can express, i.e. a unit stride in one of the
    last two axes and a leading dimension at least the other extent
    (C or Fortran order, transposed views, slices of whole rows or columns);
    other arrays raise ValueError rather than being copied silently.

    ``out`` (optional) receives the result in place and is returned; it must
    not share memory with ``a`` or ``b``. Otherwise the result is a new array
    of ``a``'s library on ``a``'s device. CUDA calls run on ``stream`` (an
    int, or a cupy/torch stream), else the current stream of ``a``'s library,
    and never block the host; the first call on a device creates its cuBLAS
    handle (an allocation), so make it before capturing a CUDA graph.
    """
    src, other = Operand(a, "a"), Operand(b, "b")
    module, stream = ops_backend(src, stream)
    trans_a, trans_b = bool(trans_a), bool(trans_b)
    shape = module.matmul_shape(src.shape, other.shape, trans_a, trans_b)
    blas_info(module)
    if out is None:
        result = _dispatch.allocate_like(src, src.dtype, shape)
        module.matmul(src.obj, other.obj, result, trans_a, trans_b, stream)
        return _dispatch.hand_back(result, src)
    module.matmul(src.obj, other.obj, Operand(out, "out").obj, trans_a, trans_b, stream)
    return out


def blas_info(module):
    """What `module`'s (``_core``'s or ``_cuda``'s) matmul runs on: a dict
    with the ``library`` file, the ``gemm`` symbol and its ``int_bits``.
    Found once; RuntimeError saying how to install a BLAS when there is none."""
    info = _blas_by_module.get(module.__name__)
    if info is None:
        cuda = module is not _dispatch._core
        info = dict(module.blas_load(_cublas_candidates() if cuda else _openblas_wheel_libraries()))
        info["library"] = os.path.realpath(info["library"])
        _blas_by_module[module.__name__] = info
    return info


def _openblas_wheel_libraries():
    """Library files of the scipy-openblas wheels, if installed: the fallback
    when numpy's own BLAS has no CBLAS (``pip install gpufilt[blas]``)."""
    files = []
    for name in ("scipy_openblas64", "scipy_openblas32"):
        try:
            wheel = importlib.import_module(name)
        except ImportError:
            continue
        lib_dir = wheel.get_lib_dir()
        files += sorted(glob.glob(os.path.join(lib_dir, "lib*.so*")) + glob.glob(os.path.join(lib_dir, "lib*.dylib")))
    return files


def _cublas_candidates():
    """Where libcublas.so.13 may lie besides the loader's own path: the
    nvidia-cublas wheel (CUDA 13 wheels share nvidia/cu13/lib) and the CUDA
    toolkit (CUDA_PATH, CUDA_HOME, /usr/local/cuda)."""
    places = [os.path.join(root, "nvidia", sub) for root in sys.path if root
              for sub in ("cu13/lib", "cublas/lib")]
    for var in ("CUDA_PATH", "CUDA_HOME"):
        if os.environ.get(var):
            places += [os.path.join(os.environ[var], "lib64"), os.path.join(os.environ[var], "lib")]
    places.append("/usr/local/cuda/lib64")
    return [os.path.join(p, _CUBLAS) for p in places if os.path.isfile(os.path.join(p, _CUBLAS))]

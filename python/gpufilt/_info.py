"""gpufilt.info(): how gpufilt was built and what it can use here."""
from __future__ import annotations

import importlib
import platform

from . import _core, _dispatch, _docs

_LIBRARIES = ("numpy", "scipy", "cupy", "torch", "jax", "numba")


def _library_versions():
    versions = {}
    for name in _LIBRARIES:
        try:
            versions[name] = importlib.import_module(name).__version__
        except Exception:  # not installed, or broken: report as absent
            versions[name] = None
    return versions


@_docs.numpy_sections(
    [],
    ("facts : dict", "Keys 'version', 'build', 'cpu', 'cuda', 'libraries', 'platform', 'python'."), """
    >>> import gpufilt
    >>> facts = gpufilt.info()
    >>> facts["version"] == gpufilt.__version__
    True
    """)
def info() -> dict:
    """Build and runtime facts: gpufilt version; build (CUDA on/off,
    architectures, compilers, OpenMP); the vector instructions the CPU
    kernels use and the CPU supports ("cpu": "baseline", "avx2" or "avx512";
    GPUFILT_CPU_ISA caps them) and the CPU result pool's free and most kept
    bytes (GPUFILT_CPU_POOL_BYTES); the CUDA driver, runtime and devices, or the
    exact reason no device is usable; versions of the array libraries."""
    build = dict(_core.build_info())
    cuda = _dispatch._cuda
    if cuda is None:
        build["cuda"] = False
        runtime = {"usable": False, "unusable_reason": _dispatch._cuda_error, "devices": []}
    else:
        build["cuda"] = True
        build.update(cuda.build_info())
        runtime = dict(cuda.runtime_info())
        runtime["usable"] = not runtime["unusable_reason"]
    return {
        "version": build.pop("version"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "build": build,
        "cpu": dict(_core.cpu_isa_info(), pool=dict(_core.cpu_pool_info())),
        "cuda": runtime,
        "libraries": _library_versions(),
    }

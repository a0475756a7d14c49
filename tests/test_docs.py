"""The examples in gpufilt's docstrings and README run and print what they say."""
import doctest
import importlib
import inspect
import os
import re

import numpy as np

import gpufilt
from gpufilt import ndimage

from _helpers import CUDA_USABLE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def public_functions():
    """(qualified name, function) of gpufilt's public functions: the top
    level, ndimage, ops, and gpufilt.torch where torch is installed."""
    from gpufilt import ops
    modules = [gpufilt, ndimage, ops]
    if importable("torch"):
        modules.append(importlib.import_module("gpufilt.torch"))
    for module in modules:
        for name in module.__all__:
            obj = getattr(module, name)
            if callable(obj) and not isinstance(obj, type) or name == "ExternalArray":
                yield f"{module.__name__}.{name}", obj


def test_every_public_function_has_a_numpy_style_docstring_with_an_example():
    names = []
    for name, func in public_functions():
        doc = inspect.getdoc(func) or ""
        sections = ("Examples\n--------",) if isinstance(func, type) else ("Returns\n-------", "Examples\n--------")
        for section in sections:
            assert section in doc, (name, section)
        names.append(name)
    assert len(names) >= len(ndimage.__all__) + 16 + 5


def test_every_filter_documents_the_device_rules():
    for name in ndimage.__all__:
        func = getattr(ndimage, name)
        doc = func.__doc__
        sections = ["Parameters\n----------"]
        for parameter in ("stream", "threads", "output"):
            if parameter in inspect.signature(func).parameters:
                sections.append(f"{parameter} :")
        for section in sections:
            assert section in doc, (name, section)


def docstring_modules():
    import gpufilt._dispatch
    import gpufilt._external
    import gpufilt._generic
    import gpufilt._info
    import gpufilt._ops_array
    import gpufilt._ops_matmul
    import gpufilt._ops_nn
    import gpufilt._range_errors
    modules = [gpufilt, ndimage, gpufilt._dispatch, gpufilt._external, gpufilt._generic, gpufilt._info,
               gpufilt._ops_array,
               gpufilt._ops_matmul, gpufilt._ops_nn, gpufilt._range_errors]
    if importable("torch"):
        modules.append(importlib.import_module("gpufilt.torch"))
    if importable("dask") and importable("zarr"):
        modules += [importlib.import_module("gpufilt.dask"), importlib.import_module("gpufilt._zarr")]
    return modules


def test_docstring_examples_run_as_written():
    printoptions = np.get_printoptions()
    np.set_printoptions(legacy=False)
    attempted = 0
    try:
        for module in docstring_modules():
            result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
            assert result.failed == 0, module.__name__
            attempted += result.attempted
    finally:
        np.set_printoptions(**printoptions)
    assert attempted >= 3 * len(ndimage.__all__) + 3 * 16


def readme_blocks():
    """The README's python code blocks, in order."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def needs_gpu(block):
    return "cuda" in block or "cupy" in block


def needs_torch(block):
    return "torch" in block


def importable(module):
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def test_readme_has_cpu_examples_beside_gpu_ones():
    blocks = readme_blocks()
    assert sum(not needs_gpu(b) and not needs_torch(b) for b in blocks) >= 2
    assert sum(not needs_gpu(b) and needs_torch(b) for b in blocks) >= 2
    assert sum(needs_gpu(b) for b in blocks) >= 3


def test_readme_examples_run():
    """Every README block that needs no GPU runs, in order, in one namespace
    (as a reader pastes them); GPU blocks too where a GPU is usable, torch
    blocks where torch is installed."""
    namespace = {}
    gpu = CUDA_USABLE and importable("cupy")
    ran = 0
    for block in readme_blocks():
        if (needs_gpu(block) and not gpu) or (needs_torch(block) and not importable("torch")):
            continue
        exec(compile(block, "README.md", "exec"), namespace)
        ran += 1
    assert ran >= 2

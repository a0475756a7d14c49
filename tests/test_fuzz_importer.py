"""Property-based fuzzing of the array importer and the filters' argument
checks (issue 32): whatever view, descriptor or producer comes in, the
outcome is scipy.ndimage's result or a clean Python exception, and the
caller's data is left as it was.

Lies stay detectable or inside a real allocation: a descriptor that points
outside the memory it came from would crash any library, and the importer
cannot know the extent of foreign memory. So in-bounds views are filtered
and compared with scipy; descriptors with arbitrary pointers go only
through gpufilt.describe(), which reads metadata and never the memory."""
from __future__ import annotations

import numpy as np
import scipy.ndimage as sp
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import as_strided

import gpufilt
from gpufilt import _core
from gpufilt import ndimage as gnd

CLEAN = (ValueError, TypeError, MemoryError, BufferError, RuntimeError)
FUZZ = settings(max_examples=200, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

DTYPES = ["f8", "f4", "f2", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "?", "c8", "c16",
          ">f8", ">i4", ">u2", "<f4", "O", "U3", "M8[s]", "V8"]
FILTERS = {
    "uniform_filter": lambda m, x, **kw: m.uniform_filter(x, 3, **kw),
    "minimum_filter": lambda m, x, **kw: m.minimum_filter(x, size=2, **kw),
    "median_filter": lambda m, x, **kw: m.median_filter(x, size=3, **kw),
    "gaussian_filter1d": lambda m, x, **kw: m.gaussian_filter1d(x, 1.0, axis=-1, **kw),
}


def outcome(call):
    """('ok', result, '') or ('error', exception type, message); other
    exceptions propagate and fail the test."""
    try:
        return "ok", call(), ""
    except CLEAN as e:
        return "error", type(e), str(e)


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "fc" or b.dtype.kind in "fc":
        return a.shape == b.shape and np.allclose(a, b, rtol=1e-3, atol=1e-3, equal_nan=True)
    return a.shape == b.shape and (a == b).all()


@st.composite
def strided_views(draw, shape=None):
    """A view of a fresh buffer with random shape, element strides (negative,
    zero, larger than the row) and offset, always inside the buffer; writable
    or not."""
    dtype = np.dtype(draw(st.sampled_from(DTYPES[:18])))
    if shape is None:
        ndim = draw(st.integers(0, 3))
        shape = tuple(draw(st.lists(st.integers(0, 6), min_size=ndim, max_size=ndim)))
    steps = draw(st.lists(st.integers(-9, 9), min_size=len(shape), max_size=len(shape)))
    lo = sum(s * (n - 1) for s, n in zip(steps, shape) if s < 0 and n > 0)
    hi = sum(s * (n - 1) for s, n in zip(steps, shape) if s > 0 and n > 0)
    extra = draw(st.integers(0, 3))
    base = np.zeros(hi - lo + 1 + extra, dtype)
    values = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).integers(-50, 50, base.shape)
    base[...] = values.astype(dtype) if dtype.kind != "b" else values > 0
    start = -lo + draw(st.integers(0, extra))
    view = as_strided(base[start:], shape, [s * dtype.itemsize for s in steps], writeable=draw(st.booleans()))
    return base, view


@FUZZ
@given(data=strided_views(), name=st.sampled_from(sorted(FILTERS)),
       mode=st.sampled_from(["reflect", "wrap", "constant"]))
def test_any_view_filters_as_scipy_does(data, name, mode):
    base, view = data
    before = base.copy()
    got = outcome(lambda: FILTERS[name](gnd, view, mode=mode))
    expected = outcome(lambda: FILTERS[name](sp, view, mode=mode))
    assert (base == before).all()
    if expected[0] == "ok":
        assert got[0] == "ok" and same(got[1], expected[1]), (got, expected)
    # where scipy refuses, gpufilt may refuse too or compute (its dtypes differ)


@FUZZ
@given(st.data())
def test_any_output_view_is_written_correctly_or_refused(data):
    base, view = data.draw(strided_views())
    out_base, out = data.draw(strided_views(shape=view.shape))
    readonly = not out.flags.writeable
    before, out_before = base.copy(), out_base.copy()
    got = outcome(lambda: gnd.uniform_filter(view, 3, output=out))
    assert (base == before).all()
    if got[0] == "error":
        assert (out_base == out_before).all()  # a refusal writes nothing
        if "overlap" in got[2]:
            assert not readonly and _numpy_rule_overlaps(out), got[2]
        return
    assert not readonly and _distinct(out)
    expected = outcome(lambda: sp.uniform_filter(view, 3, output=np.empty(out.shape, out.dtype)))
    if expected[0] == "ok":
        assert same(out, expected[1])


def _offsets(a):
    return sorted(sum(i * s for i, s in zip(index, a.strides)) for index in np.ndindex(a.shape))


def _distinct(a):
    """True when every element of `a` has bytes of its own (by enumeration)."""
    offsets = _offsets(a)
    return all(q - p >= a.itemsize for p, q in zip(offsets, offsets[1:]))


def _numpy_rule_overlaps(a):
    """numpy's conservative test, written out: axes of more than one element
    sorted by |stride|, each must reach past what the smaller ones span."""
    if a.size <= 1:
        return False
    reach = a.itemsize
    for step, n in sorted((abs(s), n) for s, n in zip(a.strides, a.shape) if n > 1):
        if step < reach:
            return True
        reach += step * (n - 1)
    return False


# ------------------------------------------------------- lying producers


class ArrayInterface:
    """A host producer exposing a dict over a real buffer (kept alive)."""

    def __init__(self, owner, interface):
        self.owner = owner
        self.__array_interface__ = interface


class CudaArrayInterface:
    def __init__(self, interface):
        self.__cuda_array_interface__ = interface


huge = st.sampled_from([2**31, 2**62, 2**63 - 1, -(2**63), 2**63, 2**64, -(2**40)])
junk = st.one_of(st.none(), st.text(max_size=3), st.floats(allow_nan=False), st.lists(st.integers(), max_size=2))
BAD_TYPESTRS = ["<f16", "<U4", "<M8", "xx", "", "<f", "<i99999999999", ">c16", "|V8", "<b1", "|b1", "<c8"]


@st.composite
def interfaces(draw, ptr, pointer_lies):
    """A descriptor dict: valid fields, one of which may be replaced by a lie."""
    dtype = np.dtype(draw(st.sampled_from(DTYPES[:18])))
    ndim = draw(st.integers(0, 3))
    shape = draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim))
    d = {"shape": tuple(shape), "typestr": dtype.str, "data": (ptr, False), "version": 3, "strides": None}
    lie = draw(st.sampled_from(["none", "shape", "strides", "typestr", "version", "missing", "data", "mask"]))
    if lie == "shape":
        d["shape"] = tuple(draw(st.lists(st.one_of(st.integers(-3, 4), huge, junk), min_size=ndim, max_size=ndim)))
    elif lie == "strides":
        d["strides"] = tuple(draw(st.lists(st.one_of(huge, st.integers(-64, 64), junk), min_size=ndim,
                                           max_size=ndim + draw(st.integers(0, 1)))))
    elif lie == "typestr":
        d["typestr"] = draw(st.one_of(st.sampled_from(BAD_TYPESTRS), junk))
    elif lie == "version":
        d["version"] = draw(st.one_of(st.integers(-2, 5), junk))
    elif lie == "missing":
        del d[draw(st.sampled_from(["shape", "typestr", "data", "version"]))]
    elif lie == "data":
        d["data"] = draw(st.one_of(st.tuples(st.sampled_from(pointer_lies), st.booleans()), junk))
    elif lie == "mask":
        d["mask"] = draw(st.one_of(st.none(), junk))
    return d


@FUZZ
@given(st.data())
def test_lying_cuda_array_interfaces_are_refused_cleanly(data):
    # describe() reads the descriptor only: any pointer is safe here.
    ptr = data.draw(st.sampled_from([2**40, 8, 2**63 - 64]))
    d = data.draw(interfaces(ptr, pointer_lies=[0, 2**63 - 8, -8, 2**64]))
    got = outcome(lambda: gpufilt.describe(CudaArrayInterface(d)))
    if got[0] == "ok":  # then the importer saw what was declared, and it fits
        seen = got[1]
        assert seen["shape"] == tuple(d["shape"]) and seen["device"] == "cuda"
        if 0 not in seen["shape"]:
            lo = sum(s * (n - 1) for s, n in zip(seen["strides"], seen["shape"]) if s < 0)
            hi = sum(s * (n - 1) for s, n in zip(seen["strides"], seen["shape"]) if s > 0) + seen["itemsize"]
            assert seen["data"] != 0 and hi - lo < 2**63 and 0 <= seen["data"] + lo and seen["data"] + hi <= 2**64


def _declared_reach(d):
    """The bytes a host descriptor reaches from its pointer, as (lo, hi), or
    None where numpy refuses it anyway (types, keys, junk)."""
    try:
        item = np.dtype(d["typestr"]).itemsize
    except Exception:
        return None
    shape, strides = d.get("shape"), d.get("strides")
    if not isinstance(shape, tuple) or not all(type(n) is int and n >= 0 for n in shape):
        return None
    if 0 in shape:
        return 0, 0
    if strides is None:
        size = 1
        for n in shape:
            size *= n
        return 0, size * item
    if not isinstance(strides, tuple) or len(strides) != len(shape) or not all(type(s) is int for s in strides):
        return None
    lo = sum(s * (n - 1) for s, n in zip(strides, shape) if s < 0)
    return lo, sum(s * (n - 1) for s, n in zip(strides, shape) if s > 0) + item


@FUZZ
@given(st.data())
def test_lying_array_interfaces_over_real_memory(data):
    # The pointer is a real buffer's; a declaration either stays inside it or
    # is detectably absurd (beyond 64 bits); pointer lies are null or junk
    # (a wild pointer, or typestr '|O' over floats, crashes numpy itself).
    owner = np.arange(128, dtype="f8")
    before = owner.copy()
    d = data.draw(interfaces(owner.ctypes.data, pointer_lies=[0]))
    assume(d.get("typestr") != "|O")
    reach = _declared_reach(d) if "typestr" in d else None
    if reach is not None:
        lo, hi = reach
        assume((lo == 0 and hi <= owner.nbytes) or hi - lo >= 2**63 or max(abs(lo), abs(hi)) >= 2**63)
    obj = ArrayInterface(owner, d)
    got = outcome(lambda: gnd.uniform_filter(obj, 3))
    assert (owner == before).all()
    if got[0] == "ok":
        expected = outcome(lambda: sp.uniform_filter(np.asarray(obj), 3))
        assert expected[0] != "ok" or same(got[1], expected[1])  # scipy takes fewer dtypes (float16)


@FUZZ
@given(ptr=st.sampled_from([0, 8, 2**40, 2**64 - 8]),
       shape=st.lists(st.one_of(st.integers(0, 4), st.sampled_from([2**62, 2**63 - 1])), max_size=3),
       strides=st.lists(st.one_of(st.integers(-9, 9), st.sampled_from([2**31, 2**61, 2**62, -(2**62), 2**63 - 1])),
                        max_size=3),
       code_bits=st.sampled_from([(2, 64), (2, 32), (0, 8), (1, 16), (6, 8), (5, 128), (4, 16), (2, 24), (9, 8),
                                  (3, 64)]),
       device=st.sampled_from([1, 2, 3, 4, 13]), version=st.sampled_from([-1, 0, 1]))
def test_lying_dlpack_capsules_are_refused_cleanly(ptr, shape, strides, code_bits, device, version):
    # Capsules made by _core.dlpack_capsule (what ExternalArray exports) with
    # arbitrary fields; describe() reads the descriptor only.
    assume(len(strides) in (0, len(shape)))
    keep = np.zeros(1)
    capsule = _core.dlpack_capsule(keep, ptr, shape, strides, *code_bits, device, 0, False, version)
    got = outcome(lambda: gpufilt.describe(capsule))
    if got[0] == "ok":
        seen = got[1]
        assert seen["shape"] == tuple(shape)
        if 0 not in shape:
            lo = sum(s * (n - 1) for s, n in zip(seen["strides"], shape) if s < 0)
            hi = sum(s * (n - 1) for s, n in zip(seen["strides"], shape) if s > 0) + seen["itemsize"]
            assert seen["data"] != 0 and hi - lo < 2**63 and seen["data"] + hi <= 2**64

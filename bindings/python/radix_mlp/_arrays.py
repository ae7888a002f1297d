"""Conversions between Python/numpy inputs and the C arrays the library takes."""

import ctypes
import operator

import numpy as np

_U32_MAX = 0xFFFFFFFF
_u32_p = ctypes.POINTER(ctypes.c_uint32)
_f32_p = ctypes.POINTER(ctypes.c_float)


def as_u32(values, name):
    """A contiguous 1-D uint32 copy (or view) of ``values``: a list/tuple of ints or a numpy array
    of any integer dtype. Raises TypeError for non-integers and ValueError for a wrong shape or
    a value outside 0..2^32-1 (naming the first offending index)."""
    if isinstance(values, np.ndarray):
        array = values
    else:
        try:
            array = np.asarray(values)
        except (OverflowError, ValueError, TypeError) as e:
            raise ValueError("%s: not a 1-D sequence of integers (%s)" % (name, e)) from None
    if array.ndim != 1:
        raise ValueError("%s must be 1-dimensional, got %dD with shape %s" % (name, array.ndim, array.shape))
    if array.size == 0:
        return np.zeros(0, dtype=np.uint32)
    kind = array.dtype.kind
    if kind == "O":  # Python ints too large for int64
        out = np.empty(array.shape[0], dtype=np.uint32)
        for i, v in enumerate(array):
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                raise TypeError("%s must hold integers, got %r at index %d" % (name, v, i))
            v = operator.index(v)
            if v < 0 or v > _U32_MAX:
                raise ValueError("%s[%d]=%d is outside 0..2^32-1" % (name, i, v))
            out[i] = v
        return out
    if kind not in "iu":
        raise TypeError("%s must hold integers (any integer dtype), got dtype %s" % (name, array.dtype))
    if kind == "i":
        bad = np.flatnonzero(array < 0)
        if bad.size:
            raise ValueError("%s[%d]=%d is negative" % (name, bad[0], array[bad[0]]))
    if array.dtype.itemsize > 4:
        bad = np.flatnonzero(array > _U32_MAX)
        if bad.size:
            raise ValueError("%s[%d]=%d is outside 0..2^32-1" % (name, bad[0], array[bad[0]]))
    return np.ascontiguousarray(array, dtype=np.uint32)


def as_uint_scalar(value, name, bits):
    """An int in 0..2^bits-1 (bool refused)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("%s must be an integer, got %r" % (name, value))
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError("%s must be an integer, got %r" % (name, value)) from None
    if v < 0 or v >= 1 << bits:
        raise ValueError("%s=%d is outside 0..2^%d-1" % (name, v, bits))
    return v


def as_u32_scalar(value, name):
    """An int in 0..2^32-1 (bool refused)."""
    return as_uint_scalar(value, name, 32)


def as_f32_2d(values, name):
    """A C-contiguous float32 2-D array (converted from any real dtype)."""
    array = np.asarray(values)
    if array.ndim != 2:
        raise ValueError("%s must be 2-dimensional (rows, hidden), got shape %s" % (name, array.shape))
    if array.dtype.kind not in "fiu":
        raise TypeError("%s must hold real numbers, got dtype %s" % (name, array.dtype))
    return np.ascontiguousarray(array, dtype=np.float32)


def u32_ptr(array):
    """A uint32* to a contiguous uint32 array (NULL when empty)."""
    if array.size == 0:
        return None
    return array.ctypes.data_as(_u32_p)


def f32_ptr(array):
    return array.ctypes.data_as(_f32_p)


def void_ptr(array):
    return ctypes.c_void_p(array.ctypes.data)


def copy_u32(pointer, length):
    """A fresh numpy copy of ``length`` uint32 values at ``pointer`` (may be NULL when 0)."""
    if length == 0:
        return np.zeros(0, dtype=np.uint32)
    if not pointer:
        raise RuntimeError("radix_mlp: the library returned a NULL array of length %d" % length)
    return np.ctypeslib.as_array(pointer, shape=(length,)).copy()

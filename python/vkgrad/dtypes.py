"""Storage dtypes of the protocol and their numpy forms.

  protocol  numpy           bytes
  f32       float32         4
  f16       float16         2
  bf16      uint16 (bits)   2   numpy has no bfloat16: bf16 tensors are
                                uint16 arrays holding the bit patterns, and
                                a call says dtype="bf16" (to_bf16/from_bf16
                                convert).

The conversions match the daemon's and client/ref.c's: to_bf16 rounds to
nearest, ties to even, and keeps NaN a quiet NaN; from_bf16 is exact.
"""

import numpy as np

__all__ = ["to_bf16", "from_bf16", "normalize", "numpy_dtype", "itemsize", "TOLERANCE"]

# protocol name -> numpy dtype of the stored values
_NUMPY = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16), "bf16": np.dtype(np.uint16)}
_ALIASES = {"f32": "f32", "float32": "f32", "float": "f32",
            "f16": "f16", "float16": "f16", "half": "f16",
            "bf16": "bf16", "bfloat16": "bf16"}

# client/ref.h: the largest |got - want| relative to max|want| the tests accept
TOLERANCE = {"f32": 1e-4, "f16": 2e-3, "bf16": 1e-2}


def normalize(dtype):
    """'f32' | 'f16' | 'bf16' for a name ("float32", "bfloat16", ...), a numpy
    dtype or type (float32, float16; uint16 is ambiguous: say "bf16")."""
    if isinstance(dtype, str):
        try:
            return _ALIASES[dtype.lower()]
        except KeyError:
            raise ValueError("dtype %r is not one of f32, f16, bf16" % dtype) from None
    d = np.dtype(dtype)
    if d == np.float32:
        return "f32"
    if d == np.float16:
        return "f16"
    if d == np.uint16:
        raise ValueError("dtype uint16 is ambiguous: pass dtype='bf16' for bf16 bit patterns")
    raise ValueError("dtype %s is not served: f32 (float32), f16 (float16) or bf16 "
                     "(uint16 bits with dtype='bf16')" % d)


def numpy_dtype(dtype):
    """The numpy dtype a tensor of this protocol dtype is stored as."""
    return _NUMPY[normalize(dtype)]


def itemsize(dtype):
    return _NUMPY[normalize(dtype)].itemsize


def to_bf16(a):
    """float array -> uint16 bf16 bit patterns (round to nearest even)."""
    f = np.ascontiguousarray(a, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
    r = np.where(nan, ((u >> 16) | 0x40) & 0xFFFF, r)
    return r.astype(np.uint16)


def from_bf16(a):
    """uint16 bf16 bit patterns -> float32 (exact)."""
    u = np.ascontiguousarray(a, dtype=np.uint16)
    return (u.astype(np.uint32) << 16).view(np.float32)


def to_float(a, dtype):
    """Stored values of a protocol dtype as float32/float16 numpy (bf16 widened)."""
    return from_bf16(a) if normalize(dtype) == "bf16" else np.asarray(a)

"""Device tensors (proto/README.md, "Device tensors"): vkgrad.Tensor, and
the Client's tensor_* methods (a mixin of Client) over libvkgrad's
vkg_tensor_* calls.

A device tensor lives in the GPU's memory, rows × cols of one dtype, and
belongs to the connection that made it (a reconnect, a fork or close()
leaves it behind: its id then answers bad_tensor). Every tensor op is
ordered with the connection's jobs: a write, a job naming the tensor and a
read, submitted without waiting, see each other's results.
"""

from __future__ import annotations

import ctypes
from typing import Any, Optional, Tuple, Union

import numpy as np

from . import _lib
from ._error import Error
from ._future import Future
from ._lib import lib
from ._region import Region
from .dtypes import normalize, numpy_dtype

__all__ = ["Tensor", "VKG_DEVICE_TENSOR"]

# vkg_tensor.region naming a device tensor whose id is in offset (vkgrad.h)
VKG_DEVICE_TENSOR = (1 << 64) - 2

_U64 = ctypes.c_uint64
_U64P = ctypes.POINTER(ctypes.c_uint64)
_ERR = ctypes.POINTER(_lib.vkg_error)
_decl = _lib._decl
_decl("vkg_tensor_new", ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, _U64, _U64, _U64P, _ERR)
for _n in ("vkg_submit_tensor_write", "vkg_submit_tensor_read"):
    _decl(_n, ctypes.c_int, ctypes.c_void_p, _U64, _U64, _U64, _U64P, _ERR)
_decl("vkg_submit_tensor_free", ctypes.c_int, ctypes.c_void_p, _U64, _U64P, _ERR)


class Tensor(int):
    """A device tensor's id, as a job operand: pass it where an array goes
    (x, dy, w, b, or an output in out={...}); the job reads or writes the
    tensor in place. Client.tensor_new returns one that knows its dtype
    and shape; Tensor(id) wraps a bare id (its shape then comes from the
    job's other operands, or dims=)."""

    dtype: Optional[str]
    shape: Optional[Tuple[int, int]]

    def __new__(cls, tensor: int, dtype: Any = None, rows: Optional[int] = None,
                cols: Optional[int] = None):
        if isinstance(tensor, bool) or not isinstance(tensor, (int, np.integer)):
            raise TypeError("a tensor id is an int, not %s" % type(tensor).__name__)
        if not 0 <= int(tensor) < VKG_DEVICE_TENSOR:
            raise ValueError("tensor id %d is out of range" % int(tensor))
        t = super().__new__(cls, int(tensor))
        src = tensor if isinstance(tensor, Tensor) else None
        t.dtype = normalize(dtype) if dtype is not None else (src.dtype if src else None)
        if rows is not None and cols is not None:
            t.shape = (int(rows), int(cols))
        else:
            t.shape = src.shape if src else None
        return t

    @property
    def nbytes(self) -> Optional[int]:
        """rows × cols × element size, when dtype and shape are known."""
        if self.dtype is None or self.shape is None:
            return None
        return self.shape[0] * self.shape[1] * numpy_dtype(self.dtype).itemsize

    def __repr__(self):
        if self.shape is None:
            return "vkgrad.Tensor(%d)" % int(self)
        return "vkgrad.Tensor(%d, %s, %d x %d)" % (int(self), self.dtype, *self.shape)


class _TensorOps:
    """Client's device-tensor methods (vkgrad.Client inherits them)."""

    def tensor_new(self, dtype: Any, rows: int, cols: int) -> Tensor:
        """A new device tensor of rows × cols elements of dtype ("f32",
        "f16", "bf16" or their numpy types), reading as zeros. Returns its
        id as a Tensor (an int that knows its dtype and shape)."""
        dt = normalize(dtype)
        for k, v in (("rows", rows), ("cols", cols)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise TypeError("%s must be an int, not %s" % (k, type(v).__name__))
            if v < 1:
                raise ValueError("%s must be at least 1, not %d" % (k, v))
        self._ensure()
        t = ctypes.c_uint64()
        err = _lib.vkg_error()
        try:
            rc = self._c(lib.vkg_tensor_new, dt.encode(), int(rows), int(cols), ctypes.byref(t),
                         ctypes.byref(err))
            if rc:
                raise self._fail(rc, err)
        finally:
            self._flush()
        return Tensor(t.value, dt, rows, cols)

    def _tensor_place(self, t, data, offset, write):
        """(region id, byte offset, pool Region or None, copies, keep) for
        data: a Region (with offset), a region id (with offset), or a numpy
        array (a region view: in place; else through a pool region)."""
        if isinstance(data, Region):
            if data.id is None:
                raise Error("io", "the region is closed")
            return data.id, int(offset), None, [], [data]
        if isinstance(data, (int, np.integer)) and not isinstance(data, bool):
            return int(data), int(offset), None, [], []
        if not isinstance(data, np.ndarray):
            raise TypeError("the client memory must be a Region, a region id or a numpy array, "
                            "not %s" % type(data).__name__)
        if offset:
            raise ValueError("offset is for a Region or a region id, not an array")
        want = getattr(t, "nbytes", None)
        if want is not None and data.nbytes != want:
            raise ValueError("the array has %d bytes; tensor %d holds %d" % (data.nbytes, t, want))
        if not write and not data.flags.writeable:
            raise ValueError("the array to read into is read-only")
        v = self._view_of(data)
        if v is not None:
            return v[0].id, v[1], None, [], [data]
        if self._pending:
            self._note_ready(self._drain())
        pool = self._pool_take(data.nbytes)
        flat = data.reshape(-1).view(np.uint8) if data.flags.c_contiguous else None
        if write:
            pool.ndarray((data.nbytes,), np.uint8, 0)[...] = (
                flat if flat is not None else np.ascontiguousarray(data).reshape(-1).view(np.uint8))
            self.bytes_copied += data.nbytes
            return pool.id, 0, pool, [], [data]
        # read: the bytes go into data when the job ends (Future._finish)
        return pool.id, 0, pool, [("dst", 0, data, data.shape)], [data]

    def _tensor_copy(self, fn, t, data, offset, write) -> Future:
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
            raise TypeError("the tensor must be a Tensor or an int id, not %s" % type(t).__name__)
        self._ensure()
        try:
            with self._lock:
                region, off, pool, copies, keep = self._tensor_place(t, data, offset, write)
                h = ctypes.c_uint64()
                err = _lib.vkg_error()
                gen = self._gen
                try:
                    rc = self._c(fn, int(t), region, off, ctypes.byref(h), ctypes.byref(err), gen=gen)
                    if rc:
                        raise self._fail(rc, err)
                except BaseException:
                    if pool is not None:
                        self._pool_release(pool)
                    raise
                npdt = data.dtype if isinstance(data, np.ndarray) else np.dtype(np.uint8)
                f = Future(self, h.value, npdt, pool, copies, {}, keep, gen)
                self._pending[f.handle] = f
                return f
        finally:
            self._flush()

    def submit_tensor_write(self, t: int, src: Union[Region, int, np.ndarray], offset: int = 0) -> Future:
        """Copy the tensor's bytes (rows × cols × element size) from client
        memory into it: src a Region (bytes from offset), a region id (with
        offset), or a numpy array of exactly those bytes (a region view is
        read in place, any other array is copied first). Returns a Future
        (result() {} once the tensor holds them)."""
        return self._tensor_copy(lib.vkg_submit_tensor_write, t, src, offset, True)

    def submit_tensor_read(self, t: int, dst: Union[Region, int, np.ndarray], offset: int = 0) -> Future:
        """Copy the tensor out into client memory (dst as src of
        submit_tensor_write; an array that is no region view is filled when
        the Future finishes). Returns a Future (result() {})."""
        return self._tensor_copy(lib.vkg_submit_tensor_read, t, dst, offset, False)

    def tensor_write(self, t: int, src: Union[Region, int, np.ndarray], offset: int = 0) -> None:
        """submit_tensor_write, waited for."""
        self.submit_tensor_write(t, src, offset).result()

    def tensor_read(self, t: int, dst: Union[Region, int, np.ndarray], offset: int = 0) -> None:
        """submit_tensor_read, waited for: the bytes are in dst on return."""
        self.submit_tensor_read(t, dst, offset).result()

    def submit_tensor_free(self, t: int) -> Future:
        """Free the tensor: its id is gone at once; its memory when the jobs
        already sent that use it end. Returns a Future (result() {})."""
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
            raise TypeError("the tensor must be a Tensor or an int id, not %s" % type(t).__name__)
        return self._submit_call(lib.vkg_submit_tensor_free, int(t))

    def tensor_free(self, t: int) -> None:
        """submit_tensor_free, waited for."""
        self.submit_tensor_free(t).result()

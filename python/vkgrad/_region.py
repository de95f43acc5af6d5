"""Region: shared memory registered with the daemon (vkgrad.Region)."""

from __future__ import annotations

import ctypes
import fcntl
import math
import mmap
import os
from typing import Any, Callable, Dict, Iterable, Optional, Protocol, Union

import numpy as np

from . import _lib
from ._lib import lib
from .dtypes import numpy_dtype


class _Owner(Protocol):
    """What a Region uses of the connection that made it (client.Client):
    named here so that this module does not import the one that imports it."""
    _lock: Any
    _regions: Dict[int, "Region"]
    _closed: bool
    _h: Any
    _dead: Any
    _c: Callable[..., int]
    _fail: Callable[..., BaseException]


class Region:
    """Shared memory registered with the daemon: a sealed memfd mapped with
    Python's mmap. Arrays from ndarray() are views of it; the memory lives as
    long as the Region or any view does, even after close(). The memfd stays
    open while the region is, so that a new connection (after a daemon
    restart, in a forked child) can register it again: id then changes."""

    def __init__(self, client: _Owner, nbytes: int, pooled: bool = False):
        nbytes = int(nbytes)
        if nbytes < 1:
            raise ValueError("region size must be at least 1 byte, not %d" % nbytes)
        self.nbytes = nbytes
        self.pooled = pooled
        self._client = client
        self.id: Optional[int] = None
        self._fd = os.memfd_create("vkgrad-py", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(self._fd, nbytes)
            # the daemon refuses memory that could shrink under the GPU
            fcntl.fcntl(self._fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
            self._mm = mmap.mmap(self._fd, nbytes, mmap.MAP_SHARED,
                                 mmap.PROT_READ | mmap.PROT_WRITE)
            probe = ctypes.c_char.from_buffer(self._mm)
            self.address = ctypes.addressof(probe)
            del probe
            try:
                self._register()
            except BaseException:
                self._mm.close()
                raise
        except BaseException:
            os.close(self._fd)
            self._fd = -1
            raise

    def _register(self):
        """Register the memfd on the client's current connection."""
        rid = ctypes.c_uint64()
        err = _lib.vkg_error()
        c = self._client
        rc = c._c(lib.vkg_region_register_fd, self._fd, self.nbytes, ctypes.byref(rid),
                  ctypes.byref(err))
        if rc:
            raise c._fail(rc, err)
        self.id = rid.value

    def ndarray(self, shape: Union[int, Iterable[int]], dtype: Any = "float32",
                offset: int = 0) -> np.ndarray:
        """A numpy view of the region's bytes [offset, offset + its size).
        dtype: a numpy dtype, or a protocol name ("f32", "f16", "bf16": bf16
        as uint16 bit patterns). offset must be a multiple of the element
        size (the daemon's rule for tensors)."""
        if isinstance(dtype, str) and dtype.lower() in ("f32", "f16", "bf16", "bfloat16"):
            dt = numpy_dtype(dtype)
        else:
            dt = np.dtype(dtype)
        shape = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)
        n = math.prod(shape) * dt.itemsize
        offset = int(offset)
        if offset < 0 or offset % dt.itemsize:
            raise ValueError("offset %d is not a non-negative multiple of the element size %d"
                             % (offset, dt.itemsize))
        if offset + n > self.nbytes:
            raise ValueError("%s %s at offset %d needs %d bytes; the region has %d"
                             % (shape, dt, offset, offset + n, self.nbytes))
        if self.id is None:
            raise ValueError("region is closed")
        # through a memoryview: numpy then holds a buffer export, so the
        # mapping cannot be closed under a live view (np.ndarray(buffer=mmap)
        # would let mmap.close() unmap it)
        n_items = math.prod(shape)
        return np.frombuffer(memoryview(self._mm), dt, n_items, offset).reshape(shape)

    def _drop(self):
        """Forget the region here (no request): the mapping goes with the
        last view, the memfd now."""
        self.id = None
        try:
            self._mm.close()
        except BufferError:
            pass  # views exist: the mapping is freed with the last one
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def close(self) -> None:
        """Unregister (returns once no job uses the region). Views stay
        readable: the mapping goes when the last of them does."""
        c = self._client
        with c._lock:
            rid, self.id = self.id, None
            if rid is None:
                return
            c._regions.pop(rid, None)
            try:
                if not c._closed and c._h is not None and c._dead is None:
                    err = _lib.vkg_error()
                    rc = c._c(lib.vkg_region_destroy, rid, None, 0, ctypes.byref(err))
                    if rc:
                        e = c._fail(rc, err)
                        if c._dead is None:  # a dead connection took it already
                            raise e
            finally:
                self._drop()

    def __enter__(self) -> "Region":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        fd = getattr(self, "_fd", -1)
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass

    def __repr__(self):
        return "<vkgrad.Region %s, %d bytes%s>" % (self.id, self.nbytes,
                                                    " (pool)" if self.pooled else "")

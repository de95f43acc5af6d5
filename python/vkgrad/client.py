"""Client, Region, Future and Error: vkgradd from Python through libvkgrad.

A Client is one connection (libvkgrad's vkg_client). Tensors travel as
numpy arrays:
  - an array that is a C-contiguous view of one of the client's regions
    (Region.ndarray) is named in place: the daemon reads and writes that
    memory, nothing is copied;
  - any other array is copied into a region the client keeps in a pool and
    reuses (inputs before the job; outputs back after it).
"""

import ctypes
import errno as _errno
import fcntl
import mmap
import os
import select
import socket
import threading
import time
import weakref

import numpy as np

from . import _lib
from ._lib import lib
from ._msgpack import packb, unpackb
from .dtypes import normalize, numpy_dtype, to_bf16

__all__ = ["Error", "Client", "Region", "Future", "connect", "default_socket", "CODES"]

# every error code of the protocol (proto/README.md); "io" is local
CODES = ("bad_frame", "bad_request", "unknown_op", "unsupported", "bad_region",
         "out_of_bounds", "overlap", "limit", "device_lost", "internal")
OUTPUTS = ("dw", "db", "dx")
_POOL_MIN = 1 << 20
_ALIGN = 64


class Error(Exception):
    """A failed request. code: the daemon's error code (CODES), or "io" for a
    local failure (socket, memfd, mmap; errno then holds the errno); message:
    what was wrong, the daemon's own words for a remote error."""

    def __init__(self, code, message, errno=None):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message
        self.errno = errno


def _error(rc, err):
    code = err.code.decode("utf-8", "replace") or "io"
    msg = err.message.decode("utf-8", "replace")
    return Error(code, msg, None if rc == _lib.VKG_EREMOTE else -rc)


def default_socket():
    """The socket a Client uses without one: $VKGRAD_SOCKET, else
    $XDG_RUNTIME_DIR/vkgrad.sock, else /run/vkgrad/vkgrad.sock."""
    return lib.vkg_default_socket().decode()


def connect(socket=None, name="python", pool_keep=4):
    """Connect to vkgradd. socket: a path, else default_socket()."""
    return Client(socket, name=name, pool_keep=pool_keep)


class Region:
    """Shared memory registered with the daemon: a sealed memfd mapped with
    Python's mmap. Arrays from ndarray() are views of it; the memory lives as
    long as the Region or any view does, even after close()."""

    def __init__(self, client, nbytes, pooled=False):
        nbytes = int(nbytes)
        if nbytes < 1:
            raise ValueError("region size must be at least 1 byte, not %d" % nbytes)
        self.nbytes = nbytes
        self.pooled = pooled
        self._client = client
        self.id = None
        fd = os.memfd_create("vkgrad-py", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, nbytes)
            # the daemon refuses memory that could shrink under the GPU
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
            self._mm = mmap.mmap(fd, nbytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            probe = ctypes.c_char.from_buffer(self._mm)
            self.address = ctypes.addressof(probe)
            del probe
            rid = ctypes.c_uint64()
            err = _lib.vkg_error()
            rc = client._c(lib.vkg_region_register_fd, fd, nbytes, ctypes.byref(rid),
                           ctypes.byref(err))
            if rc:
                self._mm.close()
                raise _error(rc, err)
            self.id = rid.value
        finally:
            os.close(fd)

    def ndarray(self, shape, dtype="float32", offset=0):
        """A numpy view of the region's bytes [offset, offset + its size).
        dtype: a numpy dtype, or "bf16" (uint16 bit patterns). offset must be
        a multiple of the element size (the daemon's rule for tensors)."""
        dt = np.dtype(np.uint16) if str(dtype).lower() in ("bf16", "bfloat16") else np.dtype(dtype)
        shape = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)
        n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
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
        n_items = int(np.prod(shape, dtype=np.int64))
        return np.frombuffer(memoryview(self._mm), dt, n_items, offset).reshape(shape)

    def close(self):
        """Unregister (returns once no job uses the region). Views stay
        readable: the mapping goes when the last of them does."""
        c = self._client
        with c._lock:
            rid, self.id = self.id, None
            if rid is None:
                return
            c._regions.pop(rid, None)
            if not c._closed:
                err = _lib.vkg_error()
                rc = c._c(lib.vkg_region_destroy, rid, None, 0, ctypes.byref(err))
                if rc:
                    raise _error(rc, err)
        try:
            self._mm.close()
        except BufferError:
            pass  # views exist: the mapping is freed with the last one

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "<vkgrad.Region %s, %d bytes%s>" % (self.id, self.nbytes,
                                                    " (pool)" if self.pooled else "")


class Future:
    """A submitted job. result() waits and returns {name: array} for the
    outputs asked for; timing holds the daemon's {queued_us, gpu_us,
    batch_jobs, kernel_us} once done."""

    def __init__(self, client, handle, dtype, pool, copies, outputs, keep):
        self._client = client
        self.dtype = dtype         # numpy dtype of its tensors
        self.handle = handle
        self._pool = pool          # pool Region or None
        self._copies = copies      # [(name, pool offset, user array or None, shape)]
        self._outputs = outputs    # name -> array (views and caller's arrays)
        self._keep = keep          # the arrays the job reads, alive until it ends
        self._event = threading.Event()
        self._exc = None
        self.timing = None

    def _finish(self, rc, res, err):
        """Called once, with the client's lock held."""
        c = self._client
        c._pending.pop(self.handle, None)
        if rc == 0:
            for name, off, user, shape in self._copies:
                src = self._pool.ndarray(shape, self.dtype, off)
                c.bytes_copied += src.nbytes
                if user is not None:
                    user[...] = src
                else:
                    self._outputs[name] = src.copy()
            self.timing = {"queued_us": res.queued_us, "gpu_us": res.gpu_us,
                           "batch_jobs": res.batch_jobs, "kernel_us": res.kernel_us}
        else:
            self._exc = _error(rc, err)
        if self._pool is not None:
            c._pool_release(self._pool)
            self._pool = None
        self._keep = None
        self._event.set()

    def _outcome(self):
        if self._exc is not None:
            raise self._exc
        return dict(self._outputs)

    def done(self):
        """True once the job finished (without blocking)."""
        if self._event.is_set():
            return True
        c = self._client
        res, err = _lib.vkg_result(), _lib.vkg_error()
        with c._lock:
            if self._event.is_set():
                return True
            try:
                rc = c._c(lib.vkg_poll, self.handle, ctypes.byref(res), ctypes.byref(err))
            except Error:  # closing: close() files the outcome
                return self._event.is_set()
            if rc == -_errno.EAGAIN:
                return False
            if rc != -_errno.ENOENT:
                self._finish(rc, res, err)
        return self._event.is_set()

    def result(self, timeout=None):
        """Wait (timeout in seconds, None: forever) and return the outputs;
        raises Error when the job failed, TimeoutError when time ran out.

        Waits on the socket, not inside libvkgrad (whose blocking calls hold
        the connection's mutex): other threads' calls and close() are not
        held up while a job runs."""
        c = self._client
        deadline = None if timeout is None else time.monotonic() + timeout
        with c._cv:
            c._waiters += 1
        try:
            self._wait(c, deadline)
        finally:
            with c._cv:
                c._waiters -= 1
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not self._event.wait(left):
            raise TimeoutError("job %d not finished within %s s" % (self.handle, timeout))
        return self._outcome()

    def _wait(self, c, deadline):
        res, err = _lib.vkg_result(), _lib.vkg_error()
        while not self._event.is_set():
            try:
                fd = c._c(lib.vkg_fd)
                rc = c._c(lib.vkg_poll, self.handle, ctypes.byref(res), ctypes.byref(err))
            except Error:
                return  # closed: close() files the outcome
            if rc != -_errno.EAGAIN:
                if rc != -_errno.ENOENT:
                    with c._lock:
                        if not self._event.is_set():
                            self._finish(rc, res, err)
                return  # ENOENT: another thread's poll() files it
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return
            # A reply another thread's call read into the library leaves the
            # socket quiet: with other waiters, look again soon. The 1 s cap
            # bounds a wait on a descriptor that close() took away meanwhile.
            cap = 0.02 if c._waiters > 1 else 1.0
            try:
                select.select([fd], [], [], cap if left is None else min(cap, left))
            except (OSError, ValueError):
                pass


class Client:
    """One connection to vkgradd. Usable from several threads (calls are
    serialised by libvkgrad); a context manager closes it."""

    def __init__(self, socket=None, name="python", pool_keep=4):
        err = _lib.vkg_error()
        path = os.fsencode(socket) if socket is not None else None
        h = lib.vkg_connect(path, ctypes.byref(err))
        if not h:
            raise _error(-ctypes.get_errno() or -_errno.EIO, err)
        self._h = h
        self._closed = False
        self._lock = threading.RLock()
        # C calls in progress: close() waits for them (after waking any
        # that block) before the library frees the connection
        self._cv = threading.Condition()
        self._calls = 0
        self._waiters = 0      # threads in Future.result()
        self._regions = {}     # id -> Region, every live one (pool included)
        self._pool_free = []   # idle pool Regions, largest first
        self._pool_keep = pool_keep
        self._pending = {}     # handle -> Future
        self._ready = []       # weakrefs: finished futures poll() has not reported
        # bytes copied between the caller's arrays and pool regions (arrays
        # outside any region), both ways: 0 for jobs on region views alone
        self.bytes_copied = 0
        self.socket = socket if socket is not None else default_socket()
        try:
            hello = {"version": 1}
            if name:  # the daemon takes 63 bytes
                hello["client"] = name.encode()[:63].decode("utf-8", "ignore")
            self.info = self.call("hello", **hello)
        except Exception:
            self.close()
            raise

    # ---- connection ----
    def _c(self, fn, *args):
        """fn(handle, *args): a libvkgrad call that close() waits for."""
        with self._cv:
            if self._closed:
                raise Error("io", "the client is closed", _errno.EBADF)
            self._calls += 1
        try:
            return fn(self._h, *args)
        finally:
            with self._cv:
                self._calls -= 1
                if self._calls == 0:
                    self._cv.notify_all()

    def fileno(self):
        """The socket: readable when replies arrive. In an event loop, call
        poll() when it fires (poll() also empties what the library read
        already, so call it before waiting on the descriptor again)."""
        return self._c(lib.vkg_fd)

    def close(self):
        """Close the connection: the daemon drops its regions; pending
        futures fail with code "io". Region views stay readable."""
        with self._cv:
            if self._closed:
                return
            self._closed = True
            # wake calls blocked on the socket (their replies cannot come
            # now), then wait until none is inside the library
            _lib.libc.shutdown(lib.vkg_fd(self._h), socket.SHUT_RDWR)
            while self._calls:
                self._cv.wait()
        with self._lock:
            for f in list(self._pending.values()):
                f._finish(-_errno.ECONNRESET, None,
                          _err_struct("io", "the client was closed before the job finished"))
            for r in list(self._regions.values()):
                r.id = None
                try:
                    r._mm.close()
                except BufferError:
                    pass
            self._regions.clear()
            self._pool_free.clear()
            lib.vkg_close(self._h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if getattr(self, "_h", None) and not getattr(self, "_closed", True):
                self.close()
        except Exception:  # noqa: BLE001 — interpreter shutdown
            pass

    # ---- any request ----
    def call(self, op, **keys):
        """Send any op with these keys and return the reply as a dict (for
        ops and keys this module does not wrap). Raises Error on ok: false."""
        args = packb(keys) if keys else None
        reply = ctypes.c_void_p()
        n = ctypes.c_size_t()
        err = _lib.vkg_error()
        rc = self._c(lib.vkg_call_raw, op.encode(), args, len(args) if args else 0,
                     ctypes.byref(reply), ctypes.byref(n), ctypes.byref(err))
        body = None
        if reply.value:
            try:
                body = ctypes.string_at(reply.value, n.value)
            finally:
                _lib.libc.free(reply)
        if rc:
            raise _error(rc, err)
        return unpackb(body)

    def ping(self):
        err = _lib.vkg_error()
        rc = self._c(lib.vkg_ping, ctypes.byref(err))
        if rc:
            raise _error(rc, err)

    def stats(self):
        """The daemon's counters and latency histograms (proto/README.md)."""
        return self.call("stats")

    # ---- regions ----
    def region(self, nbytes):
        """A new Region of nbytes registered with the daemon."""
        with self._lock:
            r = Region(self, nbytes)
            self._regions[r.id] = r
            return r

    def _pool_take(self, nbytes):
        with self._lock:
            for i, r in enumerate(self._pool_free):
                if r.nbytes >= nbytes:
                    return self._pool_free.pop(i)
            size = max(_POOL_MIN, 1 << (nbytes - 1).bit_length())
            cap = int(self.info.get("limits", {}).get("max_region_bytes", size))
            r = Region(self, max(nbytes, min(size, cap)), pooled=True)
            self._regions[r.id] = r
            return r

    def _pool_release(self, r):
        if self._closed or r.id is None:
            return
        self._pool_free.append(r)
        self._pool_free.sort(key=lambda p: -p.nbytes)
        while len(self._pool_free) > self._pool_keep:
            self._pool_free.pop().close()

    def _view_of(self, a):
        """(region, offset) when a is a contiguous view inside one region."""
        if not isinstance(a, np.ndarray) or not a.flags.c_contiguous:
            return None
        p = a.__array_interface__["data"][0]
        for r in self._regions.values():
            if r.address <= p and p + a.nbytes <= r.address + r.nbytes:
                if (p - r.address) % a.dtype.itemsize == 0:
                    return r, p - r.address
        return None

    # ---- jobs ----
    def linear_backward(self, x, dy, w=None, outputs=None, out=None, accumulate=False,
                        dtype=None, variant=None):
        """Gradients of Y = X·Wᵀ + b: {"dw": dYᵀ·X, "db": Σ rows of dY,
        "dx": dY·W} for the names in outputs (default: every one the inputs
        allow, or the keys of out). See submit()."""
        return self.submit(x, dy, w, outputs=outputs, out=out, accumulate=accumulate,
                           dtype=dtype, variant=variant).result()

    def submit(self, x, dy, w=None, outputs=None, out=None, accumulate=False, dtype=None,
               variant=None):
        """Send a linear_backward job and return its Future at once.

        x (batch × in), dy (batch × out), w (out × in, needed for dx): numpy
        arrays of one dtype — float32, float16, or uint16 bf16 bits with
        dtype="bf16". With dtype given, other float arrays that are not
        region views are converted. out: {name: array} to write into (region
        views: in place, no copy; other arrays: filled when the job ends).
        accumulate: add to the outputs instead of overwriting them.
        variant: None/"auto", or a kernel family to force (proto/README.md)."""
        dt = normalize(dtype) if dtype is not None else normalize(np.asarray(x).dtype)
        npdt = numpy_dtype(dt)
        ins = {"x": x, "dy": dy, "w": w}
        for k, a in ins.items():
            if a is not None:
                ins[k] = self._input(k, a, dt, npdt, dtype is not None)
        x, dy, w = ins["x"], ins["dy"], ins["w"]
        if x.ndim != 2 or dy.ndim != 2 or x.shape[0] != dy.shape[0]:
            raise ValueError("x must be batch × in and dy batch × out; got %s and %s"
                             % (x.shape, dy.shape))
        batch, n_in, n_out = x.shape[0], x.shape[1], dy.shape[1]
        if w is not None and w.shape != (n_out, n_in):
            raise ValueError("w must be out × in = %s; got %s" % ((n_out, n_in), w.shape))
        out = dict(out or {})
        want = set(out) | set(outputs if outputs is not None else
                              ([] if out else ["dw", "db"] + (["dx"] if w is not None else [])))
        bad = want - set(OUTPUTS)
        if bad or not want:
            raise ValueError("outputs must name some of dw, db, dx; got %s" % sorted(bad or want))
        if "dx" in want and w is None:
            raise ValueError("dx = dY·W needs w")
        shapes = {"dw": (n_out, n_in), "db": (n_out,), "dx": (batch, n_in)}
        for k, a in out.items():
            if not isinstance(a, np.ndarray) or a.shape != shapes[k] or a.dtype != npdt:
                raise ValueError("out[%r] must be a %s numpy array of shape %s" % (k, npdt, shapes[k]))
            if not a.flags.writeable:
                raise ValueError("out[%r] is read-only" % k)
        return self._send(dt, npdt, (batch, n_in, n_out), ins, out, want, shapes,
                          accumulate, variant)

    def _input(self, k, a, dt, npdt, convert):
        if isinstance(a, np.ndarray) and a.dtype == npdt:
            return a
        a = np.asarray(a)
        if a.dtype == npdt:
            return a
        if not convert or a.dtype.kind != "f":
            raise TypeError("%s has dtype %s; an %s job wants %s%s" % (
                k, a.dtype, dt, npdt, " (bf16 bits: pass dtype='bf16')" if dt == "f32" and
                a.dtype == np.uint16 else ""))
        return to_bf16(a) if dt == "bf16" else a.astype(npdt)

    def linear_forward(self, x, w, b=None, out=None, accumulate=False, dtype=None, variant=None):
        """Y = X·Wᵀ (+ b) as a numpy array (out: the array to write, a
        region view for no copy). See submit_forward()."""
        return self.submit_forward(x, w, b, out=out, accumulate=accumulate, dtype=dtype,
                                   variant=variant).result()["y"]

    def submit_forward(self, x, w, b=None, out=None, accumulate=False, dtype=None, variant=None):
        """Send a linear_forward job (proto/README.md) and return its Future,
        whose result() is {"y": Y}: x batch × in, w out × in, b (out,) or
        None, out the batch × out array to write (else a new one); dtypes,
        conversion, region views and accumulate as in submit()."""
        dt = normalize(dtype) if dtype is not None else normalize(np.asarray(x).dtype)
        npdt = numpy_dtype(dt)
        ins = {"x": x, "w": w, "b": b}
        for k, a in ins.items():
            if a is not None:
                ins[k] = self._input(k, a, dt, npdt, dtype is not None)
        x, w, b = ins["x"], ins["w"], ins["b"]
        if x.ndim != 2 or w.ndim != 2 or x.shape[1] != w.shape[1]:
            raise ValueError("x must be batch × in and w out × in; got %s and %s" % (x.shape, w.shape))
        batch, n_in, n_out = x.shape[0], x.shape[1], w.shape[0]
        if b is not None and b.shape != (n_out,):
            raise ValueError("b must have shape %s; got %s" % ((n_out,), b.shape))
        shapes = {"y": (batch, n_out)}
        outd = {} if out is None else {"y": out}
        for k, a in outd.items():
            if not isinstance(a, np.ndarray) or a.shape != shapes[k] or a.dtype != npdt:
                raise ValueError("out must be a %s numpy array of shape %s" % (npdt, shapes[k]))
            if not a.flags.writeable:
                raise ValueError("out is read-only")
        return self._send(dt, npdt, (batch, n_in, n_out), ins, outd, {"y"}, shapes, accumulate,
                          variant, forward=True)

    def _send(self, dt, npdt, dims, ins, out, want, shapes, accumulate, variant, forward=False):
        from . import _forward
        with self._lock:
            job = _forward.vkg_forward_job() if forward else _lib.vkg_job()
            for k in (_forward.FIELDS if forward else ("x", "dy", "w", "dw", "db", "dx")):
                getattr(job, k).region = _lib.VKG_NONE
            # where each tensor lives: a region view, else a piece of a pool region
            place, need = {}, 0
            tensors = [(k, a) for k, a in ins.items() if a is not None]
            tensors += [(k, out.get(k)) for k in (("y",) if forward else OUTPUTS) if k in want]
            for k, a in tensors:
                v = self._view_of(a) if a is not None else None
                if v is not None:
                    place[k] = v
                else:
                    n = int(np.prod(shapes[k] if k in shapes else a.shape)) * npdt.itemsize
                    place[k] = (None, need)
                    need += (n + _ALIGN - 1) // _ALIGN * _ALIGN
            if need and self._pending:
                self._note_ready(self._drain())  # finished jobs give their pool regions back
            pool = self._pool_take(need) if need else None
            copies = []
            try:
                for k, a in tensors:
                    r, off = place[k]
                    if r is None:
                        r = pool
                        shape = a.shape if k in ins else shapes[k]
                        if k in ins:
                            pool.ndarray(shape, npdt, off)[...] = a
                            self.bytes_copied += a.nbytes
                        else:
                            dst = pool.ndarray(shape, npdt, off)
                            if accumulate:
                                dst[...] = a if a is not None else 0
                                self.bytes_copied += dst.nbytes if a is not None else 0
                            copies.append((k, off, a, shape))
                    getattr(job, k).region = r.id
                    getattr(job, k).offset = off
                job.dtype = dt.encode()
                job.batch, job.in_, job.out = dims
                job.accumulate = bool(accumulate)
                job.variant = variant.encode() if variant else None
                handle = ctypes.c_uint64()
                err = _lib.vkg_error()
                rc = self._c(_forward.submit if forward else lib.vkg_submit, ctypes.byref(job),
                             ctypes.byref(handle), ctypes.byref(err))
                if rc:
                    raise _error(rc, err)
            except BaseException:
                if pool is not None:
                    self._pool_release(pool)
                raise
            outputs = {k: out[k] for k in want if k in out}
            f = Future(self, handle.value, npdt, pool, copies, outputs,
                       [a for _, a in tensors if a is not None])
            self._pending[f.handle] = f
            return f

    def poll(self):
        """File every finished job's outcome without blocking; returns the
        Futures that finished since the last poll() (for event loops: call
        it when fileno() fires), those submit() found finished included."""
        with self._lock:
            done = [f for f in (r() for r in self._ready) if f is not None]
            self._ready.clear()
            return done + self._drain()

    def _note_ready(self, futs):
        """Futures submit() filed, for the next poll(); weakly held, so
        that callers who only use result() keep nothing alive here."""
        self._ready.extend(weakref.ref(f) for f in futs)
        if len(self._ready) > 1024:
            self._ready = [r for r in self._ready if r() is not None]

    def _drain(self):
        done = []
        with self._lock:
            while not self._closed:
                h, res, err = ctypes.c_uint64(), _lib.vkg_result(), _lib.vkg_error()
                try:
                    rc = self._c(lib.vkg_poll_any, ctypes.byref(h), ctypes.byref(res),
                                 ctypes.byref(err))
                except Error:
                    break  # closed meanwhile
                if rc in (-_errno.EAGAIN, -_errno.ENOENT):
                    break
                f = self._pending.get(h.value)
                if f is None:
                    break  # a dead connection with nothing outstanding
                f._finish(rc, res, err)
                done.append(f)
        return done


def _err_struct(code, message):
    e = _lib.vkg_error()
    e.code = code.encode()
    e.message = message.encode()[:255]
    return e

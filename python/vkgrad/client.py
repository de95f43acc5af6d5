"""Client: vkgradd from Python through libvkgrad (Region, Future and Error,
its companions, live in _region.py, _future.py and _error.py).

A Client is one connection (libvkgrad's vkg_client). Tensors travel as
numpy arrays:
  - an array that is a C-contiguous view of one of the client's regions
    (Region.ndarray) is named in place: the daemon reads and writes that
    memory, nothing is copied;
  - any other array is copied into a region the client keeps in a pool and
    reuses (inputs before the job; outputs back after it).

A Client survives (docs/python.md, "A client that survives"):
  - the daemon restarting: the next call after the connection died connects
    again and registers the client's live regions again (new ids, the same
    memory); a job in flight when it died fails once with code "io";
  - fork: a child that uses its parent's client gets a connection of its own
    (the parent's jobs fail in the child with "io"; regions are shared
    memory, registered again by the child; the copy pool is not shared);
  - Futures are concurrent.futures.Future objects (wait, as_completed,
    add_done_callback, asyncio.wrap_future, await).
"""

from __future__ import annotations

import asyncio
import ctypes
import errno as _errno
import math
import os
import select
import socket
import threading
import weakref
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

import msgpack
import numpy as np

from . import _lib
from ._device import VKG_DEVICE_TENSOR, Tensor, _TensorOps
from ._optim import _OptimOps
from ._error import CODES, Error, _err_struct, _error
from ._future import Future
from ._lib import lib
from ._region import Region
from .dtypes import normalize, numpy_dtype, to_bf16

__all__ = ["Error", "Client", "Region", "Future", "Tensor", "connect", "default_socket", "CODES",
           "VARIANTS", "ACTIVATIONS"]

# kernel families a job may force (proto/msg.c variant_names)
VARIANTS = ("auto", "generic", "tiled", "splitk", "coopmat", "tiled128", "coopmat_khr",
            "coopmat_nv2", "coopmat_khr_f32x3", "narrow", "splitk128",
            "coopmat_khr_splitk", "coopmat_khr_f32_splitk")
OUTPUTS = ("dw", "db", "dx")
# fused activations (proto/README.md, key `activation`): gelu is torch's tanh form
ACTIVATIONS = ("none", "relu", "gelu")
_POOL_MIN = 1 << 20
_ALIGN = 64
# a library error with one of these errnos means the connection is gone
_DEAD = {-_errno.ECONNRESET, -_errno.EPIPE, -_errno.EPROTO, -_errno.ENOTCONN,
         -_errno.ECONNABORTED, -_errno.ESHUTDOWN, -_errno.EBADF}
_HUP = select.POLLHUP | select.POLLERR | getattr(select, "POLLRDHUP", 0x2000)

ArrayLike = Any  # numpy arrays (or what np.asarray takes, with dtype=)


def _socket_kind(path):
    try:
        import stat
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def default_socket() -> str:
    """The socket a Client uses without one (docs/python.md, "Which socket"):
    $VKGRAD_SOCKET when set; else, when $LOCAL_RANK is set (torchrun), the
    first existing per-GPU socket vkgrad-<LOCAL_RANK>.sock in
    $XDG_RUNTIME_DIR, then /run/vkgrad; else libvkgrad's choice:
    $XDG_RUNTIME_DIR/vkgrad.sock when it exists, else /run/vkgrad/vkgrad.sock."""
    env = os.environ.get("VKGRAD_SOCKET")
    if env:
        return env
    rank = os.environ.get("LOCAL_RANK", "").strip()
    if rank.isdigit():
        name = "vkgrad-%d.sock" % int(rank)
        dirs = [os.environ.get("XDG_RUNTIME_DIR"), "/run/vkgrad"]
        for d in dirs:
            if d and _socket_kind(os.path.join(d, name)):
                return os.path.join(d, name)
    return lib.vkg_default_socket().decode()


def connect(socket: Optional[str] = None, name: str = "python", pool_keep: int = 4,
            reconnect: bool = True) -> "Client":
    """Connect to vkgradd. socket: a path, else default_socket()."""
    return Client(socket, name=name, pool_keep=pool_keep, reconnect=reconnect)


# ---- fork: every live client learns it is in a child --------------------------

_clients: "weakref.WeakSet[Client]" = weakref.WeakSet()


def _after_fork_in_child():
    for c in list(_clients):
        try:
            c._forked()
        except Exception:  # noqa: BLE001 — never fail a fork
            pass


os.register_at_fork(after_in_child=_after_fork_in_child)


class Client(_TensorOps, _OptimOps):
    """One connection to vkgradd. Usable from several threads (calls are
    serialised by libvkgrad); a context manager closes it.

    reconnect (default True): after the connection died (the daemon
    restarted, or closed it), the next call connects again and registers
    the live regions again; False: every later call raises the library's
    error, as a plain libvkgrad client does."""

    def __init__(self, socket: Optional[str] = None, name: str = "python", pool_keep: int = 4,
                 reconnect: bool = True):
        if socket is not None and not isinstance(socket, (str, bytes, os.PathLike)):
            raise TypeError("socket must be a path, not %s" % type(socket).__name__)
        self.socket = os.fsdecode(socket) if socket is not None else default_socket()
        self._name = name
        self._auto_reconnect = bool(reconnect)
        self._h = None
        self._fd = -1
        self._gen = 0          # connection number: a Future's must match to poll
        self._dead: Optional[str] = None  # why the connection is unusable
        self._closed = False
        self._pid = os.getpid()
        self._lock = threading.RLock()
        # C calls in progress: close() and reconnecting wait for them (after
        # waking any that block) before the library frees the connection
        self._cv = threading.Condition()
        self._calls = 0
        self._waiters = 0      # threads in Future.result()
        self._regions: Dict[int, Region] = {}  # id -> Region, every live one (pool included)
        self._pool_free: List[Region] = []     # idle pool Regions, largest first
        self._pool_keep = pool_keep
        self._pending: Dict[int, Future] = {}  # handle -> Future
        self._ready = []       # weakrefs: finished futures poll() has not reported
        self._publish: List[Future] = []  # finished, their concurrent.futures side not yet
        self._driver = None    # the completion thread, once a future needs it
        self._wake = None      # (read, write) pipe that wakes it
        # bytes copied between the caller's arrays and pool regions (arrays
        # outside any region), both ways: 0 for jobs on region views alone
        self.bytes_copied = 0
        self.reconnects = 0    # connections made again (restart, fork)
        self.info: Dict[str, Any] = {}
        self._open()
        _clients.add(self)

    # ---- connection ----
    def _open(self):
        """Connect and say hello; the handle is kept only when both work."""
        err = _lib.vkg_error()
        h = lib.vkg_connect(os.fsencode(self.socket), ctypes.byref(err))
        if not h:
            e = _error(-ctypes.get_errno() or -_errno.EIO, err)
            self._dead = e.message
            raise e
        with self._cv:
            self._h, self._fd, self._dead = h, lib.vkg_fd(h), None
            self._gen += 1
        try:
            hello = {"version": 1}
            if self._name:  # the daemon takes 63 bytes
                hello["client"] = self._name.encode()[:63].decode("utf-8", "ignore")
            self.info = self._call(("hello"), hello)
        except Exception as e:
            self._drop_handle(str(e))
            raise

    def _drop_handle(self, why):
        """Stop using the connection: wake and wait out the calls inside the
        library, fail the jobs still pending, free it."""
        with self._cv:
            h, self._h = self._h, None
            if self._dead is None:
                self._dead = why
            self._gen += 1
            if h is None:
                return
            _lib.libc.shutdown(self._fd, socket.SHUT_RDWR)
            while self._calls:
                self._cv.wait()
        with self._lock:
            for f in list(self._pending.values()):
                f._finish(-_errno.ECONNRESET, None, _err_struct("io", why))
        lib.vkg_close(h)

    def _c(self, fn, *args, gen=None):
        """fn(handle, *args): a libvkgrad call on the current connection,
        which close() and reconnecting wait for. gen: the connection the
        caller's job was sent on (refused when that one is gone)."""
        with self._cv:
            if self._closed:
                raise Error("io", "the client is closed", _errno.EBADF)
            if gen is not None and gen != self._gen:
                raise Error("io", "the connection of this job is gone", _errno.ECONNRESET)
            if self._h is None:
                raise Error("io", self._dead or "not connected", _errno.ENOTCONN)
            self._calls += 1
            h = self._h
        try:
            return fn(h, *args)
        finally:
            with self._cv:
                self._calls -= 1
                if self._calls == 0:
                    self._cv.notify_all()
            if self._driver is not None and threading.current_thread() is not self._driver:
                self._poke()

    def _submit_call(self, fn, *args) -> Future:
        """fn(handle, *args, &handle, &err): a request with no client memory
        to place (tensor_free, the optimizer steps) sent on the current
        connection; a Future for its reply, which keeps args alive until
        then."""
        self._ensure()
        try:
            with self._lock:
                h = ctypes.c_uint64()
                err = _lib.vkg_error()
                gen = self._gen
                rc = self._c(fn, *args, ctypes.byref(h), ctypes.byref(err), gen=gen)
                if rc:
                    raise self._fail(rc, err)
                f = Future(self, h.value, np.dtype(np.uint8), None, [], {}, list(args), gen)
                self._pending[f.handle] = f
                return f
        finally:
            self._flush()

    def _fail(self, rc, err) -> Error:
        """The Error for a failed call; notes a connection that died."""
        e = _error(rc, err)
        if rc in _DEAD and self._dead is None:
            self._dead = e.message
        return e

    def _hung_up(self):
        """Did the daemon close its end? (without reading anything)"""
        p = select.poll()
        p.register(self._fd, _HUP)
        try:
            return any(ev & _HUP for _, ev in p.poll(0))
        except OSError:
            return True

    def _ensure(self):
        """Before a request: in a forked child, or after the connection died,
        connect again (when reconnect is on)."""
        if self._pid != os.getpid():
            self._forked()  # a fork that skipped os.register_at_fork's hooks
        if self._closed:
            raise Error("io", "the client is closed", _errno.EBADF)
        if self._h is not None and self._dead is None and self._hung_up():
            self._dead = "daemon closed the connection"
        if self._h is not None and self._dead is None:
            return
        if not self._auto_reconnect:
            if self._h is None:
                raise Error("io", self._dead or "not connected", _errno.ENOTCONN)
            return  # the library reports its own error
        with self._lock:
            if self._h is not None and self._dead is None:
                return
            self._reconnect()

    def _reconnect(self):
        why = self._dead or "the connection died"
        if self._h is not None:
            self._drain()  # finished jobs keep their results; the rest fail with io
            self._drop_handle("the connection to the daemon was lost before the job "
                              "finished (%s)" % why)
        self._open()
        self.reconnects += 1
        regions = list(self._regions.values())
        self._regions.clear()
        lost = []
        for r in regions:
            try:
                r._register()
                self._regions[r.id] = r
            except Error as e:
                r._drop()
                lost.append("%d bytes: %s" % (r.nbytes, e))
        self._pool_free = [r for r in self._pool_free if r.id is not None]
        if lost:
            raise Error("io", "reconnected, but %d region(s) could not be registered again: %s"
                        % (len(lost), "; ".join(lost)))

    def _forked(self):
        """In a child of fork(): the parent's connection, locks, thread and
        pending jobs are not ours. Fresh locks; the jobs fail with io; the
        pool (shared memory the parent keeps using) is dropped; the next
        call connects (the user's regions are registered again there: the
        same memory as the parent's)."""
        if self._pid == os.getpid():
            return
        self._pid = os.getpid()
        self._lock = threading.RLock()
        self._cv = threading.Condition()
        self._calls = self._waiters = 0
        self._driver = None
        if self._wake is not None:
            self._wake_fin.detach()
            _close_fds(self._wake)  # the child's copies
            self._wake = None
        if self._closed:
            return
        if self._h is not None:
            _close_quietly(self._fd)  # the child's copy; the parent's stays open
            self._h = None            # the library's state is the parent's: left alone
        self._dead = "forked: the parent's connection is not this process's"
        self._gen += 1
        why = "the job was sent by the parent process (pid %d) before fork" % os.getppid()
        for f in list(self._pending.values()):
            f._event = threading.Event()
            f._condition = threading.Condition()
            f._finish(-_errno.ECONNRESET, None, _err_struct("io", why))
        for r in list(self._regions.values()):
            if r.pooled:
                self._regions.pop(r.id, None)
                r._drop()
        self._pool_free = []
        self._flush()

    def fileno(self) -> int:
        """The socket: readable when replies arrive. In an event loop, call
        poll() when it fires (poll() also empties what the library read
        already, so call it before waiting on the descriptor again). The
        number changes when the client connects again."""
        self._ensure()
        return self._c(lib.vkg_fd)

    def close(self) -> None:
        """Close the connection: the daemon drops its regions; pending
        futures fail with code "io". Region views stay readable."""
        if self._pid != os.getpid():
            self._forked()
        with self._cv:
            if self._closed:
                return
            self._closed = True
            h, self._h = self._h, None
            self._gen += 1
            # wake calls blocked on the socket (their replies cannot come
            # now), then wait until none is inside the library
            if h is not None:
                _lib.libc.shutdown(self._fd, socket.SHUT_RDWR)
            while self._calls:
                self._cv.wait()
        self._poke()
        with self._lock:
            for f in list(self._pending.values()):
                f._finish(-_errno.ECONNRESET, None,
                          _err_struct("io", "the client was closed before the job finished"))
            for r in list(self._regions.values()):
                r._drop()
            self._regions.clear()
            self._pool_free.clear()
            if h is not None:
                lib.vkg_close(h)
        self._flush()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            if not getattr(self, "_closed", True):
                self.close()
        except Exception:  # noqa: BLE001 — interpreter shutdown
            pass

    # ---- the completion thread (concurrent.futures, asyncio) ----
    def _start_driver(self):
        if self._pid != os.getpid():
            self._forked()
        with self._cv:
            if self._driver is not None or self._closed:
                return
            self._wake = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
            self._wake_fin = weakref.finalize(self, _close_fds, self._wake)
            t = threading.Thread(target=_drive, args=(weakref.ref(self),),
                                 name="vkgrad-futures", daemon=True)
            self._driver = t
        t.start()

    def _poke(self):
        w = self._wake
        if w is not None:
            try:
                os.write(w[1], b"\0")
            except OSError:
                pass

    def _flush(self):
        """The concurrent.futures side of finished jobs: state, waiters,
        callbacks; outside the client's locks."""
        pub = self._publish
        while pub:
            try:
                f = pub.pop(0)
            except IndexError:
                break
            f._publish()

    # ---- any request ----
    def _call(self, op, keys):
        args = msgpack.packb(keys, use_bin_type=True) if keys else None
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
            raise self._fail(rc, err)
        return msgpack.unpackb(body, raw=False, strict_map_key=False)

    def call(self, op: str, **keys: Any) -> Dict[str, Any]:
        """Send any op with these keys and return the reply as a dict (for
        ops and keys this module does not wrap). Raises Error on ok: false."""
        if not isinstance(op, str):
            raise TypeError("op must be a str, not %s" % type(op).__name__)
        try:
            msgpack.packb(keys, use_bin_type=True)
        except (TypeError, ValueError, OverflowError) as e:
            raise TypeError("call(%r): a key cannot be encoded: %s" % (op, e)) from None
        self._ensure()
        try:
            return self._call(op, keys)
        finally:
            self._flush()

    def ping(self) -> None:
        self._ensure()
        err = _lib.vkg_error()
        rc = self._c(lib.vkg_ping, ctypes.byref(err))
        if rc:
            raise self._fail(rc, err)

    def stats(self) -> Dict[str, Any]:
        """The daemon's counters and latency histograms (proto/README.md)."""
        return self.call("stats")

    # ---- regions ----
    def region(self, nbytes: int) -> Region:
        """A new Region of nbytes registered with the daemon."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)):
            raise TypeError("nbytes must be an int, not %s" % type(nbytes).__name__)
        self._ensure()
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
            p = self._pool_free.pop()
            try:
                p.close()
            except Error:
                pass

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
    def linear_backward(self, x: ArrayLike, dy: ArrayLike, w: Optional[ArrayLike] = None,
                        outputs: Optional[Iterable[str]] = None,
                        out: Optional[Mapping[str, np.ndarray]] = None, accumulate: bool = False,
                        dtype: Any = None, variant: Optional[str] = None,
                        dims: Optional[Tuple[int, int, int]] = None,
                        activation: Optional[str] = None, y: Optional[ArrayLike] = None,
                        z: Optional[ArrayLike] = None) -> Dict[str, np.ndarray]:
        """Gradients of Y = X·Wᵀ + b: {"dw": dYᵀ·X, "db": Σ rows of dY,
        "dx": dY·W} for the names in outputs (default: every one the inputs
        allow, or the keys of out); with an activation, of act(X·Wᵀ + b),
        dZ = dY ⊙ act'(·) in dY's place. See submit()."""
        return self.submit(x, dy, w, outputs=outputs, out=out, accumulate=accumulate,
                           dtype=dtype, variant=variant, dims=dims, activation=activation,
                           y=y, z=z).result()

    async def linear_backward_async(self, x: ArrayLike, dy: ArrayLike,
                                    w: Optional[ArrayLike] = None,
                                    **kw: Any) -> Dict[str, np.ndarray]:
        """linear_backward for asyncio: `await c.linear_backward_async(...)`
        (the event loop runs meanwhile; keyword arguments as submit())."""
        return await asyncio.wrap_future(self.submit(x, dy, w, **kw))

    async def linear_forward_async(self, x: ArrayLike, w: ArrayLike,
                                   b: Optional[ArrayLike] = None, **kw: Any) -> np.ndarray:
        """linear_forward for asyncio (keyword arguments as submit_forward())."""
        return (await asyncio.wrap_future(self.submit_forward(x, w, b, **kw)))["y"]

    def submit(self, x: ArrayLike, dy: ArrayLike, w: Optional[ArrayLike] = None,
               outputs: Optional[Iterable[str]] = None,
               out: Optional[Mapping[str, np.ndarray]] = None, accumulate: bool = False,
               dtype: Any = None, variant: Optional[str] = None,
               dims: Optional[Tuple[int, int, int]] = None,
               activation: Optional[str] = None, y: Optional[ArrayLike] = None,
               z: Optional[ArrayLike] = None) -> Future:
        """Send a linear_backward job and return its Future at once.

        x (batch × in), dy (batch × out), w (out × in, needed for dx): numpy
        arrays of one dtype — float32, float16, or uint16 bf16 bits with
        dtype="bf16". With dtype given, other float arrays that are not
        region views are converted. out: {name: array} to write into (region
        views: in place, no copy; other arrays: filled when the job ends).
        accumulate: add to the outputs instead of overwriting them.
        variant: None/"auto", or a kernel family to force (VARIANTS).
        Device tensors (vkgrad.Tensor, from tensor_new) may stand for any
        input and, in out, any output: the job reads or writes them in
        place (out's Tensor comes back as its result). dims=(batch, in,
        out) where no operand tells them (bare Tensor(id)s).
        activation: None/"none", "relu" or "gelu" (torch's tanh form): the
        layer's output was act(X·Wᵀ + b), and dZ = dY ⊙ act'(·) is what dw,
        db and dx use; relu reads y (the forward's output, batch × out),
        gelu z (the pre-activation, batch × out), arrays or Tensors; with
        accumulate too.
        Bad arguments raise ValueError/TypeError before anything is sent.
        Arrays that are not region views are copied into pool regions;
        where the connection holds the daemon's max_regions and jobs still
        running hold pool regions, submit waits for the oldest of them."""
        _check_flags(accumulate, variant)
        act = _check_activation(activation, False)
        dt = normalize(dtype) if dtype is not None else _dtype_of(x)
        npdt = numpy_dtype(dt)
        ins = {"x": x, "dy": dy, "w": w}
        need = {"relu": "y", "gelu": "z"}.get(act)
        if need is not None:
            v = y if need == "y" else z
            if v is None:
                raise TypeError("activation %r reads %s (a batch × out array)" % (act, need))
            ins[need] = v
        for k, a in ins.items():
            if isinstance(a, Tensor):
                _check_tensor(k, a, dt)
            elif a is not None or k != "w":
                ins[k] = self._input(k, a, dt, npdt, dtype is not None)
        x, dy, w = ins["x"], ins["dy"], ins["w"]
        if dims is None and not any(isinstance(a, Tensor) for a in ins.values()):
            if x.ndim != 2 or dy.ndim != 2 or x.shape[0] != dy.shape[0]:
                raise ValueError("x must be batch × in and dy batch × out; got %s and %s"
                                 % (x.shape, dy.shape))
            batch, n_in, n_out = x.shape[0], x.shape[1], dy.shape[1]
        else:
            batch, n_in, n_out = _job_dims(dims, {"x": x, "dy": dy, "w": w}, backward=True)
        if need is not None and _shape(ins[need]) not in (None, (batch, n_out)):
            raise ValueError("%s must be batch × out = %s; got %s" % (need, (batch, n_out),
                                                                     _shape(ins[need])))
        _check_dims(batch, n_in, n_out)
        if w is not None and _shape(w) not in (None, (n_out, n_in)):
            raise ValueError("w must be out × in = %s; got %s" % ((n_out, n_in), _shape(w)))
        if out is not None and not isinstance(out, Mapping):
            raise TypeError("out must be a dict {name: array}, not %s" % type(out).__name__)
        out = dict(out or {})
        if isinstance(outputs, str):
            outputs = [outputs]
        want = set(out) | set(outputs if outputs is not None else
                              ([] if out else ["dw", "db"] + (["dx"] if w is not None else [])))
        bad = want - set(OUTPUTS)
        if bad or not want:
            raise ValueError("outputs must name some of dw, db, dx; got %s" % sorted(bad or want))
        if "dx" in want and w is None:
            raise ValueError("dx = dY·W needs w")
        shapes = {"dw": (n_out, n_in), "db": (n_out,), "dx": (batch, n_in)}
        for k, a in out.items():
            if isinstance(a, Tensor):
                _check_tensor(k, a, dt, shapes[k] if k != "db" else (1, n_out))
                continue
            if not isinstance(a, np.ndarray) or a.shape != shapes[k] or a.dtype != npdt:
                raise ValueError("out[%r] must be a %s numpy array of shape %s" % (k, npdt, shapes[k]))
            if not a.flags.writeable:
                raise ValueError("out[%r] is read-only" % k)
        return self._send(dt, npdt, (batch, n_in, n_out), ins, out, want, shapes,
                          accumulate, variant, activation=act)

    def _input(self, k, a, dt, npdt, convert):
        if a is None:
            raise TypeError("%s is required (a numpy array)" % k)
        if isinstance(a, np.ndarray) and a.dtype == npdt:
            return a
        try:
            a = np.asarray(a)
        except Exception as e:  # noqa: BLE001 — anything numpy refuses
            raise TypeError("%s is not an array: %s" % (k, e)) from None
        if a.dtype == npdt:
            return a
        if not convert or a.dtype.kind != "f":
            raise TypeError("%s has dtype %s; an %s job wants %s%s" % (
                k, a.dtype, dt, npdt, " (bf16 bits: pass dtype='bf16')" if dt == "f32" and
                a.dtype == np.uint16 else ""))
        return to_bf16(a) if dt == "bf16" else a.astype(npdt)

    def linear_forward(self, x: ArrayLike, w: ArrayLike, b: Optional[ArrayLike] = None,
                       out: Optional[np.ndarray] = None, accumulate: bool = False,
                       dtype: Any = None, variant: Optional[str] = None,
                       dims: Optional[Tuple[int, int, int]] = None,
                       activation: Optional[str] = None, z: Any = None) -> Any:
        """Y = act(X·Wᵀ (+ b)) as a numpy array (out: the array to write, a
        region view for no copy; a Tensor: y goes there, and comes back);
        with z given (True, an array or a Tensor to write), the pair (Y,
        Z), Z the pre-activation. See submit_forward()."""
        r = self.submit_forward(x, w, b, out=out, accumulate=accumulate, dtype=dtype,
                                variant=variant, dims=dims, activation=activation, z=z).result()
        return r["y"] if z is None or z is False else (r["y"], r["z"])

    def submit_forward(self, x: ArrayLike, w: ArrayLike, b: Optional[ArrayLike] = None,
                       out: Optional[np.ndarray] = None, accumulate: bool = False,
                       dtype: Any = None, variant: Optional[str] = None,
                       dims: Optional[Tuple[int, int, int]] = None,
                       activation: Optional[str] = None, z: Any = None) -> Future:
        """Send a linear_forward job (proto/README.md) and return its Future,
        whose result() is {"y": Y} (and "z" when asked for): x batch × in, w
        out × in, b (out,) or None, out the batch × out array to write (else
        a new one); dtypes, conversion, region views, accumulate, device
        tensors (x, w, b, and out=Tensor for y) and dims as in submit().
        activation: None/"none", "relu" or "gelu" (torch's tanh form): Y =
        act(Z), Z = X·Wᵀ (+ b); not with accumulate. z: None, True (Z as a
        new array), or the batch × out array or Tensor to write Z into."""
        _check_flags(accumulate, variant)
        act = _check_activation(activation, accumulate)
        dt = normalize(dtype) if dtype is not None else _dtype_of(x)
        npdt = numpy_dtype(dt)
        ins = {"x": x, "w": w, "b": b}
        for k, a in ins.items():
            if isinstance(a, Tensor):
                _check_tensor(k, a, dt)
            elif a is not None or k != "b":
                ins[k] = self._input(k, a, dt, npdt, dtype is not None)
        x, w, b = ins["x"], ins["w"], ins["b"]
        if dims is None and not isinstance(out, Tensor) and not any(
                isinstance(a, Tensor) for a in ins.values()):
            if x.ndim != 2 or w.ndim != 2 or x.shape[1] != w.shape[1]:
                raise ValueError("x must be batch × in and w out × in; got %s and %s"
                                 % (x.shape, w.shape))
            batch, n_in, n_out = x.shape[0], x.shape[1], w.shape[0]
        else:
            batch, n_in, n_out = _job_dims(dims, {"x": x, "w": w, "y": out}, backward=False)
        _check_dims(batch, n_in, n_out)
        if b is not None and not isinstance(b, Tensor) and b.shape != (n_out,):
            raise ValueError("b must have shape %s; got %s" % ((n_out,), _shape(b)))
        if isinstance(b, Tensor) and b.shape not in (None, (1, n_out)):
            raise ValueError("b's tensor must be 1 × out = %s; got %s" % ((1, n_out), b.shape))
        shapes = {"y": (batch, n_out), "z": (batch, n_out)}
        outd = {} if out is None else {"y": out}
        want = {"y"}
        if z is not None and z is not False:
            want.add("z")
            if z is not True:
                outd["z"] = z
        for k, a in outd.items():
            if isinstance(a, Tensor):
                _check_tensor(k, a, dt, shapes[k])
                continue
            name = "out" if k == "y" else "z"
            if not isinstance(a, np.ndarray) or a.shape != shapes[k] or a.dtype != npdt:
                raise ValueError("%s must be a %s numpy array of shape %s" % (name, npdt, shapes[k]))
            if not a.flags.writeable:
                raise ValueError("%s is read-only" % name)
        return self._send(dt, npdt, (batch, n_in, n_out), ins, outd, want, shapes, accumulate,
                          variant, forward=True, activation=act)

    def _send(self, dt, npdt, dims, ins, out, want, shapes, accumulate, variant, forward=False,
              activation=None):
        from . import _forward
        self._ensure()
        try:
            while True:
                try:
                    with self._lock:
                        return self._send_locked(_forward, dt, npdt, dims, ins, out, want, shapes,
                                                 accumulate, variant, forward, activation)
                except Error as e:
                    oldest = self._region_holder(e)
                    if oldest is None:
                        raise
                # back-pressure: wait for the oldest job holding a pool
                # region (its region goes back to the pool), then again
                oldest.exception()
        finally:
            self._flush()

    def _region_holder(self, e):
        """For e, a send's failure: where it is the daemon's max_regions
        (code limit, the connection at the hello's max_regions) and a job
        still running holds a pool region, the oldest such job's Future;
        else None (the error is the caller's)."""
        cap = int(self.info.get("limits", {}).get("max_regions", 0) or 0)
        with self._lock:
            if e.code != "limit" or not cap or len(self._regions) < cap:
                return None
            return next((f for f in self._pending.values()
                         if f._pool is not None and not f._event.is_set()), None)

    def _send_locked(self, _forward, dt, npdt, dims, ins, out, want, shapes, accumulate,
                     variant, forward, activation=None):
        job = _forward.vkg_forward_job() if forward else _lib.vkg_job()
        for k in (_forward.FIELDS if forward else ("x", "dy", "w", "dw", "db", "dx", "y", "z")):
            getattr(job, k).region = _lib.VKG_NONE
        # where each tensor lives: a region view, else a piece of a pool region
        place, need = {}, 0
        tensors = [(k, a) for k, a in ins.items() if a is not None]
        tensors += [(k, out.get(k)) for k in (("y", "z") if forward else OUTPUTS) if k in want]
        for k, a in tensors:
            if isinstance(a, Tensor):
                place[k] = (a, 0)  # a device tensor: named, not placed
                continue
            v = self._view_of(a) if a is not None else None
            if v is not None:
                place[k] = v
            else:
                n = math.prod(shapes[k] if k in shapes else a.shape) * npdt.itemsize
                place[k] = (None, need)
                need += (n + _ALIGN - 1) // _ALIGN * _ALIGN
        if need and self._pending:
            self._note_ready(self._drain())  # finished jobs give their pool regions back
        pool = self._pool_take(need) if need else None
        copies = []
        try:
            for k, a in tensors:
                r, off = place[k]
                if isinstance(r, Tensor):
                    getattr(job, k).region = VKG_DEVICE_TENSOR
                    getattr(job, k).offset = int(r)
                    continue
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
            job.activation = activation.encode() if activation else None
            handle = ctypes.c_uint64()
            err = _lib.vkg_error()
            gen = self._gen
            rc = self._c(_forward.submit if forward else _lib.submit_job, ctypes.byref(job),
                         ctypes.byref(handle), ctypes.byref(err), gen=gen)
            if rc:
                raise self._fail(rc, err)
        except BaseException:
            if pool is not None:
                self._pool_release(pool)
            raise
        outputs = {k: out[k] for k in want if k in out}
        f = Future(self, handle.value, npdt, pool, copies, outputs,
                   [a for _, a in tensors if a is not None], gen)
        self._pending[f.handle] = f
        return f

    def poll(self) -> List[Future]:
        """File every finished job's outcome without blocking; returns the
        Futures that finished since the last poll() (for event loops: call
        it when fileno() fires), those submit() found finished included."""
        with self._lock:
            done = [f for f in (r() for r in self._ready) if f is not None]
            self._ready.clear()
            done += self._drain()
        self._flush()
        return done

    def _note_ready(self, futs):
        """Futures submit() filed, for the next poll(); weakly held, so
        that callers who only use result() keep nothing alive here."""
        self._ready.extend(weakref.ref(f) for f in futs)
        if len(self._ready) > 1024:
            self._ready = [r for r in self._ready if r() is not None]

    def _drain(self):
        done = []
        with self._lock:
            while not self._closed and self._h is not None:
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
                    if rc in _DEAD and self._dead is None:
                        self._dead = err.message.decode("utf-8", "replace")
                    break  # a dead connection with nothing outstanding
                f._finish(rc, res, err)
                done.append(f)
        return done


def _drive(ref):
    """The completion thread of a Client (weakly held): files outcomes as
    replies arrive, waiting on the socket and on the wake pipe (poked after
    other threads' calls, which may have read replies into the library,
    and by submit and close)."""
    me = threading.current_thread()
    while True:
        c = ref()
        if c is None:
            return
        with c._cv:
            if c._closed or c._driver is not me:
                return
            wake = c._wake
        with c._lock:
            if c._pending and c._h is not None:
                try:
                    c._note_ready(c._drain())
                except Exception:  # noqa: BLE001 — keep serving
                    pass
            fds = [wake[0]]
            if c._pending and c._h is not None:
                fds.append(c._fd)
        c._flush()
        del c
        try:
            select.select(fds, [], [], 1.0)
            os.read(wake[0], 4096)
        except (OSError, ValueError):
            pass


def _check_flags(accumulate, variant):
    if not isinstance(accumulate, (bool, np.bool_)):
        raise TypeError("accumulate must be a bool, not %s" % type(accumulate).__name__)
    if variant is not None:
        if not isinstance(variant, str):
            raise TypeError("variant must be a str, not %s" % type(variant).__name__)
        if variant not in VARIANTS:
            raise ValueError("variant %r is not one of %s" % (variant, ", ".join(VARIANTS)))


def _check_activation(activation, accumulate):
    """activation's name, or None for none; ValueError/TypeError when bad
    (accumulate: a forward's, which cannot go with an activation)."""
    if activation is None:
        return None
    if not isinstance(activation, str):
        raise TypeError("activation must be a str, not %s" % type(activation).__name__)
    if activation not in ACTIVATIONS:
        raise ValueError("activation %r is not one of %s" % (activation, ", ".join(ACTIVATIONS)))
    if activation == "none":
        return None
    if accumulate:
        raise ValueError("activation %r cannot go with accumulate=True" % activation)
    return activation


def _check_dims(batch, n_in, n_out):
    if min(batch, n_in, n_out) < 1:
        raise ValueError("batch, in and out must each be at least 1; got %d, %d, %d"
                         % (batch, n_in, n_out))


def _shape(a):
    """An operand's shape: a Tensor's (rows, cols) or None, an array's."""
    if isinstance(a, Tensor):
        return a.shape
    return None if a is None else tuple(a.shape)


def _check_tensor(k, t, dt, shape=None):
    """A Tensor operand k: its dtype the job's, its shape `shape` (both
    where it knows them; the daemon checks too: bad_tensor)."""
    if t.dtype is not None and t.dtype != dt:
        raise ValueError("%s is a %s tensor; the job's dtype is %s" % (k, t.dtype, dt))
    if shape is not None and t.shape is not None and t.shape != tuple(shape):
        raise ValueError("%s's tensor is %d × %d; it must be %d × %d" % (k, *t.shape, *shape))


def _job_dims(dims, ops, backward):
    """(batch, in, out) from dims or the operands' shapes (x batch × in,
    dy / y batch × out, w out × in), every known shape agreeing."""
    got = {"batch": None, "in": None, "out": None}
    if dims is not None:
        if len(dims) != 3:
            raise ValueError("dims must be (batch, in, out), not %r" % (dims,))
        got = dict(zip(("batch", "in", "out"), (int(d) for d in dims)))
    two = {"x": ("batch", "in"), "dy": ("batch", "out"), "y": ("batch", "out"), "w": ("out", "in")}
    for k, a in ops.items():
        s = _shape(a)
        if s is None:
            continue
        if len(s) != 2:
            raise ValueError("%s must be 2-D (%s × %s); got %s" % (k, two[k][0], two[k][1], s))
        for name, v in zip(two[k], s):
            if got[name] is None:
                got[name] = int(v)
            elif got[name] != v:
                raise ValueError("%s is %s; its %s disagrees with %s = %d" % (
                    k, s, name, name, got[name]))
    missing = [n for n, v in got.items() if v is None]
    if missing:
        raise ValueError("%s unknown: no operand tells it (bare Tensor ids); pass dims=(batch, "
                         "in, out)" % ", ".join(missing))
    return got["batch"], got["in"], got["out"]


def _dtype_of(x):
    if isinstance(x, Tensor):
        if x.dtype is None:
            raise TypeError("x is a Tensor id without a dtype: pass dtype=")
        return x.dtype
    if x is None:
        raise TypeError("x is required (a numpy array)")
    try:
        d = x.dtype if isinstance(x, np.ndarray) else np.asarray(x).dtype
    except Exception as e:  # noqa: BLE001
        raise TypeError("x is not an array: %s" % e) from None
    return normalize(d)


def _close_quietly(fd):
    try:
        os.close(fd)
    except OSError:
        pass


def _close_fds(fds):
    for fd in fds:
        _close_quietly(fd)

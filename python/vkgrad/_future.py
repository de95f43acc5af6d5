"""Future: a submitted job, a concurrent.futures.Future (vkgrad.Future)."""

from __future__ import annotations

import asyncio
import concurrent.futures as _cf
import ctypes
import errno as _errno
import select
import threading
import time
import weakref
from typing import Dict, Optional

import numpy as np

from . import _lib
from ._error import Error
from ._lib import lib


class _Waiters(list):
    """Future._waiters: concurrent.futures.wait() and as_completed() add to
    it; that starts the client's completion thread (nothing else would
    look at the socket for them)."""

    def __init__(self, fut):
        super().__init__()
        self._fut = weakref.ref(fut)

    def append(self, w):
        super().append(w)
        f = self._fut()
        if f is not None:
            f._client._start_driver()


class Future(_cf.Future):
    """A submitted job, a concurrent.futures.Future. result() waits and
    returns {name: array} for the outputs asked for; timing holds the
    daemon's {queued_us, gpu_us, batch_jobs, kernel_us} once done.

    concurrent.futures.wait/as_completed, add_done_callback and asyncio
    (await fut, asyncio.wrap_future) work: the first of them starts a
    thread of the client that waits on fileno() and files outcomes as they
    come. Callbacks run in the thread that files the outcome, outside the
    client's locks. A job cannot be cancelled once sent (cancel() is
    False)."""

    def __init__(self, client, handle, dtype, pool, copies, outputs, keep, gen):
        super().__init__()
        self.set_running_or_notify_cancel()
        self._waiters = _Waiters(self)
        self._client = client
        self._gen = gen            # the connection it was sent on
        self.dtype = dtype         # numpy dtype of its tensors
        self.handle = handle
        self._pool = pool          # pool Region or None
        self._copies = copies      # [(name, pool offset, user array or None, shape)]
        self._outputs = outputs    # name -> array (views and caller's arrays)
        self._keep = keep          # the arrays the job reads, alive until it ends
        self._event = threading.Event()
        self._exc = None
        self.timing: Optional[Dict[str, int]] = None

    def _finish(self, rc, res, err):
        """Called once, with the client's lock held; the concurrent.futures
        side (waiters, callbacks) follows in the client's _flush()."""
        c = self._client
        c._pending.pop(self.handle, None)
        if rc == 0:
            try:
                for name, off, user, shape in self._copies:
                    src = self._pool.ndarray(shape, self.dtype, off)
                    c.bytes_copied += src.nbytes
                    if user is not None:
                        user[...] = src
                    else:
                        self._outputs[name] = src.copy()
            except Exception as e:  # noqa: BLE001 — the pool went (fork)
                self._exc = Error("io", "reading the outputs back failed: %s" % e)
            self.timing = {"queued_us": res.queued_us, "gpu_us": res.gpu_us,
                           "batch_jobs": res.batch_jobs, "kernel_us": res.kernel_us}
        else:
            self._exc = c._fail(rc, err)
        if self._pool is not None:
            c._pool_release(self._pool)
            self._pool = None
        self._keep = None
        self._event.set()
        c._publish.append(self)

    def _publish(self):
        with self._condition:
            if self._state in (_cf._base.FINISHED, _cf._base.CANCELLED_AND_NOTIFIED):
                return
        if self._exc is not None:
            self.set_exception(self._exc)
        else:
            self.set_result(dict(self._outputs))

    def _outcome(self):
        if self._exc is not None:
            raise self._exc
        return dict(self._outputs)

    def done(self) -> bool:
        """True once the job finished (without blocking)."""
        if self._event.is_set():
            return True
        c = self._client
        res, err = _lib.vkg_result(), _lib.vkg_error()
        with c._lock:
            if not self._event.is_set():
                try:
                    rc = c._c(lib.vkg_poll, self.handle, ctypes.byref(res), ctypes.byref(err),
                              gen=self._gen)
                except Error:  # closing or reconnecting: that files the outcome
                    rc = -_errno.ENOENT
                if rc not in (-_errno.EAGAIN, -_errno.ENOENT):
                    self._finish(rc, res, err)
        c._flush()
        return self._event.is_set()

    def running(self) -> bool:
        return not self.done()

    def cancel(self) -> bool:
        """A job cannot be taken back once sent: always False."""
        return False

    def add_done_callback(self, fn) -> None:
        self._client._start_driver()
        super().add_done_callback(fn)

    def result(self, timeout: Optional[float] = None) -> Dict[str, np.ndarray]:
        """Wait (timeout in seconds, None: forever) and return the outputs;
        raises Error when the job failed, TimeoutError when time ran out.

        Waits on the socket, not inside libvkgrad (whose blocking calls hold
        the connection's mutex): other threads' calls and close() are not
        held up while a job runs."""
        c = self._client
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._event.is_set():
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
        c._flush()
        return self._outcome()

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        try:
            self.result(timeout)
        except Error as e:
            return e
        return None

    def __await__(self):
        return asyncio.wrap_future(self).__await__()

    def _wait(self, c, deadline):
        res, err = _lib.vkg_result(), _lib.vkg_error()
        while not self._event.is_set():
            with c._cv:  # (as _c would refuse: closed, reconnected, dead)
                if c._closed or self._gen != c._gen or c._h is None:
                    return
                fd = c._fd
            try:
                rc = c._c(lib.vkg_poll, self.handle, ctypes.byref(res), ctypes.byref(err),
                          gen=self._gen)
            except Error:
                return  # closed or reconnecting: that files the outcome
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
            cap = 0.02 if c._waiters > 1 or c._driver is not None else 1.0
            try:
                select.select([fd], [], [], cap if left is None else min(cap, left))
            except (OSError, ValueError):
                pass

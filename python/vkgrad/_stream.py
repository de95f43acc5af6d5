"""The wire of resident mode (resident.py): one client's requests, each
sent at once without waiting, the Futures not yet looked at, and the
tensors, host staging buffers and gradient scratch it keeps for reuse."""

import threading
import weakref

from ._device import Tensor
from ._tensors import default_client, empty, in_region

_KEEP_SCRATCH = 16  # gradient scratch shapes a stream keeps
_KEEP_STAGING = 16  # host staging buffers a stream keeps


class _Stream:
    """One client's resident requests: tensors, jobs, reads and writes, each
    submitted at once; the Futures not yet looked at (with what they need
    alive: host buffers they read or write) are kept until a wait finds
    them done, and their errors raised then."""

    def __init__(self, client):
        self.c = client
        self.lock = threading.RLock()
        self.pending = []    # [(future, keep)]
        self.scratch = {}    # (dtype, rows, cols) -> [tensor ids], gradient scratch
        self.free_acts = {}  # key -> [_Acts], activation sets not in use
        self.dead = []       # tensor ids to free (finalizers only note them)
        self.staging = {}    # (shape, torch dtype) -> [region tensor, last write]

    # -- bookkeeping
    def _add(self, f, keep=None):
        with self.lock:
            self.pending.append((f, keep))
            if len(self.pending) > 256:
                self.reap()
        return f

    def reap(self):
        """Look at the finished requests (without blocking); raise the
        first failure."""
        with self.lock:
            left, err = [], None
            for f, keep in self.pending:
                if f.done():
                    try:
                        f.result()
                    except Exception as e:  # noqa: BLE001 — re-raised below
                        err = err or e
                else:
                    left.append((f, keep))
            self.pending = left
        if err is not None:
            raise err

    def wait(self, f):
        """f's result, after which every earlier request is done (the
        connection's order): their errors are raised too."""
        try:
            r = f.result()
        finally:
            self.reap()
        return r

    def finish(self):
        """Wait for everything sent so far."""
        with self.lock:
            pend = list(self.pending)
        for f, _ in pend:
            try:
                f.result()
            except Exception:  # noqa: BLE001 — reap raises it
                pass
        self.reap()

    # -- requests
    def new(self, dtype, rows, cols):
        self._free_dead()
        return self.c.tensor_new(dtype, rows, cols)

    def free(self, t):
        """Free tensor t with the next request (called from finalizers,
        which may run inside another call of the client)."""
        self.dead.append(t)

    def _free_dead(self):
        while self.dead:
            t = self.dead.pop()
            try:
                self._add(self.c.submit_tensor_free(t))
            except Exception:  # noqa: BLE001 — connection gone: the daemon freed it
                pass

    def _place(self, host):
        p = in_region(host, self.c)
        if p is None:
            raise RuntimeError("vkgrad.torch resident: a host buffer is not in a region")
        return self.c._regions[p[0]], p[1]

    def write(self, t, host):
        """Upload host (a region tensor) into tensor t; host stays alive
        until the copy is done."""
        self._free_dead()
        r, off = self._place(host)
        return self._add(self.c.submit_tensor_write(t, r, off), host)

    def upload(self, t, src):
        """Upload CPU tensor src (t's shape) into tensor t: from src's own
        memory when it lies in a region, else through a staging buffer of
        the stream's, one per shape and dtype (reused once its previous
        copy is done: in practice always, since a wait came between)."""
        if src.is_contiguous() and in_region(src, self.c) is not None:
            return self.write(t, src)
        key = (tuple(src.shape), src.dtype)
        with self.lock:
            ent = self.staging.get(key)
            if ent is None:
                if len(self.staging) >= _KEEP_STAGING:
                    self.staging = {}  # (pending copies keep theirs alive)
                ent = self.staging[key] = [empty(src.shape, src.dtype, self.c), None]
        if ent[1] is not None and not ent[1].done():
            ent[1].result()
        ent[0].copy_(src)
        ent[1] = self.write(t, ent[0])
        return ent[1]

    def read(self, t, host):
        r, off = self._place(host)
        return self._add(self.c.submit_tensor_read(t, r, off), host)

    def forward(self, dtype, x, w, b, y, z, activation):
        kw = {"activation": activation}
        if z is not None:
            kw["z"] = Tensor(z)
        return self._add(self.c.submit_forward(Tensor(x), Tensor(w), Tensor(b) if b is not None
                                               else None, out=Tensor(y), dtype=dtype, **kw))

    def backward(self, dtype, x, dy, w, out, activation, y, z, accumulate):
        kw = {"activation": activation}
        if y is not None:
            kw["y"] = Tensor(y)
        if z is not None:
            kw["z"] = Tensor(z)
        return self._add(self.c.submit(Tensor(x), Tensor(dy), Tensor(w) if w is not None else None,
                                       out={k: Tensor(v) for k, v in out.items()}, dtype=dtype,
                                       accumulate=accumulate, **kw))

    def sgd_step(self, **keys):
        return self._add(self.c.submit_sgd_step(**keys))

    def adam_step(self, **keys):
        return self._add(self.c.submit_adam_step(**keys))

    # -- gradient scratch: ordered on the connection, so reused at once
    def trim_scratch(self):
        """Between backward passes: past _KEEP_SCRATCH shapes, free them all
        (jobs already sent keep them alive on the daemon until they end)."""
        with self.lock:
            if len(self.scratch) > _KEEP_SCRATCH:
                for lst in self.scratch.values():
                    for t in lst:
                        self.free(t)
                self.scratch = {}

    def scratch_for(self, dtype, rows, cols, avoid):
        key = (dtype, rows, cols)
        with self.lock:
            lst = self.scratch.setdefault(key, [])
            for t in lst:
                if t not in avoid:
                    return t
            t = self.new(dtype, rows, cols)
            lst.append(t)
            return t


_streams = weakref.WeakKeyDictionary()
_streams_lock = threading.Lock()


def stream_of(client=None):
    """The _Stream of a client (default_client())."""
    c = client if client is not None else default_client()
    with _streams_lock:
        s = _streams.get(c)
        if s is None:
            s = _streams[c] = _Stream(c)
        return s

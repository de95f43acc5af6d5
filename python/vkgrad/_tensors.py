"""Region-backed tensors for vkgrad.torch: CPU tensors carved out of
regions registered with the daemon (empty, to_region, in_region), the
default client the layers use, and the views of tensors the client takes.
(vkgrad.torch re-exports the public names.)"""

import math
import os
import threading
import warnings
import weakref

import numpy as np
import torch as _torch

from . import client as _client

_DTYPES = {_torch.float32: "f32", _torch.float16: "f16", _torch.bfloat16: "bf16"}
_ITEMSIZE = {_torch.float32: 4, _torch.float16: 2, _torch.bfloat16: 2}
_default = {"client": None}
_default_lock = threading.Lock()


def set_default_client(c):
    """The Client layers without their own use (None: connect again lazily)."""
    with _default_lock:
        _default["client"] = c


def default_client():
    """A Client connected on first use to the default socket, shared by the
    process's layers."""
    with _default_lock:
        if _default["client"] is None or _default["client"]._closed:
            _default["client"] = _client.connect(name="vkgrad.torch")
        return _default["client"]


def bytes_copied(client=None):
    """Bytes the client (default: default_client()) copied into and out of
    its pool so far: arrays outside every region."""
    return (client or default_client()).bytes_copied


# ---- region-backed tensors --------------------------------------------------

_CHUNK = 64 << 20   # regions of at least this many bytes, carved into blocks
_ALIGN = 256


class _Arena:
    """Blocks of registered regions for one client: a free list per block
    size (powers of two from 256 bytes), regions of _CHUNK bytes or one
    block, each block handed back (weakref.finalize on the numpy array the
    tensor's storage holds) when the last tensor using it dies."""

    def __init__(self, client):
        self.client = client
        self.lock = threading.Lock()
        self.free = {}      # block bytes -> [(region, offset)]
        self.regions = []   # every region (kept open)
        self.shared = set()  # id() of regions made before a fork: never reused here

    def take(self, nbytes):
        size = max(_ALIGN, 1 << (max(1, nbytes) - 1).bit_length())
        with self.lock:
            lst = self.free.get(size)
            if not lst:
                lst = self.free.setdefault(size, [])
                n = max(1, _CHUNK // size)
                r = self.client.region(size * n)
                self.regions.append(r)
                lst.extend((r, i * size) for i in range(n))
            r, off = lst.pop()
        return r, off, size

    def give(self, size, r, off):
        with self.lock:
            if r.id is not None and id(r) not in self.shared:
                self.free.setdefault(size, []).append((r, off))


_arenas = weakref.WeakKeyDictionary()
_arenas_lock = threading.Lock()


def _after_fork_in_child():
    """A forked child shares the parent's region memory: blocks free at the
    fork may be handed out by the parent too, so the child forgets them
    (tensors allocated before the fork stay shared, as Hogwild wants) and
    carves new regions of its own; fresh locks (a parent thread may have
    held one)."""
    global _arenas_lock, _default_lock
    _arenas_lock = threading.Lock()
    _default_lock = threading.Lock()
    for a in list(_arenas.values()):
        a.lock = threading.Lock()
        a.free = {}
        a.shared.update(id(r) for r in a.regions)


os.register_at_fork(after_in_child=_after_fork_in_child)


def _arena(client):
    with _arenas_lock:
        a = _arenas.get(client)
        if a is None:
            a = _arenas[client] = _Arena(client)
        return a


def empty(shape, dtype=_torch.float32, client=None):
    """An uninitialised CPU tensor in a region registered with the daemon
    (client: default_client()): jobs on it read and write it in place."""
    if dtype not in _DTYPES:
        raise TypeError("vkgrad.torch.empty: dtype %s; served: float32, float16, bfloat16" % dtype)
    shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list, _torch.Size)) else (shape,)))
    n = math.prod(shape) * _ITEMSIZE[dtype]
    a = _arena(client or default_client())
    r, off, size = a.take(n)
    block = r.ndarray((max(n, 1),), np.uint8, off)
    weakref.finalize(block, a.give, size, r, off)
    # a tensor of its own over the block's storage, not a view of another
    # (autograd lets a custom Function's output be modified in place, as by
    # ReLU(inplace=True), only when it is no view); the storage holds block
    with warnings.catch_warnings():
        # torch 2.x warns that TypedStorage is deprecated on every call (a
        # training step's); it is still how set_ takes a dtype over bytes
        # in both 1.13 (Debian 12) and 2.x
        warnings.simplefilter("ignore", UserWarning)
        st = _torch.from_numpy(block).storage()
        st = st.untyped() if hasattr(st, "untyped") else st._untyped()
        typed = _torch.storage.TypedStorage(wrap_storage=st, dtype=dtype)
    stride, k = [], 1
    for d in reversed(shape):
        stride.append(k)
        k *= d
    stride = tuple(reversed(stride))
    return _torch.empty(0, dtype=dtype).set_(typed, 0, shape, stride)


def in_region(t, client=None):
    """(region id, byte offset) when t is contiguous inside one of the
    client's regions, else None."""
    c = client or default_client()
    if not t.is_contiguous() or t.device.type != "cpu":
        return None
    p, n = t.data_ptr(), t.numel() * t.element_size()
    for r in list(c._regions.values()):
        if r.id is not None and r.address <= p and p + n <= r.address + r.nbytes:
            return r.id, p - r.address
    return None


def to_region(t, client=None):
    """t itself when it lies in a region already, else a copy of it in one."""
    if in_region(t, client) is not None:
        return t
    out = empty(t.shape, t.dtype, client)
    out.copy_(t)
    return out


def _np(t):
    """A contiguous CPU tensor as a numpy array sharing its memory (bf16 as
    its uint16 bits): a region view when t lies in a region."""
    t = t.detach()
    if not t.is_contiguous():
        t = t.contiguous()
    if t.dtype == _torch.bfloat16:
        return t.view(_torch.int16).numpy().view(np.uint16)
    return t.numpy()


def in_region_copy(t, c):
    """to_region(t, c) (t contiguous), its copy's bytes counted in
    c.bytes_copied: what a layer reads from outside the regions."""
    r = to_region(t, c)
    if r is not t:
        with c._lock:
            c.bytes_copied += r.numel() * r.element_size()
    return r


def linear_params_why_not(m):
    """Why nn.Linear m's weight or bias cannot live in the daemon (lazy,
    not on the CPU, a dtype it does not serve), or None: the check both
    torch.py's convert and resident.py's share."""
    for n, p in (("weight", m.weight), ("bias", m.bias)):
        if p is None:
            continue
        if isinstance(p, _torch.nn.parameter.UninitializedParameter):
            return "%s is not initialised yet (lazy)" % n
        if p.device.type != "cpu":
            return "%s is on %s" % (n, p.device)
        if p.dtype not in _DTYPES:
            return "%s has dtype %s (served: float32, float16, bfloat16)" % (n, p.dtype)
    return None

"""PyTorch layer whose forward and backward passes run on vkgradd, on
tensors that live in the daemon's shared memory.

    import vkgrad.torch as vt
    layer = vt.Linear(1024, 512)            # an nn.Linear: same parameters, state_dict
    report = {}
    model = vt.convert(model, report=report)  # swap every nn.Linear (subclasses too)
    t = vt.empty((2048, 1024), torch.float32) # a tensor in a registered region

Zero copies (the tensors: _tensors.py): empty() carves tensors out of regions registered with the
daemon (torch.from_numpy over the region's mapping, blocks pooled by size
and handed back when the last tensor using one dies). convert() moves every
parameter (and its .grad) of the layers it replaces into such memory;
Linear's forward writes Y into a new region tensor, so the next layer's
saved input is already there (use ReLU(inplace=True) between layers to keep
it so); its backward writes dX, dW and db there too. The daemon then reads
and writes those tensors in place; the only copy left is of dY when
autograd hands over a gradient outside any region (the loss's; an
activation's unless it is ReLU, which convert() swaps for one whose
gradient lands in a region), and of an input outside them (once: the forward's copy
serves the backward). Those copies are torch's own (all its threads) into
region tensors. client.bytes_copied counts every byte the client copied
(bytes_copied() here reads the default client's); daemon_seconds() the
time spent in daemon jobs, profile() each job's times.

The forward is Y = X·Wᵀ (+ b) by op linear_forward; the backward dX = dY·W,
dW = dYᵀ·X, db = Σ dY by linear_backward, only those autograd asks for,
returned to autograd, which adds them to .grad as for nn.Linear.

Resident mode, convert(model, resident=True) (vkgrad/resident.py), keeps
weights, gradients and activations on the daemon instead (only a chain's
input, output and output gradient cross), with vkgrad.torch.optim (SGD,
Adam, AdamW) stepping there; docs/python.md.

CPU tensors of float32, float16 and bfloat16 (bf16 travels as its bit
patterns); float64 is refused (run gradcheck-style checks in float32 at
vkgrad.TOLERANCE["f32"], as tests/python/test_torch.py does). Inputs of any
leading shape (..., in), as nn.Linear.
"""

import logging
import sys as _sys
import time

import torch as _torch

from ._tensors import (_DTYPES, _np, bytes_copied, default_client, empty, in_region,
                       linear_params_why_not,
                       in_region_copy, set_default_client, to_region)

__all__ = ["optim", "resident", "sync", "synchronize", "LinearFunction", "Linear", "ReLUFunction", "ReLU", "convert", "default_client",
           "set_default_client", "empty", "in_region", "to_region", "bytes_copied",
           "daemon_seconds", "profile"]

_log = logging.getLogger("vkgrad.torch")

# resident mode (convert(model, resident=True)): its optimizers, also
# importable as vkgrad.torch.optim, and sync(model)
from . import optim, resident  # noqa: E402
from .resident import sync, synchronize  # noqa: E402

_sys.modules[__name__ + ".optim"] = optim

_waited = {"forward": 0.0, "backward": 0.0}
_profile = {"on": False, "jobs": []}


def profile(on=True):
    """Start (on) or stop recording each daemon job of the layers; returns
    the jobs recorded since the last start: dicts of op ("forward",
    "backward"), shape (batch, in, out), dtype, wall_us (send to answer)
    and the reply's timing (queued_us, gpu_us, batch_jobs, kernel_us)."""
    jobs = _profile["jobs"]
    _profile["on"], _profile["jobs"] = bool(on), []
    return jobs


def _note(op, shape, dtype, t0, fut):
    dt = time.perf_counter() - t0
    _waited[op] += dt
    if _profile["on"]:
        _profile["jobs"].append(dict(op=op, shape=shape, dtype=dtype, wall_us=dt * 1e6,
                                     **(fut.timing or {})))


def daemon_seconds():
    """{"forward": s, "backward": s}: wall time the layers of this process
    spent in their daemon jobs so far (from sending to the answer, the
    copies of dY included), to tell it from the time torch spends on the
    CPU around them."""
    return dict(_waited)


# ---- the layer ------------------------------------------------------------------

def _check(t, what):
    if t.device.type != "cpu":
        raise TypeError("vkgrad.torch: %s is on %s; the daemon reads CPU memory (move it "
                        "with .cpu())" % (what, t.device))
    if t.dtype not in _DTYPES:
        raise TypeError("vkgrad.torch: %s has dtype %s; served: float32, float16, bfloat16"
                        % (what, t.dtype))


class LinearFunction(_torch.autograd.Function):
    """y = x·Wᵀ + b, both passes on vkgradd. apply(x, weight, bias, client):
    bias may be None, client None means default_client()."""

    @staticmethod
    def forward(ctx, x, weight, bias, client):
        for t, what in ((x, "input"), (weight, "weight")) + (((bias, "bias"),) if bias is not None else ()):
            _check(t, what)
            if t.dtype != x.dtype:
                raise TypeError("vkgrad.torch: %s has dtype %s, the input %s" % (what, t.dtype, x.dtype))
        c = client if client is not None else default_client()
        n_out, n_in = weight.shape
        x2 = x.reshape(-1, n_in)
        ctx.x_copy = None
        if x2.shape[0] > 0:
            xr = in_region_copy(x2.contiguous(), c)
            if xr is not x2:  # the backward reads the same copy
                ctx.x_copy = x2 = xr
        y = empty(tuple(x.shape[:-1]) + (n_out,), x.dtype, c)
        if x2.shape[0] > 0:  # (the protocol has no empty batch)
            t0 = time.perf_counter()
            f = c.submit_forward(_np(x2), _np(weight), _np(bias) if bias is not None else None,
                                 out=_np(y.view(-1, n_out)), dtype=_DTYPES[x.dtype])
            f.result()
            _note("forward", (x2.shape[0], n_in, n_out), _DTYPES[x.dtype], t0, f)
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        ctx.client = c
        return y

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        need_dx, need_dw, need_db = ctx.needs_input_grad[:3]
        need_db = need_db and ctx.has_bias
        c = ctx.client
        n_out, n_in = weight.shape
        x2 = x.reshape(-1, n_in) if ctx.x_copy is None else ctx.x_copy
        if not (need_dx or need_dw or need_db):
            return None, None, None, None
        dt = x.dtype
        g = {}
        if need_dx:
            g["dx"] = empty((x2.shape[0], n_in), dt, c)
        if need_dw:
            g["dw"] = empty((n_out, n_in), dt, c)
        if need_db:
            g["db"] = empty((n_out,), dt, c)
        if x2.shape[0] == 0:
            for v in g.values():
                v.zero_()
        else:
            t0 = time.perf_counter()
            dy2 = grad_out.reshape(-1, n_out)
            if dy2.dtype != dt:
                dy2 = dy2.to(dt)
            dy2 = in_region_copy(dy2.contiguous(), c)
            f = c.submit(_np(x2), _np(dy2), _np(weight) if need_dx else None,
                         out={k: _np(v) for k, v in g.items()}, dtype=_DTYPES[dt])
            f.result()
            _note("backward", (x2.shape[0], n_in, n_out), _DTYPES[dt], t0, f)
        dx = g["dx"].view(x.shape) if need_dx else None
        return dx, g.get("dw"), g.get("db"), None


class Linear(_torch.nn.Linear):
    """nn.Linear whose forward and backward run on vkgradd (same parameters,
    init and state_dict). client: a vkgrad.Client, or None for
    default_client()."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None,
                 client=None):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.client = client

    def forward(self, input):
        return LinearFunction.apply(input, self.weight, self.bias, self.client)

    @classmethod
    def from_linear(cls, lin, client=None):
        """A Linear sharing lin's parameters (no copy)."""
        new = cls.__new__(cls)
        _torch.nn.Module.__init__(new)
        new.in_features, new.out_features = lin.in_features, lin.out_features
        new.weight = lin.weight
        new.register_parameter("bias", lin.bias)
        new.client = client
        return new


class ReLUFunction(_torch.autograd.Function):
    """max(x, 0) whose gradient lands in a region tensor: the next layer's
    backward then reads it in place instead of copying it. apply(x,
    inplace, client)."""

    @staticmethod
    def forward(ctx, x, inplace, client):
        c = client if client is not None else default_client()
        if inplace:
            ctx.mark_dirty(x)
            y = x.relu_()
        else:
            y = empty(x.shape, x.dtype, c)
            _torch.clamp(x, min=0, out=y)
        ctx.save_for_backward(y)
        ctx.client = c
        return y

    @staticmethod
    def backward(ctx, grad_out):
        (y,) = ctx.saved_tensors
        gi = empty(y.shape, grad_out.dtype, ctx.client)
        # torch's own ReLU backward (from the output: y > 0 where x > 0),
        # written into the region
        _torch.ops.aten.threshold_backward.grad_input(grad_out, y, 0, grad_input=gi)
        return gi, None, None


class ReLU(_torch.nn.ReLU):
    """nn.ReLU whose gradient is written into a region (ReLUFunction), for
    CPU tensors of a served dtype that need a gradient; others take
    torch's ReLU."""

    def __init__(self, inplace=False, client=None):
        super().__init__(inplace=inplace)
        self.client = client

    def forward(self, input):
        if input.device.type != "cpu" or input.dtype not in _DTYPES or not _torch.is_grad_enabled() \
                or not input.requires_grad:
            return _torch.nn.functional.relu(input, inplace=self.inplace)
        return ReLUFunction.apply(input, self.inplace, self.client)


def _move(p, client):
    """Parameter p's data (and .grad) into regions, in place of the old
    memory: the Parameter object stays the same (optimisers keep it)."""
    p.data = to_region(p.data, client)
    if p.grad is not None:
        p.grad = to_region(p.grad, client)


def _why_not(m):
    """Why module m (an nn.Linear) cannot become a vkgrad Linear, or None."""
    if isinstance(m, Linear):
        return "already a vkgrad.torch.Linear"
    if type(m).forward is not _torch.nn.Linear.forward:
        return "%s overrides forward()" % type(m).__name__
    return linear_params_why_not(m)


def convert(module, client=None, move=True, report=None, activations=True, resident=False):
    """Replace every nn.Linear inside module, subclasses included (and module
    itself, when it is one), by a vkgrad Linear sharing its parameters;
    returns the module. With move (the default) their parameters and
    gradients go into regions (zero copy; see the module's docstring).
    Subclasses that override forward(), lazy, non-CPU or float64 layers are
    left as they are. Each replacement and skip is logged (logger
    "vkgrad.torch", INFO); report, a dict, gets "replaced": [names] and
    "skipped": [(name, why)]. (A replaced layer whose owner reads its weight
    directly, as MultiheadAttention does with out_proj, keeps working: the
    parameters are the same objects.) With activations (the default), plain
    nn.ReLU modules become vkgrad.torch.ReLU, whose gradient lands in a
    region, so the layer before it copies no dY (report["activations"]:
    their names).

    With resident=True the layers are kept on the daemon instead
    (vkgrad.resident: weight, bias and gradients in daemon tensors, chains of
    Linear and ReLU/GELU(tanh) in nn.Sequential run there; step with
    vkgrad.torch.optim); report gets "replaced", "skipped" and "chains" (the
    names of the nn.Sequential modules that run chains). move and
    activations do not apply."""
    if resident:
        from .resident import convert_resident
        return convert_resident(module, client, report, _log)
    rep = report if report is not None else {}
    rep.setdefault("replaced", [])
    rep.setdefault("skipped", [])
    rep.setdefault("activations", [])

    def one(m, name):
        if activations and type(m) is _torch.nn.ReLU:
            rep["activations"].append(name)
            _log.info("convert: %s (ReLU) -> vkgrad.torch.ReLU", name)
            return ReLU(inplace=m.inplace, client=client)
        if isinstance(m, _torch.nn.Linear):
            why = _why_not(m)
            if why is None:
                new = Linear.from_linear(m, client)
                if move:
                    for p in new.parameters():
                        _move(p, client)
                rep["replaced"].append(name)
                _log.info("convert: %s (%s %dx%d) -> vkgrad.torch.Linear", name, type(m).__name__,
                          m.out_features, m.in_features)
                return new
            if not isinstance(m, Linear):
                rep["skipped"].append((name, why))
                _log.info("convert: %s skipped: %s", name, why)
        for n, child in m.named_children():
            new = one(child, name + "." + n if name else n)
            if new is not child:
                setattr(m, n, new)
        return m

    return one(module, "")

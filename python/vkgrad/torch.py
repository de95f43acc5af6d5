"""PyTorch layer whose backward pass runs on vkgradd.

    import vkgrad.torch as vt
    layer = vt.Linear(1024, 512)           # an nn.Linear: same parameters, state_dict
    model = vt.convert(model)              # or swap every nn.Linear of a model in place

The forward pass is torch's own (F.linear). The backward computes
dX = dY·W, dW = dYᵀ·X and db = Σ dY through the daemon, only those autograd
asks for, and returns them, so autograd adds them to .grad exactly as it does
for nn.Linear (accumulating over backward calls until zero_grad).

CPU tensors of float32, float16 and bfloat16 (bf16 travels as its bit
patterns). float16 forward passes compute in float32 and round once where
this torch has no CPU half matmul (Debian 12's 1.13). Inputs of any leading
shape (..., in), as nn.Linear.
"""

import threading

import numpy as np
import torch as _torch

from . import client as _client

__all__ = ["LinearFunction", "Linear", "convert", "default_client", "set_default_client"]

_DTYPES = {_torch.float32: "f32", _torch.float16: "f16", _torch.bfloat16: "bf16"}
_local = threading.local()
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


def _check(t, what):
    if t.device.type != "cpu":
        raise TypeError("vkgrad.torch: %s is on %s; the daemon reads CPU memory (move it "
                        "with .cpu())" % (what, t.device))
    if t.dtype not in _DTYPES:
        raise TypeError("vkgrad.torch: %s has dtype %s; served: float32, float16, bfloat16"
                        % (what, t.dtype))


def _to_numpy(t):
    """A contiguous CPU tensor as a numpy array sharing its memory (bf16 as
    its uint16 bits)."""
    t = t.detach().contiguous()
    if t.dtype == _torch.bfloat16:
        return t.view(_torch.int16).numpy().view(np.uint16)
    return t.numpy()


def _from_numpy(a, dtype):
    if dtype == _torch.bfloat16:
        return _torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(_torch.bfloat16)
    return _torch.from_numpy(np.ascontiguousarray(a))


def _forward(x, weight, bias):
    if x.dtype == _torch.float16:
        try:
            return _torch.nn.functional.linear(x, weight, bias)
        except RuntimeError:  # no CPU half matmul in this torch
            b = bias.float() if bias is not None else None
            return _torch.nn.functional.linear(x.float(), weight.float(), b).half()
    return _torch.nn.functional.linear(x, weight, bias)


class LinearFunction(_torch.autograd.Function):
    """y = x·Wᵀ + b with the backward on vkgradd. apply(x, weight, bias,
    client): bias may be None, client None means default_client()."""

    @staticmethod
    def forward(ctx, x, weight, bias, client):
        for t, what in ((x, "input"), (weight, "weight")) + (((bias, "bias"),) if bias is not None else ()):
            _check(t, what)
            if t.dtype != x.dtype:
                raise TypeError("vkgrad.torch: %s has dtype %s, the input %s" % (what, t.dtype, x.dtype))
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        ctx.client = client
        return _forward(x, weight, bias)

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        need_dx, need_dw, need_db = ctx.needs_input_grad[:3]
        need_db = need_db and ctx.has_bias
        want = [n for n, on in (("dx", need_dx), ("dw", need_dw), ("db", need_db)) if on]
        if not want:
            return None, None, None, None
        n_out, n_in = weight.shape
        x2 = x.reshape(-1, n_in)
        dy2 = grad_out.reshape(-1, n_out).to(x.dtype)
        if x2.shape[0] == 0:  # the protocol has no empty batch
            g = {"dx": _torch.zeros_like(x2), "dw": _torch.zeros_like(weight),
                 "db": _torch.zeros(n_out, dtype=x.dtype)}
        else:
            c = ctx.client if ctx.client is not None else default_client()
            r = c.linear_backward(_to_numpy(x2), _to_numpy(dy2),
                                  _to_numpy(weight) if need_dx else None,
                                  outputs=want, dtype=_DTYPES[x.dtype])
            g = {k: _from_numpy(v, x.dtype) for k, v in r.items()}
        dx = g["dx"].reshape(x.shape) if need_dx else None
        return dx, g.get("dw") if need_dw else None, g.get("db") if need_db else None, None


class Linear(_torch.nn.Linear):
    """nn.Linear whose backward runs on vkgradd (same parameters, init and
    state_dict). client: a vkgrad.Client, or None for default_client()."""

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


def convert(module, client=None):
    """Replace every nn.Linear inside module (and module itself, when it is
    one) by a vkgrad Linear sharing its parameters; returns the module."""
    if type(module) is _torch.nn.Linear:
        return Linear.from_linear(module, client)
    for name, child in module.named_children():
        setattr(module, name, convert(child, client))
    return module

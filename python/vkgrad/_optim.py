"""The optimizer step on the daemon (proto/README.md, "Optimizer steps"):
the Client's sgd_step / adam_step and their submit_ forms (a mixin of
Client) over libvkgrad's vkg_submit_sgd_step / vkg_submit_adam_step.

torch.optim.SGD, Adam and AdamW's update rules on device tensors
(Client.tensor_new), f32 math, each stored value rounded once. One call
steps many parameters: param, grad and the buffers are each a tensor (a
vkgrad.Tensor or an int id) or a sequence of them, all of one length
(1 .. 256), each grad and buffer of its param's shape; dtypes may differ.
The step is ordered with the connection's jobs: submitted after a
backward, it sees that backward's gradients, without a wait in between.
"""

from __future__ import annotations

import ctypes
from typing import Any, Optional, Sequence, Union

import numpy as np

from . import _lib
from ._future import Future
from ._lib import lib

__all__ = ["MAX_PARAMS"]

MAX_PARAMS = 256  # parameters per request (proto/optim.h PROTO_OPTIM_MAX_N)

_U64P = ctypes.POINTER(ctypes.c_uint64)
_ERR = ctypes.POINTER(_lib.vkg_error)


class vkg_sgd_args(ctypes.Structure):
    _fields_ = [("lr", ctypes.c_double), ("momentum", ctypes.c_double),
                ("dampening", ctypes.c_double), ("weight_decay", ctypes.c_double),
                ("nesterov", ctypes.c_bool), ("first_step", ctypes.c_bool)]


class vkg_adam_args(ctypes.Structure):
    _fields_ = [("lr", ctypes.c_double), ("beta1", ctypes.c_double), ("beta2", ctypes.c_double),
                ("eps", ctypes.c_double), ("weight_decay", ctypes.c_double),
                ("step", ctypes.c_uint64), ("decoupled", ctypes.c_bool)]


_lib._decl("vkg_submit_sgd_step", ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, _U64P, _U64P,
           _U64P, ctypes.POINTER(vkg_sgd_args), _U64P, _ERR)
_lib._decl("vkg_submit_adam_step", ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, _U64P, _U64P,
           _U64P, _U64P, ctypes.POINTER(vkg_adam_args), _U64P, _ERR)

Tensors = Union[int, Sequence[int]]


def _ids(name, v, n=None):
    """v (a tensor id or a sequence of them) as a ctypes uint64 array."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        v = [v]
    elif isinstance(v, (str, bytes)) or not hasattr(v, "__len__"):
        raise TypeError("%s must be a tensor (vkgrad.Tensor or int id) or a sequence of them, not %s"
                        % (name, type(v).__name__))
    v = list(v)
    for i, t in enumerate(v):
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not 0 <= int(t) < (1 << 64):
            raise TypeError("%s[%d] must be a tensor id, not %r" % (name, i, t))
    if not v:
        raise ValueError("%s is empty: a step names 1 to %d parameters" % (name, MAX_PARAMS))
    if n is not None and len(v) != n:
        raise ValueError("%s names %d tensors; param %d (one of each per parameter)"
                         % (name, len(v), n))
    return (ctypes.c_uint64 * len(v))(*[int(t) for t in v]), len(v)


def _num(name, v):
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError("%s must be a number, not %s" % (name, type(v).__name__))
    return float(v)


def _flag(name, v):
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError("%s must be a bool, not %s" % (name, type(v).__name__))
    return bool(v)


class _OptimOps:
    """Client's optimizer steps (vkgrad.Client inherits them)."""

    def submit_sgd_step(self, param: Tensors, grad: Tensors, lr: float, momentum: float = 0.0,
                        dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
                        momentum_buf: Optional[Tensors] = None, first_step: bool = False) -> Future:
        """torch.optim.SGD's step of every param (in place) from its grad:
        g = grad + weight_decay·param; with momentum > 0 (momentum_buf: a
        tensor per param) buf = grad on first_step (torch's first step; the
        buffer's old contents are not read), else momentum·buf + (1 −
        dampening)·g, and g = g + momentum·buf (nesterov) or buf; param −=
        lr·g. Returns a Future (result() {} once done)."""
        p, n = _ids("param", param)
        g, _ = _ids("grad", grad, n)
        mom = _num("momentum", momentum)
        b = None
        if momentum_buf is not None:
            b, _ = _ids("momentum_buf", momentum_buf, n)
        elif mom != 0:
            raise TypeError("momentum %g needs momentum_buf (a tensor per param)" % mom)
        a = vkg_sgd_args(lr=_num("lr", lr), momentum=mom, dampening=_num("dampening", dampening),
                         weight_decay=_num("weight_decay", weight_decay),
                         nesterov=_flag("nesterov", nesterov),
                         first_step=_flag("first_step", first_step))
        return self._submit_call(lib.vkg_submit_sgd_step, n, p, g, b, ctypes.byref(a))

    def sgd_step(self, *args: Any, **kw: Any) -> None:
        """submit_sgd_step, waited for."""
        self.submit_sgd_step(*args, **kw).result()

    def submit_adam_step(self, param: Tensors, grad: Tensors, m: Tensors, v: Tensors, step: int,
                         lr: float, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
                         weight_decay: float = 0.0, decoupled: bool = False) -> Future:
        """torch.optim.Adam's step (AdamW's with decoupled=True) of every
        param (in place) from its grad and its moment tensors m and v (zeros
        before the first step: tensor_new's); step >= 1 is the step count
        after this step (torch's state['step']). Returns a Future."""
        p, n = _ids("param", param)
        g, _ = _ids("grad", grad, n)
        mm, _ = _ids("m", m, n)
        vv, _ = _ids("v", v, n)
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
            raise TypeError("step must be an int >= 1, not %r" % (step,))
        a = vkg_adam_args(lr=_num("lr", lr), beta1=_num("beta1", beta1), beta2=_num("beta2", beta2),
                          eps=_num("eps", eps), weight_decay=_num("weight_decay", weight_decay),
                          step=int(step), decoupled=_flag("decoupled", decoupled))
        return self._submit_call(lib.vkg_submit_adam_step, n, p, g, mm, vv, ctypes.byref(a))

    def adam_step(self, *args: Any, **kw: Any) -> None:
        """submit_adam_step, waited for."""
        self.submit_adam_step(*args, **kw).result()

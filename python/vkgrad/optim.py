"""vkgrad.torch.optim: SGD, Adam and AdamW whose step runs on vkgradd for
resident parameters (vkgrad.torch.convert(model, resident=True)).

They are torch.optim.Optimizer subclasses taking torch's arguments (what
they do not support is refused with a ValueError naming it), so that
param_groups, add_param_group and learning-rate schedulers work as with
torch's. A step sends, per parameter group and connection, one sgd_step or
adam_step request naming every resident parameter with a gradient and its
state tensors (momentum buffer; exp_avg, exp_avg_sq), and does not wait for
it. State buffers are float32 daemon tensors, whatever the parameter's
dtype (the daemon's math is float32, each stored value rounded once).
Parameters that are not resident (a LayerNorm's, say) are stepped by
torch's own optimizer of the same kind, with the same settings.

zero_grad() marks the resident gradients zero without touching memory (set_to_none
is accepted and ignored for them: their .grad reads None afterwards, as
torch 2's default); the next backward overwrites them. state_dict() brings
the daemon's state down (torch's keys: momentum_buffer; step, exp_avg,
exp_avg_sq); load_state_dict() sends it up."""

import weakref

import torch as _torch

from ._optim import MAX_PARAMS as _MAX_LIST  # parameters per request (the daemon's limit)
from .resident import is_resident

__all__ = ["SGD", "Adam", "AdamW"]


def _refuse(name, why):
    raise ValueError("vkgrad.torch.optim.%s: %s" % (name, why))


def _free_state(dev):
    """The optimizer is gone: its state tensors go (with each stream's next
    request)."""
    for p, d in list(dev.items()):
        for k, v in d.items():
            if k in ("momentum_buffer", "exp_avg", "exp_avg_sq"):
                p._vk.s.free(v)


class _DaemonOptimizer(_torch.optim.Optimizer):
    _torch_cls = None
    _keys = ()            # torch's state keys of tensors

    def __init__(self, params, defaults):
        super().__init__(params, defaults)
        self._dev = {}    # resident parameter -> {key: daemon tensor id, ...}
        weakref.finalize(self, _free_state, self._dev)
        self._inner = None
        self._host_ok = True  # self.state matches the daemon's

    # -- host parameters: torch's optimizer
    def _host_step(self):
        groups = [[p for p in g["params"] if not is_resident(p)] for g in self.param_groups]
        if not any(groups):
            return
        if self._inner is None or [len(g["params"]) for g in self._inner.param_groups] != \
                [len(g) for g in groups if g]:
            spec = [dict({k: v for k, v in g.items() if k != "params"}, params=h)
                    for g, h in zip(self.param_groups, groups) if h]
            self._inner = self._torch_cls(spec)
        self._inner.state = self.state  # one state (state_dict, load_state_dict)
        inner = iter(self._inner.param_groups)
        for g, h in zip(self.param_groups, groups):
            if h:
                ig = next(inner)
                ig.update({k: v for k, v in g.items() if k != "params"})
        self._inner.step()

    def zero_grad(self, set_to_none=True):
        for g in self.param_groups:
            for p in g["params"]:
                if is_resident(p):
                    p._vk.set_grad(p, None)
                elif set_to_none:
                    p.grad = None
                elif p.grad is not None:
                    p.grad.detach_()
                    p.grad.zero_()

    @_torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with _torch.enable_grad():
                loss = closure()
        for gi, g in enumerate(self.param_groups):
            batches = {}
            for p in g["params"]:
                if not is_resident(p):
                    continue
                st = p._vk
                st.push(p)
                st.push_grad()
                if st.grad == "zero":
                    continue
                d = self._dev.get(p)
                if d is None:
                    d = self._dev[p] = self._new_state(p)
                batches.setdefault((st.s, self._batch_key(d)), []).append(p)
            for (s, key), ps in batches.items():
                for i in range(0, len(ps), _MAX_LIST):
                    part = ps[i:i + _MAX_LIST]
                    self._send(s, g, key, part)
                    for p in part:
                        p._vk.changed_on_daemon()
                        self._advance(self._dev[p])
                self._host_ok = False
        self._host_step()
        return loss

    def _new_state(self, p):
        s = p._vk.s
        return {k: s.new("f32", p._vk.rows, p._vk.cols) for k in self._keys}

    # -- state_dict
    def state_dict(self):
        self._pull_state()
        return super().state_dict()

    def _pull_state(self):
        """self.state[p] gets the daemon's buffers (float32 host tensors)."""
        from ._tensors import empty
        if self._host_ok:
            return
        futs = []
        for p, d in self._dev.items():
            st = self.state[p]
            for k in self._keys:
                h = empty(p._vk.shape, _torch.float32, p._vk.s.c)
                futs.append((p._vk.s, p._vk.s.read(d[k], h)))
                st[k] = h
            self._host_state(st, d)
        for s, f in futs:
            s.wait(f)
        self._host_ok = True

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        from ._tensors import empty
        for g in self.param_groups:
            for p in g["params"]:
                if not is_resident(p) or p not in self.state or not self.state[p]:
                    continue
                st = self.state[p]
                d = self._dev.get(p) or self._new_state(p)
                self._dev[p] = d
                for k in self._keys:
                    if k in st:
                        h = empty(p._vk.shape, _torch.float32, p._vk.s.c)
                        h.copy_(st[k].reshape(p._vk.shape))
                        p._vk.s.write(d[k], h)
                self._dev_state(st, d)
        self._host_ok = True


class SGD(_DaemonOptimizer):
    """torch.optim.SGD(params, lr, momentum=0, dampening=0, weight_decay=0,
    nesterov=False); maximize, differentiable and fused are refused when
    on; foreach is ignored (one request per step anyway)."""

    _torch_cls = _torch.optim.SGD

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                 *, maximize=False, foreach=None, differentiable=False, fused=None):
        if maximize:
            _refuse("SGD", "maximize=True is not supported")
        if differentiable:
            _refuse("SGD", "differentiable=True is not supported")
        if fused:
            _refuse("SGD", "fused=True is not supported")
        if lr < 0.0:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if momentum < 0.0:
            raise ValueError("Invalid momentum value: {}".format(momentum))
        if weight_decay < 0.0:
            raise ValueError("Invalid weight_decay value: {}".format(weight_decay))
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov))

    @property
    def _keys(self):
        return ("momentum_buffer",) if any(g["momentum"] for g in self.param_groups) else ()

    def _new_state(self, p):
        d = super()._new_state(p)
        d["first"] = True
        return d

    def _batch_key(self, d):
        return bool(d.get("first"))

    def _advance(self, d):
        d["first"] = False

    def _send(self, s, g, first, ps):
        keys = dict(param=[p._vk.t for p in ps], grad=[p._vk.g for p in ps], lr=float(g["lr"]),
                    weight_decay=float(g["weight_decay"]))
        if g["momentum"]:
            keys.update(momentum=float(g["momentum"]), dampening=float(g["dampening"]),
                        nesterov=bool(g["nesterov"]),
                        momentum_buf=[self._dev[p]["momentum_buffer"] for p in ps],
                        first_step=first)
        s.sgd_step(**keys)

    def _host_state(self, st, d):
        pass

    def _dev_state(self, st, d):
        d["first"] = "momentum_buffer" not in st


class Adam(_DaemonOptimizer):
    """torch.optim.Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
    weight_decay=0, decoupled_weight_decay=False: True is AdamW's update);
    amsgrad, maximize, capturable, differentiable and fused are refused
    when on; foreach is ignored."""

    _torch_cls = _torch.optim.Adam
    _keys = ("exp_avg", "exp_avg_sq")
    _name = "Adam"
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        if decoupled_weight_decay:  # (newer torch's Adam flag: AdamW's update)
            self._decoupled, self._torch_cls = True, _torch.optim.AdamW
        for flag, what in ((amsgrad, "amsgrad"), (maximize, "maximize"), (capturable, "capturable"),
                           (differentiable, "differentiable"), (fused, "fused")):
            if flag:
                _refuse(self._name, "%s=True is not supported" % what)
        if not 0.0 <= lr:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if not 0.0 <= eps:
            raise ValueError("Invalid epsilon value: {}".format(eps))
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError("Invalid beta parameter at index 0: {}".format(betas[0]))
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError("Invalid beta parameter at index 1: {}".format(betas[1]))
        if not 0.0 <= weight_decay:
            raise ValueError("Invalid weight_decay value: {}".format(weight_decay))
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=False))

    def _new_state(self, p):
        d = super()._new_state(p)
        d["step"] = 0
        return d

    def _batch_key(self, d):
        return d["step"]

    def _advance(self, d):
        d["step"] += 1

    def _send(self, s, g, step, ps):
        b1, b2 = g["betas"]
        s.adam_step(param=[p._vk.t for p in ps], grad=[p._vk.g for p in ps],
                    m=[self._dev[p]["exp_avg"] for p in ps],
                    v=[self._dev[p]["exp_avg_sq"] for p in ps], step=step + 1, lr=float(g["lr"]),
                    beta1=float(b1), beta2=float(b2), eps=float(g["eps"]),
                    weight_decay=float(g["weight_decay"]), decoupled=self._decoupled)

    def _host_state(self, st, d):
        st["step"] = _torch.tensor(float(d["step"]))

    def _dev_state(self, st, d):
        s = st.get("step", 0)
        d["step"] = int(s.item() if isinstance(s, _torch.Tensor) else s)


class AdamW(Adam):
    """torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
    weight_decay=1e-2): Adam with decoupled weight decay; the same refusals."""

    _torch_cls = _torch.optim.AdamW
    _name = "AdamW"
    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, **kw):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, **kw)

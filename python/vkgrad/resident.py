"""Resident mode of vkgrad.torch: a model's Linear layers kept on vkgradd.

    import vkgrad.torch as vt
    model = vt.convert(model, resident=True)
    opt = vt.optim.AdamW(model.parameters(), lr=1e-3)
    for x, t in data:
        opt.zero_grad()
        loss = F.mse_loss(model(x), t)
        loss.backward()
        opt.step()

Every converted nn.Linear keeps its weight, bias and their gradients in
daemon tensors (tensor_new). Consecutive Linear and ReLU / GELU(approximate=
"tanh") modules of an nn.Sequential run as one chain: the input goes up once
(tensor_write), each Linear is one linear_forward job with its activation
fused, writing daemon tensors (its output, and the pre-activation z where
GELU's backward needs it), and only the chain's output comes down
(tensor_read). Its backward sends only the output's gradient, runs one
linear_backward per layer (the activation's derivative fused; dW and db
into the gradient tensors, dX into the next layer's dY) and brings dX of
the first layer down only when the input requires grad. Other modules run
in torch on the CPU between chains (their inputs and outputs cross).

Nothing waits per operation: requests go out asynchronously, in the
connection's order, and the host waits only where it needs a value (the
chain's output; dX; reading a parameter). A failed request's error is
raised at the next wait of its connection.

The host side of a resident parameter is its Parameter object, kept for
torch (optimizers, state_dict keys, parameters()); its class becomes
ResidentParameter, whose .grad reads the daemon's gradient when the host
copy is stale and whose .grad setter uploads (None: the gradient is zero,
and the next backward overwrites instead of adding). Reading module.weight
(or .bias), module.state_dict() and .grad bring current values down;
load_state_dict() and in-place changes of a parameter or gradient read that
way (seen through torch's version counter) go up before the next daemon use.
A Parameter reached through parameters() is not synced by reading it: call
sync(model) first."""

import math
import weakref

import torch as _torch

from ._stream import stream_of
from ._tensors import _DTYPES, empty, linear_params_why_not

__all__ = ["ResidentLinear", "ResidentParameter", "ResidentSequential", "convert_resident",
           "sync", "synchronize", "is_resident", "stream_of"]

_ACTS = ("none", "relu", "gelu")


# ---- parameters -------------------------------------------------------------------

class _State:
    """A resident parameter: its daemon tensor and gradient, and where the
    newest value of each is.

    value: the daemon holds it; host_ok: the Parameter's memory equals it
    (and host_ver is the Parameter's version then: a change in place since
    is uploaded before the next daemon use). grad: "zero" (none: the next
    backward overwrites) or "dev" (in the gradient tensor); ghost, the host
    copy of the gradient (a region tensor), valid when ghost_ok and
    unchanged since (ghost_ver)."""

    def __init__(self, p, stream):
        self.s = stream
        self.dtype = _DTYPES[p.dtype]
        shape = tuple(p.shape)
        self.shape = shape
        self.rows, self.cols = (1, shape[0]) if len(shape) == 1 else shape
        self.t = stream.new(self.dtype, self.rows, self.cols)
        self.g = None
        self.grad = "zero"
        self.ghost = None
        self.ghost_ok = False
        self.ghost_ver = 0
        self.ghost_up = None  # the last upload from ghost (set_grad)
        self.host_ok = True
        self.host_ver = -1   # uploaded below
        self.p = weakref.ref(p)
        weakref.finalize(p, _free_state, stream, [self.t], self)

    def grad_tensor(self):
        if self.g is None:
            self.g = self.s.new(self.dtype, self.rows, self.cols)
        return self.g

    # -- value
    def push(self, p):
        """Upload the Parameter's memory when it changed on the host."""
        if p._version != self.host_ver:
            self.s.write(self.t, p.data)
            self.host_ok, self.host_ver = True, p._version

    def pull(self, p):
        """Bring the value down when the host copy is stale."""
        if not self.host_ok:
            self.s.wait(self.s.read(self.t, p.data))
            self.host_ok, self.host_ver = True, p._version

    def changed_on_daemon(self):
        self.host_ok = False

    # -- gradient
    def push_grad(self):
        """The host gradient changed in place (clip_grad_norm_, zero_()):
        all zeros makes the state zero, anything else goes up."""
        gh = self.ghost
        if gh is not None and self.ghost_ok and gh._version != self.ghost_ver:
            self.ghost_ver = gh._version
            if not bool(gh.any()):
                self.grad = "zero"
            else:
                self.s.write(self.grad_tensor(), gh)
                self.grad = "dev"

    def grad_changed_on_daemon(self):
        self.grad = "dev"
        self.ghost_ok = False

    def host_grad(self, p):
        self.push_grad()
        if self.grad == "zero":
            return None
        if self.ghost is None:
            self.ghost = empty(self.shape, p.dtype, self.s.c)
        if not self.ghost_ok:
            self.s.wait(self.s.read(self.g, self.ghost))
            self.ghost_ok, self.ghost_ver = True, self.ghost._version
        return self.ghost

    def set_grad(self, p, v):
        if v is None:
            self.grad = "zero"
            self.ghost_ok = False
            return
        if not isinstance(v, _torch.Tensor) or tuple(v.shape) != self.shape or v.dtype != p.dtype:
            raise RuntimeError("vkgrad.torch resident: a gradient must be a tensor of shape %s and "
                               "dtype %s" % (self.shape, p.dtype))
        if self.ghost is None:
            self.ghost = empty(self.shape, p.dtype, self.s.c)
        elif self.ghost_up is not None and not self.ghost_up.done():
            self.ghost_up.result()  # the last upload from it has read it
        self.ghost.copy_(v.detach())
        self.ghost_up = self.s.write(self.grad_tensor(), self.ghost)
        self.grad, self.ghost_ok, self.ghost_ver = "dev", True, self.ghost._version


def _free_state(stream, ts, st):
    for t in ts + ([st.g] if st.g is not None else []):
        stream.free(t)


class ResidentParameter(_torch.nn.Parameter):
    """A Parameter whose value and gradient live in daemon tensors (see the
    module's docstring); .grad reads and writes them."""

    @property
    def grad(self):
        st = self.__dict__.get("_vk")
        if st is None:
            return _torch.Tensor.grad.__get__(self)
        return st.host_grad(self)

    @grad.setter
    def grad(self, v):
        st = self.__dict__.get("_vk")
        if st is None:
            _torch.Tensor.grad.__set__(self, v)
        else:
            st.set_grad(self, v)

    @grad.deleter
    def grad(self):
        self.grad = None


def is_resident(p):
    return isinstance(p, ResidentParameter) and "_vk" in p.__dict__


def _make_resident(p, stream):
    """Parameter p (the same object) becomes resident: its memory moves into
    a region (uploads and reads need no copy), its value goes up."""
    if is_resident(p):
        if p._vk.s is not stream:
            raise ValueError("vkgrad.torch resident: a parameter shared by layers of two clients")
        return p
    if p.grad is not None:
        g = p.grad.detach().clone()
    else:
        g = None
    from ._tensors import to_region
    p.data = to_region(p.data, stream.c)
    _torch.Tensor.grad.__set__(p, None)
    p.__class__ = ResidentParameter
    p._vk = _State(p, stream)
    p._vk.push(p)
    if g is not None:
        p._vk.set_grad(p, g)
    return p


def _sync_param(p):
    if is_resident(p):
        p._vk.pull(p)
        p._vk.push_grad()


def synchronize(client=None):
    """Wait for every resident request the client (default_client()) sent
    so far; raises the first that failed."""
    stream_of(client).finish()


def sync(module):
    """Bring every resident parameter of module (and its gradient's state)
    up to date on the host: afterwards parameters() hold current values.
    Waits for everything the module's connections have in flight."""
    for p in module.parameters():
        _sync_param(p)
    for s in {p._vk.s for p in module.parameters() if is_resident(p)}:
        s.finish()
    return module


# ---- activation sets: the tensors one forward keeps for its backward --------------

class _Acts:
    """Daemon tensors of one forward of a chain: its input, each layer's
    output (y) and, for GELU, pre-activation (z). Back in the stream's free
    list when the graph that needs them dies (or at once without one)."""

    def __init__(self, s, key, dtype, batch, dims, acts):
        self.s, self.key = s, key
        self.x = s.new(dtype, batch, dims[0])
        self.y = [s.new(dtype, batch, d) for d in dims[1:]]
        self.z = [s.new(dtype, batch, d) if a == "gelu" else None for d, a in zip(dims[1:], acts)]

    def ids(self):
        return [self.x] + self.y + [z for z in self.z if z is not None]


def _take_acts(s, dtype, batch, dims, acts):
    key = (dtype, batch, tuple(dims), tuple(acts))
    with s.lock:
        lst = s.free_acts.get(key)
        if lst:
            return lst.pop()
    return _Acts(s, key, dtype, batch, dims, acts)


_KEEP_ACTS = 8      # activation sets a stream keeps for reuse (all shapes)


def _give_acts(a):
    """a back into its stream's free list; past _KEEP_ACTS sets the oldest
    go (freed with the stream's next request)."""
    s = a.s
    with s.lock:
        s.free_acts.setdefault(a.key, []).append(a)
        n = sum(len(v) for v in s.free_acts.values())
        while n > _KEEP_ACTS:
            key = next(iter(s.free_acts))
            old = s.free_acts[key].pop(0)
            if not s.free_acts[key]:
                del s.free_acts[key]
            for t in old.ids():
                s.free(t)
            n -= 1


class _Release:
    """Held by the autograd node: gives the activation set back when the
    graph dies."""

    def __init__(self, a):
        self.a = a
        weakref.finalize(self, _give_acts, a)


# ---- the chain --------------------------------------------------------------------

def _act_of(m):
    """"relu" / "gelu" for an activation module the kernels fuse, else None."""
    if type(m) is _torch.nn.ReLU:
        return "relu"
    if type(m) is _torch.nn.GELU and getattr(m, "approximate", "none") == "tanh":
        return "gelu"
    return None


class _ChainFn(_torch.autograd.Function):
    """A chain of resident Linear layers with fused activations:
    apply(layers, acts, keep, x, *params) with layers [ResidentLinear],
    acts ["none"|"relu"|"gelu"] (after each layer), params every layer's
    weight and bias (so that autograd calls backward; their gradients land
    in daemon tensors, not in autograd)."""

    @staticmethod
    def forward(ctx, layers, acts, keep, x, *params):
        lin0 = layers[0]
        s = lin0._stream()
        w0 = lin0._parameters["weight"]
        dt = _DTYPES.get(x.dtype)
        if x.device.type != "cpu" or x.dtype != w0.dtype:
            raise TypeError("vkgrad.torch resident: the input is %s on %s; the layer wants %s on "
                            "the CPU" % (x.dtype, x.device, w0.dtype))
        if x.shape[-1] != lin0.in_features:
            raise RuntimeError("vkgrad.torch resident: input of %d features, layer takes %d"
                               % (x.shape[-1], lin0.in_features))
        dims = [lin0.in_features] + [m.out_features for m in layers]
        lead = tuple(x.shape[:-1])
        batch = math.prod(lead)
        ctx.layers, ctx.acts, ctx.lead, ctx.batch, ctx.dt = layers, acts, lead, batch, dt
        ctx.rel = None
        if batch == 0:
            return _torch.zeros(lead + (dims[-1],), dtype=x.dtype)
        for m in layers:
            for p in m._parameters.values():
                if p is not None:
                    p._vk.push(p)
        a = _take_acts(s, dt, batch, dims, acts)
        s.upload(a.x, x.reshape(batch, dims[0]))
        cur = a.x
        for k, m in enumerate(layers):
            b = m._parameters.get("bias")
            s.forward(dt, cur, m._parameters["weight"]._vk.t, b._vk.t if b is not None else None,
                      a.y[k], a.z[k], acts[k])
            cur = a.y[k]
        # (a tensor of its own, not a view: torch lets a Function's output
        # be changed in place only then)
        out = empty(lead + (dims[-1],), x.dtype, s.c)
        s.wait(s.read(cur, out))
        if keep:
            ctx.rel = _Release(a)
        else:
            _give_acts(a)
        return out

    @staticmethod
    def backward(ctx, gy):
        layers, acts, dt = ctx.layers, ctx.acts, ctx.dt
        nparams = sum(len([p for p in m._parameters.values() if p is not None]) for m in layers)
        none = (None,) * (3 + nparams)
        need_x = ctx.needs_input_grad[3]
        if ctx.batch == 0:
            return none + (None,) if not need_x else \
                none[:3] + (_torch.zeros(ctx.lead + (layers[0].in_features,), dtype=gy.dtype),) + \
                none[3:]
        if ctx.rel is None:
            raise RuntimeError("vkgrad.torch resident: backward through a chain whose forward kept "
                               "no activations (it ran without grad)")
        a = ctx.rel.a
        s = layers[0]._stream()
        w0 = layers[0]._parameters["weight"]
        batch = ctx.batch
        g = gy.reshape(batch, layers[-1].out_features)
        if g.dtype != w0.dtype:
            g = g.to(w0.dtype)
        s.trim_scratch()
        cur = s.scratch_for(dt, batch, layers[-1].out_features, ())
        s.upload(cur, g)
        for k in range(len(layers) - 1, -1, -1):
            m = layers[k]
            w, b = m._parameters["weight"], m._parameters.get("bias")
            xin = a.x if k == 0 else a.y[k - 1]
            over, accum = {}, {}
            for key, p in (("dw", w), ("db", b)):
                if p is None or not p.requires_grad:
                    continue
                st = p._vk
                st.push_grad()
                (accum if st.grad == "dev" else over)[key] = st.grad_tensor()
            want_dx = k > 0 or need_x
            if want_dx:
                over["dx"] = s.scratch_for(dt, batch, m.in_features, (cur,))
            act = acts[k]
            yk = a.y[k] if act == "relu" else None
            zk = a.z[k] if act == "gelu" else None
            wt = w._vk.t if want_dx else None
            if over:
                s.backward(dt, xin, cur, wt if "dx" in over else None, over, act, yk, zk, False)
            if accum:
                s.backward(dt, xin, cur, None, accum, act, yk, zk, True)
            for key, p in (("dw", w), ("db", b)):
                if key in over or key in accum:
                    p._vk.grad_changed_on_daemon()
            if want_dx:
                cur = over["dx"]
        dx = None
        if need_x:
            dx = empty(ctx.lead + (layers[0].in_features,), w0.dtype, s.c)
            s.wait(s.read(cur, dx))
        return (None, None, None, dx) + (None,) * nparams


def _run_chain(layers, acts, x):
    params = [p for m in layers for p in m._parameters.values() if p is not None]
    keep = _torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in params))
    return _ChainFn.apply(layers, acts, keep, x, *params)


class ResidentLinear(_torch.nn.Linear):
    """An nn.Linear whose weight and bias (ResidentParameter) live on the
    daemon; called on its own it is a chain of one layer."""

    def _stream(self):
        return self.__dict__["_vk_stream"]

    @classmethod
    def from_linear(cls, lin, stream):
        new = cls.__new__(cls)
        _torch.nn.Module.__init__(new)
        new.in_features, new.out_features = lin.in_features, lin.out_features
        new.__dict__["_vk_stream"] = stream
        new.weight = _make_resident(lin.weight, stream)
        new.register_parameter("bias", _make_resident(lin.bias, stream)
                               if lin.bias is not None else None)
        return new

    def forward(self, input):
        return _run_chain([self], ["none"], input)

    def __getattr__(self, name):
        ps = self.__dict__["_parameters"]
        if name in ("weight", "bias") and name in ps:
            p = ps[name]
            if p is not None:
                _sync_param(p)
            return p
        return super().__getattr__(name)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for p in self._parameters.values():
            if p is not None:
                _sync_param(p)
        super()._save_to_state_dict(destination, prefix, keep_vars)

    def _load_from_state_dict(self, *args, **kw):
        for p in self._parameters.values():
            if p is not None:
                _sync_param(p)  # (what the state dict leaves out stays current)
        super()._load_from_state_dict(*args, **kw)
        for name, p in self._parameters.items():
            if p is None:
                continue
            if not is_resident(p):  # load_state_dict(assign=True): a new Parameter
                self._parameters[name] = _make_resident(p, self._stream())
            else:
                p._vk.push(p)   # what it copied in (in place: the version moved)


def _chainable(m):
    return isinstance(m, ResidentLinear) and not (m._forward_hooks or m._forward_pre_hooks)


class ResidentSequential(_torch.nn.Sequential):
    """nn.Sequential whose runs of resident Linear layers (each optionally
    followed by ReLU or GELU(approximate="tanh")) run as chains on the
    daemon; the other modules run as they are. Same modules, same names,
    same state_dict."""

    def forward(self, input):
        mods = list(self._modules.values())
        i, x = 0, input
        while i < len(mods):
            if not _chainable(mods[i]):
                x = mods[i](x)
                i += 1
                continue
            layers, acts = [], []
            s = mods[i]._stream()
            while i < len(mods) and _chainable(mods[i]) and mods[i]._stream() is s \
                    and (not layers or mods[i].weight_dtype() == layers[0].weight_dtype()):
                layers.append(mods[i])
                i += 1
                act = "none"
                if i < len(mods) and _act_of(mods[i]) and not (mods[i]._forward_hooks
                                                               or mods[i]._forward_pre_hooks):
                    act = _act_of(mods[i])
                    i += 1
                acts.append(act)
            x = _run_chain(layers, acts, x)
        return x


def _weight_dtype(self):
    return self._parameters["weight"].dtype


ResidentLinear.weight_dtype = _weight_dtype


def _why_not(m):
    if type(m).forward is not _torch.nn.Linear.forward and not isinstance(m, ResidentLinear):
        return "%s overrides forward()" % type(m).__name__
    return linear_params_why_not(m)


def convert_resident(module, client=None, report=None, log=None):
    """vkgrad.torch.convert(module, resident=True): every nn.Linear (subclasses
    that keep nn.Linear's forward included) becomes a ResidentLinear sharing
    its Parameter objects (now ResidentParameter, on the daemon); every plain
    nn.Sequential becomes a ResidentSequential (its chains run on the
    daemon). Returns the module."""
    s = stream_of(client)
    rep = report if report is not None else {}
    rep.setdefault("replaced", [])
    rep.setdefault("skipped", [])
    rep.setdefault("chains", [])

    def one(m, name):
        if isinstance(m, ResidentLinear):
            return m
        if isinstance(m, _torch.nn.Linear):
            why = _why_not(m)
            if why is None:
                rep["replaced"].append(name)
                if log:
                    log.info("convert: %s (%s %dx%d) -> resident", name, type(m).__name__,
                             m.out_features, m.in_features)
                return ResidentLinear.from_linear(m, s)
            rep["skipped"].append((name, why))
            if log:
                log.info("convert: %s skipped: %s", name, why)
        for n, child in m.named_children():
            new = one(child, name + "." + n if name else n)
            if new is not child:
                setattr(m, n, new)
        if type(m) is _torch.nn.Sequential:
            m.__class__ = ResidentSequential
            rep["chains"].append(name)
        return m

    return one(module, "")

"""The daemon's resident-training ops from Python (proto/README.md,
Additions): the fused activations of linear_forward / linear_backward
(`activation=`, `y=`, `z=`), checked against torch run in float64 —
torch.nn.functional.relu and gelu(approximate="tanh"), gradients by
autograd — at the dtype's tolerance; the optimizer steps (sgd_step,
adam_step on device tensors) over several steps against torch.optim.SGD,
Adam and AdamW run in float64; and bad arguments, each followed by a job
that succeeds."""

import unittest

import numpy as np
import torch

import vkgrad
from daemon import Daemon

D = None
TOL = {"f32": 1e-4, "bf16": 1e-2}


def setUpModule():
    global D
    D = Daemon()


def tearDownModule():
    problems = D.stop()
    if problems:
        raise AssertionError("daemon: " + problems)


def rel_err(got, want):
    """max |got - want| / max |want| (a normwise relative error)."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))


def act64(name, z):
    if name == "relu":
        return torch.nn.functional.relu(z)
    return torch.nn.functional.gelu(z, approximate="tanh")


def as_f64(a, dt):
    return vkgrad.from_bf16(a).astype(np.float64) if dt == "bf16" else a.astype(np.float64)


class TestActivations(unittest.TestCase):
    def setUp(self):
        self.c = vkgrad.connect(D.sock)
        self.rng = np.random.default_rng(7)

    def tearDown(self):
        self.c.close()

    def data(self, batch, n_in, n_out, dt):
        r = self.rng
        x = r.standard_normal((batch, n_in)).astype(np.float32)
        w = (r.standard_normal((n_out, n_in)) / np.sqrt(n_in)).astype(np.float32)
        b = r.standard_normal(n_out).astype(np.float32)
        dy = r.standard_normal((batch, n_out)).astype(np.float32)
        if dt == "bf16":
            x, w, b, dy = (vkgrad.to_bf16(a) for a in (x, w, b, dy))
        return x, w, b, dy

    def test_forward_and_backward_against_torch(self):
        for dt in ("f32", "bf16"):
            for act in ("relu", "gelu"):
                for variant in (None, "generic", "tiled", "splitk"):
                    with self.subTest(dtype=dt, activation=act, variant=variant):
                        x, w, b, dy = self.data(37, 29, 23, dt)
                        y, z = self.c.linear_forward(x, w, b, dtype=dt, variant=variant,
                                                     activation=act, z=True)
                        X, W, B, DY = (torch.tensor(as_f64(a, dt), requires_grad=True)
                                       for a in (x, w, b, dy))
                        Z = X @ W.T + B
                        Y = act64(act, Z)
                        self.assertLessEqual(rel_err(as_f64(z, dt), Z.detach()), TOL[dt])
                        self.assertLessEqual(rel_err(as_f64(y, dt), Y.detach()), TOL[dt])
                        (Y * DY).sum().backward()
                        kw = {"y": y} if act == "relu" else {"z": z}
                        g = self.c.linear_backward(x, dy, w, dtype=dt, variant=variant,
                                                   activation=act, **kw)
                        for k, ref in (("dw", W.grad), ("db", B.grad), ("dx", X.grad)):
                            self.assertLessEqual(rel_err(as_f64(g[k], dt), ref), TOL[dt], k)

    def test_z_into_an_array_and_none(self):
        x, w, b, _ = self.data(8, 5, 6, "f32")
        z = np.zeros((8, 6), np.float32)
        y = self.c.linear_forward(x, w, b, activation="none", z=z)[0]
        want = x.astype(np.float64) @ w.T.astype(np.float64) + b
        self.assertLessEqual(rel_err(z, want), 1e-5)
        self.assertLessEqual(rel_err(y, want), 1e-5)
        f = self.c.submit_forward(x, w, b, activation="relu")
        self.assertEqual(set(f.result()), {"y"})

    def test_on_device_tensors(self):
        """x, w, b, y and z as device tensors; the backward reads y (relu)
        and z (gelu) from them, pipelined without waits."""
        x, w, b, dy = self.data(9, 6, 5, "f32")
        c = self.c
        tx, tw, tb = (c.tensor_new("f32", *a.reshape(len(a), -1).shape if a.ndim == 2
                                   else (1, a.shape[0])) for a in (x, w, b))
        for t, a in ((tx, x), (tw, w), (tb, b)):
            c.submit_tensor_write(t, a)
        for act in ("relu", "gelu"):
            with self.subTest(activation=act):
                ty, tz, tdw = c.tensor_new("f32", 9, 5), c.tensor_new("f32", 9, 5), c.tensor_new("f32", 5, 6)
                c.submit_forward(tx, tw, tb, out=ty, activation=act, z=tz)
                kw = {"y": ty} if act == "relu" else {"z": tz}
                f = c.submit(tx, dy, tw, out={"dw": tdw}, outputs=["dw", "db"], activation=act, **kw)
                g = f.result()
                dw = np.empty((5, 6), np.float32)
                c.tensor_read(tdw, dw)
                X, W, B = (torch.tensor(a.astype(np.float64), requires_grad=True) for a in (x, w, b))
                Y = act64(act, X @ W.T + B)
                (Y * torch.tensor(dy.astype(np.float64))).sum().backward()
                self.assertLessEqual(rel_err(dw, W.grad), 1e-4)
                self.assertLessEqual(rel_err(g["db"], B.grad), 1e-4)
                yv = np.empty((9, 5), np.float32)
                c.tensor_read(ty, yv)
                self.assertLessEqual(rel_err(yv, Y.detach()), 1e-4)

    def test_bad_arguments_then_a_job(self):
        x, w, b, dy = self.data(4, 3, 2, "f32")
        bad = [
            (ValueError, lambda: self.c.linear_forward(x, w, b, activation="swish")),
            (TypeError, lambda: self.c.linear_forward(x, w, b, activation=1)),
            (ValueError, lambda: self.c.linear_forward(x, w, b, activation="relu",
                                                       out=np.zeros((4, 2), np.float32),
                                                       accumulate=True)),
            (TypeError, lambda: self.c.linear_backward(x, dy, w, activation="relu")),
            (TypeError, lambda: self.c.linear_backward(x, dy, w, activation="gelu",
                                                       y=np.ones((4, 2), np.float32))),
            (ValueError, lambda: self.c.linear_backward(x, dy, w, activation="gelu",
                                                        z=np.ones((4, 3), np.float32))),
            (ValueError, lambda: self.c.linear_forward(x, w, b, z=np.zeros((2, 2), np.float32))),
        ]
        for exc, call in bad:
            with self.assertRaises(exc):
                call()
            g = self.c.linear_backward(x, dy, w)
            self.assertLessEqual(rel_err(g["dw"], dy.T.astype(np.float64) @ x), 1e-5)


class TestOptimizers(unittest.TestCase):
    """Several steps of the daemon's optimizer against torch.optim in
    float64 on the same parameters and gradients (f32 tensors: 1e-5
    normwise; bf16 ones at bf16's tolerance)."""

    SHAPES = [(7, 5), (1, 33), (16, 16)]

    def setUp(self):
        self.c = vkgrad.connect(D.sock)
        self.rng = np.random.default_rng(3)

    def tearDown(self):
        self.c.close()

    def tensor(self, a, dt="f32"):
        t = self.c.tensor_new(dt, *a.shape)
        self.c.tensor_write(t, vkgrad.to_bf16(a) if dt == "bf16" else a)
        return t

    def read(self, t, shape, dt="f32"):
        out = np.empty(shape, np.uint16 if dt == "bf16" else np.float32)
        self.c.tensor_read(t, out)
        return vkgrad.from_bf16(out).astype(np.float64) if dt == "bf16" else out.astype(np.float64)

    def run_steps(self, make_opt, step_fn, bufs, steps=4, dt="f32"):
        """steps of torch's optimizer (float64) and of the daemon's on the
        same data; the params compared at the end."""
        ps = [self.rng.standard_normal(s).astype(np.float32) for s in self.SHAPES]
        if dt == "bf16":
            ps = [vkgrad.from_bf16(vkgrad.to_bf16(p)) for p in ps]
        tp = [torch.tensor(p.astype(np.float64), requires_grad=True) for p in ps]
        opt = make_opt(tp)
        ids = [self.tensor(p, dt) for p in ps]
        gids = [self.c.tensor_new("f32", *s) for s in self.SHAPES]
        bids = [[self.c.tensor_new("f32", *s) for s in self.SHAPES] for _ in range(bufs)]
        for k in range(steps):
            gs = [self.rng.standard_normal(s).astype(np.float32) for s in self.SHAPES]
            for t, g in zip(tp, gs):
                t.grad = torch.tensor(g.astype(np.float64))
            opt.step()
            futs = [self.c.submit_tensor_write(gid, g) for gid, g in zip(gids, gs)]
            f = step_fn(ids, gids, bids, k)     # submitted behind the writes
            f.result()
            for w in futs:
                w.result()
        tol = 1e-5 if dt == "f32" else 1e-2
        for t, i, s in zip(tp, ids, self.SHAPES):
            self.assertLessEqual(rel_err(self.read(i, s, dt), t.detach()), tol)

    def test_sgd_plain_momentum_nesterov_decay(self):
        cases = [dict(lr=0.1), dict(lr=0.1, momentum=0.9), dict(lr=0.05, momentum=0.9, dampening=0.2),
                 dict(lr=0.1, momentum=0.9, nesterov=True),
                 dict(lr=0.1, momentum=0.8, nesterov=True, weight_decay=0.01),
                 dict(lr=0.1, weight_decay=0.1)]
        for kw in cases:
            with self.subTest(**kw):
                mom = kw.get("momentum", 0)

                def step(ids, gids, bids, k, kw=kw, mom=mom):
                    return self.c.submit_sgd_step(ids, gids, momentum_buf=bids[0] if mom else None,
                                                  first_step=k == 0, **kw)
                self.run_steps(lambda ps, kw=kw: torch.optim.SGD(ps, **kw), step, 1 if mom else 0)

    def test_adam_and_adamw(self):
        for decoupled, wd in ((False, 0.0), (False, 0.05), (True, 0.05)):
            with self.subTest(decoupled=decoupled, weight_decay=wd):
                cls = torch.optim.AdamW if decoupled else torch.optim.Adam

                def step(ids, gids, bids, k, wd=wd, decoupled=decoupled):
                    return self.c.submit_adam_step(ids, gids, bids[0], bids[1], step=k + 1, lr=0.01,
                                                   weight_decay=wd, decoupled=decoupled)
                self.run_steps(lambda ps, cls=cls, wd=wd: cls(ps, lr=0.01, weight_decay=wd), step, 2)

    def test_bf16_params(self):
        def step(ids, gids, bids, k):
            return self.c.submit_adam_step(ids, gids, bids[0], bids[1], step=k + 1, lr=0.01)
        self.run_steps(lambda ps: torch.optim.Adam(ps, lr=0.01), step, 2, steps=3, dt="bf16")

    def test_bad_input_then_a_step(self):
        p = self.tensor(np.ones((3, 2), np.float32))
        g = self.tensor(np.full((3, 2), 0.5, np.float32))
        wrong = self.c.tensor_new("f32", 2, 3)
        with vkgrad.connect(D.sock) as other:
            theirs = other.tensor_new("f32", 3, 2)
            bad = [
                (vkgrad.Error, "bad_tensor", lambda: self.c.sgd_step(p, wrong, lr=0.1)),
                (vkgrad.Error, "bad_tensor", lambda: self.c.sgd_step(p, theirs, lr=0.1)),
                (vkgrad.Error, "limit", lambda: self.c.sgd_step([p] * 257, [g] * 257, lr=0.1)),
                (vkgrad.Error, "overlap", lambda: self.c.sgd_step(p, p, lr=0.1)),
                (vkgrad.Error, "bad_request", lambda: self.c.sgd_step(p, g, lr=-1.0)),
                (vkgrad.Error, "bad_request", lambda: self.c.adam_step(p, g, wrong, wrong, step=0,
                                                                       lr=0.1)),
                (ValueError, None, lambda: self.c.sgd_step([p, p], [g], lr=0.1)),
                (TypeError, None, lambda: self.c.sgd_step(p, g, lr=0.1, momentum=0.9)),
                (TypeError, None, lambda: self.c.sgd_step(p, "g", lr=0.1)),
            ]
            want = np.ones((3, 2))
            for exc, code, call in bad:
                before = self.read(p, (3, 2))
                with self.assertRaises(exc) as cm:
                    call()
                if code:
                    self.assertEqual(cm.exception.code, code)
                np.testing.assert_array_equal(self.read(p, (3, 2)), before)  # untouched
                self.c.sgd_step(p, g, lr=0.1)
                want = want - 0.05
                self.assertLessEqual(rel_err(self.read(p, (3, 2)), want), 1e-6)


if __name__ == "__main__":
    unittest.main()

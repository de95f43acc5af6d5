"""The daemon's resident-training ops from Python (proto/README.md,
Additions): the fused activations of linear_forward / linear_backward
(`activation=`, `y=`, `z=`), checked against torch run in float64 —
torch.nn.functional.relu and gelu(approximate="tanh"), gradients by
autograd — at the dtype's tolerance, and bad arguments, each followed by a
job that succeeds."""

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


if __name__ == "__main__":
    unittest.main()

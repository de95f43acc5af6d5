"""Device tensors from Python (vkgrad.Client.tensor_*, vkgrad.Tensor
operands) against a private daemon (lavapipe here).

Numbers against a float64 numpy reference from the stored inputs, at
client/ref.h's tolerances (max|got - want| / max|want|: f32 1e-4, bf16
1e-2). Ordering: writes, jobs and reads submitted without waiting. Each
bad input raises vkgrad.Error with its code and a message naming the key,
and a job on the same connection succeeds afterwards."""

import unittest

import numpy as np

import vkgrad
from daemon import Daemon
from numerics import rel_err

D = None


def setUpModule():
    global D
    D = Daemon(["--max-tensors", "16"])


def tearDownModule():
    problems = D.stop()
    if problems:
        raise AssertionError("tensors daemon: " + problems)


def bf16_to_f64(bits):
    return (np.asarray(bits, dtype=np.uint32) << 16).view(np.float32).astype(np.float64)


class TestTensors(unittest.TestCase):
    def setUp(self):
        self.c = vkgrad.connect(D.sock)
        self.rng = np.random.default_rng(7)

    def tearDown(self):
        self.c.close()

    def rand(self, *shape):
        return self.rng.uniform(-1, 1, shape).astype(np.float32)

    def job_ok(self):
        """a plain job on the same connection still gives the right numbers"""
        x, dy, w = self.rand(5, 3), self.rand(5, 4), self.rand(4, 3)
        g = self.c.linear_backward(x, dy, w)
        want = dy.astype(np.float64).T @ x.astype(np.float64)
        self.assertLessEqual(rel_err(g["dw"], want), 1e-4)

    def test_pipelined_backward_and_forward(self):
        c = self.c
        B, I, O = 33, 17, 12
        x, dy, w, b = self.rand(B, I), self.rand(B, O), self.rand(O, I), self.rand(O)
        tx, tdy, tw = c.tensor_new("f32", B, I), c.tensor_new("f32", B, O), c.tensor_new("f32", O, I)
        tdw, tdb = c.tensor_new(np.float32, O, I), c.tensor_new("float32", 1, O)
        ty = c.tensor_new("f32", B, O)
        self.assertIsInstance(tx, vkgrad.Tensor)
        self.assertIsInstance(tx, int)
        self.assertEqual(tx.shape, (B, I))
        self.assertEqual(tx.dtype, "f32")
        # a region view for some, plain arrays (copied) for others
        r = c.region(1 << 16)
        xv = r.ndarray((B, I), np.float32, 0)
        xv[...] = x
        r.ndarray((O, I), np.float32, 16384)[...] = w
        futs = [c.submit_tensor_write(tx, xv), c.submit_tensor_write(tdy, dy),
                c.submit_tensor_write(tw, r, 16384)]
        fb = c.submit(tx, tdy, tw, out={"dw": tdw, "db": tdb, "dx": np.empty((B, I), np.float32)})
        got_dw, got_db = np.full((O, I), 7, np.float32), r.ndarray((1, O), np.float32, 8192)
        futs += [fb, c.submit_tensor_read(tdw, got_dw), c.submit_tensor_read(tdb, got_db)]
        ff = c.submit_forward(tx, tw, b, out=ty)
        got_y = np.empty((B, O), np.float32)
        futs += [ff, c.submit_tensor_read(ty, got_y)]
        for f in futs:
            f.result(timeout=60)
        X, DY, W = x.astype(np.float64), dy.astype(np.float64), w.astype(np.float64)
        self.assertLessEqual(rel_err(got_dw, DY.T @ X), 1e-4)
        self.assertLessEqual(rel_err(got_db[0], DY.sum(0)), 1e-4)
        self.assertLessEqual(rel_err(fb.result()["dx"], DY @ W), 1e-4)
        self.assertIs(fb.result()["dw"], tdw)
        self.assertLessEqual(rel_err(got_y, X @ W.T + b.astype(np.float64)), 1e-4)
        for t in (tx, tdy, tw, tdw, tdb, ty):
            c.tensor_free(t)
        r.close()

    def test_bf16_and_bare_ids(self):
        c = self.c
        B, I, O = 9, 8, 7
        x = vkgrad.to_bf16(self.rand(B, I))
        w = vkgrad.to_bf16(self.rand(O, I))
        tx, tw, ty = c.tensor_new("bf16", B, I), c.tensor_new("bf16", O, I), c.tensor_new("bf16", B, O)
        c.tensor_write(tx, x)
        c.tensor_write(tw, w)
        # bare ids: the dims and dtype from dims= and dtype=
        y = np.empty((B, O), np.uint16)
        c.submit_forward(vkgrad.Tensor(int(tx)), vkgrad.Tensor(int(tw)), out=vkgrad.Tensor(int(ty)),
                         dtype="bf16", dims=(B, I, O)).result(timeout=60)
        c.tensor_read(ty, y)
        want = bf16_to_f64(x) @ bf16_to_f64(w).T
        self.assertLessEqual(rel_err(bf16_to_f64(y), want), 1e-2)
        with self.assertRaises(ValueError):
            c.submit_forward(vkgrad.Tensor(int(tx)), vkgrad.Tensor(int(tw)),
                             out=vkgrad.Tensor(int(ty)), dtype="bf16")
        with self.assertRaises(ValueError):  # the dtype the Tensor knows
            c.submit_forward(tx, tw, out=ty, dtype="f32")
        for t in (tx, tw, ty):
            c.tensor_free(t)

    def test_new_tensor_reads_zeros(self):
        c = self.c
        t = c.tensor_new("f16", 64, 64)
        c.tensor_write(t, np.full((64, 64), 3.5, np.float16))
        c.tensor_free(t)
        with vkgrad.connect(D.sock) as c2:
            t2 = c2.tensor_new("f16", 64, 64)
            got = np.full((64, 64), 1, np.float16)
            c2.tensor_read(t2, got)
            self.assertFalse(got.any())

    def test_bad_input(self):
        c = self.c
        tx = c.tensor_new("f32", 4, 3)
        with vkgrad.connect(D.sock) as c2:
            t_other = c2.tensor_new("f32", 4, 3)
            for fn in (lambda: c.tensor_write(t_other, np.zeros((4, 3), np.float32)),
                       lambda: c.tensor_read(vkgrad.Tensor(int(t_other)), np.zeros((4, 3), np.float32)),
                       lambda: c.tensor_free(t_other),
                       lambda: c.linear_backward(vkgrad.Tensor(int(t_other)), self.rand(4, 2),
                                                 dtype="f32", dims=(4, 3, 2), outputs=["dw"])):
                with self.assertRaises(vkgrad.Error) as cm:
                    fn()
                self.assertEqual(cm.exception.code, "bad_tensor")
                self.assertIn("not a tensor of this connection", cm.exception.message)
                self.job_ok()
        freed = c.tensor_new("f32", 4, 3)
        c.tensor_free(freed)
        with self.assertRaises(vkgrad.Error) as cm:
            c.tensor_free(freed)
        self.assertEqual(cm.exception.code, "bad_tensor")
        # shape and dtype the daemon checks (bare ids carry none)
        with self.assertRaises(vkgrad.Error) as cm:
            c.linear_backward(vkgrad.Tensor(int(tx)), self.rand(5, 2), dtype="f32", outputs=["dw"],
                              dims=(5, 3, 2))
        self.assertEqual(cm.exception.code, "bad_tensor")
        self.assertIn("'x'", cm.exception.message)
        th = c.tensor_new("f16", 4, 3)
        with self.assertRaises(vkgrad.Error) as cm:
            c.linear_backward(vkgrad.Tensor(int(th)), self.rand(4, 2), dtype="f32", outputs=["dw"],
                              dims=(4, 3, 2))
        self.assertEqual(cm.exception.code, "bad_tensor")
        self.assertIn("dtype f16", cm.exception.message)
        # shapes the client knows: refused before sending
        with self.assertRaises(ValueError):
            c.linear_backward(tx, self.rand(5, 2), outputs=["dw"])
        with self.assertRaises(ValueError):
            c.tensor_write(tx, np.zeros((3, 3), np.float32))
        # a region too small for the tensor
        r = c.region(16)
        with self.assertRaises(vkgrad.Error) as cm:
            c.tensor_write(tx, r, 0)
        self.assertEqual(cm.exception.code, "out_of_bounds")
        self.assertIn("'src'", cm.exception.message)
        r.close()
        self.job_ok()
        # max_tensors (16 on this daemon) and rows 0
        held = [c.tensor_new("f32", 1, 1) for _ in range(16 - 2)]
        with self.assertRaises(vkgrad.Error) as cm:
            c.tensor_new("f32", 1, 1)
        self.assertEqual(cm.exception.code, "limit")
        self.assertIn("max_tensors = 16", cm.exception.message)
        with self.assertRaises(ValueError):
            c.tensor_new("f32", 0, 1)
        for t in held + [tx, th]:
            c.tensor_free(t)
        self.job_ok()

    def test_stats_and_limits(self):
        c = self.c
        lim = c.info.get("limits", {})
        self.assertEqual(lim.get("max_tensors"), 16)
        self.assertGreater(lim.get("max_device_bytes", 0), 0)
        self.assertGreater(lim.get("max_device_bytes_per_uid", 0), 0)
        before = c.stats()
        t = c.tensor_new("f32", 32, 32)
        c.tensor_write(t, np.ones((32, 32), np.float32))
        s = c.stats()
        self.assertEqual(s["device_bytes"], before["device_bytes"] + 4096)
        self.assertEqual(s["tensors"], before["tensors"] + 1)
        self.assertGreaterEqual(s["host_read_bytes"] - before["host_read_bytes"], 4096)
        self.assertTrue(any(e["bytes"] >= 4096 for e in s["device_bytes_by_uid"]))
        mine = [e for e in c.call("clients")["clients"] if e.get("tensors") == 1]
        self.assertTrue(mine and mine[0]["device_bytes"] == 4096)
        c.tensor_free(t)
        self.assertEqual(c.stats()["device_bytes"], before["device_bytes"])


if __name__ == "__main__":
    unittest.main()

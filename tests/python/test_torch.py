"""vkgrad.torch against torch's own backward, on a real daemon.

Gradients of vkgrad.torch.Linear are compared with those of torch.nn.Linear
holding the same parameters, and both with a float64 numpy reference of the
same (stored) values, at client/ref.h's tolerances relative to max|want|:
f32 1e-4, f16 2e-3, bf16 1e-2 (torch's own bf16 result is rounded too, so
the two are compared at twice the bf16 tolerance). Debian 12's torch (1.13)
has no CPU float16 matmul: for f16, "torch's own backward" is run in
float32 on the same f16 values.

Skipped, saying so, only when torch cannot be imported (package
python3-torch)."""

import unittest


try:
    import torch
    TORCH_MISSING = None
except ImportError as e:  # pragma: no cover — reported as a skip
    torch = None
    TORCH_MISSING = "torch is not installed (Debian package python3-torch): %s" % e

import vkgrad
from daemon import Daemon
from numerics import f64, rel_err

D = None
TOL = vkgrad.TOLERANCE


def setUpModule():
    global D
    if TORCH_MISSING:
        print("test_torch: SKIPPING every test: " + TORCH_MISSING)
        return
    import vkgrad.torch as vt
    D = Daemon()
    vt.set_default_client(vkgrad.connect(D.sock, name="test_torch"))


def tearDownModule():
    if D is None:
        return
    import vkgrad.torch as vt
    vt.default_client().close()
    vt.set_default_client(None)
    problems = D.stop()
    if problems:
        raise AssertionError("daemon: " + problems)


@unittest.skipIf(TORCH_MISSING, TORCH_MISSING or "")
class TestLinear(unittest.TestCase):
    def setUp(self):
        import vkgrad.torch as vt
        self.vt = vt

    def pair(self, i, o, dt, bias=True, seed=0):
        torch.manual_seed(seed)
        ref = torch.nn.Linear(i, o, bias=bias)
        ours = self.vt.Linear(i, o, bias=bias)
        ours.load_state_dict(ref.state_dict())
        return ref.to(dt), ours.to(dt)

    def numpy_ref(self, x, w, dy):
        x2 = f64(x).reshape(-1, w.shape[1])
        dy2 = f64(dy).reshape(-1, w.shape[0])
        return {"dw": dy2.T @ x2, "db": dy2.sum(0), "dx": (dy2 @ f64(w)).reshape(x.shape)}

    def check(self, got, want, tol, what):
        e = rel_err(f64(got), want)
        self.assertLessEqual(e, tol, "%s: error %.3g > %g" % (what, e, tol))

    def test_matches_torch_every_dtype_with_accumulation(self):
        for dt, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16"), (torch.float16, "f16")):
            ref, ours = self.pair(24, 10, dt)
            torch.manual_seed(1)
            x = torch.randn(3, 7, 24).to(dt)
            dys = [torch.randn(3, 7, 10).to(dt) for _ in range(2)]
            xa = x.clone().requires_grad_()
            xb = x.clone().requires_grad_()
            if dt == torch.float16:  # torch 1.13: no CPU half matmul
                ref = ref.float()
                xb = x.float().requires_grad_()
            for dy in dys:  # twice: .grad accumulates
                ours(xa).backward(dy)
                ref(xb).backward(dy.to(xb.dtype))
            self.assertEqual(ours.weight.grad.dtype, dt)
            self.assertEqual(xa.grad.shape, x.shape)
            want = {"dw": 0, "db": 0, "dx": 0}
            for dy in dys:
                r = self.numpy_ref(x, ours.weight, dy)
                want = {k: want[k] + r[k] for k in r}
            got = {"dw": ours.weight.grad, "db": ours.bias.grad, "dx": xa.grad}
            theirs = {"dw": ref.weight.grad, "db": ref.bias.grad, "dx": xb.grad}
            for k in got:
                self.check(got[k], want[k], TOL[name], "%s %s vs numpy" % (name, k))
                tol = TOL[name] * (2 if name == "bf16" else 1)
                self.check(got[k], f64(theirs[k]), tol, "%s %s vs torch" % (name, k))

    def test_only_the_gradients_autograd_asks_for(self):
        ref, ours = self.pair(16, 8, torch.float32, bias=False)
        x = torch.randn(5, 16)  # no requires_grad: no dx
        before = vkgrad_jobs()
        ours(x).sum().backward()
        ref(x).sum().backward()
        self.assertEqual(vkgrad_jobs(), before + 2)  # the forward and one backward
        self.assertIsNone(x.grad)
        self.check(ours.weight.grad, f64(ref.weight.grad), TOL["f32"], "dw")
        # frozen weight, input needing its gradient: dx only
        ours.weight.requires_grad_(False)
        xa = torch.randn(5, 16, requires_grad=True)
        ours(xa).sum().backward()
        xb = xa.detach().clone().requires_grad_()
        ref(xb).sum().backward()
        self.check(xa.grad, f64(xb.grad), TOL["f32"], "dx")

    def test_convert_mlp_trains_like_torch(self):
        torch.manual_seed(3)
        plain = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.ReLU(),
                                    torch.nn.Linear(32, 4))
        ours = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.ReLU(),
                                   torch.nn.Linear(32, 4))
        ours.load_state_dict(plain.state_dict())
        ours = self.vt.convert(ours)
        self.assertIsInstance(ours[0], self.vt.Linear)
        self.assertIsInstance(ours[2], self.vt.Linear)
        opt_a = torch.optim.SGD(plain.parameters(), lr=0.05)
        opt_b = torch.optim.SGD(ours.parameters(), lr=0.05)
        x, y = torch.randn(64, 12), torch.randn(64, 4)
        for step in range(5):
            losses = []
            for m, opt in ((plain, opt_a), (ours, opt_b)):
                opt.zero_grad()
                loss = torch.nn.functional.mse_loss(m(x), y)
                loss.backward()
                losses.append(loss.item())
                opt.step()
            self.assertLessEqual(abs(losses[0] - losses[1]), 1e-4 * abs(losses[0]),
                                 "step %d losses %s" % (step, losses))
        for (n, a), b in zip(plain.named_parameters(), ours.parameters()):
            self.check(b.grad, f64(a.grad), TOL["f32"], n)

    def test_gradcheck_in_float32_against_autograd_of_f64(self):
        # the daemon's backward is a function of x: compare with torch's
        # float64 autograd at the f32 tolerance
        torch.manual_seed(4)
        w = torch.randn(6, 9, dtype=torch.float64, requires_grad=True)
        x = torch.randn(11, 9, dtype=torch.float64, requires_grad=True)
        (x @ w.T).pow(2).sum().backward()
        xa = x.detach().float().requires_grad_()
        wa = w.detach().float().requires_grad_()
        self.vt.LinearFunction.apply(xa, wa, None, None).pow(2).sum().backward()
        self.check(xa.grad, f64(x.grad), TOL["f32"], "dx")
        self.check(wa.grad, f64(w.grad), TOL["f32"], "dw")

    def test_refuses_what_it_cannot_serve(self):
        lin = self.vt.Linear(3, 2).double()
        with self.assertRaisesRegex(TypeError, "float64"):
            lin(torch.randn(4, 3, dtype=torch.float64))
        lin = self.vt.Linear(3, 2)
        with self.assertRaisesRegex(TypeError, "dtype"):
            lin(torch.randn(4, 3).half())

    def test_empty_batch(self):
        ref, ours = self.pair(4, 3, torch.float32)
        x = torch.zeros(0, 4, requires_grad=True)
        ours(x).sum().backward()
        self.assertEqual(ours.weight.grad.abs().max().item(), 0)
        self.assertEqual(x.grad.shape, (0, 4))


def vkgrad_jobs():
    import vkgrad.torch as vt
    return vt.default_client().stats()["jobs_done"]


if __name__ == "__main__":
    unittest.main()

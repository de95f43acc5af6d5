"""vkgrad.torch resident mode (convert(model, resident=True)) and
vkgrad.torch.optim on a real daemon (lavapipe), against float64 references.

Tolerances (relative to max |want|): vkgrad.TOLERANCE (f32 1e-4, bf16
1e-2) for one pass or optimizer steps, and for a model trained 50 steps in
f32 (lavapipe gave 2e-7); 3e-2 for the bf16 model after 50 steps (every
stored value is rounded each step; the reference rounds its parameters the
same way after each step, so what differs is the rounding of activations
and gradients on the way, which compounds: lavapipe gave up to 9.7e-3).
Shapes are tiny (lavapipe).

Skipped, saying so, only when torch cannot be imported (python3-torch)."""

import copy
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
TRAIN_TOL = {"f32": 1e-4, "bf16": 3e-2}
DT = {"f32": None, "bf16": None}


def setUpModule():
    global D
    if TORCH_MISSING:
        print("test_resident: SKIPPING every test: " + TORCH_MISSING)
        return
    import vkgrad.torch as vt
    DT.update(f32=torch.float32, bf16=torch.bfloat16)
    D = Daemon()
    vt.set_default_client(vkgrad.connect(D.sock, name="test_resident"))


def tearDownModule():
    if D is None:
        return
    import vkgrad.torch as vt
    vt.default_client().close()
    vt.set_default_client(None)
    problems = D.stop()
    if problems:
        raise AssertionError("daemon: " + problems)


def mlp(gelu=True):
    """A 3-layer MLP: Linear ReLU Linear GELU(tanh) Linear (one chain)."""
    return torch.nn.Sequential(torch.nn.Linear(12, 20), torch.nn.ReLU(),
                               torch.nn.Linear(20, 16),
                               torch.nn.GELU(approximate="tanh") if gelu else torch.nn.ReLU(),
                               torch.nn.Linear(16, 6))


def host_bytes():
    """Bytes the daemon moved from and to client memory so far (after
    everything sent has run)."""
    import vkgrad.torch as vt
    vt.synchronize()
    s = vt.default_client().stats()
    return s["host_read_bytes"] + s["host_write_bytes"]


@unittest.skipIf(TORCH_MISSING, TORCH_MISSING or "")
class TestResident(unittest.TestCase):
    def setUp(self):
        import vkgrad.torch as vt
        self.vt = vt

    def check(self, got, want, tol, what):
        e = rel_err(f64(got) if isinstance(got, torch.Tensor) else got,
                    f64(want) if isinstance(want, torch.Tensor) else want)
        self.assertLessEqual(e, tol, "%s: error %.3g > %g" % (what, e, tol))

    def pair(self, dt, make=mlp, seed=0):
        """(float64 reference, resident model) of the same stored values."""
        torch.manual_seed(seed)
        base = make().to(dt)
        ref = copy.deepcopy(base).double()
        ours = self.vt.convert(base, resident=True)
        return ref, ours

    def test_mlp_trains_50_steps_like_torch(self):
        for name in ("f32", "bf16"):
            dt = DT[name]
            ref, ours = self.pair(dt)
            self.assertIsInstance(ours, self.vt.resident.ResidentSequential)
            torch.manual_seed(1)
            x = torch.randn(16, 12).to(dt)
            t = (torch.randn(16, 6) * 0.5).to(dt)
            oa = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
            ob = self.vt.optim.SGD(ours.parameters(), lr=0.05, momentum=0.9)
            losses = []
            for step in range(50):
                if step == 10:
                    b0 = host_bytes()
                for m, o, xi, ti in ((ref, oa, x.double(), t.double()), (ours, ob, x, t)):
                    o.zero_grad()
                    loss = (m(xi) - ti).pow(2).mean()
                    loss.backward()
                    o.step()
                    losses.append(loss.item())
                with torch.no_grad():  # the reference keeps the stored values
                    for p in ref.parameters():
                        p.copy_(p.to(dt).double())
                if step == 19:
                    # PCIe per step: the input, the output, its gradient
                    moved = (host_bytes() - b0) / 10
                    es = torch.tensor(0, dtype=dt).element_size()
                    self.assertEqual(moved, es * 16 * (12 + 6 + 6), name)
            self.assertLess(losses[-1], 0.7 * losses[1], "%s: the loss fell %s" % (name, losses[::10]))
            self.check(losses[-1], losses[-2], TRAIN_TOL[name], "%s final loss" % name)
            want = ref.state_dict()
            got = ours.state_dict()
            self.assertEqual(list(got), list(want))
            for k in want:
                self.assertEqual(got[k].dtype, dt)
                self.check(got[k], want[k], TRAIN_TOL[name], "%s %s after 50 steps" % (name, k))

    def opt_case(self, torch_cls, ours_cls, kw, steps=4, ours_kw=None, name="f32"):
        """Set the same gradients on a resident layer's parameters and on
        float64 copies; step both; compare after every second step (the
        f32 tolerance): two steps whose gradients were set without a wait
        in between must each have used their own."""
        torch.manual_seed(5)
        lin = torch.nn.Linear(7, 5).to(DT[name])
        ref = copy.deepcopy(lin).double()
        ours = self.vt.convert(torch.nn.Sequential(lin), resident=True)
        oa = torch_cls(ref.parameters(), **kw)
        ob = ours_cls(ours.parameters(), **dict(kw, **(ours_kw or {})))
        pa, pb = list(ref.parameters()), list(ours.parameters())
        for step in range(steps):
            for i, (a, b) in enumerate(zip(pa, pb)):
                if step == 2 and i == 1:  # the bias has no gradient this step: skipped
                    a.grad = b.grad = None
                    continue
                g = torch.randn(a.shape).to(DT[name])
                a.grad = g.double()
                b.grad = g
            oa.step()
            ob.step()
            with torch.no_grad():  # the reference keeps the stored values
                for a in ref.parameters():
                    a.copy_(a.to(DT[name]).double())
            if step % 2 == 0 and step != steps - 1:
                continue
            for (n, a), b in zip(ref.named_parameters(), ours[0].state_dict().values()):
                self.check(b, a, TOL[name], "%s %s %s step %d" % (ours_cls.__name__, name, n, step))
        return ours, ob

    def test_sgd_against_torch(self):
        for kw in (dict(lr=0.1), dict(lr=0.1, weight_decay=0.05),
                   dict(lr=0.1, momentum=0.9, dampening=0.2, weight_decay=0.01),
                   dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.02)):
            with self.subTest(**kw):
                self.opt_case(torch.optim.SGD, self.vt.optim.SGD, kw)
        # bf16 parameters (a float32 momentum buffer on the daemon)
        self.opt_case(torch.optim.SGD, self.vt.optim.SGD, dict(lr=0.1, momentum=0.9),
                      name="bf16")

    def test_adam_and_adamw_against_torch(self):
        for tc, oc, kw in ((torch.optim.Adam, self.vt.optim.Adam, dict(lr=0.01)),
                           (torch.optim.Adam, self.vt.optim.Adam,
                            dict(lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
                           (torch.optim.AdamW, self.vt.optim.AdamW, dict(lr=0.01)),
                           (torch.optim.AdamW, self.vt.optim.AdamW,
                            dict(lr=0.02, betas=(0.85, 0.995), weight_decay=0.3))):
            with self.subTest(opt=oc.__name__, **kw):
                self.opt_case(tc, oc, kw, steps=5)
        # bf16 parameters (float32 state on the daemon)
        self.opt_case(torch.optim.Adam, self.vt.optim.Adam, dict(lr=0.01, weight_decay=0.1),
                      name="bf16")
        # newer torch's Adam(decoupled_weight_decay=True) is AdamW
        self.opt_case(torch.optim.AdamW, self.vt.optim.Adam, dict(lr=0.05, weight_decay=0.2),
                      ours_kw=dict(decoupled_weight_decay=True))

    def test_optimizer_refuses_what_it_does_not_support(self):
        ours = self.vt.convert(torch.nn.Sequential(torch.nn.Linear(3, 2)), resident=True)
        for cls, kw, what in ((self.vt.optim.SGD, dict(lr=0.1, maximize=True), "maximize"),
                              (self.vt.optim.Adam, dict(amsgrad=True), "amsgrad"),
                              (self.vt.optim.AdamW, dict(fused=True), "fused"),
                              (self.vt.optim.Adam, dict(capturable=True), "capturable")):
            with self.assertRaisesRegex(ValueError, what):
                cls(ours.parameters(), **kw)
        with self.assertRaisesRegex(ValueError, "Nesterov"):
            self.vt.optim.SGD(ours.parameters(), lr=0.1, nesterov=True)
        # still serves
        self.assertEqual(ours(torch.randn(2, 3)).shape, (2, 2))

    def test_state_dict_round_trip(self):
        torch.manual_seed(7)
        a = self.vt.convert(mlp(), resident=True)
        b = self.vt.convert(mlp(), resident=True)
        oa = self.vt.optim.Adam(a.parameters(), lr=0.01)
        x, t = torch.randn(8, 12), torch.randn(8, 6)
        p0 = next(a.parameters())
        before = p0.detach().clone()
        for _ in range(2):
            oa.zero_grad()
            (a(x) - t).pow(2).mean().backward()
            oa.step()
        # parameters() are not brought down by reading them; sync() does
        self.assertTrue(torch.equal(p0.detach(), before))
        self.vt.sync(a)
        self.assertFalse(torch.equal(p0.detach(), before))
        sd = a.state_dict()
        self.assertTrue(torch.equal(sd["0.weight"], p0.detach()))
        b.load_state_dict(sd)
        for k, v in b.state_dict().items():
            self.assertTrue(torch.equal(v, sd[k]), k)
        with torch.no_grad():
            self.assertTrue(torch.equal(a(x), b(x)))
        # the optimizer's state too: the next step is the same
        ob = self.vt.optim.Adam(b.parameters(), lr=0.01)
        ob.load_state_dict(oa.state_dict())
        self.assertEqual(ob.state_dict()["state"][0]["step"].item(), 2)
        for m, o in ((a, oa), (b, ob)):
            o.zero_grad()
            (m(x) - t).pow(2).mean().backward()
            o.step()
        for (k, v), w in zip(a.state_dict().items(), b.state_dict().values()):
            self.assertTrue(torch.equal(v, w), k)
        # module.weight reads the current value; an in-place change goes up
        w = a[0].weight
        with torch.no_grad():
            w.mul_(0)
            a[0].bias.fill_(1)
        self.assertTrue(torch.equal(a[0](x), torch.ones(8, 20)))

    def test_input_gradient_and_accumulation(self):
        ref, ours = self.pair(torch.float32, seed=9)
        torch.manual_seed(2)
        x = torch.randn(3, 5, 12)  # leading dims: (..., in)
        dys = [torch.randn(3, 5, 6) for _ in range(2)]
        # no grad wanted for the input: only the output gradient goes up
        b0 = host_bytes()
        ours(x).backward(dys[0])
        self.assertEqual(host_bytes() - b0, 4 * 15 * (12 + 6 + 6))
        for p in ours.parameters():  # (the next backward starts from zero)
            p.grad = None
        xa = x.clone().requires_grad_()
        xb = x.double().requires_grad_()
        for dy in dys:  # twice without zero_grad: the gradients add up
            ours(xa).backward(dy)
            ref(xb).backward(dy.double())
        self.assertEqual(xa.grad.shape, x.shape)
        self.check(xa.grad, xb.grad, TOL["f32"], "dx")
        for (n, a), b in zip(ref.named_parameters(), ours.parameters()):
            self.check(b.grad, a.grad, TOL["f32"], "d" + n)
        # a frozen layer: no gradient for it, the others still right
        ours[0].weight.requires_grad_(False)
        for p in ours.parameters():
            p.grad = None
        ours(x).backward(dys[0])
        self.assertIsNone(ours[0].weight.grad)
        self.assertIsNotNone(ours[0].bias.grad)

    def test_gradients_changed_on_the_host_go_up(self):
        """clip_grad_norm_ reads .grad (down) and scales it in place; the
        step then uses the scaled gradients (up again)."""
        ref, ours = self.pair(torch.float32, seed=17)
        oa = torch.optim.SGD(ref.parameters(), lr=0.5)
        ob = self.vt.optim.SGD(ours.parameters(), lr=0.5)
        x, t = torch.randn(6, 12), torch.randn(6, 6)
        for step in range(2):
            norms = []
            for m, o, xi, ti in ((ref, oa, x.double(), t.double()), (ours, ob, x, t)):
                o.zero_grad()
                (m(xi) - ti).pow(2).mean().backward()
                norms.append(float(torch.nn.utils.clip_grad_norm_(m.parameters(), 0.05)))
                o.step()
            self.check(norms[1], norms[0], TOL["f32"], "grad norm step %d" % step)
            self.assertGreater(norms[0], 0.05)  # (so that clipping changed them)
            for (k, a), b in zip(ref.state_dict().items(), ours.state_dict().values()):
                self.check(b, a, TOL["f32"], "%s step %d" % (k, step))

    def test_non_chain_module_in_the_middle(self):
        def make():
            return torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(),
                                       torch.nn.LayerNorm(16), torch.nn.Linear(16, 10),
                                       torch.nn.GELU(), torch.nn.Linear(10, 6))
        ref, ours = self.pair(torch.float32, make, seed=11)
        oa = torch.optim.AdamW(ref.parameters(), lr=0.01)
        ob = self.vt.optim.AdamW(ours.parameters(), lr=0.01)
        self.assertFalse(self.vt.resident.is_resident(ours[2].weight))
        x, t = torch.randn(8, 12), torch.randn(8, 6)
        for step in range(3):
            for m, o, xi, ti in ((ref, oa, x.double(), t.double()), (ours, ob, x, t)):
                o.zero_grad()
                (m(xi) - ti).pow(2).mean().backward()
                o.step()
            for (k, a), b in zip(ref.state_dict().items(), ours.state_dict().values()):
                self.check(b, a, TOL["f32"], "%s step %d" % (k, step))

    def test_refusals_raise_and_the_model_still_serves(self):
        """The daemon's refusals reach the caller as vkgrad.Error: a
        tensor over --max-device-bytes at convert(); a backward whose dZ
        needs more scratch than --scratch-max-bytes, answered after the
        backward returned (nothing waits on it), at the next wait. Then a
        model that fits trains right on the same connection."""
        d = Daemon(["--max-device-bytes", "262144", "--scratch-max-bytes", "4096"])
        c = vkgrad.connect(d.sock, name="test_resident-limits")
        try:
            with self.assertRaises(vkgrad.Error) as cm:
                self.vt.convert(torch.nn.Linear(256, 256), client=c, resident=True)
            self.assertEqual(cm.exception.code, "limit")
            torch.manual_seed(13)
            base = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.ReLU(),
                                       torch.nn.Linear(64, 4))
            ref = copy.deepcopy(base).double()
            ours = self.vt.convert(base, client=c, resident=True)
            opt = self.vt.optim.SGD(ours.parameters(), lr=0.1)
            ours(torch.randn(32, 8)).sum().backward()  # dZ: 32 x 64 f32, 8 KiB
            with self.assertRaises(vkgrad.Error) as cm:
                self.vt.synchronize(c)
            self.assertEqual(cm.exception.code, "limit")
            self.assertIn("scratch", cm.exception.message)
            with self.assertRaisesRegex(TypeError, "input"):
                ours(torch.randn(8, 8, dtype=torch.float64))
            x = torch.randn(8, 8)  # dZ: 2 KiB
            opt.zero_grad()
            ours(x).pow(2).mean().backward()
            ref(x.double()).pow(2).mean().backward()
            for (n, a), b in zip(ref.named_parameters(), ours.parameters()):
                self.check(b.grad, a.grad, TOL["f32"], "d" + n)
            opt.step()
            with torch.no_grad():
                for a in ref.parameters():
                    a -= 0.1 * a.grad
            for (k, a), b in zip(ref.state_dict().items(), ours.state_dict().values()):
                self.check(b, a, TOL["f32"], k)
        finally:
            c.close()
            problems = d.stop()
        self.assertFalse(problems, problems)

    def test_empty_batch_and_no_grad(self):
        ours = self.vt.convert(mlp(), resident=True)
        with torch.no_grad():
            y = ours(torch.randn(4, 12))
        self.assertFalse(y.requires_grad)
        x = torch.zeros(0, 12, requires_grad=True)
        ours(x).sum().backward()
        self.assertEqual(x.grad.shape, (0, 12))


if __name__ == "__main__":
    unittest.main()

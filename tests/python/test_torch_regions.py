"""vkgrad.torch's forward on the daemon and its zero-copy tensors.

- The forward (op linear_forward) against torch's F.linear and a float64
  numpy reference of the same stored values, each dtype, bias or not, any
  leading shape, at client/ref.h's tolerances relative to max|want| (f16:
  torch 1.13 has no CPU half matmul, so torch's side runs in float32 on
  the same f16 values).
- Zero copies on region-backed tensors, through the client's counter
  (Client.bytes_copied): a layer whose input, parameters and dY live in
  regions copies nothing in either pass; a dY outside them costs exactly
  its bytes, an input outside them exactly its bytes, once for both
  passes; vt.profile() lists each job, vt.daemon_seconds() their time.
- empty(): tensors in a registered region, blocks reused once freed.
- convert() of a model holding nn.Linear subclasses (MultiheadAttention's
  out_proj, a plain subclass) replaces them, skips one that overrides
  forward() and says why, moves parameters into regions, and trains like
  torch.
Skipped, saying so, only when torch cannot be imported."""

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
C = None
TOL = vkgrad.TOLERANCE
DTYPES = (("f32", "float32"), ("f16", "float16"), ("bf16", "bfloat16"))


def setUpModule():
    global D, C
    if TORCH_MISSING:
        print("test_torch_regions: SKIPPING every test: " + TORCH_MISSING)
        return
    import vkgrad.torch as vt
    D = Daemon()
    C = vkgrad.connect(D.sock, name="test_torch_regions")
    vt.set_default_client(C)


def tearDownModule():
    if D is None:
        return
    import vkgrad.torch as vt
    C.close()
    vt.set_default_client(None)
    problems = D.stop()
    if problems:
        raise AssertionError("daemon: " + problems)


@unittest.skipIf(TORCH_MISSING, TORCH_MISSING or "")
class TestForward(unittest.TestCase):
    def setUp(self):
        import vkgrad.torch as vt
        self.vt = vt

    def test_forward_matches_torch_every_dtype(self):
        for name, tname in DTYPES:
            dt = getattr(torch, tname)
            for bias in (True, False):
                torch.manual_seed(7)
                ref = torch.nn.Linear(37, 19, bias=bias)
                ours = self.vt.Linear(37, 19, bias=bias)
                ours.load_state_dict(ref.state_dict())
                ours = ours.to(dt)
                x = torch.randn(2, 5, 37).to(dt)
                y = ours(x)
                self.assertEqual(y.dtype, dt)
                self.assertEqual(tuple(y.shape), (2, 5, 19))
                w, xs = f64(ours.weight), f64(x).reshape(-1, 37)
                want = xs @ w.T + (f64(ours.bias) if bias else 0)
                e = rel_err(f64(y).reshape(-1, 19), want)
                self.assertLessEqual(e, TOL[name], "%s bias=%s vs numpy: %.3g" % (name, bias, e))
                # torch's own (f16 in float32: no CPU half matmul in torch 1.13)
                tdt = torch.float32 if dt == torch.float16 else dt
                theirs = torch.nn.functional.linear(
                    x.to(tdt), ours.weight.to(tdt), ours.bias.to(tdt) if bias else None)
                e = rel_err(f64(y), f64(theirs))
                tol = TOL[name] * (2 if name == "bf16" else 1)
                self.assertLessEqual(e, tol, "%s bias=%s vs torch: %.3g" % (name, bias, e))

    def test_backward_matches_torch_every_dtype(self):
        for name, tname in DTYPES:
            dt = getattr(torch, tname)
            torch.manual_seed(8)
            ref = torch.nn.Linear(24, 10)
            ours = self.vt.convert(torch.nn.Linear(24, 10))
            ours.load_state_dict(ref.state_dict())
            ours, ref = ours.to(dt), ref.to(torch.float32 if dt == torch.float16 else dt)
            x = torch.randn(9, 24).to(dt)
            dy = torch.randn(9, 10).to(dt)
            xa, xb = x.clone().requires_grad_(), x.to(ref.weight.dtype).requires_grad_()
            ours(xa).backward(dy)
            ref(xb).backward(dy.to(ref.weight.dtype))
            tol = TOL[name] * (2 if name == "bf16" else 1)
            for what, a, b in (("dx", xa.grad, xb.grad), ("dw", ours.weight.grad, ref.weight.grad),
                               ("db", ours.bias.grad, ref.bias.grad)):
                e = rel_err(f64(a), f64(b))
                self.assertLessEqual(e, tol, "%s %s: %.3g" % (name, what, e))


@unittest.skipIf(TORCH_MISSING, TORCH_MISSING or "")
class TestZeroCopy(unittest.TestCase):
    def setUp(self):
        import vkgrad.torch as vt
        self.vt = vt

    def test_empty_lives_in_a_region_and_blocks_come_back(self):
        t = self.vt.empty((64, 33), torch.bfloat16)
        self.assertEqual(tuple(t.shape), (64, 33))
        self.assertEqual(t.dtype, torch.bfloat16)
        self.assertIsNotNone(self.vt.in_region(t))
        self.assertIsNone(self.vt.in_region(torch.zeros(4)))
        p = t.data_ptr()
        v = t[3]  # a view keeps the block
        del t
        u = self.vt.empty((64, 33), torch.bfloat16)
        self.assertNotEqual(u.data_ptr(), p)
        up = u.data_ptr()
        del v, u  # both blocks free now: the next one of that size is one of them
        w = self.vt.empty((64, 33), torch.bfloat16)
        self.assertIn(w.data_ptr(), (p, up))
        with self.assertRaisesRegex(TypeError, "float64"):
            self.vt.empty((2,), torch.float64)

    def test_no_copy_on_region_tensors(self):
        for name, tname in DTYPES:
            dt = getattr(torch, tname)
            lin = self.vt.convert(torch.nn.Linear(48, 20).to(dt))
            self.assertIsNotNone(self.vt.in_region(lin.weight))
            x = self.vt.empty((16, 48), dt)
            x.copy_(torch.randn(16, 48))
            x.requires_grad_()
            dy = self.vt.empty((16, 20), dt)
            dy.copy_(torch.randn(16, 20))
            before = C.bytes_copied
            y = lin(x)
            self.assertIsNotNone(self.vt.in_region(y), "the forward's output is in a region")
            self.assertEqual(C.bytes_copied, before, "%s forward copied" % name)
            y.backward(dy)
            self.assertEqual(C.bytes_copied, before, "%s backward copied" % name)
            for g in (x.grad, lin.weight.grad, lin.bias.grad):
                self.assertIsNotNone(self.vt.in_region(g))
            # dY outside every region: exactly its bytes, once
            dy_plain = torch.randn(16, 20).to(dt)
            lin(x).backward(dy_plain)
            self.assertEqual(C.bytes_copied - before, dy_plain.numel() * dy_plain.element_size())
            # an input outside every region: its bytes in the forward
            before = C.bytes_copied
            xp = torch.randn(16, 48).to(dt)
            lin(xp)
            self.assertEqual(C.bytes_copied - before, xp.numel() * xp.element_size())

    def test_input_outside_regions_copied_once_for_both_passes(self):
        torch.manual_seed(3)
        lin = self.vt.convert(torch.nn.Linear(24, 12))
        xp = torch.randn(10, 24)
        dy = self.vt.empty((10, 12), torch.float32)
        dy.copy_(torch.randn(10, 12))
        before = C.bytes_copied
        s0 = self.vt.daemon_seconds()
        self.vt.profile(True)
        lin(xp).backward(dy)
        jobs = self.vt.profile(False)
        s1 = self.vt.daemon_seconds()
        # the forward's copy of X serves the backward too
        self.assertEqual(C.bytes_copied - before, xp.numel() * 4)
        want = dy.double().t() @ xp.double()
        err = float((lin.weight.grad.double() - want).abs().max() / want.abs().max())
        self.assertLessEqual(err, TOL["f32"])
        # vt.profile: each job, in order; daemon_seconds grows by their time
        self.assertEqual([(j["op"], j["shape"], j["dtype"]) for j in jobs],
                         [("forward", (10, 24, 12), "f32"), ("backward", (10, 24, 12), "f32")])
        for j in jobs:
            self.assertGreater(j["wall_us"], 0)
            self.assertGreaterEqual(j["wall_us"], j["gpu_us"] - 1)
        self.assertAlmostEqual(s1["forward"] - s0["forward"], jobs[0]["wall_us"] / 1e6, places=5)
        self.assertAlmostEqual(s1["backward"] - s0["backward"], jobs[1]["wall_us"] / 1e6, places=5)
        self.assertEqual(self.vt.profile(False), [], "profiling was off")

    def test_mlp_copies_only_dy(self):
        torch.manual_seed(2)
        m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(inplace=True),
                                torch.nn.Linear(64, 16))
        m = self.vt.convert(m)
        x = self.vt.to_region(torch.randn(8, 32))
        target = torch.randn(8, 16)
        before = C.bytes_copied
        torch.nn.functional.mse_loss(m(x), target).backward()
        # the loss's dY (8x16), nothing else: convert() made the ReLU one
        # whose gradient lands in a region
        self.assertIsInstance(m[1], self.vt.ReLU)
        self.assertEqual(C.bytes_copied - before, 4 * 8 * 16)
        # with activations=False the ReLU's gradient (8x64) is copied too
        m2 = self.vt.convert(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(inplace=True),
                                                 torch.nn.Linear(64, 16)), activations=False)
        self.assertIs(type(m2[1]), torch.nn.ReLU)
        before = C.bytes_copied
        torch.nn.functional.mse_loss(m2(x), target).backward()
        self.assertEqual(C.bytes_copied - before, 4 * (8 * 16 + 8 * 64))

    def test_relu_gradient_in_a_region_equals_torch(self):
        for name, tname in DTYPES:
            dt = getattr(torch, tname)
            try:
                torch.relu(torch.ones(1, dtype=dt))
            except RuntimeError:  # torch 1.13: no CPU half ReLU
                continue
            for inplace in (False, True):
                torch.manual_seed(7)
                x0 = torch.randn(6, 10).to(dt)
                g = torch.randn(6, 10).to(dt)
                xa = x0.clone().requires_grad_()
                xb = x0.clone().requires_grad_()
                relu = self.vt.ReLU(inplace=inplace)
                ya = relu(xa * 1)  # (in place on a non-leaf, as after a layer)
                yb = torch.nn.functional.relu(xb * 1)
                self.assertTrue(torch.equal(ya, yb), "%s inplace=%s forward" % (name, inplace))
                ya.backward(g)
                yb.backward(g)
                self.assertTrue(torch.equal(xa.grad, xb.grad), "%s inplace=%s grad" % (name, inplace))
                fn = ya.grad_fn
                self.assertIn("ReLUFunction", type(fn).__name__)
        # the gradient it hands on is a region tensor (the next layer reads it in place)
        seen = []
        h = torch.randn(4, 5, requires_grad=True) * 1
        h.register_hook(lambda gx: seen.append(self.vt.in_region(gx)))
        self.vt.ReLU()(h).sum().backward()
        self.assertEqual(len(seen), 1)
        self.assertIsNotNone(seen[0], "ReLU's gradient is in a region")
        # no grad needed: torch's ReLU, nothing allocated
        with torch.no_grad():
            self.assertTrue(torch.equal(self.vt.ReLU()(torch.tensor([-1.0, 2.0])),
                                        torch.tensor([0.0, 2.0])))


@unittest.skipIf(TORCH_MISSING, TORCH_MISSING or "")
class TestConvert(unittest.TestCase):
    def setUp(self):
        import vkgrad.torch as vt
        self.vt = vt

    def test_subclasses_replaced_overrides_skipped(self):
        class Plain(torch.nn.Linear):
            pass

        class Scaled(torch.nn.Linear):
            def forward(self, x):
                return 2 * super().forward(x)

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = torch.nn.MultiheadAttention(16, 2)
                self.plain = Plain(16, 16)
                self.scaled = Scaled(16, 8)

            def forward(self, x):
                a, _ = self.attn(x, x, x)
                return self.scaled(self.plain(a))

        torch.manual_seed(5)
        net = Net()
        ref = Net()
        ref.load_state_dict(net.state_dict())
        params = list(net.parameters())
        report = {}
        self.vt.convert(net, report=report)
        self.assertEqual(sorted(report["replaced"]), ["attn.out_proj", "plain"])
        self.assertEqual([n for n, _ in report["skipped"]], ["scaled"])
        self.assertIn("overrides forward", report["skipped"][0][1])
        self.assertIsInstance(net.attn.out_proj, self.vt.Linear)
        self.assertIsInstance(net.plain, self.vt.Linear)
        self.assertIs(type(net.scaled), Scaled)
        # the same Parameter objects (optimisers keep working), now in regions
        self.assertEqual([id(p) for p in net.parameters()], [id(p) for p in params])
        self.assertIsNotNone(self.vt.in_region(net.plain.weight))
        self.assertIsNotNone(self.vt.in_region(net.attn.out_proj.weight))
        x = torch.randn(5, 3, 16)
        e = rel_err(f64(net(x)), f64(ref(x)))
        self.assertLessEqual(e, TOL["f32"], "converted net vs torch: %.3g" % e)
        # trains like torch
        oa = torch.optim.SGD(net.parameters(), lr=0.1)
        ob = torch.optim.SGD(ref.parameters(), lr=0.1)
        for step in range(3):
            for m, o in ((net, oa), (ref, ob)):
                o.zero_grad()
                m(x).pow(2).mean().backward()
                o.step()
        for (n, a), b in zip(ref.named_parameters(), net.parameters()):
            e = rel_err(f64(b), f64(a))
            self.assertLessEqual(e, 1e-4, "%s after 3 steps: %.3g" % (n, e))

    def test_float64_layers_skipped(self):
        m = torch.nn.Sequential(torch.nn.Linear(3, 2).double())
        report = {}
        self.vt.convert(m, report=report)
        self.assertEqual(report["replaced"], [])
        self.assertIn("float64", report["skipped"][0][1])
        self.assertIs(type(m[0]), torch.nn.Linear)


if __name__ == "__main__":
    unittest.main()

"""scripts/torch_train.py --smoke on a real daemon (lavapipe): the training
benchmark runs f32 and bf16 (f16 too where torch has CPU half ops), CPU torch against vkgrad.torch, and exits 0 only
when vkgrad's gradients match CPU torch's within twice the dtype's
tolerance; its table has a line per way and dtype, and the vkgrad way
copies per step exactly the dY of each layer (the loss's and two ReLUs')."""

import json
import os
import subprocess
import sys
import unittest

try:
    import torch  # noqa: F401
    TORCH_MISSING = None
except ImportError as e:  # pragma: no cover
    TORCH_MISSING = "torch is not installed (Debian package python3-torch): %s" % e

from daemon import Daemon, python_env

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, os.pardir, os.pardir, "scripts", "torch_train.py")


@unittest.skipIf(TORCH_MISSING, TORCH_MISSING or "")
class TestTrainSmoke(unittest.TestCase):
    def test_smoke(self):
        d = Daemon()
        try:
            p = subprocess.run([sys.executable, SCRIPT, "--smoke", "--no-cuda", "--json",
                                "--socket", d.sock], capture_output=True, text=True,
                               timeout=600, env=python_env())
        finally:
            problems = d.stop()
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertFalse(problems, problems)
        rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
        ways = {(r["dtype"], r["way"].split("(")[0]) for r in rows}
        for dt in ("f32", "bf16"):  # (f16 where torch has a CPU half ReLU)
            self.assertIn((dt, "cpu"), ways)
            self.assertIn((dt, "vkgrad"), ways)
        for r in rows:
            if r["way"] == "vkgrad":
                es = 4 if r["dtype"] == "f32" else 2
                # dY of the last layer (48x32), the loss's; the ReLUs'
                # gradients land in regions (vkgrad.torch.ReLU)
                self.assertEqual(r["bytes_copied_per_step"], es * 48 * 32, r)
                self.assertGreater(r["step_ms"], 0)


if __name__ == "__main__":
    unittest.main()

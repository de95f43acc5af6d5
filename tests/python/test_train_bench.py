"""scripts/train_bench.py --smoke on a real daemon (lavapipe): 1 and 2
processes train a tiny MLP resident (f32 and bf16); the runner exits 0
only when every process's loss fell and the daemon moved at most 1.2x the
bytes of input, output and output gradient per step (its stats counters).
Here the bytes must be exactly those: one chain, nothing else crossing."""

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
SCRIPT = os.path.join(HERE, os.pardir, os.pardir, "scripts", "train_bench.py")


@unittest.skipIf(TORCH_MISSING, TORCH_MISSING or "")
class TestTrainBench(unittest.TestCase):
    def test_smoke(self):
        d = Daemon()
        try:
            p = subprocess.run([sys.executable, SCRIPT, "--smoke", "--json", "--socket", d.sock],
                               capture_output=True, text=True, timeout=600, env=python_env())
        finally:
            problems = d.stop()
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertFalse(problems, problems)
        rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
        self.assertEqual(sorted((r["dtype"], r["procs"]) for r in rows),
                         [("bf16", 1), ("bf16", 2), ("f32", 1), ("f32", 2)])
        for r in rows:
            self.assertEqual(r["way"], "vkgrad")
            self.assertTrue(r["trained"], r)
            self.assertGreater(r["steps_per_s"], 0)
            self.assertGreater(r["p50_step_ms"], 0)
            self.assertEqual(r["pcie_bytes_per_step"], r["io_bytes_per_step"], r)
            self.assertGreater(r["daemon_device_bytes"], 0)


if __name__ == "__main__":
    unittest.main()

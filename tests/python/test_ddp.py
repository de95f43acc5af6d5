"""docs/python.md's DDP example (ddp_mlp.py), run as written: two ranks
(gloo, CPU tensors), each choosing its own daemon by LOCAL_RANK
(vkgrad-0.sock, vkgrad-1.sock in $XDG_RUNTIME_DIR), against one process on
the whole batch. The ranks end with the same parameters, equal to the one
process's within f32's tolerance, each on its own daemon, and both
daemons served jobs."""

import json
import os
import socket
import subprocess
import sys
import tempfile
import unittest

try:
    import torch  # noqa: F401
    import torch.distributed as dist
    TORCH_MISSING = None if dist.is_available() and dist.is_gloo_available() else \
        "torch.distributed with gloo is not available"
except ImportError as e:  # pragma: no cover
    TORCH_MISSING = "torch is not installed (Debian package python3-torch): %s" % e

import numpy as np

import vkgrad
from daemon import ROOT, Daemon, python_env

TOL = 1e-4  # f32, normwise against the one-process run


def example_source():
    with open(os.path.join(ROOT, "docs", "python.md")) as f:
        text = f.read()
    start = text.index("```python\n# ddp_mlp.py") + len("```python\n")
    return text[start:text.index("```", start)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@unittest.skipIf(TORCH_MISSING, TORCH_MISSING or "")
class TestDdp(unittest.TestCase):
    def test_two_ranks_two_daemons_match_one_process(self):
        tmp = tempfile.mkdtemp(prefix="vkgrad-ddp.")
        script = os.path.join(tmp, "ddp_mlp.py")
        with open(script, "w") as f:
            f.write(example_source())
        run_dir = os.path.join(tmp, "run")
        os.mkdir(run_dir)
        daemons = [Daemon(sock_name="vkgrad-%d.sock" % i) for i in range(2)]
        try:
            for i, d in enumerate(daemons):  # the per-GPU names in one runtime dir
                os.symlink(d.sock, os.path.join(run_dir, "vkgrad-%d.sock" % i))
            base = python_env()
            base.pop("VKGRAD_SOCKET", None)
            base["XDG_RUNTIME_DIR"] = run_dir
            # the package from the tree (a user would have it pip-installed)
            base["PYTHONPATH"] = os.pathsep.join(
                [os.path.join(ROOT, "python")] + ([base["PYTHONPATH"]] if base.get("PYTHONPATH") else []))
            one = subprocess.run([sys.executable, script], capture_output=True, text=True,
                                 timeout=300, env=dict(base, LOCAL_RANK="0"))
            self.assertEqual(one.returncode, 0, one.stdout + one.stderr)
            ref = json.loads(one.stdout.strip().splitlines()[-1])
            port = str(free_port())
            procs = []
            for r in range(2):
                env = dict(base, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2",
                           LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
                procs.append(subprocess.Popen([sys.executable, script], stdout=subprocess.PIPE,
                                              stderr=subprocess.PIPE, text=True, env=env))
            outs = [p.communicate(timeout=300) for p in procs]
            for p, (o, e) in zip(procs, outs):
                self.assertEqual(p.returncode, 0, o + e)
            ranks = [json.loads(o.strip().splitlines()[-1]) for o, _ in outs]
            for r, res in enumerate(ranks):
                self.assertEqual(res["rank"], r)
                self.assertEqual(res["socket"], os.path.join(run_dir, "vkgrad-%d.sock" % r))
            a, b, p1 = (np.array(x["params"], np.float64) for x in (ranks[0], ranks[1], ref))
            np.testing.assert_array_equal(a, b)  # DDP keeps the replicas identical
            err = np.abs(a - p1).max() / np.abs(p1).max()
            print("DDP 2 ranks against 1 process: parameters differ by %.3g (normwise, "
                  "bound %g)" % (err, TOL))
            self.assertLessEqual(err, TOL)
            for d in daemons:  # each daemon ran its rank's jobs and still serves
                with vkgrad.connect(d.sock) as c:
                    self.assertGreater(c.stats()["jobs_done"], 0)
        finally:
            problems = [d.stop() for d in daemons]
        self.assertFalse(any(problems), problems)


if __name__ == "__main__":
    unittest.main()

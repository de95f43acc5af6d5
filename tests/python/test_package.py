"""The package as users install it (issue 26): `pip install ./python` into
a fresh virtual environment, offline (--no-index, the system's setuptools
and wheel: --no-build-isolation; numpy and msgpack from the system's
site-packages), then an import and a job against a private daemon, and
`python -m vkgrad info|ping|stats|bench`."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from daemon import BUILD, ROOT, Daemon, python_env

D = None
VENV = None


def setUpModule():
    global D, VENV
    D = Daemon()
    VENV = tempfile.mkdtemp(prefix="vkgrad-venv.")


def tearDownModule():
    shutil.rmtree(VENV, ignore_errors=True)
    problems = D.stop()
    if problems:
        raise AssertionError("shared daemon: " + problems)


def run(argv, **kw):
    # this process's environment: under test-asan the sanitizer runtimes
    # stay preloaded, as the venv's Python loads the instrumented libvkgrad
    env = python_env({"VKGRAD_LIBRARY": os.path.join(BUILD, "libvkgrad.so.0"),
                      "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    env.pop("PYTHONPATH", None)
    return subprocess.run(argv, env=env, capture_output=True, text=True, cwd=VENV, **kw)


class TestPipInstall(unittest.TestCase):
    def test_1_install_import_job_and_cli(self):
        py = os.path.join(VENV, "venv", "bin", "python")
        p = run([sys.executable, "-m", "venv", "--system-site-packages",
                 os.path.join(VENV, "venv")])
        self.assertEqual(p.returncode, 0, p.stderr)
        # a copy of python/: the build writes build/ and *.egg-info beside
        # pyproject.toml, which must not land in the checkout
        src = os.path.join(VENV, "src")
        shutil.copytree(os.path.join(ROOT, "python"), src,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
        p = run([py, "-m", "pip", "install", "--no-index", "--no-build-isolation", src],
                timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        script = (
            "import os, numpy as np, vkgrad, vkgrad.client\n"
            "assert 'site-packages' in vkgrad.__file__, vkgrad.__file__\n"
            "assert os.path.exists(os.path.join(os.path.dirname(vkgrad.__file__), 'py.typed'))\n"
            "with vkgrad.connect(%r) as c:\n"
            "    x = np.ones((8, 4), np.float32); dy = np.ones((8, 3), np.float32)\n"
            "    g = c.linear_backward(x, dy)\n"
            "    assert (g['db'] == 8).all() and (g['dw'] == 8).all(), g\n"
            "print('job ok', vkgrad.__version__)\n" % D.sock)
        p = run([py, "-c", script])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("job ok 0.2.0", p.stdout)
        p = run([py, "-m", "pip", "show", "vkgrad"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("Requires: msgpack, numpy", p.stdout)

        p = run([py, "-m", "vkgrad", "ping", "--socket", D.sock])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith("ok " + D.sock), p.stdout)
        p = run([py, "-m", "vkgrad", "info", "--socket", D.sock])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("server   vkgradd ", p.stdout)
        self.assertIn("max_dim=", p.stdout)
        p = run([py, "-m", "vkgrad", "info", "--json", "--socket", D.sock])
        self.assertEqual(json.loads(p.stdout)["hello"]["version"], 1)
        p = run([py, "-m", "vkgrad", "stats", "--socket", D.sock])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("validation_errors", json.loads(p.stdout))
        # errors: a clear message and status 1 (2 for usage), the daemon serving on
        p = run([py, "-m", "vkgrad", "ping", "--socket", os.path.join(VENV, "none.sock")])
        self.assertEqual(p.returncode, 1)
        self.assertIn("io: connect to", p.stderr)
        p = run([py, "-m", "vkgrad", "frobnicate"])
        self.assertEqual(p.returncode, 2)
        # bench: Client.linear_backward on region views, checked against float64
        for dt in ("f32", "bf16"):
            p = run([py, "-m", "vkgrad", "bench", "--socket", D.sock, "--shape", "40,24,16",
                     "--dtype", dt, "--reps", "3", "--json"])
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            b = json.loads(p.stdout)
            self.assertTrue(b["ok"], b)
            self.assertLessEqual(b["max_rel_err"], {"f32": 1e-4, "bf16": 1e-2}[dt])
            self.assertEqual(b["bytes_copied"], 0, "region views are not copied")
            self.assertEqual((b["shape"], b["reps"]), ([40, 24, 16], 3))
            self.assertGreater(b["end_to_end_us"], 0)
        p = run([py, "-m", "vkgrad", "bench", "--socket", D.sock, "--shape", "40,24"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("--shape takes three positive integers", p.stderr)
        p = run([py, "-m", "vkgrad", "ping", "--socket", D.sock])
        self.assertEqual(p.returncode, 0, p.stderr)


if __name__ == "__main__":
    unittest.main()

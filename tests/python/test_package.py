"""The package as users install it (issues 26, 38): `pip install ./python`
into a fresh virtual environment, offline (--no-index, the system's
setuptools and wheel: --no-build-isolation; numpy and msgpack from the
system's site-packages), from a copy of the checkout where neither `make`
nor `make install` ran: the build compiles libvkgrad from client/ and
proto/ into the package. Then, with no VKGRAD_LIBRARY set, an import that
loads that library, a job against a private daemon, and `python -m vkgrad
info|ping|stats|bench`; and a build from python/ alone, outside a checkout,
failing with a message that says what is missing."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from daemon import ROOT, Daemon, child_env, python_env

D = None
VENV = None
# what a checkout's build would leave, or git: not in a fresh clone's files
_NOT_SOURCE = ("__pycache__", "*.egg-info")


def setUpModule():
    global D, VENV
    D = Daemon()
    VENV = tempfile.mkdtemp(prefix="vkgrad-venv.")


def tearDownModule():
    shutil.rmtree(VENV, ignore_errors=True)
    problems = D.stop()
    if problems:
        raise AssertionError("shared daemon: " + problems)


def _clean(env):
    for k in ("VKGRAD_LIBRARY", "PYTHONPATH", "MAKEFLAGS", "MAKELEVEL", "MFLAGS"):
        env.pop(k, None)
    env.update({"PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    return env


def run(argv, **kw):
    """A Python child that loads libvkgrad: this process's environment (under
    test-asan the sanitizer runtimes stay preloaded), without VKGRAD_LIBRARY."""
    return subprocess.run(argv, env=_clean(python_env()), capture_output=True, text=True,
                          cwd=VENV, **kw)


def build(argv, **kw):
    """pip building the package: make and the compiler, so no preloaded
    sanitizer runtimes (child_env)."""
    return subprocess.run(argv, env=_clean(child_env()), capture_output=True, text=True,
                          cwd=VENV, **kw)


def copy_checkout(dst):
    """The checkout's sources as a fresh clone has them: no build*/ output,
    no .git or other dot-folders, no python/build, no caches."""
    def ignore(d, names):
        out = set(shutil.ignore_patterns(*_NOT_SOURCE)(d, names))
        if os.path.samefile(d, ROOT):
            out |= {n for n in names if n.startswith(("build", "."))}
        elif os.path.samefile(d, os.path.join(ROOT, "python")):
            out.add("build")
        return out
    shutil.copytree(ROOT, dst, ignore=ignore, symlinks=True)


class TestPipInstall(unittest.TestCase):
    def test_1_install_import_job_and_cli(self):
        py = os.path.join(VENV, "venv", "bin", "python")
        p = run([sys.executable, "-m", "venv", "--system-site-packages",
                 os.path.join(VENV, "venv")])
        self.assertEqual(p.returncode, 0, p.stderr)
        # a checkout where make never ran (the build also writes build/ and
        # *.egg-info beside pyproject.toml, which must not land in this one)
        src = os.path.join(VENV, "src")
        copy_checkout(src)
        self.assertFalse(os.path.exists(os.path.join(src, "build")))
        p = build([py, "-m", "pip", "install", "--no-index", "--no-build-isolation",
                   os.path.join(src, "python")], timeout=400)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        script = (
            "import os, numpy as np, vkgrad, vkgrad.client, vkgrad._install\n"
            "assert 'VKGRAD_LIBRARY' not in os.environ\n"
            "here = os.path.dirname(vkgrad.__file__)\n"
            "assert 'site-packages' in here, here\n"
            "assert vkgrad._install.LIBDIR is None, 'make install ran'\n"
            "assert vkgrad.library_path == os.path.join(here, 'libvkgrad.so.0'), "
            "vkgrad.library_path\n"
            "assert not os.path.islink(vkgrad.library_path)\n"
            "assert os.path.exists(os.path.join(here, 'py.typed'))\n"
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
        info = json.loads(p.stdout)
        self.assertEqual(info["hello"]["version"], 1)
        self.assertTrue(info["library"].startswith(os.path.join(VENV, "venv", "lib")), info)
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

    def test_2_outside_a_checkout(self):
        """python/ alone (no client/, proto/ around it): the build fails,
        saying what it needs, instead of a package that cannot load."""
        py = os.path.join(VENV, "venv", "bin", "python")
        if not os.path.exists(py):
            self.skipTest("test_1 made no venv")
        lone = os.path.join(VENV, "lone", "python")
        shutil.copytree(os.path.join(ROOT, "python"), lone,
                        ignore=shutil.ignore_patterns("build", *_NOT_SOURCE))
        p = build([py, "-m", "pip", "install", "--no-index", "--no-build-isolation", lone],
                  timeout=300)
        self.assertNotEqual(p.returncode, 0, p.stdout)
        out = p.stdout + p.stderr
        self.assertIn("libvkgrad is built from the vkgrad checkout around python/", out)
        self.assertIn("Makefile", out)
        # the installed package is still test_1's, and still serves
        p = run([py, "-m", "vkgrad", "ping", "--socket", D.sock])
        self.assertEqual(p.returncode, 0, p.stderr)


if __name__ == "__main__":
    unittest.main()

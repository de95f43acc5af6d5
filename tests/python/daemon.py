"""A private vkgradd for the Python tests (the counterpart of
tests/common/daemon_proc.c): its own directory with socket, pipeline cache
and log; $BUILD/vkgradd with the Khronos validation layer (synchronization
validation included); dies with the test process. stop() checks that stats
report no validation error, that SIGTERM ends it with status 0 within 60 s,
and that its log holds no validation error."""

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def python_env(extra=None):
    """The environment for a Python child that loads libvkgrad (a script, a
    venv's interpreter): this process's own, so under test-asan it gets the
    sanitizer runtimes preloaded as runner.py arranged for this one."""
    e = dict(os.environ)
    e.update(extra or {})
    return e


def child_env(extra=None):
    """The environment for a daemon or the CLI: under test-asan (runner.py)
    the original ASAN_OPTIONS, and no preloaded runtimes (they link their
    own)."""
    e = dict(os.environ)
    orig = e.pop("VKGRAD_TEST_CHILD_ASAN_OPTIONS", None)
    if orig is not None:
        e["ASAN_OPTIONS"] = orig
        e.pop("LD_PRELOAD", None)
    e.update(extra or {})
    return e


def can_connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


# 180 s: a loaded 2-core machine can take a minute to time the kernels at
# start-up (tests/common/daemon_proc.c says more)
START_TIMEOUT_S = 180


def wait_listening(proc, sock):
    """True once `sock` accepts a connection; False when `proc` exited
    first or START_TIMEOUT_S passed."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while not can_connect(sock):
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class Daemon:
    def __init__(self, args=(), env=None, sock_name="sock"):
        self.dir = tempfile.mkdtemp(prefix="vkgrad-py.")
        self.sock = os.path.join(self.dir, sock_name)
        self.log = os.path.join(self.dir, "daemon.log")
        e = child_env()
        for k in ("JOURNAL_STREAM", "VKGRAD_FAULT_INJECT", "LISTEN_FDS", "LISTEN_PID",
                  "LISTEN_FDNAMES", "NOTIFY_SOCKET"):
            e.pop(k, None)
        e["VKGRAD_VALIDATION"] = "0" if os.environ.get("VKGRAD_TEST_VALIDATION") == "0" else "1"
        if os.environ.get("VKGRAD_TEST_SYNC_VALIDATION") != "0":
            e.setdefault("VK_LAYER_ENABLES",
                         "VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT")
        e.update(env or {})
        argv = [os.path.join(BUILD, "vkgradd"), "--socket", self.sock, "--cache-dir",
                os.path.join(self.dir, "cache"), "--log-level", "debug"] + list(args)
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=e,
                                         stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        if not wait_listening(self.proc, self.sock):
            self.kill()
            raise RuntimeError("vkgradd did not start (exit %s); log:\n%s"
                               % (self.proc.returncode, self.log_tail()))

    def log_text(self):
        with open(self.log, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def log_tail(self, n=30):
        return "\n".join(self.log_text().splitlines()[-n:])

    def validation_errors(self):
        import vkgrad
        with vkgrad.connect(self.sock) as c:
            return c.stats()["validation_errors"]

    def stop(self):
        """Returns "" when everything was clean, else what was not."""
        problems = []
        if self.proc.poll() is None:
            try:
                n = self.validation_errors()
                if n:
                    problems.append("stats: %d validation error(s)" % n)
            except Exception as e:  # noqa: BLE001 — reported, not raised
                problems.append("stats failed: %s" % e)
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                rc = self.proc.wait()
                problems.append("did not exit within 60 s of SIGTERM")
            if rc != 0:
                problems.append("exit status %s after SIGTERM" % rc)
        bad = [l for l in self.log_text().splitlines() if "error: vulkan validation" in l]
        if bad:
            problems.append("%d validation error line(s), the first: %s" % (len(bad), bad[0][:300]))
        if problems:
            return "; ".join(problems) + "\nlog tail:\n" + self.log_tail()
        shutil.rmtree(self.dir, ignore_errors=True)
        return ""

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

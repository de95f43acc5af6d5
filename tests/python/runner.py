"""Runs unittest modules of tests/python for tests/run.sh: one line per
test as it finishes, then cmocka's summary lines ("[  PASSED  ] N test(s).",
"[  FAILED  ] N test(s)"), which run.sh adds up; skipped tests are listed
with their reason. Exit status 1 when anything failed.

The package under test is python/vkgrad of this checkout; its library is
$BUILD/libvkgrad.so.0 (VKGRAD_LIBRARY is set to it unless BUILD is the
default build/, where the package must find it by itself)."""

import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


class _Result(unittest.TextTestResult):
    def startTest(self, test):
        self._t0 = time.monotonic()
        super().startTest(test)

    def _line(self, mark, test, extra=""):
        self.stream.write("[ %-8s ] %s (%.2f s)%s\n" % (mark, test.id().split(".", 1)[1],
                                                        time.monotonic() - self._t0, extra))
        self.stream.flush()

    def addSuccess(self, test):
        super().addSuccess(test)
        self._line("OK", test)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._line("FAILED", test, "\n" + self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._line("ERROR", test, "\n" + self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._line("SKIPPED", test, ": " + reason)


def _asan_reexec():
    """Under `make test-asan` the library is instrumented: Python must load
    the sanitizer runtimes first (LD_PRELOAD), without leak checking (the
    interpreter's own allocations would drown ours). The daemons and the
    CLI the tests start get the original ASAN_OPTIONS back (daemon.py)."""
    if not os.environ.get("ASAN_OPTIONS") or "VKGRAD_TEST_CHILD_ASAN_OPTIONS" in os.environ:
        return
    import subprocess
    libs = [subprocess.run(["cc", "-print-file-name=" + l], capture_output=True,
                           text=True).stdout.strip() for l in ("libasan.so", "libubsan.so")]
    env = dict(os.environ, VKGRAD_TEST_CHILD_ASAN_OPTIONS=os.environ["ASAN_OPTIONS"],
               ASAN_OPTIONS="detect_leaks=0:abort_on_error=1",
               LD_PRELOAD=" ".join(libs + [os.environ.get("LD_PRELOAD", "")]).strip())
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def main(*modules):
    _asan_reexec()
    sys.path.insert(0, os.path.join(ROOT, "python"))
    sys.path.insert(0, HERE)
    build = os.environ.get("BUILD", "build")
    if os.path.normpath(build) != "build":
        os.environ["VKGRAD_LIBRARY"] = os.path.join(ROOT, build, "libvkgrad.so.0")
    suite = unittest.defaultTestLoader.loadTestsFromNames(modules)
    runner = unittest.TextTestRunner(stream=sys.stdout, verbosity=0, resultclass=_Result)
    r = runner.run(suite)
    failed = len(r.failures) + len(r.errors) + len(r.unexpectedSuccesses)
    passed = r.testsRun - failed - len(r.skipped)
    print("[==========] %d test(s) run." % r.testsRun)
    print("[  PASSED  ] %d test(s)." % passed)
    if r.skipped:
        print("[  SKIPPED ] %d test(s): %s" % (len(r.skipped), "; ".join(
            "%s: %s" % (t.id().split(".")[-1], why) for t, why in r.skipped)))
    if failed:
        print("[  FAILED  ] %d test(s)" % failed)
    sys.exit(1 if failed or not r.wasSuccessful() else 0)

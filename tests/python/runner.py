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


def main(*modules):
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

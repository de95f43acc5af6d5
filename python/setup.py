"""The build step of `pip install ./python`: the package carries its own
libvkgrad.so.0, compiled from the checkout around it (../client, ../proto)
by the checkout's Makefile into setuptools' build_temp (never into the
checkout's build/), and copied into the wheel as vkgrad/libvkgrad.so.0,
which vkgrad/_lib.py loads first (after an explicit $VKGRAD_LIBRARY).

Needs what `make` needs for the library (make, gcc, pkg-config,
libmsgpack-dev: `scripts/deps.sh python`), nothing from PyPI: offline, with
the system's setuptools and wheel, `pip install --no-index
--no-build-isolation ./python` (docs/python.md). The metadata is in
pyproject.toml. The wheel is tagged py3-none-<platform>: a native library,
loaded through ctypes, that no Python ABI touches.

An editable install (`pip install -e ./python`) builds no library: the
package then sits in the checkout and loads the checkout's
build/libvkgrad.so.0 (run `make`)."""

import os
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:
    from setuptools.errors import ExecError
except ImportError:  # setuptools < 59
    from distutils.errors import DistutilsExecError as ExecError

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SONAME = "libvkgrad.so.0"
# what the library is built from: the build needs all of them
CHECKOUT_FILES = ("Makefile", "client/vkgrad.h", "client/connection.c", "proto/msg.c")
# make's variables from a make that runs pip (`make test`): a jobserver
# that is not ours, the caller's command-line overrides (BUILD=, SAN=)
MAKE_ENV = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "MAKE_TERMOUT", "MAKE_TERMERR")


def _jobs():
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class build_py_libvkgrad(build_py):
    """build_py, then libvkgrad.so.0 into the built package."""

    def run(self):
        super().run()
        if not getattr(self, "editable_mode", False):
            self._build_library()

    def _lib_target(self):
        return os.path.join(self.build_lib, "vkgrad", SONAME)

    def _build_library(self):
        absent = [f for f in CHECKOUT_FILES if not os.path.exists(os.path.join(ROOT, f))]
        if absent:
            raise ExecError(
                "vkgrad: libvkgrad is built from the vkgrad checkout around python/, "
                "and %s has no %s; build from a checkout (pip install ./python), "
                "or install the library (make install) and the package with it"
                % (ROOT, ", ".join(absent)))
        build_dir = os.path.abspath(os.path.join(
            self.get_finalized_command("build").build_temp, "libvkgrad"))
        env = {k: v for k, v in os.environ.items() if k not in MAKE_ENV}
        cmd = ["make", "-C", ROOT, "--no-print-directory", "-j%d" % _jobs(),
               "BUILD=" + build_dir, "SAN=", os.path.join(build_dir, "libvkgrad.so")]
        self.announce("building libvkgrad: " + " ".join(cmd), level=2)
        try:
            subprocess.run(cmd, env=env, check=True)
        except (OSError, subprocess.CalledProcessError) as e:
            raise ExecError("vkgrad: building libvkgrad failed (%s): %s; the build needs "
                            "make, gcc, pkg-config and libmsgpack-dev "
                            "(scripts/deps.sh python)" % (" ".join(cmd), e))
        # the file itself (a wheel holds no symlinks), under its soname
        self.mkpath(os.path.dirname(self._lib_target()))
        self.copy_file(os.path.realpath(os.path.join(build_dir, SONAME)), self._lib_target(),
                       preserve_mode=True)

    def get_outputs(self, include_bytecode=1):
        out = super().get_outputs(include_bytecode)
        if not getattr(self, "editable_mode", False):
            out.append(self._lib_target())
        return out


class BinaryDistribution(Distribution):
    """A native library inside: platform-specific (purelib is not the place)."""

    def has_ext_modules(self):
        return True


cmdclass = {"build_py": build_py_libvkgrad}
try:
    from wheel.bdist_wheel import bdist_wheel as _bdist_wheel

    class bdist_wheel(_bdist_wheel):
        """py3-none-<platform>: any Python 3, this machine's kind."""

        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            return ("py3", "none", super().get_tag()[2])

    cmdclass["bdist_wheel"] = bdist_wheel
except ImportError:
    pass

setup(cmdclass=cmdclass, distclass=BinaryDistribution)

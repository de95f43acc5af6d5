"""Loading libvkgrad.so and declaring the C functions (client/vkgrad.h).

Where the library comes from, first found wins:
  1. $VKGRAD_LIBRARY, when set (a path): an explicit choice overrides;
  2. build/libvkgrad.so.0 of the checkout this package sits in
     (python/vkgrad/ -> ../../build), so PYTHONPATH=python works after `make`;
  3. the installed library: the libdir `make install` recorded in
     _install.py, then the dynamic linker's own search (libvkgrad.so.0).
"""

import ctypes
import os

from . import _install

VKG_EREMOTE = -10000
VKG_NONE = (1 << 64) - 1
SONAME = "libvkgrad.so.0"


class vkg_error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_char * 24), ("message", ctypes.c_char * 256)]


class vkg_tensor(ctypes.Structure):
    _fields_ = [("region", ctypes.c_uint64), ("offset", ctypes.c_uint64)]


class vkg_job(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_char_p),
                ("batch", ctypes.c_uint64), ("in_", ctypes.c_uint64), ("out", ctypes.c_uint64),
                ("x", vkg_tensor), ("dy", vkg_tensor), ("w", vkg_tensor),
                ("dw", vkg_tensor), ("db", vkg_tensor), ("dx", vkg_tensor),
                ("accumulate", ctypes.c_bool),
                ("variant", ctypes.c_char_p),
                # 0.2: the fused activation (read through vkg_submit_sized)
                ("activation", ctypes.c_char_p),
                ("y", vkg_tensor), ("z", vkg_tensor)]


class vkg_result(ctypes.Structure):
    _fields_ = [("queued_us", ctypes.c_uint64), ("gpu_us", ctypes.c_uint64),
                ("batch_jobs", ctypes.c_uint64), ("kernel_us", ctypes.c_uint64)]


def _candidates():
    env = os.environ.get("VKGRAD_LIBRARY")
    if env:
        return [env], True
    here = os.path.dirname(os.path.abspath(__file__))
    out = [os.path.normpath(os.path.join(here, os.pardir, os.pardir, "build", SONAME))]
    if _install.LIBDIR:
        out.append(os.path.join(_install.LIBDIR, SONAME))
    out.append(SONAME)
    return out, False


def _load():
    tried = []
    paths, explicit = _candidates()
    for p in paths:
        if os.sep in p and not os.path.exists(p) and not explicit:
            tried.append("%s (absent)" % p)
            continue
        try:
            return ctypes.CDLL(p, use_errno=True), p
        except OSError as e:
            tried.append("%s (%s)" % (p, e))
    raise ImportError("vkgrad: libvkgrad.so not found; tried " + "; ".join(tried) +
                      ". Run `make` in the checkout, `make install`, or set "
                      "VKGRAD_LIBRARY to the library's path.")


lib, path = _load()

_P = ctypes.c_void_p
_ERR = ctypes.POINTER(vkg_error)
_U64P = ctypes.POINTER(ctypes.c_uint64)


def _decl(name, res, *args):
    f = getattr(lib, name)
    f.restype = res
    f.argtypes = list(args)


_decl("vkg_connect", _P, ctypes.c_char_p, _ERR)
_decl("vkg_close", None, _P)
_decl("vkg_default_socket", ctypes.c_char_p)
_decl("vkg_ping", ctypes.c_int, _P, _ERR)
_decl("vkg_region_register_fd", ctypes.c_int, _P, ctypes.c_int, ctypes.c_size_t, _U64P, _ERR)
_decl("vkg_region_destroy", ctypes.c_int, _P, ctypes.c_uint64, _P, ctypes.c_size_t, _ERR)
_decl("vkg_submit_sized", ctypes.c_int, _P, ctypes.POINTER(vkg_job), ctypes.c_size_t, _U64P, _ERR)
_decl("vkg_poll", ctypes.c_int, _P, ctypes.c_uint64, ctypes.POINTER(vkg_result), _ERR)
_decl("vkg_wait", ctypes.c_int, _P, ctypes.c_uint64, ctypes.c_int, ctypes.POINTER(vkg_result),
      _ERR)
_decl("vkg_poll_any", ctypes.c_int, _P, _U64P, ctypes.POINTER(vkg_result), _ERR)
_decl("vkg_fd", ctypes.c_int, _P)
_decl("vkg_call_raw", ctypes.c_int, _P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t,
      ctypes.POINTER(_P), ctypes.POINTER(ctypes.c_size_t), _ERR)



def submit_job(h, job, handle, err):
    """vkg_submit for this package's whole vkg_job (its 0.2 fields too:
    vkg_submit reads 0.1's part only)."""
    return lib.vkg_submit_sized(h, job, ctypes.sizeof(vkg_job), handle, err)


# the C library's free(), for vkg_call_raw's reply buffers
libc = ctypes.CDLL(None)
libc.free.restype = None
libc.free.argtypes = [_P]
libc.shutdown.restype = ctypes.c_int
libc.shutdown.argtypes = [ctypes.c_int, ctypes.c_int]

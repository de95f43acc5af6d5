"""libvkgrad's linear_forward (client/vkgrad.h vkg_forward_job,
vkg_submit_forward) for Client.submit_forward: Y = X·Wᵀ (+ b)."""

import ctypes

from . import _lib

FIELDS = ("x", "w", "b", "y", "z")


class vkg_forward_job(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_char_p),
                ("batch", ctypes.c_uint64), ("in_", ctypes.c_uint64), ("out", ctypes.c_uint64),
                ("x", _lib.vkg_tensor), ("w", _lib.vkg_tensor), ("b", _lib.vkg_tensor),
                ("y", _lib.vkg_tensor),
                ("accumulate", ctypes.c_bool),
                ("variant", ctypes.c_char_p),
                ("activation", ctypes.c_char_p),
                ("z", _lib.vkg_tensor)]


submit = _lib.lib.vkg_submit_forward
submit.restype = ctypes.c_int
submit.argtypes = [ctypes.c_void_p, ctypes.POINTER(vkg_forward_job), ctypes.POINTER(ctypes.c_uint64),
                   ctypes.POINTER(_lib.vkg_error)]

"""Error: what a failed request raises (vkgrad.Error), and its making from
libvkgrad's vkg_error."""

from typing import Optional

from . import _lib

# every error code of the protocol (proto/README.md); "io" is local
CODES = ("bad_frame", "bad_request", "unknown_op", "unsupported", "bad_region",
         "out_of_bounds", "overlap", "limit", "device_lost", "internal", "bad_tensor")


class Error(Exception):
    """A failed request. code: the daemon's error code (CODES), or "io" for a
    local failure (socket, memfd, mmap; errno then holds the errno); message:
    what was wrong, the daemon's own words for a remote error."""

    def __init__(self, code: str, message: str, errno: Optional[int] = None):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message
        self.errno = errno


def _error(rc, err):
    code = err.code.decode("utf-8", "replace") or "io"
    msg = err.message.decode("utf-8", "replace")
    return Error(code, msg, None if rc == _lib.VKG_EREMOTE else -rc)


def _err_struct(code, message):
    e = _lib.vkg_error()
    e.code = code.encode()
    e.message = message.encode()[:255]
    return e

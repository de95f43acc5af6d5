"""The msgpack subset the vkgrad protocol uses (proto/README.md): nil, bool,
int, float, str, bin, array and map. Enough to build the keys of a request
for :meth:`vkgrad.Client.call` and to read any reply; not a general library.
Decoding is bounded by the bytes given: every length is checked against
what is left before anything is allocated."""

import struct

__all__ = ["packb", "unpackb", "MsgpackError"]


class MsgpackError(ValueError):
    """Bytes that are not one msgpack object of the supported types."""


def _pack(o, out):
    if o is None:
        out.append(0xC0)
    elif o is True:
        out.append(0xC3)
    elif o is False:
        out.append(0xC2)
    elif isinstance(o, int):
        if 0 <= o < 0x80:
            out.append(o)
        elif -32 <= o < 0:
            out.append(o & 0xFF)
        elif 0 <= o < 1 << 64:
            out += b"\xcf" + struct.pack(">Q", o)
        elif -(1 << 63) <= o < 0:
            out += b"\xd3" + struct.pack(">q", o)
        else:
            raise MsgpackError("integer %d does not fit 64 bits" % o)
    elif isinstance(o, float):
        out += b"\xcb" + struct.pack(">d", o)
    elif isinstance(o, str):
        b = o.encode("utf-8")
        _head(out, len(b), 0xA0, 32, 0xD9, 0xDA, 0xDB)
        out += b
    elif isinstance(o, (bytes, bytearray, memoryview)):
        b = bytes(o)
        _head(out, len(b), None, 0, 0xC4, 0xC5, 0xC6)
        out += b
    elif isinstance(o, (list, tuple)):
        _head(out, len(o), 0x90, 16, None, 0xDC, 0xDD)
        for v in o:
            _pack(v, out)
    elif isinstance(o, dict):
        _head(out, len(o), 0x80, 16, None, 0xDE, 0xDF)
        for k, v in o.items():
            _pack(k, out)
            _pack(v, out)
    else:
        raise MsgpackError("cannot encode %s in msgpack" % type(o).__name__)


def _head(out, n, fix, fixmax, b8, b16, b32):
    if fix is not None and n < fixmax:
        out.append(fix | n)
    elif b8 is not None and n < 1 << 8:
        out += bytes((b8, n))
    elif n < 1 << 16:
        out += bytes((b16,)) + struct.pack(">H", n)
    elif n < 1 << 32:
        out += bytes((b32,)) + struct.pack(">I", n)
    else:
        raise MsgpackError("container of %d elements is too long" % n)


def packb(o):
    """Encode one object."""
    out = bytearray()
    _pack(o, out)
    return bytes(out)


class _Reader:
    def __init__(self, data):
        self.b = memoryview(data)
        self.i = 0

    def take(self, n):
        if n > len(self.b) - self.i:
            raise MsgpackError("truncated: %d bytes wanted at offset %d of %d"
                               % (n, self.i, len(self.b)))
        v = self.b[self.i:self.i + n]
        self.i += n
        return v

    def uint(self, n):
        return int.from_bytes(self.take(n), "big")


_FIXED = {0xCC: (">B", 1), 0xCD: (">H", 2), 0xCE: (">I", 4), 0xCF: (">Q", 8),
          0xD0: (">b", 1), 0xD1: (">h", 2), 0xD2: (">i", 4), 0xD3: (">q", 8),
          0xCA: (">f", 4), 0xCB: (">d", 8)}


def _unpack(r, depth):
    if depth > 32:
        raise MsgpackError("nested deeper than 32 levels")
    t = r.uint(1)
    if t < 0x80:
        return t
    if t >= 0xE0:
        return t - 0x100
    if 0x80 <= t <= 0x8F:
        return _map(r, t & 0x0F, depth)
    if 0x90 <= t <= 0x9F:
        return _array(r, t & 0x0F, depth)
    if 0xA0 <= t <= 0xBF:
        return _str(r, t & 0x1F)
    if t == 0xC0:
        return None
    if t in (0xC2, 0xC3):
        return t == 0xC3
    if t in _FIXED:
        fmt, n = _FIXED[t]
        return struct.unpack(fmt, r.take(n))[0]
    if t in (0xD9, 0xDA, 0xDB):
        return _str(r, r.uint({0xD9: 1, 0xDA: 2, 0xDB: 4}[t]))
    if t in (0xC4, 0xC5, 0xC6):
        return bytes(r.take(r.uint({0xC4: 1, 0xC5: 2, 0xC6: 4}[t])))
    if t in (0xDC, 0xDD):
        return _array(r, r.uint(2 if t == 0xDC else 4), depth)
    if t in (0xDE, 0xDF):
        return _map(r, r.uint(2 if t == 0xDE else 4), depth)
    raise MsgpackError("unsupported msgpack type byte 0x%02x" % t)


def _str(r, n):
    try:
        return str(r.take(n), "utf-8")
    except UnicodeDecodeError as e:
        raise MsgpackError("string is not UTF-8: %s" % e) from None


def _array(r, n, depth):
    if n > len(r.b) - r.i:  # each element takes at least one byte
        raise MsgpackError("array of %d elements in %d bytes" % (n, len(r.b) - r.i))
    return [_unpack(r, depth + 1) for _ in range(n)]


def _map(r, n, depth):
    if 2 * n > len(r.b) - r.i:
        raise MsgpackError("map of %d pairs in %d bytes" % (n, len(r.b) - r.i))
    d = {}
    for _ in range(n):
        k = _unpack(r, depth + 1)
        if isinstance(k, (list, dict)):
            raise MsgpackError("map key of type %s" % type(k).__name__)
        d[k] = _unpack(r, depth + 1)
    return d


def unpackb(data):
    """Decode exactly one object from data (bytes-like)."""
    r = _Reader(data)
    o = _unpack(r, 0)
    if r.i != len(r.b):
        raise MsgpackError("%d bytes after the object" % (len(r.b) - r.i))
    return o

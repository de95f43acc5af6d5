"""python -m vkgrad info|ping|stats|bench [--socket PATH] [--json]

  info   the library and socket in use, the daemon's hello (server, device,
         limits, kernels with --json)
  ping   one round trip; prints its time
  stats  the daemon's counters (proto/README.md), as JSON
  bench  Client.linear_backward on tensors in regions (zero copy), one job
         in flight: --shape B,I,O (default 2048,1024,1024) --dtype
         f32|f16|bf16 --reps N (after warm-up jobs for 0.3 s, as bench
         --kernels); prints the median
         round trip, comparable with `vkgrad bench --kernels`' end_to_end_us
         for the same shape (JSON with --json), and the last job checked
         against float64 (db whole, 4 rows of dW and dX; status 1 past
         vkgrad.TOLERANCE)

Exit status 0, or 1 with the error on stderr (vkgrad.Error: code and
message), 2 for bad usage."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import List, Optional


def _jsonable(o):
    if isinstance(o, bytes):
        return o.hex()
    if isinstance(o, dict):
        return {str(k): _jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_jsonable(v) for v in o]
    return o


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m vkgrad",
                                description="The vkgrad Python package: check the daemon.")
    p.add_argument("command", choices=("info", "ping", "stats", "bench"))
    p.add_argument("--socket", help="the daemon's socket (default: vkgrad.default_socket())")
    p.add_argument("--json", action="store_true", help="info (bench) as JSON")
    p.add_argument("--shape", default="2048,1024,1024", help="bench: batch,in,out")
    p.add_argument("--dtype", default="f32", choices=("f32", "f16", "bf16"), help="bench: dtype")
    p.add_argument("--reps", type=int, default=20, help="bench: measured jobs")
    a = p.parse_args(argv)
    if a.command == "bench":
        try:
            shape = tuple(int(v) for v in a.shape.split(","))
        except ValueError:
            shape = ()
        if len(shape) != 3 or min(shape) < 1 or a.reps < 1:
            p.error("--shape takes three positive integers B,I,O and --reps a positive one")
    try:
        import vkgrad
    except ImportError as e:
        print("python -m vkgrad: %s" % e, file=sys.stderr)
        return 1
    try:
        with vkgrad.connect(a.socket, name="python -m vkgrad") as c:
            if a.command == "ping":
                t0 = time.perf_counter()
                c.ping()
                print("ok %s %.1f us" % (c.socket, (time.perf_counter() - t0) * 1e6))
            elif a.command == "bench":
                from ._bench import describe, linear_backward_on_views
                res = linear_backward_on_views(c, shape, a.dtype, a.reps)
                print(json.dumps(res) if a.json else describe(res))
                if not res["ok"]:
                    return 1
            elif a.command == "stats":
                print(json.dumps(_jsonable(c.stats()), indent=2, sort_keys=True))
            else:
                info = {"package": vkgrad.__version__, "library": vkgrad.library_path,
                        "socket": c.socket, "hello": c.info}
                if a.json:
                    print(json.dumps(_jsonable(info), indent=2, sort_keys=True))
                else:
                    h = c.info
                    dev = h.get("device", {})
                    print("package  vkgrad %s" % vkgrad.__version__)
                    print("library  %s" % vkgrad.library_path)
                    print("socket   %s" % c.socket)
                    print("server   %s (protocol %s)" % (h.get("server"), h.get("version")))
                    print("device   %s (%s, driver %s)" % (dev.get("name"), dev.get("type"),
                                                          dev.get("driver")))
                    lim = h.get("limits", {})
                    print("limits   " + ", ".join("%s=%s" % kv for kv in sorted(lim.items())))
                    ks = h.get("kernels", [])
                    by = {}
                    for k in ks:
                        by[k.get("status")] = by.get(k.get("status"), 0) + 1
                    print("kernels  %d: %s" % (len(ks), ", ".join(
                        "%s %d" % (s, n) for s, n in sorted(by.items(), key=str))))
    except vkgrad.Error as e:
        print("python -m vkgrad %s: %s" % (a.command, e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

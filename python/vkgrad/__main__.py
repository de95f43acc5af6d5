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


def _bench(c, shape, dtype, reps, as_json):
    """Median round trip of Client.linear_backward (dw, db, dx) on region
    views: inputs random in [-1, 1), outputs written in place."""
    import numpy as np
    import vkgrad
    from vkgrad.dtypes import numpy_dtype
    B, I, O = shape
    npdt = numpy_dtype(dtype)
    size = np.dtype(npdt).itemsize
    rng = np.random.default_rng(0)
    dims = {"x": (B, I), "dy": (B, O), "w": (O, I), "dw": (O, I), "db": (O,), "dx": (B, I)}
    t = {}
    regions = []
    for k, d in dims.items():
        r = c.region(int(np.prod(d)) * size)
        regions.append(r)
        t[k] = r.ndarray(d, dtype)
        if k in ("x", "dy", "w"):
            v = rng.uniform(-1, 1, d).astype(np.float32)
            t[k][...] = vkgrad.to_bf16(v) if dtype == "bf16" else v.astype(npdt)
    copied0 = c.bytes_copied
    times, gpu, queued = [], [], []
    # unmeasured warm-up as bench --kernels: at least 2 jobs and 0.3 s (the
    # GPU raises its clocks only under sustained load)
    warm, start = 0, time.perf_counter()
    while warm < 2 or time.perf_counter() - start < 0.3:
        c.linear_backward(t["x"], t["dy"], t["w"], out={"dw": t["dw"], "db": t["db"], "dx": t["dx"]},
                          dtype=dtype)
        warm += 1
    for i in range(reps):
        t0 = time.perf_counter()
        f = c.submit(t["x"], t["dy"], t["w"], out={"dw": t["dw"], "db": t["db"], "dx": t["dx"]},
                     dtype=dtype)
        f.result()
        times.append(time.perf_counter() - t0)
        gpu.append(f.timing["gpu_us"])
        queued.append(f.timing["queued_us"])
    # the last job's outputs against float64, sampled as bench --kernels
    # checks: db whole, 4 rows of dW and of dX (relative to max|want|)
    f64 = {k: (vkgrad.from_bf16(t[k]) if dtype == "bf16" else t[k]).astype(np.float64)
           for k in ("x", "dy", "w")}
    got = {k: (vkgrad.from_bf16(t[k]) if dtype == "bf16" else t[k]).astype(np.float64)
           for k in ("dw", "db", "dx")}
    err = 0.0
    rows_o, rows_b = rng.integers(0, O, 4), rng.integers(0, B, 4)
    for want, have in ((f64["dy"].sum(axis=0), got["db"]),
                       (f64["dy"][:, rows_o].T @ f64["x"], got["dw"][rows_o]),
                       (f64["dy"][rows_b] @ f64["w"], got["dx"][rows_b])):
        den = float(np.abs(want).max()) or 1.0
        err = max(err, float(np.abs(have - want).max()) / den)
    times.sort()
    med = times[len(times) // 2] if len(times) % 2 else (times[len(times) // 2 - 1] + times[len(times) // 2]) / 2
    res = {"shape": [B, I, O], "dtype": dtype, "reps": reps, "end_to_end_us": med * 1e6,
           "min_us": times[0] * 1e6, "batch_gpu_us": sorted(gpu)[len(gpu) // 2],
           "queued_us": sorted(queued)[len(queued) // 2], "bytes_copied": c.bytes_copied - copied0,
           "max_rel_err": err, "tol": vkgrad.TOLERANCE[dtype], "ok": err <= vkgrad.TOLERANCE[dtype]}
    del t, f64, got
    for r in regions:
        r.close()
    if as_json:
        print(json.dumps(res))
    else:
        print("linear_backward %dx%dx%d %s on region views: median %.1f us (min %.1f; batch GPU "
              "%d us, queued %d us) over %d jobs, %d bytes copied; max_rel_err %.3g (%s)"
              % (B, I, O, dtype, res["end_to_end_us"], res["min_us"], res["batch_gpu_us"],
                 res["queued_us"], reps, res["bytes_copied"], err,
                 "ok" if res["ok"] else "FAILED: over %g" % res["tol"]))
    return 0 if res["ok"] else 1


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
                if _bench(c, shape, a.dtype, a.reps, a.json):
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

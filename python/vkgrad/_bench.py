"""python -m vkgrad bench: Client.linear_backward on region views, timed as
`vkgrad bench --kernels` times a job end to end (one in flight, after a
0.3 s warm-up), its last job checked against float64."""

import math
import statistics
import time

import numpy as np

from .dtypes import TOLERANCE, from_bf16, numpy_dtype, to_bf16


def linear_backward_on_views(c, shape, dtype, reps):
    """The medians of reps jobs (dw, db, dx) of shape (B, I, O) on region
    views: inputs random in [-1, 1), outputs written in place. Returns a
    dict (end_to_end_us, min_us, batch_gpu_us, queued_us, bytes_copied,
    max_rel_err against float64, tol, ok)."""
    B, I, O = shape
    npdt = numpy_dtype(dtype)
    rng = np.random.default_rng(0)
    dims = {"x": (B, I), "dy": (B, O), "w": (O, I), "dw": (O, I), "db": (O,), "dx": (B, I)}
    t, regions = {}, []
    for k, d in dims.items():
        r = c.region(math.prod(d) * npdt.itemsize)
        regions.append(r)
        t[k] = r.ndarray(d, dtype)
        if k in ("x", "dy", "w"):
            v = rng.uniform(-1, 1, d).astype(np.float32)
            t[k][...] = to_bf16(v) if dtype == "bf16" else v.astype(npdt)
    outs = {k: t[k] for k in ("dw", "db", "dx")}
    copied0 = c.bytes_copied
    # unmeasured warm-up: at least 2 jobs and 0.3 s (the GPU raises its
    # clocks only under sustained load)
    warm, start = 0, time.perf_counter()
    while warm < 2 or time.perf_counter() - start < 0.3:
        c.linear_backward(t["x"], t["dy"], t["w"], out=outs, dtype=dtype)
        warm += 1
    times, gpu, queued = [], [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        f = c.submit(t["x"], t["dy"], t["w"], out=outs, dtype=dtype)
        f.result()
        times.append(time.perf_counter() - t0)
        gpu.append(f.timing["gpu_us"])
        queued.append(f.timing["queued_us"])
    # the last job's outputs against float64, sampled as bench --kernels
    # checks: db whole, 4 rows of dW and of dX (relative to max|want|)
    f64 = {k: (from_bf16(v) if dtype == "bf16" else v).astype(np.float64) for k, v in t.items()}
    err = 0.0
    rows_o, rows_b = rng.integers(0, O, 4), rng.integers(0, B, 4)
    for want, have in ((f64["dy"].sum(axis=0), f64["db"]),
                       (f64["dy"][:, rows_o].T @ f64["x"], f64["dw"][rows_o]),
                       (f64["dy"][rows_b] @ f64["w"], f64["dx"][rows_b])):
        den = float(np.abs(want).max()) or 1.0
        err = max(err, float(np.abs(have - want).max()) / den)
    del t, outs, f64
    for r in regions:
        r.close()
    return {"shape": [B, I, O], "dtype": dtype, "reps": reps,
            "end_to_end_us": statistics.median(times) * 1e6, "min_us": min(times) * 1e6,
            "batch_gpu_us": statistics.median_high(gpu), "queued_us": statistics.median_high(queued),
            "bytes_copied": c.bytes_copied - copied0,
            "max_rel_err": err, "tol": TOLERANCE[dtype], "ok": err <= TOLERANCE[dtype]}


def describe(res):
    """One line for a person."""
    return ("linear_backward %s %s on region views: median %.1f us (min %.1f; batch GPU %d us, "
            "queued %d us) over %d jobs, %d bytes copied; max_rel_err %.3g (%s)"
            % ("x".join(map(str, res["shape"])), res["dtype"], res["end_to_end_us"], res["min_us"],
               res["batch_gpu_us"], res["queued_us"], res["reps"], res["bytes_copied"],
               res["max_rel_err"], "ok" if res["ok"] else "FAILED: over %g" % res["tol"]))

#!/usr/bin/env python3
"""Summaries of scripts/device-run.sh's raw files, printed for summary.txt.

    device_report.py kernels BENCH.jsonl TORCH.jsonl  the kernels table: `vkgrad bench
                     --kernels --json` beside torch_linear_backward.py (GPU time and
                     end to end, with ratios), as docs/performance.md prints it
    device_report.py lines FILE       one line per `bench --kernels` line of FILE (its
                     "run" tag, dtype, shape, e2e, gpu, ok; STAGES=1: the stages too)
    device_report.py tiny FILE        one line per `bench --compare --json` line
    device_report.py sync16 FILE TORCH  16 synchronous clients against the anchors'
                     16 processes under MPS
    device_report.py torch FILE       the PyTorch anchors' JSON lines
    device_report.py peak FILE        `bench --peak --json` lines
    device_report.py pybench FILE     `python -m vkgrad bench --json` lines beside
                     `bench --kernels --json` lines of the same dtypes: the ratio
                     of their end-to-end medians
    device_report.py narrow BENCH.jsonl TORCH.jsonl  issue 37's table: `bench --kernels
                     --json` lines of the narrow set (dW+db and the full backward,
                     auto and narrow) beside torch_narrow.py's cuBLAS times, with
                     each line's GB/s and its fraction of copy_gbps
    device_report.py auto FILE        `bench --kernels --json`'s kernels_auto lines:
                     auto over the fastest other variant, per shape and dtype
    device_report.py clocks TRAIN.jsonl CLOCKS.csv  the GPU's SM clock (nvidia-smi
                     samples: timestamp, clocks.sm, ...) while each way and dtype of
                     torch_train.py --json ran its timed steps (its t0, t1)
    device_report.py clockhist CLOCKS.csv  nvidia-smi's SM clock samples
                     (timestamp, clocks.sm) counted by MHz
A file that is missing or holds no such lines prints a line saying so."""
import json
import os
import sys


def lines(path):
    out = []
    if not path or not os.path.exists(path):
        return out
    for l in open(path):
        try:
            j = json.loads(l)
        except ValueError:
            continue
        if isinstance(j, dict):
            out.append(j)
    return out


def fmt(v):
    return format(v, ",.0f") if v else "—"


def kernels(bench_path, torch_path):
    bench = [j for j in lines(bench_path) if "gpu_us" in j and j.get("outputs") == "dw,db,dx"]
    torch = {(j["dtype"], j["B"], j["I"], j["O"]): j for j in lines(torch_path) if "full_us" in j}
    if not bench:
        print("kernels: no bench lines in %s" % bench_path)
        return
    print("| B×I×O | dtype | variant | vkgrad GPU µs | TFLOP/s | max_rel_err (ok) | PyTorch GPU µs "
          "| GPU ratio | vkgrad e2e µs | PyTorch e2e µs | e2e ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for j in bench:
        B, I, O = j["shape"]
        t = torch.get((j["dtype"], B, I, O)) or {}
        tus, te = t.get("full_us"), t.get("e2e_host_us")
        ve = j.get("end_to_end_us")
        print("| %d×%d×%d | %s | %s | %s | %.1f | %.2g (%s) | %s | %s | %s | %s | %s |" % (
            B, I, O, j["dtype"], j.get("variant", "?"), fmt(j["gpu_us"]), j.get("tflops", 0),
            j.get("max_rel_err", 0), "ok" if j.get("ok") else "FAIL", fmt(tus),
            "%.2f×" % (j["gpu_us"] / tus) if tus else "—", fmt(ve), fmt(te),
            "%.2f×" % (ve / te) if ve and te else "—"))


def narrow(bench_path, torch_path):
    bench = [j for j in lines(bench_path) if "gpu_us" in j]
    trows = lines(torch_path)
    torch = {(j["dtype"], j["B"], j["I"], j["O"]): j for j in trows if "full_us" in j}
    hbm = [j["hbm_copy_GBps"] for j in trows if "hbm_copy_GBps" in j]
    if not bench:
        print("narrow: no bench lines in %s" % bench_path)
        return
    copy = next((j.get("copy_gbps") for j in bench if j.get("copy_gbps")), None)
    print("copy bandwidth: vkgrad bench --peak copy_gbps %s, torch_narrow.py hbm_copy_GBps %s" % (
        copy if copy else "?", hbm[0] if hbm else "?"))
    print("| B×I×O | dtype | outputs | variant | vkgrad µs | GB/s | of copy_gbps | cuBLAS µs "
          "| vkgrad ÷ cuBLAS | max_rel_err (ok) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for j in bench:
        B, I, O = j["shape"]
        t = torch.get((j["dtype"], B, I, O)) or {}
        tus = t.get("full_us") if j.get("outputs") == "dw,db,dx" else t.get("param_us")
        frac = j.get("copy_fraction")
        print("| %d×%d×%d | %s | %s | %s | %s | %s | %s | %s | %s | %.2g (%s) |" % (
            B, I, O, j["dtype"], j.get("outputs", "?"), j.get("variant", "?"), fmt(j["gpu_us"]),
            fmt(j.get("gbps")), "%.2f" % frac if frac is not None else "—", fmt(tus),
            "%.2f×" % (j["gpu_us"] / tus) if tus else "—", j.get("max_rel_err") or 0,
            "ok" if j.get("ok") else "FAIL"))


def auto(path):
    rows = [j for j in lines(path) if j.get("bench") == "kernels_auto"]
    if not rows:
        print("auto: no kernels_auto lines in %s" % path)
        return
    for j in rows:
        print("auto %-5s %-18s auto %10.1f  best %-12s %10.1f  auto/best %.2f" % (
            j["dtype"], "x".join(str(x) for x in j["shape"]), j["auto_us"], j["best"], j["best_us"],
            j["auto_over_best"]))
    print("worst auto/best: %.2f over %d shape-dtype pairs" % (max(j["auto_over_best"] for j in rows), len(rows)))


def kernel_lines(path):
    got = False
    for j in lines(path):
        if "end_to_end_us" not in j:
            continue
        got = True
        sh = ",".join(str(x) for x in j.get("shape", []))
        t = " ".join("%s=%s" % (k.replace("_us", ""), v) for k, v in j.get("stream_us", {}).items())
        print("%-13s %-5s %-15s %-10s %-8s e2e %9.1f gpu %9.1f ok %-5s %s" % (
            j.get("run", ""), j.get("dtype", ""), sh, j.get("variant", ""), j.get("outputs", ""),
            j["end_to_end_us"], j.get("gpu_us", 0), str(j.get("ok")).lower(), t))
        if os.environ.get("STAGES") == "1" and j.get("stages_us"):
            print("%-16s stages_us %s" % ("", " ".join("%s=%s" % kv for kv in j["stages_us"].items())))
    if not got:
        print("no bench --kernels lines in %s" % path)


def tiny(path):
    got = False
    for j in lines(path):
        if "scenario" not in j:
            continue
        got = True
        head = "%-10s %-15s c=%-2d x%-2d %-6s" % (j.get("run", ""), j["scenario"], j.get("clients", 0),
                                               j.get("inflight", 0), j.get("mode", ""))
        if j.get("mode") == "ratio":
            print(head, {k: v for k, v in j.items() if k.endswith("ratio")})
        else:
            print("%s %9.0f jobs/s p50 %8.1f p99 %8.1f %s" % (
                head, j.get("jobs_per_s", 0), j.get("p50_us", 0), j.get("p99_us", 0),
                " ".join("%s=%s" % kv for kv in j.get("stages_us", {}).items())))
    if not got:
        print("no bench lines in %s" % path)


def torch_lines(path):
    got = False
    for t in lines(path):
        got = True
        print("torch " + " ".join("%s=%s" % kv for kv in t.items()))
    if not got:
        print("no PyTorch lines in %s (no CUDA here?)" % path)


def sync16(path, torch_path):
    mps = [t["jobs_per_s"] for t in lines(torch_path) if t.get("processes") == 16 and t.get("mps")]
    got = False
    for j in lines(path):
        if j.get("mode") != "daemon":
            continue
        got = True
        ratio = " = %.2fx MPS" % (j["jobs_per_s"] / mps[0]) if mps else ""
        print("16 sync %-9s %9.0f jobs/s%s, p50 %.1f us, p99 %.1f us" % (
            j.get("run", ""), j["jobs_per_s"], ratio, j.get("p50_us", 0), j.get("p99_us", 0)))
    if not got:
        print("no 16-client lines in %s" % path)


def peak(path):
    got = False
    for j in lines(path):
        got = True
        print("peak " + " ".join("%s=%s" % (k, v) for k, v in j.items() if not isinstance(v, (list, dict))))
    if not got:
        print("no bench --peak lines in %s" % path)


def pybench(path):
    py, ck = {}, {}
    for j in lines(path):
        if "end_to_end_us" in j:
            (py if "min_us" in j else ck)[j["dtype"]] = j["end_to_end_us"]
    if not py:
        print("pybench: no python -m vkgrad bench lines in %s" % path)
    for dt, us in py.items():
        c = ck.get(dt)
        print("%s: Client.linear_backward on region views %.0f us, bench --kernels end to end %s us%s"
              % (dt, us, "%.0f" % c if c else "?", ", ratio %.3f" % (us / c) if c else ""))


def clock_samples(csv_path):
    """nvidia-smi's csv (timestamp, clocks.sm): [(unix time, MHz)]."""
    import datetime
    samples = []
    if os.path.exists(csv_path):
        for l in open(csv_path):
            f = [x.strip() for x in l.split(",")]
            try:
                t = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").replace(
                    tzinfo=datetime.timezone.utc).timestamp()
                samples.append((t, int(f[1].split()[0])))
            except (ValueError, IndexError):
                continue
    return samples


def clocks(train_path, csv_path):
    samples = clock_samples(csv_path)
    rows = [j for j in lines(train_path) if "t0" in j]
    if not samples or not rows:
        print("clocks: no samples in %s or no timed ways in %s" % (csv_path, train_path))
        return
    for j in rows:
        v = sorted(c for t, c in samples if j["t0"] <= t <= j["t1"])
        if v:
            print("clocks %-5s %-7s SM MHz min %d median %d max %d (%d samples)" % (
                j["dtype"], j["way"], v[0], v[len(v) // 2], v[-1], len(v)))


def clockhist(csv_path):
    """The SM clock samples of nvidia-smi's csv (timestamp, clocks.sm), by MHz."""
    counts = {}
    for _, mhz in clock_samples(csv_path):
        counts[mhz] = counts.get(mhz, 0) + 1
    if not counts:
        print("SM clock: no samples in %s" % csv_path)
        return
    top = sorted(counts.items(), key=lambda kv: -kv[1])
    print("SM clock samples (MHz: count), %d in all: %s" % (
        sum(counts.values()), ", ".join("%d: %d" % kv for kv in top[:6]) +
        (", others: %d" % sum(c for _, c in top[6:]) if len(top) > 6 else "")))


def main(a):
    cmds = {"clocks": (clocks, 2), "clockhist": (clockhist, 1), "pybench": (pybench, 1), "kernels": (kernels, 2), "lines": (kernel_lines, 1), "tiny": (tiny, 1),
            "sync16": (sync16, 2), "torch": (torch_lines, 1), "peak": (peak, 1), "narrow": (narrow, 2),
            "auto": (auto, 1)}
    if len(a) < 1 or a[0] not in cmds or len(a) - 1 != cmds[a[0]][1]:
        sys.stderr.write(__doc__)
        return 2
    cmds[a[0]][0](*a[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

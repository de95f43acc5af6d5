#!/usr/bin/python3
"""Training benchmark (issue 36 item 5): N processes each train an MLP on
one GPU for S seconds, three ways in one run: resident vkgrad
(vkgrad.torch.convert(model, resident=True), vkgrad.torch.optim), CUDA
torch, and CUDA torch under NVIDIA MPS (where nvidia-cuda-mps-control is
found; this runner starts and stops a private MPS daemon).

    scripts/train_bench.py --socket PATH [--procs 1,4,16] [--seconds 6]
        [--dtype f32,bf16] [--ways vkgrad,cuda,mps] [--dims 512,2048,2048,512]
        [--batch 1024] [--optim sgd|adam] [--json]
    scripts/train_bench.py --smoke --socket PATH   # lavapipe: tiny, vkgrad only

The model: Linear/ReLU layers of --dims (default 512-2048-2048-512), MSE
against a fixed target, batch --batch (1024), SGD or Adam (--lr 1e-3). Each
process builds it from its own seed, warms up (--warmup steps), waits at a
barrier, then steps for --seconds. A step is what a training loop does:
zero_grad, forward, loss, backward, optimizer step, and the loss read on
the host (loss.item()). The vkgrad way keeps its data in host memory (the
input goes up, the output comes down, the loss and its gradient are
torch's on the CPU); the CUDA ways copy the batch (input and target) from
pinned host memory to the GPU each step and read the loss back.

Per way, dtype and N it prints: total steps/s over all processes; p50 step
time (over every step of every process); GPU memory in use at the end of
the timed phase (nvidia-smi's memory.used, the whole GPU: every process's
context and the daemon's) and, in brackets, its growth over the value
before the row's processes started (the daemon's idle memory left out);
the daemon's device_bytes (its tensors); for vkgrad, the daemon's jobs and
batches per step and the median stages of its recent jobs at the row's
end (queue, record, launch, gpu, complete: where a step waits); PCIe
bytes per step: for vkgrad the daemon's stats host_read_bytes +
host_write_bytes over the timed phase divided by the steps (all clients),
and the ratio to the bytes the model's input, output and output gradient
take (the issue's target is <= 1.2); for CUDA the bytes of the copies
each step issues (input, target, the loss). With --json one JSON line per
row too.

--smoke: dims 16-32-32-8, batch 8, lr 0.05, 1 and 2 processes, 1.5 s, vkgrad only,
f32 and bf16 (lavapipe: these timings are not GPU timings). It checks that
every process trained (the loss fell) and that the PCIe bytes per step are
within 1.2x of input + output + output gradient; exit status 1 otherwise
(tests/python/test_train_bench runs it). Exit status 1 also when a process
failed."""

import argparse
import json
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.join(HERE, os.pardir, "python")
ES = {"f32": 4, "bf16": 2}


def mlp(torch, dims):
    layers = []
    for i in range(len(dims) - 1):
        layers.append(torch.nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def worker(k, cfg, barrier, q):
    """One process: build, warm up, barrier, train for cfg seconds; puts
    (k, result dict) on q (result has "error" on failure)."""
    try:
        q.put((k, _train(k, cfg, barrier)))
    except BaseException as e:  # noqa: BLE001 — reported by the parent
        try:
            barrier.abort()
        except Exception:  # noqa: BLE001
            pass
        q.put((k, {"error": "%s: %s" % (type(e).__name__, e)}))


def _train(k, cfg, barrier):
    sys.path.insert(0, PYDIR)
    import torch
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // cfg["procs"]))
    dt = {"f32": torch.float32, "bf16": torch.bfloat16}[cfg["dtype"]]
    dims, batch = cfg["dims"], cfg["batch"]
    torch.manual_seed(1000 + k)
    model = mlp(torch, dims).to(dt)
    x = torch.randn(batch, dims[0]).to(dt)
    target = (torch.randn(batch, dims[-1]) * 0.5).to(dt)
    way = cfg["way"]
    if way == "vkgrad":
        import vkgrad
        import vkgrad.torch as vt
        client = vkgrad.connect(cfg["socket"], name="train_bench")
        vt.set_default_client(client)
        model = vt.convert(model, resident=True)
        optim = vt.optim
        x = vt.to_region(x)
        sync = lambda: None  # noqa: E731 — loss.item() is the step's wait
        finish = vt.synchronize
        copies = 0
    else:
        dev = torch.device("cuda")
        model = model.to(dev)
        optim = torch.optim
        xh, th = x.pin_memory(), target.pin_memory()
        sync = finish = torch.cuda.synchronize
        copies = xh.numel() * xh.element_size() + th.numel() * th.element_size() + \
            torch.tensor(0, dtype=dt).element_size()
    if cfg["optim"] == "adam":
        opt = optim.Adam(model.parameters(), lr=cfg["lr"])
    else:
        opt = optim.SGD(model.parameters(), lr=cfg["lr"])

    def step():
        if way == "vkgrad":
            xs, ts = x, target
        else:
            xs, ts = xh.to(dev, non_blocking=True), th.to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        loss = (model(xs) - ts).pow(2).mean()  # MSE (torch 1.13 has no CPU bf16 mse_loss)
        loss.backward()
        opt.step()
        return loss.item()

    first = None
    for _ in range(cfg["warmup"]):
        v = step()
        first = v if first is None else first
    finish()
    barrier.wait()  # warmed up: the parent reads the counters
    barrier.wait()  # ... and starts the clock
    times, n, last = [], 0, None
    t_end = time.perf_counter() + cfg["seconds"]
    t_start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        last = step()
        sync()
        t1 = time.perf_counter()
        times.append(t1 - t0)
        n += 1
        if t1 >= t_end:
            break
    finish()
    elapsed = time.perf_counter() - t_start
    res = {"steps": n, "elapsed": elapsed, "times": times, "first_loss": first,
           "last_loss": last, "copy_bytes_per_step": copies}
    barrier.wait()  # the parent samples memory and stats here
    barrier.wait()
    return res


def gpu_mem_mib():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        out = subprocess.run([smi, "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout
        return int(out.split()[0])
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


def daemon_stats(sock):
    sys.path.insert(0, PYDIR)
    import vkgrad
    with vkgrad.connect(sock, name="train_bench-stats") as c:
        return c.stats()


def run(cfg, procs):
    """One row: cfg's way and dtype with procs processes."""
    cfg = dict(cfg, procs=procs)
    idle = gpu_mem_mib()  # before the row's processes: the daemon's idle memory included
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(procs + 1)
    q = ctx.Queue()
    ps = [ctx.Process(target=worker, args=(k, cfg, barrier, q)) for k in range(procs)]
    for p in ps:
        p.start()
    row = {"way": cfg["way"], "dtype": cfg["dtype"], "procs": procs}
    results, s0, s1, mem = {}, None, None, None
    try:
        barrier.wait(timeout=cfg["start_timeout"])   # every process warmed up
        if cfg["way"] == "vkgrad":
            s0 = daemon_stats(cfg["socket"])
        barrier.wait(timeout=60)                     # go
        barrier.wait(timeout=cfg["seconds"] * 4 + 120)  # every process done
        mem = gpu_mem_mib()
        if cfg["way"] == "vkgrad":
            s1 = daemon_stats(cfg["socket"])
        barrier.wait(timeout=60)
    except Exception as e:  # noqa: BLE001 — a broken barrier: a worker failed
        row["error"] = "barrier: %s" % type(e).__name__
    deadline = time.monotonic() + 120
    while len(results) < procs and time.monotonic() < deadline:
        try:
            k, r = q.get(timeout=max(0.1, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001 — queue.Empty
            break
        results[k] = r
    for p in ps:
        p.join(timeout=30)
        if p.is_alive():
            p.kill()
    errs = [r["error"] for r in results.values() if "error" in r]
    if errs or len(results) < procs:
        row["error"] = "; ".join(errs) or row.get("error") or "a process gave no result"
        return row
    steps = sum(r["steps"] for r in results.values())
    times = [t for r in results.values() for t in r["times"]]
    row["steps_per_s"] = sum(r["steps"] / r["elapsed"] for r in results.values())
    row["p50_step_ms"] = statistics.median(times) * 1e3
    row["gpu_mem_MiB"] = mem
    row["gpu_mem_row_MiB"] = mem - idle if mem is not None and idle is not None else None
    row["trained"] = all(r["last_loss"] < r["first_loss"] for r in results.values())
    dims, es = cfg["dims"], ES[cfg["dtype"]]
    row["io_bytes_per_step"] = cfg["batch"] * (dims[0] + 2 * dims[-1]) * es
    if cfg["way"] == "vkgrad":
        keys = ("host_read_bytes", "host_write_bytes")
        if any(k not in s0 or k not in s1 for k in keys):
            row["error"] = "the daemon's stats have no %s" % " / ".join(keys)
            return row
        # (the counters count every client's: only this row's run)
        moved = sum(s1[k] - s0[k] for k in keys)
        row["pcie_bytes_per_step"] = moved / steps
        row["pcie_vs_io"] = row["pcie_bytes_per_step"] / row["io_bytes_per_step"]
        row["daemon_device_bytes"] = s1.get("device_bytes")
        # where a step's time goes in the daemon: its jobs and batches per
        # step (this row's), and the median stages of the daemon's recent
        # jobs at the row's end (its window: the last jobs, this row's)
        for k, name in (("jobs_done", "jobs_per_step"), ("batches", "batches_per_step")):
            if k in s0 and k in s1:
                row[name] = (s1[k] - s0[k]) / steps
        stages = s1.get("stages") or {}
        row["stages_p50_us"] = {k: round(v["p50_us"], 1) for k, v in stages.items()
                                if isinstance(v, dict) and "p50_us" in v}
    else:
        row["pcie_bytes_per_step"] = results[0]["copy_bytes_per_step"]
    return row


class MPS:
    """A private NVIDIA MPS control daemon (../shared/anchors/README.md):
    its pipe and log folders in the environment the workers inherit."""

    def __init__(self):
        self.ctl = shutil.which("nvidia-cuda-mps-control") or (
            "/usr/local/nvidia/bin/nvidia-cuda-mps-control"
            if os.access("/usr/local/nvidia/bin/nvidia-cuda-mps-control", os.X_OK) else None)
        self.dir = None

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="vkgrad-mps.")
        self.saved = {k: os.environ.get(k) for k in ("CUDA_MPS_PIPE_DIRECTORY",
                                                     "CUDA_MPS_LOG_DIRECTORY")}
        os.environ["CUDA_MPS_PIPE_DIRECTORY"] = os.path.join(self.dir, "p")
        os.environ["CUDA_MPS_LOG_DIRECTORY"] = os.path.join(self.dir, "l")
        os.makedirs(os.environ["CUDA_MPS_PIPE_DIRECTORY"])
        os.makedirs(os.environ["CUDA_MPS_LOG_DIRECTORY"])
        subprocess.run([self.ctl, "-d"], check=True, timeout=30)
        time.sleep(1)
        return self

    def __exit__(self, *exc):
        subprocess.run([self.ctl], input="quit\n", text=True, timeout=30)
        time.sleep(1)
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(self.dir, ignore_errors=True)


def cuda_available():
    """Asked of a child: the parent never touches CUDA (MPS starts later)."""
    code = "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    try:
        return subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def fmt(row, base):
    if "error" in row:
        return "%-7s %-5s %5d  FAILED: %s" % (row["way"], row["dtype"], row["procs"], row["error"])
    ratio = ""
    if base and base.get("steps_per_s"):
        ratio = "%.2fx" % (row["steps_per_s"] / base["steps_per_s"])
    mem = "-" if row["gpu_mem_MiB"] is None else "%d (+%d)" % (row["gpu_mem_MiB"],
                                                              row["gpu_mem_row_MiB"])
    pcie = "%d" % row["pcie_bytes_per_step"]
    if "pcie_vs_io" in row:
        pcie += " (%.2fx io)" % row["pcie_vs_io"]
    line = "%-7s %-5s %5d %10.1f %8s %10.2f %15s %26s" % (
        row["way"], row["dtype"], row["procs"], row["steps_per_s"], ratio, row["p50_step_ms"],
        mem, pcie)
    if "batches_per_step" in row:
        st = row.get("stages_p50_us") or {}
        line += "\n        daemon: %.1f jobs in %.1f batches a step; median stages µs: %s" % (
            row.get("jobs_per_step", 0), row["batches_per_step"],
            " ".join("%s %.0f" % (k, st[k]) for k in ("queue", "record", "launch", "gpu", "complete")
                     if k in st))
    return line


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", default=None, help="vkgradd's socket (the vkgrad way)")
    ap.add_argument("--procs", default="1,4,16")
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--dtype", default="f32,bf16")
    ap.add_argument("--ways", default="vkgrad,cuda,mps")
    ap.add_argument("--dims", default="512,2048,2048,512")
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--optim", default="sgd", choices=["sgd", "adam"])
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--smoke", action="store_true",
                    help="lavapipe: tiny model, vkgrad only, checks training and PCIe bytes")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.smoke:
        a.dims, a.batch, a.procs, a.seconds, a.warmup, a.ways, a.lr = "16,32,32,8", 8, "1,2", \
            1.5, 3, "vkgrad", 0.05
    ways = [w for w in a.ways.split(",") if w]
    bad = [w for w in ways if w not in ("vkgrad", "cuda", "mps")]
    if bad:
        ap.error("--ways: unknown %s (vkgrad, cuda, mps)" % ",".join(bad))
    dtypes = [d for d in a.dtype.split(",") if d]
    if any(d not in ES for d in dtypes):
        ap.error("--dtype: f32 and/or bf16")
    procs = [int(n) for n in a.procs.split(",")]
    dims = [int(d) for d in a.dims.split(",")]
    cfg = dict(dims=dims, batch=a.batch, seconds=a.seconds, warmup=a.warmup, optim=a.optim, lr=a.lr,
               socket=a.socket, start_timeout=300)
    notes = []
    if ("cuda" in ways or "mps" in ways) and not cuda_available():
        notes.append("no CUDA: the cuda and mps ways are left out")
        ways = [w for w in ways if w == "vkgrad"]
    mps = MPS()
    if "mps" in ways and not mps.ctl:
        notes.append("nvidia-cuda-mps-control not found: the mps way is left out")
        ways.remove("mps")
    print("MLP %s ReLU, MSE, %s lr %g, batch %d, %g s per row after %d warm-up steps; processes %s"
          % ("-".join(map(str, dims)), a.optim.upper(), a.lr, a.batch, a.seconds, a.warmup, a.procs))
    for n in notes:
        print(n)
    print("%-7s %-5s %5s %10s %8s %10s %15s %26s" % ("way", "dtype", "procs", "steps/s", "vs cuda",
                                                    "p50 ms", "GPU MiB (+row)", "PCIe B/step"))
    rows, failed = [], False
    for dt in dtypes:
        for n in procs:
            base = None
            for way in ways:
                c = dict(cfg, way="cuda" if way == "mps" else way, dtype=dt)
                if way == "mps":
                    with mps:
                        row = run(c, n)
                    row["way"] = "mps"
                else:
                    row = run(c, n)
                if way == "cuda":
                    base = row
                rows.append(row)
                print(fmt(row, base if way != "cuda" else None), flush=True)
                if a.json:
                    print(json.dumps(row), flush=True)
                if "error" in row:
                    failed = True
            # (vkgrad runs before cuda: its ratio is printed below)
            vk = [r for r in rows[-len(ways):] if r["way"] == "vkgrad" and "error" not in r]
            if vk and base and "error" not in base:
                print("        vkgrad/cuda steps/s: %.2fx" % (vk[0]["steps_per_s"] /
                                                            base["steps_per_s"]))
    if a.smoke:
        for r in rows:
            if "error" in r:
                continue
            if not r["trained"]:
                print("smoke: %s %s x%d did not train (the loss did not fall)"
                      % (r["way"], r["dtype"], r["procs"]))
                failed = True
            if not r["pcie_vs_io"] <= 1.2:
                print("smoke: %s %s x%d moved %.2fx the input+output+gradient bytes per step"
                      % (r["way"], r["dtype"], r["procs"], r["pcie_vs_io"]))
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

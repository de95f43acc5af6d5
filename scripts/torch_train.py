#!/usr/bin/python3
"""Training steps of an MLP three ways: CPU torch, vkgrad.torch (both passes
on vkgradd, tensors in its regions), and CUDA torch where there is a GPU.

    scripts/torch_train.py --socket PATH [--dtype f32|bf16|f16|all] [--steps N]
    scripts/torch_train.py --smoke --socket PATH   # tiny sizes, for lavapipe

The model: Linear(d0, d1) ReLU Linear(d1, d2) ReLU Linear(d2, d3) (default
1024-4096-4096-1024) at batch 2048, SGD (lr 1e-3), MSE against a fixed
target. Every way starts from the same parameters and data. Per way and
dtype it prints the median step time (after --warmup steps and at least
--warmup-s seconds: the GPU raises its clocks only under sustained load;
CPU and vkgrad ways first, CUDA torch's last, as it leaves the clocks up
for seconds), the bytes the
vkgrad client copied per step (vkgrad way only: Client.bytes_copied, the
pool copies of tensors outside regions), the time its layers spent in
daemon jobs per step (vt.daemon_seconds(): forward, backward; the rest of
the step is torch on the CPU), and after the first step the max
|gradient difference| against CPU torch's, over all parameters, relative
to max |CPU gradient| (normwise, as client/ref.h). f16 on a CPU torch
without half matmul (Debian's 1.13) runs its CPU reference in float32 on
the same f16 values; f16 is skipped, saying so, where torch has no CPU half
ReLU (the activations run in torch). One JSON line per way and dtype with --json.

Exit status 1 when vkgrad's gradient difference passes --max-grad-err
times the larger of the dtype's tolerance (vkgrad.TOLERANCE) and CUDA
torch's difference (where CUDA ran: through three layers f32 roundings flip
ReLUs, and CUDA torch differs from CPU torch by 1.3e-3 in f32), else 0 —
so the smoke mode is a test (tests/python/test_train_smoke).
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, "python"))

import torch  # noqa: E402

import vkgrad  # noqa: E402
import vkgrad.torch as vt  # noqa: E402

PROFILE = False
WARMUP_S = 0.0
DT = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def mlp(dims):
    layers = []
    for i in range(len(dims) - 1):
        layers.append(torch.nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            layers.append(torch.nn.ReLU(inplace=True))
    return torch.nn.Sequential(*layers)


def has_cpu_matmul(dt):
    try:
        torch.ones(2, 2, dtype=dt) @ torch.ones(2, 2, dtype=dt)
        return True
    except RuntimeError:
        return False


def run_way(way, model, x, target, steps, warmup, sync, client=None):
    """(median step s, first step's grads, bytes copied per step, median
    daemon seconds per step (forward, backward): vkgrad way only). Warm-up
    steps: at least warmup, and until WARMUP_S seconds have passed."""
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    times, grads, copied, fwd, bwd = [], None, [], [], []
    span = [None, None]  # wall clock of the timed steps (t0, t1)
    start = time.perf_counter()
    s = 0
    while len(times) < steps:
        warm = s < warmup or time.perf_counter() - start < WARMUP_S
        if not warm and span[0] is None:
            span[0] = time.time()
        last = not warm and len(times) == steps - 1
        c0 = client.bytes_copied if client else 0
        w0 = vt.daemon_seconds()
        if client and last and PROFILE:
            vt.profile(True)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)  # (torch 2.x's default: the next backward's dW becomes .grad)
        loss = (model(x) - target).pow(2).mean()  # MSE (mse_loss has no CPU bf16 in torch 1.13)
        loss.backward()
        if s == 0:
            grads = [p.grad.detach().float().cpu().clone() for p in model.parameters()]
        if client and last and PROFILE:
            for j in vt.profile(False):
                print("  %-8s %-5s %-16s wall %9.1f us  queued %7s  batch gpu %7s  kernels %7s" % (
                    j["op"], j["dtype"], "x".join(map(str, j["shape"])), j["wall_us"],
                    j.get("queued_us"), j.get("gpu_us"), j.get("kernel_us")))
        opt.step()
        sync()
        t1 = time.perf_counter()
        if not warm:
            times.append(t1 - t0)
            copied.append((client.bytes_copied - c0) if client else 0)
            w1 = vt.daemon_seconds()
            fwd.append(w1["forward"] - w0["forward"])
            bwd.append(w1["backward"] - w0["backward"])
        s += 1
    span[1] = time.time()
    return (statistics.median(times), grads, statistics.median(copied) if copied else 0,
            (statistics.median(fwd), statistics.median(bwd)) if client else (0.0, 0.0), span)


def grad_err(got, want):
    num = max(float((g - w).abs().max()) for g, w in zip(got, want))
    den = max(float(w.abs().max()) for w in want)
    return num / den if den > 0 else num


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", default=None, help="vkgradd's socket (default: vkgrad's default)")
    ap.add_argument("--dtype", default="all", choices=["all"] + list(DT))
    ap.add_argument("--dims", default="1024,4096,4096,1024")
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--warmup-s", type=float, default=0.0,
                    help="warm up for at least this many seconds too (the GPU's clocks rise "
                         "only under sustained load)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: 64-96-80-32 at batch 48, 3 steps")
    ap.add_argument("--no-cuda", action="store_true")
    ap.add_argument("--max-grad-err", type=float, default=2.0,
                    help="fail past this many times the dtype's tolerance")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--profile", action="store_true",
                    help="print each daemon job of the vkgrad way's last step (vt.profile)")
    a = ap.parse_args()
    global PROFILE, WARMUP_S
    PROFILE, WARMUP_S = a.profile, a.warmup_s
    if a.smoke:
        a.dims, a.batch, a.steps, a.warmup = "64,96,80,32", 48, 3, 1
    dims = [int(d) for d in a.dims.split(",")]
    dtypes = list(DT) if a.dtype == "all" else [a.dtype]
    client = vkgrad.connect(a.socket, name="torch_train")
    vt.set_default_client(client)
    cuda = torch.cuda.is_available() and not a.no_cuda
    print("MLP %s, batch %d, SGD, MSE; %d steps after %d warm-up (and %g s); torch %s, %d CPU "
          "threads%s" % (
        "-".join(map(str, dims)), a.batch, a.steps, a.warmup, a.warmup_s, torch.__version__,
        torch.get_num_threads(), ", CUDA " + torch.cuda.get_device_name() if cuda else ", no CUDA"))
    print("%-5s %-7s %12s %9s %16s %12s" % ("dtype", "way", "step ms", "vs CPU", "copied B/step",
                                             "grad err"))
    bad = False
    results = []  # per dtype: (name, rows, cuda inputs)
    for name in dtypes:
        dt = DT[name]
        try:  # the activations between the layers run in torch, on the CPU
            torch.relu_(torch.ones(2, dtype=dt))
        except RuntimeError:
            print("%-5s skipped: this torch has no CPU ReLU for %s" % (name, dt))
            continue
        torch.manual_seed(0)
        base = mlp(dims)
        x = torch.randn(a.batch, dims[0])
        target = torch.randn(a.batch, dims[-1])
        cpu_dt = dt if has_cpu_matmul(dt) else torch.float32
        rows = []
        ref = mlp(dims)
        ref.load_state_dict(base.state_dict())
        ref = ref.to(dt).to(cpu_dt)  # (f16 values, f32 arithmetic where no half matmul)
        t_cpu, g_cpu, _, _, sp = run_way("cpu", ref, x.to(dt).to(cpu_dt), target.to(dt).to(cpu_dt),
                                         a.steps, a.warmup, lambda: None)
        rows.append(("cpu" + ("(f32)" if cpu_dt != dt else ""), t_cpu, 0, 0.0, None, sp))
        ours = mlp(dims)
        ours.load_state_dict(base.state_dict())
        ours = vt.convert(ours.to(dt))
        xr, tr = vt.to_region(x.to(dt)), target.to(dt)
        t_vk, g_vk, copied, waited, sp = run_way("vkgrad", ours, xr, tr, a.steps, a.warmup,
                                                 lambda: None, client)
        e = grad_err(g_vk, g_cpu)
        rows.append(("vkgrad", t_vk, copied, e, waited, sp))
        del ours, xr
        results.append((name, rows, (base, x, target, g_cpu)))
    # CUDA torch last, for every dtype: it raises the GPU's clocks, which
    # stay up for seconds, and the vkgrad ways should not run on them
    for name, rows, (base, x, target, g_cpu) in results:
        if cuda:
            dt = DT[name]
            cm = mlp(dims)
            cm.load_state_dict(base.state_dict())
            cm = cm.to(dt).cuda()
            t_cu, g_cu, _, _, sp = run_way("cuda", cm, x.to(dt).cuda(), target.to(dt).cuda(),
                                           a.steps, a.warmup, torch.cuda.synchronize)
            rows.append(("cuda", t_cu, 0, grad_err(g_cu, g_cpu), None, sp))
    for name, rows, _ in results:
        # the check: vkgrad's gradients within --max-grad-err times the
        # dtype's tolerance of CPU torch's, or (through three layers, where
        # a ReLU whose input rounds to the other side of 0 flips a whole
        # gradient entry) no farther from them than --max-grad-err times
        # CUDA torch's, where it ran
        tol = vkgrad.TOLERANCE[name]
        e = rows[1][3]
        cu = [r[3] for r in rows if r[0] == "cuda"]
        limit = a.max_grad_err * max([tol] + cu)
        if not e <= limit:
            bad = True
            print("%s: vkgrad's gradients differ from CPU torch's by %.3g > %g x %s" % (
                name, e, a.max_grad_err, "max(%g, CUDA torch's %.3g)" % (tol, cu[0]) if cu else tol))
        t_cpu = rows[0][1]
        for way, t, cp, err, waited, span in rows:
            print("%-5s %-7s %12.2f %8.2fx %16d %12.3g%s" % (
                name, way, t * 1e3, t_cpu / t, cp, err,
                "   (in daemon jobs: forward %.2f ms, backward %.2f ms per step)"
                % (waited[0] * 1e3, waited[1] * 1e3) if waited else ""))
            if a.json:
                j = {"dtype": name, "way": way, "step_ms": t * 1e3,
                     "speedup_vs_cpu": t_cpu / t, "bytes_copied_per_step": cp,
                     "grad_err_vs_cpu": err, "dims": dims, "batch": a.batch,
                     "t0": span[0], "t1": span[1]}
                if waited:
                    j["daemon_forward_ms"], j["daemon_backward_ms"] = waited[0] * 1e3, waited[1] * 1e3
                print(json.dumps(j))
    client.close()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

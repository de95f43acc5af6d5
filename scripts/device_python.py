"""A small MLP trained with vkgrad.torch's backward (on vkgradd) next to
plain torch: losses, gradient differences and time per step, as a table.

Run by `scripts/device-run.sh python` (which starts the daemon); on its own:
    VKGRAD_SOCKET=... PYTHONPATH=python python3 scripts/device_python.py

Every run starts from the same weights and data. Per dtype (f32, bf16):
  torch-cpu    plain torch, CPU tensors (forward and backward on the CPU)
  vkgrad       the same model with vkgrad.torch.Linear: forward on the CPU
               (torch), backward dX, dW, db on the daemon's GPU
  torch-cuda   plain torch on the GPU, where CUDA is there (f32 with TF32
               off, as the README's anchors)
Gradient difference: the largest over the parameters of
max|g - g_ref| / max|g_ref| after the first step's backward, g_ref from
the model in float64 (the tests' tolerances: f32 1e-4, bf16 1e-2), and
from torch-cpu of the same dtype (bf16 weights and activations are rounded
before any GEMM, so against float64 both bf16 runs differ alike).
Times: median over the steps after WARMUP, synchronised per step.
Settings (environment): MLP_SIZES=in,hidden,...,out  MLP_BATCH  MLP_STEPS
MLP_WARMUP  MLP_DTYPES=f32,bf16.
"""

import os
import statistics
import sys
import time

import torch

import vkgrad
import vkgrad.torch as vt

SIZES = [int(s) for s in os.environ.get("MLP_SIZES", "1024,4096,4096,1024").split(",")]
BATCH = int(os.environ.get("MLP_BATCH", "512"))
STEPS = int(os.environ.get("MLP_STEPS", "30"))
WARMUP = int(os.environ.get("MLP_WARMUP", "5"))
DTYPES = os.environ.get("MLP_DTYPES", "f32,bf16").split(",")
TORCH_DT = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
LR = 1e-3


def make_model(seed):
    torch.manual_seed(seed)
    layers = []
    for i in range(len(SIZES) - 1):
        layers.append(torch.nn.Linear(SIZES[i], SIZES[i + 1]))
        if i < len(SIZES) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def data(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(BATCH, SIZES[0], generator=g)
    y = torch.randn(BATCH, SIZES[-1], generator=g)
    return x, y


def sync(dev):
    if dev == "cuda":
        torch.cuda.synchronize()


def first_grads(model, x, y):
    model.zero_grad()
    torch.nn.functional.mse_loss(model(x).float(), y.float()).backward()
    return [p.grad.detach().double().cpu().clone() for p in model.parameters()]


def grad_diff(got, want):
    worst = 0.0
    for g, w in zip(got, want):
        m = w.abs().max().item()
        d = (g - w).abs().max().item()
        worst = max(worst, d / m if m > 0 else d)
    return worst


def train(kind, dt, base_state, x, y, ref_grads):
    dev = "cuda" if kind == "torch-cuda" else "cpu"
    model = make_model(0)
    model.load_state_dict(base_state)
    if kind == "vkgrad":
        model = vt.convert(model)
    model = model.to(device=dev, dtype=TORCH_DT[dt])
    xs, ys = x.to(dev, TORCH_DT[dt]), y.to(dev, TORCH_DT[dt])
    grads = first_grads(model, xs, ys)
    gdiff = grad_diff(grads, ref_grads)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses, t_step, t_fwd, t_bwd = [], [], [], []
    for step in range(STEPS):
        sync(dev)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(xs).float(), ys.float())
        sync(dev)
        t1 = time.perf_counter()
        loss.backward()
        sync(dev)
        t2 = time.perf_counter()
        opt.step()
        sync(dev)
        t3 = time.perf_counter()
        losses.append(loss.item())
        if step >= WARMUP:
            t_step.append(t3 - t0)
            t_fwd.append(t1 - t0)
            t_bwd.append(t2 - t1)
    med = lambda v: statistics.median(v) * 1e3 if v else float("nan")  # noqa: E731
    return {"kind": kind, "dtype": dt, "gdiff": gdiff, "grads": grads,
            "loss0": losses[0], "loss_end": losses[-1],
            "losses": losses, "step_ms": med(t_step), "fwd_ms": med(t_fwd), "bwd_ms": med(t_bwd)}


def main():
    print("vkgrad %s, library %s, socket %s" % (vkgrad.__version__, vkgrad.library_path,
                                                 vkgrad.default_socket()))
    with vkgrad.connect() as c:
        d = c.info["device"]
        print("daemon: %s on %s (%s, %s)" % (c.info["server"], d["name"], d["type"], d["driver"]))
    print("torch %s, CPU threads %d, CUDA %s" % (
        torch.__version__, torch.get_num_threads(),
        torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no"))
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = False
    print("MLP %s, batch %d, %d steps (medians over the last %d), SGD lr %g" % (
        "-".join(map(str, SIZES)), BATCH, STEPS, STEPS - WARMUP, LR))
    base = make_model(0).state_dict()
    x, y = data(1)
    ref = make_model(0)
    ref.load_state_dict(base)
    ref_grads = first_grads(ref.double(), x.double(), y.double())
    kinds = ["torch-cpu", "vkgrad"] + (["torch-cuda"] if torch.cuda.is_available() else [])
    rows = []
    for dt in DTYPES:
        for kind in kinds:
            try:
                rows.append(train(kind, dt, base, x, y, ref_grads))
            except Exception as e:  # noqa: BLE001 — reported in the table
                rows.append({"kind": kind, "dtype": dt, "error": "%s: %s" % (type(e).__name__, e)})
            r = rows[-1]
            print("  done %s %s%s" % (dt, kind, ": " + r["error"] if "error" in r else ""),
                  file=sys.stderr, flush=True)
    print()
    print("| dtype | backward by | step ms | forward ms | backward ms | loss step 0 | loss step %d "
          "| loss diff vs torch-cpu | grad rel diff vs f64 | grad rel diff vs torch-cpu |"
          % (STEPS - 1))
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        if "error" in r:
            print("| %s | %s | %s |" % (r["dtype"], r["kind"], r["error"]))
            continue
        cpu = next((q for q in rows if q["dtype"] == r["dtype"] and q["kind"] == "torch-cpu"
                    and "error" not in q), None)
        ldiff = max(abs(a - b) for a, b in zip(r["losses"], cpu["losses"])) if cpu else float("nan")
        gcpu = grad_diff(r["grads"], cpu["grads"]) if cpu else float("nan")
        print("| %s | %s | %.2f | %.2f | %.2f | %.5f | %.5f | %.2g | %.2g | %.2g |" % (
            r["dtype"], r["kind"], r["step_ms"], r["fwd_ms"], r["bwd_ms"], r["loss0"],
            r["loss_end"], ldiff, r["gdiff"], gcpu))
    # within the dtype's tolerance, or within twice plain torch's own error
    # of that dtype (bf16 weights and activations round before any GEMM)
    def limit(dt):
        cpu = [q["gdiff"] for q in rows if q["dtype"] == dt and q["kind"] == "torch-cpu"
               and "error" not in q]
        return max([vkgrad.TOLERANCE[dt]] + [2 * g for g in cpu])
    bad = [r for r in rows if "error" not in r and r["kind"] == "vkgrad"
           and r["gdiff"] > limit(r["dtype"])]
    print()
    print("vkgrad gradients within tolerance (the dtype's, or 2x torch-cpu's own): %s" % (
        "yes" if not bad else "NO: %s" % [(r["dtype"], r["gdiff"]) for r in bad]))
    return 1 if bad or any("error" in r for r in rows if r["kind"] == "vkgrad") else 0


if __name__ == "__main__":
    sys.exit(main())

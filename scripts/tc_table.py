#!/usr/bin/env python3
"""Summary table of one GPU run: `vkgrad bench --kernels --json` lines beside
PyTorch's (../shared/anchors/torch_linear_backward.py) for the same shapes
and dtypes, full backward (dW, db, dX) GPU time, with ratios.
    tc_table.py BENCH.jsonl TORCH.jsonl  > table.md"""
import json, sys

def lines(path):
    out = []
    for l in open(path):
        try:
            out.append(json.loads(l))
        except ValueError:
            pass
    return out

bench = [j for j in lines(sys.argv[1]) if "gpu_us" in j and j.get("outputs") == "dw,db,dx"]
torch = {(j["dtype"], j["B"], j["I"], j["O"]): j for j in lines(sys.argv[2]) if "full_us" in j}
print("| B×I×O | dtype | variant | vkgrad GPU µs | TFLOP/s | max_rel_err (ok) | PyTorch µs | PyTorch TFLOP/s | vkgrad / PyTorch |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for j in bench:
    B, I, O = j["shape"]
    t = torch.get((j["dtype"], B, I, O))
    tus = t["full_us"] if t else None
    ratio = "%.2f×" % (j["gpu_us"] / tus) if tus else "—"
    print("| %d×%d×%d | %s | %s | %s | %.1f | %.2g (%s) | %s | %s | %s |" % (
        B, I, O, j["dtype"], j["variant"], format(j["gpu_us"], ",.0f"), j["tflops"], j["max_rel_err"],
        "ok" if j["ok"] else "FAIL", format(tus, ",.0f") if tus else "—",
        "%.1f" % t["full_tflops"] if t else "—", ratio))

#!/usr/bin/env python3
"""The closing table of one GPU run: `vkgrad bench --kernels --json` lines
beside PyTorch's (../shared/anchors/torch_linear_backward.py) for the same
shapes and dtypes, full backward (dW, db, dX): GPU time and end to end from
client memory (PyTorch: from pinned host memory, e2e_host_us), with ratios.
    closing_table.py BENCH.jsonl TORCH.jsonl"""
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
print("| B×I×O | dtype | variant | vkgrad GPU µs | TFLOP/s | max_rel_err (ok) | PyTorch GPU µs | GPU ratio | vkgrad e2e µs | PyTorch e2e µs | e2e ratio |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
fmt = lambda v: format(v, ",.0f") if v else "—"
for j in bench:
    B, I, O = j["shape"]
    t = torch.get((j["dtype"], B, I, O)) or {}
    tus, te = t.get("full_us"), t.get("e2e_host_us")
    ve = j.get("end_to_end_us")
    print("| %d×%d×%d | %s | %s | %s | %.1f | %.2g (%s) | %s | %s | %s | %s | %s |" % (
        B, I, O, j["dtype"], j["variant"], fmt(j["gpu_us"]), j["tflops"], j["max_rel_err"],
        "ok" if j["ok"] else "FAIL", fmt(tus), "%.2f×" % (j["gpu_us"] / tus) if tus else "—",
        fmt(ve), fmt(te), "%.2f×" % (ve / te) if ve and te else "—"))

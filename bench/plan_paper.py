#!/usr/bin/python3
"""The planner on paper, against published runs, weight-free, on the GPU presets:

1. The Megatron-LM paper's weak-scaling rows nearest 175B (Narayanan et al., SC21, "Efficient
   Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", Table 1): GPT models
   with vocabulary 51200 and sequence 2048 (test/models/meta_gpt.py), judged by `ds-opt --plan
   --plan-fix` at the layout each row was published with, recomputing as they did, on
   `dgx-a100` with the row's GPU count: ds's predicted step and peak beside the published
   per-GPU throughput, the throughput counted as the paper counts it (96 B s l h^2 (1 + s/6h +
   V/16lh), recomputation included) at ds's predicted step, and their ratio; then ds's own
   choice on that mesh with the ZeRO stage and recomputation free.
2. torchtitan's Llama 3 70B run (docs/performance.md: 64 A100, FSDP2, local batch 1, sequence
   8192, full activation checkpointing, 331 tokens/s per GPU) with test/models/meta_llama.py,
   at that layout on dgx-a100:8 and dgx-h100:8, and ds's choice among the layouts without pp
   or sp at micro-batch 1.

The presets price bf16 at a GEMM's measured rate (docs/design/comm-model.md); what the ratio
still shows is what the cost model leaves out (kernel efficiency below a large GEMM's, gaps).

usage: .venv/bin/python bench/plan_paper.py [--rows 145.6B,310.1B] [--llama Llama-3-70B]
                                          [--build build]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, os.path.join(ROOT, "test", "models"))
import meta_gpt  # noqa: E402

VOCAB, SEQ = 51200, 2048
# Table 1's rows nearest 175B: name -> (heads, hidden, layers, tp, pp, GPUs, batch, TFLOP/s).
ROWS = {
    "145.6B": (96, 12288, 80, 8, 8, 1536, 2304, 148),
    "310.1B": (128, 16384, 96, 8, 16, 1920, 2160, 155),
}


def megatron_flops(batch, layers, hidden):
    """FLOPs per iteration as the paper counts them (with activation recomputation)."""
    return 96 * batch * SEQ * layers * hidden ** 2 * (
        1 + SEQ / (6 * hidden) + VOCAB / (16 * layers * hidden))


# torchtitan's published Llama 3 run (docs/performance.md, "Llama 3 performance numbers"):
# Llama-3-70B's shape, 64 A100-80GB, FSDP2 over all 64 (ZeRO 3), local batch 1 (global 64),
# sequence 8192, full activation checkpointing: 331 tokens/s per GPU (MFU 51.7%).
# name -> (layers, d, heads, kv heads, ffn, vocab, seq, GPUs, global batch, tokens/s/GPU)
LLAMA = {
    "Llama-3-70B": (80, 8192, 64, 8, 28672, 128256, 8192, 64, 64, 331),
}


def plan_fix(ds_opt, pt2, inputs, cfg, cluster, batch, fix, w):
    """ds-opt --plan --plan-fix FIX: (predicted step s, fullest rank's peak bytes, seconds it
    took) or (None, the error, seconds)."""
    t0 = time.time()
    p = subprocess.run([ds_opt, pt2] + inputs + ["--config", cfg, "--plan", "--cluster",
                                                 cluster, "--global-batch", str(batch),
                                                 "--plan-fix", fix, "--plan-out",
                                                 os.path.join(w, "plan.json")],
                       capture_output=True, text=True)
    secs = time.time() - t0
    step = re.search(r"predicted step (\S+) s", p.stdout)
    peaks = [int(x) for x in re.findall(r": peak (\d+) \+ padding", p.stdout)]
    if not step or not peaks:
        return None, (p.stderr.strip().splitlines() or ["?"])[-1], secs
    return float(step.group(1)), max(peaks), secs


def llama_rows(ds_opt, w, names):
    import meta_llama
    print("\n%-12s %-30s %-16s %9s %8s %8s %10s %10s %6s %6s" % (
        "model", "layout", "cluster", "params", "peak GB", "step s", "ds tok/s", "published",
        "ratio", "secs"))
    for name in names:
        layers, d, heads, kv, ffn, vocab, seq, gpus, batch, published = LLAMA[name]
        pt2 = os.path.join(w, name + ".pt2")
        n = meta_llama.export(pt2, layers, d, heads, kv, ffn, vocab, seq)
        cfg = os.path.join(w, "llama.json")
        json.dump({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                   "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}}, open(cfg, "w"))
        inputs = ["--input", "input_ids=tensor<1x%dxi64>" % seq,
                  "--input", "labels=tensor<1x%dxi64>" % seq]
        # The published layout on the published GPUs, and the same on H100s (nothing
        # published to set beside it).
        for cluster, pub in (("dgx-a100:%d" % (gpus // 8), published),
                             ("dgx-h100:%d" % (gpus // 8), None)):
            t, peak, secs = plan_fix(ds_opt, pt2, inputs, cfg, cluster, batch,
                                     "tp=1,pp=1,sp=1,zero=3,micro=1,recompute=1", w)
            layout = "dp=%d ZeRO 3, recomputing" % gpus
            if t is None:
                print("%-12s %-30s %-16s %9.4g  failed: %s" % (name, layout, cluster, n, peak))
                continue
            ours = batch * seq / (t * gpus)
            print("%-12s %-30s %-16s %9.4g %8.1f %8.3g %10.1f %10s %6s %6.0f" % (
                name, layout, cluster, n, peak / 1e9, t, ours, pub or "-",
                "%.2f" % (ours / pub) if pub else "-", secs), flush=True)
        # ds's own choice among the layouts without pipeline or sequence parallelism at
        # micro-batch 1 (tp x ZeRO stage, recomputation where needed); the search over
        # pipelines too does not finish in 30 minutes yet (each compile holds every
        # micro-batch).
        t0 = time.time()
        p = subprocess.run([ds_opt, pt2] + inputs + [
            "--config", cfg, "--plan", "--cluster", "dgx-a100:%d" % (gpus // 8),
            "--global-batch", str(batch), "--plan-fix", "pp=1,sp=1,micro=1", "--plan-rows", "3",
            "--plan-out", os.path.join(w, "plan.json")], capture_output=True, text=True)
        secs = time.time() - t0
        rows = [l for l in p.stdout.splitlines() if re.match(r"^\d+\s+dp=", l)]
        m = re.search(r"plan: (\d+) layouts.* (\d+) fit", p.stdout)
        counted = "%s layouts, %s fit" % m.groups() if m else p.stderr.strip()
        print("%s: ds's choice with pp=1 sp=1 micro=1 on dgx-a100:%d (%s; search %.0f s):" % (
            name, gpus // 8, counted, secs))
        for r in rows:
            print("  " + r)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--llama", default=",".join(LLAMA))
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    a = ap.parse_args()
    ds_opt = os.path.join(a.build, "bin", "ds-opt")
    print("%-7s %-22s %6s %9s %10s %10s %12s %10s %7s %6s" % (
        "model", "layout", "GPUs", "params", "peak GB", "step s", "ds TFLOP/s", "published",
        "ratio", "secs"))
    with tempfile.TemporaryDirectory() as w:
        for name in filter(None, a.rows.split(",")):
            heads, hidden, layers, tp, pp, gpus, batch, published = ROWS[name]
            dp = gpus // (tp * pp)
            pt2 = os.path.join(w, name + ".pt2")
            n = meta_gpt.export(pt2, layers=layers, d=hidden, heads=heads, vocab=VOCAB,
                                block=SEQ, batch=1)
            cfg = os.path.join(w, "base.json")
            json.dump({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                       "optimizer": {"type": "Adam", "params": {"lr": 1e-4}}}, open(cfg, "w"))
            inputs = ["--input", "idx=tensor<1x%dxi64>" % SEQ,
                      "--input", "targets=tensor<1x%dxi64>" % SEQ]
            t, peak, secs = plan_fix(ds_opt, pt2, inputs, cfg, "dgx-a100:%d" % (gpus // 8),
                                     batch, "tp=%d,pp=%d,sp=1,zero=0,micro=1,recompute=1" %
                                     (tp, pp), w)
            layout = "dp=%d tp=%d pp=%d" % (dp, tp, pp)
            if t is None:
                print("%-7s %-22s %6d %9.4g  failed: %s" % (name, layout, gpus, n, peak))
                continue
            ours = megatron_flops(batch, layers, hidden) / (t * gpus) / 1e12
            print("%-7s %-22s %6d %9.4g %10.1f %10.3g %12.1f %10d %7.2f %6.0f" % (
                name, layout, gpus, n, peak / 1e9, t, ours, published, ours / published,
                secs), flush=True)
            # ds's own choice on the published mesh: ZeRO stage and recomputation free.
            t0 = time.time()
            p = subprocess.run([ds_opt, pt2] + inputs + [
                "--config", cfg, "--plan", "--cluster", "dgx-a100:%d" % (gpus // 8),
                "--global-batch", str(batch), "--plan-fix", "tp=%d,pp=%d,sp=1,micro=1" % (tp, pp),
                "--plan-rows", "1", "--plan-out", os.path.join(w, "plan.json")],
                capture_output=True, text=True)
            first = [l for l in p.stdout.splitlines() if re.match(r"^1\s+dp=", l)]
            print("  ds's choice on that mesh (ZeRO stage, recomputation free; %.0f s): %s" % (
                time.time() - t0, first[0] if first else p.stderr.strip()), flush=True)
        llama_rows(ds_opt, w, list(filter(None, a.llama.split(","))))


if __name__ == "__main__":
    main()

"""Weight-free import: a model exported without weights (on the meta device, or under
FakeTensorMode) compiles, plans and reports by its shapes alone.

1. A small GPT (tied embeddings) exported three ways (cpu with weights, meta, fake) gives the
   same memory report; the meta import writes no weights and ds-run refuses it without
   --weights, naming the cause; with the cpu import's weights it trains to the cpu import's
   losses, bit for bit (the tie found in the meta export is the cpu export's).
2. GPT-3 175B's shape (96 layers, d 12288, 96 heads, sequence 2048) imports and compiles for
   tp 8 x dp 64 under bf16 within the time and memory bounds below (ds-opt's own process,
   measured from outside: wall time and peak RSS).
3. The ZeRO paper's model states (Rajbhandari et al., SC20, Figure 1: 7.5B parameters, 64
   devices, mixed-precision Adam: 120, 31.4, 16.6 and 1.9 GB per device for stages 0-3) from
   --memory-report on a 7.49B-parameter GPT (within 0.5% of 7.5e9), printed for FileCheck.

usage: weight_free.py --bin BUILD/bin --work DIR
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import meta_gpt  # noqa: E402

MAX_SECONDS, MAX_RSS_GIB = 60, 2.0


def run(cmd, ok=True):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if ok and p.returncode != 0:
        sys.exit("FAILED: %s\n%s%s" % (" ".join(cmd), p.stdout, p.stderr))
    return p


def config(path, **keys):
    cfg = {"train_micro_batch_size_per_gpu": keys.pop("micro", 1),
           "optimizer": {"type": keys.pop("optimizer", "AdamW"), "params": {"lr": 1e-2}}}
    cfg.update(keys)
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def compile_model(ds_opt, pt2, mlir, cfg, batch, seq, world, report=True):
    cmd = [ds_opt, pt2, "--input", "idx=tensor<%dx%dxi64>" % (batch, seq),
           "--input", "targets=tensor<%dx%dxi64>" % (batch, seq), "--config", cfg,
           "--world-size", str(world), "-o", mlir] + (["--memory-report"] if report else [])
    return run(cmd)


def table(report):
    """The memory report without its first line (which names nothing that differs)."""
    return "\n".join(l for l in report.splitlines() if not l.startswith("ds-opt:"))


def small(args, ds_opt, ds_run):
    w = args.work
    cfg = config(os.path.join(w, "small.json"), micro=4, zero_optimization={"stage": 1})
    reports = {}
    for device in ("cpu", "meta", "fake"):
        pt2 = os.path.join(w, device + ".pt2")
        meta_gpt.export(pt2, layers=2, d=32, heads=2, vocab=64, block=16, batch=4,
                        device=device)
        reports[device] = table(compile_model(ds_opt, pt2, os.path.join(w, device + ".mlir"),
                                              cfg, 4, 16, 2).stdout)
    same = reports["meta"] == reports["cpu"] and reports["fake"] == reports["cpu"]
    print("small GPT: memory reports of the cpu, meta and fake exports %s" %
          ("equal" if same else "DIFFER"))
    if not same:
        print(reports["cpu"], reports["meta"], sep="\n---\n")
    for device in ("meta", "fake"):
        print("%s import wrote weights: %s" %
              (device, os.path.exists(os.path.join(w, device + ".safetensors"))))

    # One rank: the step as ds-run runs it.
    rng = np.random.default_rng(0)
    idx = os.path.join(w, "idx.npy")
    np.save(idx, rng.integers(0, 64, (12, 16)).astype(np.int64))
    losses = {}
    for device in ("cpu", "meta"):
        compile_model(ds_opt, os.path.join(w, device + ".pt2"),
                      os.path.join(w, device + "1.mlir"), cfg, 4, 16, 1, report=False)
    base = [ds_run, None, "--data", "idx=" + idx, "--data", "targets=" + idx, "--steps", "3",
            "--threads", "1"]
    refused = run([base[0], os.path.join(w, "meta1.mlir")] + base[2:], ok=False)
    print("ds-run without --weights: exit %d: %s" %
          (refused.returncode, refused.stderr.strip().splitlines()[-1]))
    weights = ["--weights", os.path.join(w, "cpu1.safetensors")]
    for device, extra in (("cpu", []), ("meta", weights)):
        log = os.path.join(w, device + ".jsonl")
        run([base[0], os.path.join(w, device + "1.mlir")] + base[2:] + extra + ["--log", log])
        with open(log) as f:
            losses[device] = [json.loads(l)["loss"] for l in f]
    compiled = run([os.path.join(os.path.dirname(ds_run), "ds-compile"),
                    os.path.join(w, "meta1.mlir"), "-o", os.path.join(w, "meta1.exe")])
    print("ds-compile without --weights: %s" % compiled.stderr.strip().splitlines()[-1])
    print("losses cpu %s, meta with the cpu weights %s: %s" %
          (losses["cpu"], losses["meta"], "equal" if losses["cpu"] == losses["meta"] else
           "DIFFER"))


def bf16_recompute(args, ds_opt):
    """A torch.export program reads every parameter at its top: in bf16 each widening to f32
    still sits right before its read, so the blocks are found and recomputed."""
    w = args.work
    peaks, flops = {}, {}
    for name, extra in (("plain", {}), ("ckpt", {"activation_checkpointing": {}})):
        cfg = config(os.path.join(w, "bf16-%s.json" % name), micro=4, bf16={"enabled": True},
                     **extra)
        out = compile_model(ds_opt, os.path.join(w, "meta.pt2"),
                            os.path.join(w, "bf16-%s.mlir" % name), cfg, 4, 16, 1).stdout
        peaks[name] = max(int(l.split()[7]) for l in out.splitlines() if re.match(r"^\d+\s+\d", l))
        m = re.search(r"^recomputed per rank and step .*: (\d+) FLOPs", out, re.M)
        flops[name] = int(m.group(1)) if m else 0
    print("bf16 meta GPT with activation_checkpointing: %d FLOPs recomputed, peak %d -> %d: %s" %
          (flops["ckpt"], peaks["plain"], peaks["ckpt"],
           "lower" if flops["ckpt"] > 0 and peaks["ckpt"] < peaks["plain"] else "NOT LOWER"))


def meta_constant(args, ds_opt):
    """A non-persistent buffer made on meta: the program needs its values, which the export
    does not hold."""
    import torch

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)
            self.register_buffer("scale", torch.ones(4), persistent=False)

        def forward(self, x, y):
            return torch.nn.functional.cross_entropy(self.lin(x) * self.scale, y)

    with torch.device("meta"):
        model, x, y = Scaled(), torch.zeros(2, 4), torch.zeros(2, dtype=torch.long)
    pt2 = os.path.join(args.work, "scaled.pt2")
    torch.export.save(torch.export.export(model, (x, y)), pt2)
    p = run([ds_opt, pt2, "--input", "x=tensor<2x4xf32>", "--input", "y=tensor<2xi64>",
             "-o", os.path.join(args.work, "scaled.mlir")], ok=False)
    print("a meta constant: exit %d: %s" % (p.returncode, p.stderr.strip().splitlines()[-1]))


def measured(cmd):
    """Runs `cmd`; returns (seconds, peak RSS of it in GiB, its result)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.monotonic()
    p = run(cmd)
    seconds = time.monotonic() - start
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if rss <= before:
        sys.exit("FAILED: the child's peak RSS is hidden by an earlier, larger child")
    return seconds, rss / 2**20, p


def gpt3(args, ds_opt):
    w = args.work
    pt2 = os.path.join(w, "gpt3.pt2")
    n = meta_gpt.export(pt2, layers=96, d=12288, heads=96, vocab=51200, block=2048)
    cfg = config(os.path.join(w, "gpt3.json"), bf16={"enabled": True},
                 zero_optimization={"stage": 1}, tensor_parallel={"autotp_size": 8})
    cmd = [ds_opt, pt2, "--input", "idx=tensor<1x2048xi64>", "--input",
           "targets=tensor<1x2048xi64>", "--config", cfg, "--world-size", "64",
           "--memory-report", "-o", os.path.join(w, "gpt3.mlir")]
    seconds, rss, p = measured(cmd)
    states = [l for l in p.stdout.splitlines() if l.startswith("model states")]
    print("GPT-3 175B shape: %.2fB parameters; tp8 x dp64 bf16 ZeRO-1: %s" % (n / 1e9, states[0]))
    # 512 ranks, every one alike: one row stands for them (not 512 equal rows).
    rows = [l for l in p.stdout.splitlines() if re.match(r"^\d+\s+\d+", l)]
    print("GPT-3 175B shape: memory report: %d row%s for 512 ranks: %s" % (
        len(rows), "" if len(rows) == 1 else "s", rows[0].split("  ")[-1].strip()))
    print("GPT-3 175B shape: ds-opt %s within %d s and %.1f GiB (took %.1f s, %.2f GiB)" %
          ("PASS" if seconds < MAX_SECONDS and rss < MAX_RSS_GIB else "FAIL", MAX_SECONDS,
           MAX_RSS_GIB, seconds, rss))


def zero_paper(args, ds_opt):
    w = args.work
    pt2 = os.path.join(w, "zero.pt2")
    n = meta_gpt.export(pt2, layers=36, d=4096, heads=32, vocab=57344, block=2048, seq=128)
    print("ZeRO paper model: %d parameters, %.3f%% from 7.5e9" %
          (n, abs(n - 7.5e9) / 7.5e9 * 100))
    for stage in range(4):
        cfg = config(os.path.join(w, "zero%d.json" % stage), optimizer="Adam",
                     fp16={"enabled": True}, zero_optimization={"stage": stage})
        p = compile_model(ds_opt, pt2, os.path.join(w, "zero.mlir"), cfg, 1, 128, 64)
        states = [l for l in p.stdout.splitlines() if l.startswith("model states")]
        print("stage %d: %s" % (stage, states[0]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    ds_opt, ds_run = os.path.join(args.bin, "ds-opt"), os.path.join(args.bin, "ds-run")
    small(args, ds_opt, ds_run)
    bf16_recompute(args, ds_opt)
    meta_constant(args, ds_opt)
    zero_paper(args, ds_opt)
    gpt3(args, ds_opt)


if __name__ == "__main__":
    main()

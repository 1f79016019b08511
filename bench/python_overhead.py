#!/usr/bin/env python3
"""The Python package's overhead per step beside ds-run, on the d512 GPT (6 layers, 8 heads,
seq 128, vocab 1024, micro-batch 16, fp32 AdamW, one rank).

Each pair runs two processes, alternately: `ds.initialize` + `engine.train_batch` in
.venv/bin/python (the same program: the engine's own export, compiled in-process), and
`ds-opt` + `ds-run` of that export. Three figures per pair, each the median of steps 3..N:
  ds-run      ds-run's step time (its log's step_ms);
  python      the wall time of one train_batch call, as the script sees it;
  in-process  python minus the runtime's own step time in the same process (its log's
              step_ms): what the package adds around the compiled step (the batch checks,
              the agreement, the pointers), free of the process-to-process spread.
The overhead is in-process / ds-run; the issue's bound is 2%.

usage: .venv/bin/python bench/python_overhead.py [--steps 12] [--pairs 3] [--build build]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
CONFIG = {"train_micro_batch_size_per_gpu": 16, "gradient_accumulation_steps": 1,
          "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "weight_decay": 0.1}},
          "steps_per_print": 1000}


def python_child(work, steps):
    """One process: ds.initialize and `steps` train_batch calls; prints its timings."""
    import torch
    sys.path.insert(0, os.path.join(ROOT, "test", "models"))
    from make_models import GPT, GPTConfig
    import ds
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=1024, block_size=128, n_layer=6, n_head=8, n_embd=512))
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, 1024, (16, 128), generator=g)
    tgt = torch.randint(0, 1024, (16, 128), generator=g)
    log = os.path.join(work, "py.jsonl")
    engine, *_ = ds.initialize(model=model, config=CONFIG, example_inputs=(idx, tgt),
                               workdir=work, log=log)
    wall = []
    for _ in range(steps):
        t0 = time.perf_counter()
        engine.train_batch([(idx, tgt)])
        wall.append((time.perf_counter() - t0) * 1e3)
    runtime = [json.loads(l)["step_ms"] for l in open(log)]
    print(json.dumps({"wall": wall, "runtime": runtime}))


def settled(values):
    return statistics.median(values[2:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--child")
    a = ap.parse_args()
    if a.child:
        return python_child(a.child, a.steps)
    import numpy as np
    bin_ = os.path.join(a.build, "bin")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for pair in range(a.pairs):
            work = os.path.join(tmp, f"py{pair}")
            os.makedirs(work)
            out = subprocess.run([sys.executable, __file__, "--child", work, "--steps",
                                  str(a.steps)], check=True, capture_output=True, text=True)
            py = json.loads(out.stdout.strip().splitlines()[-1])
            if pair == 0:  # ds-run trains the very export the engine made
                g = np.random.default_rng(0)
                for n in ("idx", "targets"):
                    np.save(os.path.join(tmp, n + ".npy"),
                            g.integers(0, 1024, (16 * a.steps, 128), dtype=np.int64))
                with open(os.path.join(tmp, "cfg.json"), "w") as f:
                    json.dump(CONFIG, f)
                subprocess.run([os.path.join(bin_, "ds-opt"), os.path.join(work, "model.pt2"),
                                "--input", "idx=tensor<16x128xi64>",
                                "--input", "targets=tensor<16x128xi64>",
                                "--config", os.path.join(tmp, "cfg.json"),
                                "-o", os.path.join(tmp, "step.mlir")], check=True,
                               capture_output=True)
            log = os.path.join(tmp, f"run{pair}.jsonl")
            subprocess.run([os.path.join(bin_, "ds-run"), os.path.join(tmp, "step.mlir"),
                            "--data", "idx=" + os.path.join(tmp, "idx.npy"),
                            "--data", "targets=" + os.path.join(tmp, "targets.npy"),
                            "--steps", str(a.steps), "--log", log], check=True,
                           capture_output=True)
            run = [json.loads(l)["step_ms"] for l in open(log)]
            inproc = [w - r for w, r in zip(py["wall"], py["runtime"])]
            rows.append((settled(run), settled(py["wall"]), settled(inproc)))
            print(f"pair {pair + 1}: ds-run {rows[-1][0]:.1f} ms, python {rows[-1][1]:.1f} ms, "
                  f"in-process overhead {rows[-1][2]:.3f} ms", flush=True)
    run, wall, inproc = (statistics.median(r[i] for r in rows) for i in range(3))
    print(f"\nd512 GPT, micro-batch 16 x seq 128, fp32 AdamW, 1 rank, medians of {a.pairs} "
          f"pairs (steps 3..{a.steps}):")
    print(f"{'ds-run step':<28}{run:10.1f} ms")
    print(f"{'python train_batch':<28}{wall:10.1f} ms   ({wall / run:.3f}x ds-run)")
    print(f"{'in-process overhead':<28}{inproc:10.3f} ms   ({100 * inproc / run:.2f}% of ds-run's "
          f"step)")


if __name__ == "__main__":
    main()

"""Planning at scale, from weight-free exports (test/models/meta_gpt.py, on the meta device):

1. GPT-3 175B's shape (96 layers, d 12288, 96 heads, vocab 51200, sequence 2048), bf16 ZeRO-1:
   ds-opt's wall time and peak RSS compiling tp 8 x dp 64, and pp 16 x dp 8 x tp 8 with 16
   micro-batches; the pipeline's parameter bytes on each stage (--memory-report) and rank 0's
   sends (--comm-report).
2. --plan of a 355M GPT (24 layers, d 1024, 16 heads, vocab 50304, sequence 1024, bf16) for
   global batch 32 on dgx-h100:1: search time, the layouts counted, the first rows.
3. The ZeRO paper's 7.49B GPT (36 layers, d 4096, vocab 57344) at 64 GPUs: ds's model states
   per stage beside DeepSpeed's own estimators (estimate_zero2/3_model_states_mem_needs_all_cold,
   from the .venv's deepspeed; printed as DeepSpeed prints them).

usage: .venv/bin/python bench/plan_scale.py [--bin build/bin] [--skip-plan]
"""
import argparse
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "models"))
import meta_gpt  # noqa: E402


def run(cmd):
    """Runs `cmd`; returns its result, wall seconds and its own peak RSS in GiB (wait4)."""
    start = time.monotonic()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        p = subprocess.CompletedProcess(cmd, child.returncode, out.read(), err.read())
    if p.returncode != 0:
        sys.exit("FAILED: %s\n%s" % (" ".join(cmd), p.stderr))
    return p, seconds, usage.ru_maxrss / 2**20


def config(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def gpt3(ds_opt, w):
    pt2 = os.path.join(w, "gpt3.pt2")
    n = meta_gpt.export(pt2, layers=96, d=12288, heads=96, vocab=51200, block=2048)
    print("GPT-3 175B shape: %.2fB parameters" % (n / 1e9))
    inputs = ["--input", "idx=tensor<1x2048xi64>", "--input", "targets=tensor<1x2048xi64>"]
    common = '"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, ' \
             '"optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}, ' \
             '"zero_optimization": {"stage": 1}, "tensor_parallel": {"autotp_size": 8}'
    tp = config(os.path.join(w, "tp.json"), "{%s}" % common)
    pp = config(os.path.join(w, "pp.json"), '{%s, "gradient_accumulation_steps": 16, '
                '"pipeline": {"stages": 16}}' % common)
    for name, cfg, world in (("tp8 x dp64", tp, 64), ("pp16 x dp8 x tp8", pp, 8)):
        p, s, rss = run([ds_opt, pt2] + inputs + ["--config", cfg, "--world-size", str(world),
                                                   "-o", os.path.join(w, "step.mlir")])
        print("  %-18s ds-opt %.1f s, %.2f GiB peak RSS" % (name, s, rss))
    p, _, _ = run([ds_opt, pt2] + inputs + ["--config", pp, "--world-size", "8",
                                            "--memory-report", "--comm-report",
                                            "-o", os.path.join(w, "step.mlir")])
    stages = {}
    for line in p.stdout.splitlines():
        m = re.match(r"^\d+\s+(\d+)\s+.*\bpp(\d+),dp0,tp0\b", line)
        if m:
            stages[int(m.group(2))] = int(m.group(1))
    print("  pp16 parameter bytes per stage (GB): %s" %
          " ".join("%.2f" % (stages[k] / 1e9) for k in sorted(stages)))
    rank0 = p.stdout.split("pipeline rank 0:")[1].split("pipeline rank 1:")[0]
    sends = re.search(r"pp\s+send\s+(\d+)\s+(\d+)", rank0)
    print("  pp16 rank 0 sends per step: %s calls, %s bytes" % (sends.group(1), sends.group(2)))


def plan(ds_opt, w):
    pt2 = os.path.join(w, "g355.pt2")
    n = meta_gpt.export(pt2, layers=24, d=1024, heads=16, vocab=50304, block=1024, batch=2,
                        dynamic_batch=True)
    cfg = config(os.path.join(w, "g355.json"), '{"train_micro_batch_size_per_gpu": 1, '
                 '"bf16": {"enabled": true}, "optimizer": {"type": "AdamW", "params": '
                 '{"lr": 1e-4}}}')
    # Twice: compiling every layout (--plan-keep 0), and as the search runs by default
    # (in the order of each layout's lower bound, until the 20 fastest fitting are known).
    ranked = {}
    for keep in ("0", "20"):
        listed = os.path.join(w, "plan-keep%s.json" % keep)
        p, s, _ = run([ds_opt, pt2, "--input", "idx=tensor<1x1024xi64>", "--input",
                       "targets=tensor<1x1024xi64>", "--config", cfg, "--plan", "--cluster",
                       "dgx-h100:1", "--global-batch", "32", "--plan-rows", "5",
                       "--plan-keep", keep, "--plan-json", listed,
                       "--plan-out", os.path.join(w, "plan.json")])
        with open(listed) as f:
            cands = json.load(f)["candidates"]
        ranked[keep] = [(c["dp"], c["tp"], c["pp"], c["sp"], c["zero_stage"], c["micro_batch"],
                         c["recompute"], c["virtual_stages"], c["peak_bytes"], c["step_s"])
                        for c in cands if c["fits"]][:20]
        compiled = [c for c in cands if not c["pruned"]]
        print("--plan of a %.0fM GPT on dgx-h100:1, global batch 32, --plan-keep %s: %.0f s, "
              "%d of %d layouts compiled (%.0f s of compiles)" % (
                  n / 1e6, keep, s, len(compiled), len(cands),
                  sum(c["compile_s"] for c in compiled)))
        print("\n".join("  " + l for l in p.stdout.splitlines()))
    print("the first 20 rows the same with and without the bounds: %s" % (
        ranked["0"] == ranked["20"]))


def zero_paper(ds_opt, w):
    pt2 = os.path.join(w, "zero.pt2")
    n = meta_gpt.export(pt2, layers=36, d=4096, heads=32, vocab=57344, block=2048, seq=128)
    print("ZeRO paper model: %d parameters, 64 GPUs (8 nodes x 8), fp16 Adam" % n)
    ds = {}
    for stage in range(4):
        cfg = config(os.path.join(w, "z%d.json" % stage),
                     '{"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": true}, '
                     '"optimizer": {"type": "Adam", "params": {"lr": 1e-4}}, '
                     '"zero_optimization": {"stage": %d}}' % stage)
        p, _, _ = run([ds_opt, pt2, "--input", "idx=tensor<1x128xi64>", "--input",
                       "targets=tensor<1x128xi64>", "--config", cfg, "--world-size", "64",
                       "--memory-report", "-o", os.path.join(w, "z.mlir")])
        ds[stage] = re.search(r"model states per rank \(GB = 1e9 bytes\): (\S+)",
                              p.stdout).group(1)
        print("  ds stage %d: %s GB" % (stage, ds[stage]))
    try:
        from deepspeed.runtime.zero.stage3 import \
            estimate_zero3_model_states_mem_needs_all_cold
        from deepspeed.runtime.zero.stage_1_and_2 import \
            estimate_zero2_model_states_mem_needs_all_cold
    except ImportError as e:
        print("  DeepSpeed's estimators: cannot import deepspeed (%s)" % e)
        return
    for name, call in (("zero2", lambda: estimate_zero2_model_states_mem_needs_all_cold(
            n, num_gpus_per_node=8, num_nodes=8)),
                       ("zero3", lambda: estimate_zero3_model_states_mem_needs_all_cold(
            n, 57344 * 4096, num_gpus_per_node=8, num_nodes=8))):
        out = io.StringIO()
        with redirect_stdout(out):
            call()
        for line in out.getvalue().splitlines():
            if "offload_optimizer=none" in line and ("zero_init" not in line or
                                                     "offload_param=none" in line):
                print("  DeepSpeed %s estimate: %s" % (name, " ".join(line.split())))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "build", "bin"))
    ap.add_argument("--skip-plan", action="store_true")
    a = ap.parse_args()
    ds_opt = os.path.join(a.bin, "ds-opt")
    with tempfile.TemporaryDirectory() as w:
        gpt3(ds_opt, w)
        zero_paper(ds_opt, w)
        if not a.skip_plan:
            plan(ds_opt, w)


if __name__ == "__main__":
    main()

"""ds-opt --plan on a small GPT (weight-free, dynamic batch) for 4 ranks of a toy cluster.

Checks, from outside the planner: every layout it calls fitting has a peak within the device
memory and the rows are ranked by predicted step time; each refused layout says why; the
config it writes compiles with the command it prints, and that step's --memory-report peak (the
fullest rank's) equals the table's first row.

usage: plan_check.py --bin BUILD/bin --work DIR
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import meta_gpt  # noqa: E402

# One node of 4 devices, each with 400 kB: the GPT's largest layouts do not fit.
CLUSTER = {"name": "toy", "nodes": 1, "devices_per_node": 4, "device_memory_bytes": 4e5,
           "peak_flops": {"bf16": 4e11, "fp16": 4e11, "fp32": 1e11},
           "memory_bandwidth_bytes_per_s": 5e10, "intra_node_bandwidth_bytes_per_s": 1e10,
           "intra_node_latency_s": 5e-6, "inter_node_bandwidth_bytes_per_s": 1e9,
           "inter_node_latency_s": 2e-5, "host_memory_bytes": 1e10,
           "nvme_bandwidth_bytes_per_s": 1e9}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    w = a.work
    os.makedirs(w, exist_ok=True)
    model = os.path.join(w, "gpt.pt2")
    meta_gpt.export(model, layers=2, d=32, heads=2, vocab=64, block=16, batch=2,
                    dynamic_batch=True)
    with open(os.path.join(w, "cluster.json"), "w") as f:
        json.dump(CLUSTER, f)
    with open(os.path.join(w, "base.json"), "w") as f:
        json.dump({"train_micro_batch_size_per_gpu": 1,
                   "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}, f)
    ds_opt = os.path.join(a.bin, "ds-opt")
    plan_json = os.path.join(w, "plan.json")
    # Every layout compiled (--plan-keep 0): the checks below judge them all.
    p = subprocess.run([ds_opt, model, "--plan-rows", "1000", "--plan-keep", "0", "--input",
                        "idx=tensor<1x16xi64>", "--input", "targets=tensor<1x16xi64>",
                        "--config", os.path.join(w, "base.json"), "--plan", "--cluster", os.path.join(w, "cluster.json"),
                        "--global-batch", "8", "--plan-out", plan_json,
                        "--plan-json", os.path.join(w, "candidates.json")],
                       capture_output=True, text=True)
    print(p.stdout, end="")
    if p.returncode != 0:
        sys.exit("FAILED: ds-opt --plan\n" + p.stderr)
    rows = [l.split() for l in p.stdout.splitlines() if re.match(r"^(\d+|-)\s+dp=", l)]
    fitting = [r for r in rows if r[0] != "-"]
    budget = CLUSTER["device_memory_bytes"]
    peaks = [int(r[9]) for r in fitting]
    steps = [float(r[10]) for r in fitting]
    print("fitting rows: %d, all within the device memory: %s, ranked by step time: %s" %
          (len(fitting), all(x <= budget for x in peaks), steps == sorted(steps)))
    sums = all(abs(float(r[10]) - float(r[11]) - float(r[12])) <= 1e-3 * float(r[10])
               for r in fitting)
    print("step = compute + communication on every row: %s" % sums)
    print("fitting micro-batches: %s" % sorted({int(r[6]) for r in fitting}))
    # Why the first wins: against another shape's fastest, the difference of the two rows.
    why = re.findall(r"^why 1 beats (dp=\d+ tp=\d+ pp=\d+ sp=\d+) +ZeRO (\d+), micro-batch (\d+)"
                     r"(, recomputing)?(?:, interleaved x(\d+))?: (\S+) s less \(compute (\S+) s, "
                     r"communication (\S+) s\)", p.stdout, re.M)
    steps_by = {(" ".join(r[1:5]), r[5], r[6], r[8], r[14]): float(r[10]) for r in fitting}
    key = lambda x: x[:3] + ("y" if x[3] else "-", x[4] or "1")
    agree = [abs(float(x[5]) - (steps_by[key(x)] - steps[0])) <= 2e-3 * steps_by[key(x)] and
             abs(float(x[6]) + float(x[7]) + float(x[5])) <= 5e-3 * steps_by[key(x)]
             for x in why]
    print("why the first wins: %d other shapes, each the rows' difference: %s" %
          (len(why), all(agree) and len(why) > 0))
    # Interleaving a pipeline (2 model chunks a rank) as an axis: its rows beside 1F1B's.
    print("pipelined fitting rows: %d with 1F1B (v 1), %d interleaved (v 2)" % (
        sum(r[3] != "pp=1" and r[14] == "1" for r in fitting),
        sum(r[3] != "pp=1" and r[14] == "2" for r in fitting)))
    print("fitting layouts with tp, pp, sp > 1: %s %s %s" % tuple(
        any(r[k].split("=")[1] != "1" for r in fitting) for k in (2, 3, 4)))
    over = len(re.findall(r"^ +\(needs \d+ bytes of %d\)$" % budget, p.stdout, re.M))
    print("layouts over the device memory: %d" % over)
    # The printed command, run as printed, with --memory-report.
    cmd = re.search(r"compile it with: (.*)$", p.stdout, re.M).group(1)
    argv = shlex.split(cmd.replace("STEP.mlir", os.path.join(w, "step.mlir")))
    argv[0] = ds_opt
    q = subprocess.run(argv + ["--memory-report"], capture_output=True, text=True)
    if q.returncode != 0:
        sys.exit("FAILED: %s\n%s" % (cmd, q.stderr))
    report = [int(l.split()[7]) for l in q.stdout.splitlines() if re.match(r"^\d+\s+\d+", l)]
    print("plan.json compiles: fullest rank's peak %d, the table's %d: %s" %
          (max(report), peaks[0], "equal" if max(report) == peaks[0] else "DIFFER"))
    # --plan-json: every layout of the table, in its order, with the table's figures; the
    # first one's config is the one --plan-out wrote.
    with open(os.path.join(w, "candidates.json")) as f:
        listed = json.load(f)
    cands = listed["candidates"]
    with open(plan_json) as f:
        chosen = json.load(f)
    same = all(c["dp"] == int(r[1][3:]) and c["zero_stage"] == int(r[5]) and
               c["peak_bytes"] == int(r[9]) and
               abs(c["step_s"] - float(r[10])) <= 1e-3 * c["step_s"]
               for c, r in zip(cands, fitting))
    print("plan-json: %d layouts (%d fitting), the table's rows: %s, first config = plan.json: %s"
          % (len(cands), sum(c["fits"] for c in cands), same, cands[0]["config"] == chosen))
    # Interleaving shrinks the fill and drain: m micro-batches over p stages take m + p - 1
    # slots in 1F1B, 2m + p - 1 half-slots over 2 chunks. The same layout's compute, each
    # unstretched, is the same program's work (within 8%: the busiest rank may differ).
    pairs = {}
    for c in cands:
        if c["pp"] > 1 and "compute_s" in c:
            k = tuple(c[f] for f in ("dp", "tp", "pp", "sp", "zero_stage", "micro_batch",
                                     "recompute"))
            pairs.setdefault(k, {})[c["virtual_stages"]] = c
    ratios = []
    for k, v in pairs.items():
        if 1 in v and 2 in v:
            m, stages = v[1]["gradient_accumulation_steps"], k[2]
            ratios.append((v[2]["compute_s"] * 2 * m / (2 * m + stages - 1)) /
                          (v[1]["compute_s"] * m / (m + stages - 1)))
    print("interleaved against 1F1B: %d pairs, unstretched compute within 8%%: %s" % (
        len(ratios), bool(ratios) and all(abs(r - 1) <= 0.08 for r in ratios)))
    # Ranks that share cores (cores_per_node, as the CPU probe writes it): the ranks' mean
    # compute, no pipeline stretch; the same where every rank runs one program.
    shared = dict(CLUSTER, cores_per_node=2)
    with open(os.path.join(w, "shared.json"), "w") as f:
        json.dump(shared, f)
    q = subprocess.run([ds_opt, model, "--input", "idx=tensor<1x16xi64>", "--input",
                        "targets=tensor<1x16xi64>", "--config", os.path.join(w, "base.json"),
                        "--plan", "--cluster", os.path.join(w, "shared.json"), "--global-batch",
                        "8", "--plan-keep", "0", "--plan-out", os.devnull, "--plan-json",
                        os.path.join(w, "shared-all.json")], capture_output=True, text=True)
    if q.returncode != 0:
        sys.exit("FAILED: --plan on shared cores\n" + q.stderr)
    key = lambda c: (c["dp"], c["tp"], c["pp"], c["sp"], c["zero_stage"], c["micro_batch"])
    alone = {key(c): c for c in cands if "compute_s" in c}
    with open(os.path.join(w, "shared-all.json")) as f:
        both = [(alone[key(c)], c) for c in json.load(f)["candidates"] if key(c) in alone]
    flat = [abs(a["compute_s"] - b["compute_s"]) <= 1e-9 * a["compute_s"]
            for a, b in both if a["pp"] == 1]
    piped = [b["compute_s"] < a["compute_s"] for a, b in both if a["pp"] > 1]
    print("shared cores: %d one-program layouts' compute the same: %s; %d pipelines' less: %s" %
          (len(flat), all(flat), len(piped), all(piped) and len(piped) > 0))
    # A bf16 step's products run at the cluster's bf16 peak: raising only that peak speeds a
    # bf16 plan up and leaves an fp32 plan as it was.
    with open(os.path.join(w, "base.json")) as f:
        bf16 = dict(json.load(f), bf16={"enabled": True})
    with open(os.path.join(w, "bf16.json"), "w") as f:
        json.dump(bf16, f)
    def computes(config, bf16_peak):
        c = dict(CLUSTER, peak_flops=dict(CLUSTER["peak_flops"], bf16=bf16_peak))
        path = os.path.join(w, "peak.json")
        with open(path, "w") as f:
            json.dump(c, f)
        q = subprocess.run([ds_opt, model, "--input", "idx=tensor<1x16xi64>", "--input",
                            "targets=tensor<1x16xi64>", "--config", config, "--plan",
                            "--cluster", path, "--global-batch", "8", "--world-size", "2",
                            "--plan-keep", "0", "--plan-out", os.devnull, "--plan-json",
                            path + ".all"],
                           capture_output=True, text=True)
        if q.returncode != 0:
            sys.exit("FAILED: --plan at a bf16 peak\n" + q.stderr)
        with open(path + ".all") as f:
            return {key(c): c["compute_s"] for c in json.load(f)["candidates"]
                    if "compute_s" in c}
    slow, fast = (computes(os.path.join(w, "bf16.json"), p) for p in (4e11, 4e14))
    same32 = computes(os.path.join(w, "base.json"), 4e11) == computes(
        os.path.join(w, "base.json"), 4e14)
    print("bf16 peak: a bf16 plan faster on every layout: %s; an fp32 plan the same: %s" %
          (all(fast[k] < slow[k] for k in slow) and len(slow) > 0, same32))
    # Will it fit: the table's first row, and a row over the device memory, given back with
    # every axis fixed; the per-rank verdict counts the plan's peak (the table's) and the
    # allocator's padding, and the nearest layouts that fit come from the table's fitting ones.
    def fix(r):
        return "tp=%s,pp=%s,sp=%s,zero=%s,micro=%s,recompute=%d,virtual=%s" % (
            r[2][3:], r[3][3:], r[4][3:], r[5], r[6], r[8] == "y", r[14])
    common = [ds_opt, model, "--input", "idx=tensor<1x16xi64>", "--input",
              "targets=tensor<1x16xi64>", "--config", os.path.join(w, "base.json"), "--plan",
              "--cluster", os.path.join(w, "cluster.json"), "--global-batch", "8"]
    q = subprocess.run(common + ["--plan-fix", fix(fitting[0]), "--plan-out",
                                 os.path.join(w, "fit.json")], capture_output=True, text=True)
    m = re.search(r"every rank \(4\): peak (\d+) \+ padding (\d+) = (\d+): fits, (\d+) bytes spare",
                  q.stdout)
    ok = (q.returncode == 0 and m and int(m.group(1)) == peaks[0] and
          int(m.group(1)) + int(m.group(2)) == int(m.group(3)) and
          int(m.group(3)) + int(m.group(4)) == budget and "what would fit" not in q.stdout)
    # Its predicted step, the table's.
    pred = re.search(r"predicted step (\S+) s", q.stdout)
    ok = ok and pred and abs(float(pred.group(1)) - steps[0]) <= 1e-3 * steps[0]
    with open(os.path.join(w, "fit.json")) as f:
        ok = ok and json.load(f) == chosen
    print("will it fit, the first row: fits with the table's peak and step, no search, plan-out "
          "the same: %s" % ok)
    if not ok:
        print(q.stdout + q.stderr)
    over_rows = [l.split() for l in p.stdout.splitlines()
                 if re.match(r"^-\s+dp=", l) and len(l.split()) > 10]
    r = over_rows[0]
    q = subprocess.run(common + ["--plan-fix", fix(r), "--plan-out", os.path.join(w, "over.json")],
                       capture_output=True, text=True)
    verdicts = re.findall(r"^  (?:every rank \(\d+\)|pipeline stage \d+ \(\d+ ranks?\)): "
                          r"peak (\d+) \+ "
                          r"padding (\d+) = (\d+): (?:fits, (\d+) bytes spare|DOES NOT FIT, "
                          r"short by (\d+) bytes)$", q.stdout, re.M)
    short = [int(v[4]) for v in verdicts if v[4]]
    arithmetic = all(int(v[0]) + int(v[1]) == int(v[2]) and
                     (int(v[2]) + int(v[3]) == budget if v[3] else int(v[2]) - int(v[4]) == budget)
                     for v in verdicts)
    nearest = re.findall(r"^  (dp=\d+ tp=\d+ pp=\d+ sp=\d+) +ZeRO (\d+), micro-batch (\d+)"
                         r"(, recomputing)?(?:, interleaved x(\d+))?: peak (\d+)", q.stdout, re.M)
    table = {(" ".join(x[1:5]), x[5], x[6], x[8], x[14]): int(x[9]) for x in fitting}
    ok = (q.returncode == 1 and verdicts and max(int(v[0]) for v in verdicts) == int(r[9]) and
          arithmetic and short and len(nearest) > 0 and
          all(table.get(n[:3] + ("y" if n[3] else "-", n[4] or "1")) == int(n[5])
              for n in nearest))
    print("will it fit, a row over the memory (%s ZeRO %s micro %s): short by %s, %d nearest "
          "fitting layouts, all fitting rows of the table: %s" % (
              " ".join(r[1:5]), r[5], r[6], max(short) if short else "?", len(nearest), ok))
    if not ok:
        print(q.stdout + q.stderr)
    print(q.stderr.strip())
    # The best row of each other kind of layout, its config written here from the row's
    # columns (not by the planner), compiled and reported.
    with open(os.path.join(w, "base.json")) as f:
        base = json.load(f)
    for k, axis in ((2, "tp"), (3, "pp"), (4, "sp")):
        r = next(r for r in fitting if r[k] != axis + "=1")
        dp, tp, pp, sp = (int(x.split("=")[1]) for x in r[1:5])
        cfg = dict(base, train_micro_batch_size_per_gpu=int(r[6]),
                   gradient_accumulation_steps=int(r[7]),
                   zero_optimization={"stage": int(r[5])},
                   tensor_parallel={"autotp_size": tp}, pipeline={"stages": pp},
                   sequence_parallel_size=sp)
        if r[8] == "y":
            cfg["activation_checkpointing"] = {}
        if r[14] != "1":
            cfg["pipeline"].update(schedule="interleaved", virtual_stages=int(r[14]))
        path = os.path.join(w, axis + ".json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        q = subprocess.run([ds_opt, model, "--config", path, "--world-size", str(dp),
                            "--input", "idx=tensor<%sx16xi64>" % r[6],
                            "--input", "targets=tensor<%sx16xi64>" % r[6],
                            "-o", os.path.join(w, axis + ".mlir"), "--memory-report"],
                           capture_output=True, text=True)
        if q.returncode != 0:
            sys.exit("FAILED: the %s row's config\n%s" % (axis, q.stderr))
        got = max(int(l.split()[7]) for l in q.stdout.splitlines() if re.match(r"^\d+\s+\d+", l))
        print("best %s row (%s): peak %d, the table's %s: %s" %
              (axis, " ".join(r[1:5]), got, r[9], "equal" if got == int(r[9]) else "DIFFER"))
    # Recomputation as an axis: tried where a layout does not fit without it. The fastest
    # fitting row that recomputes, given back with recompute=0 (over the memory) and =1 (the
    # table's peak).
    rc = [r for r in fitting if r[8] == "y"]
    r = rc[0]
    off = subprocess.run(common + ["--plan-fix", fix(r).replace("recompute=1", "recompute=0"),
                                   "--plan-out", os.path.join(w, "rc-off.json")],
                         capture_output=True, text=True)
    on = subprocess.run(common + ["--plan-fix", fix(r), "--plan-out",
                                  os.path.join(w, "rc-on.json")], capture_output=True, text=True)
    peak_on = re.findall(r": peak (\d+) \+ padding", on.stdout)
    print("recomputation: %d fitting rows recompute; %s ZeRO %s micro %s without it: %s; with "
          "it: %s, peak the table's: %s" % (
              len(rc), " ".join(r[1:5]), r[5], r[6],
              "does not fit" if off.returncode == 1 else "FITS (exit %d)" % off.returncode,
              "fits" if on.returncode == 0 else "DOES NOT FIT",
              max(int(x) for x in peak_on) == int(r[9]) if peak_on else False))

    # A pipeline's compile grows with its accumulation steps m: past three periods beyond
    # the warm-up, the search plans it at three m and continues the line. At global batch 64
    # (32 micro-batches on pp=2), 1F1B and interleaved, every continued row's peak, padding
    # and bytes are those of --plan-exact's compile at its own m, its times within 1e-4.
    inter = os.path.join(w, "interleaved.json")
    with open(inter, "w") as f:
        json.dump(dict(base, pipeline={"schedule": "interleaved", "virtual_stages": 2}), f)
    for name, cfg in (("1f1b", os.path.join(w, "base.json")), ("interleaved", inter)):
        runs = {}
        for exact in ("", "--plan-exact"):
            out = os.path.join(w, "continued-%s%s.json" % (name, exact))
            args = common[:common.index("--config")] + [
                "--config", cfg, "--plan", "--cluster", os.path.join(w, "cluster.json"),
                "--global-batch", "64", "--plan-fix", "micro=1", "--device-memory", "100M",
                "--plan-keep", "0",
                "--plan-out", os.path.join(w, "continued.plan.json"), "--plan-json", out]
            q = subprocess.run(args + ([exact] if exact else []), capture_output=True, text=True)
            if q.returncode != 0:
                sys.exit("FAILED: --plan %s at global batch 64 %s\n%s" % (name, exact, q.stderr))
            with open(out) as f:
                runs[exact] = {(c["dp"], c["tp"], c["pp"], c["sp"], c["zero_stage"],
                                c["recompute"]): c for c in json.load(f)["candidates"]}
        cont = [k for k, c in runs[""].items() if c["continued"]]
        exact = runs["--plan-exact"]
        same = all(runs[""][k].get(f) == exact[k].get(f) for k in runs[""]
                   for f in ("peak_bytes", "padding_bytes", "bytes_by_axis", "fits", "why"))
        close = all(abs(runs[""][k][f] - exact[k][f]) <= 1e-4 * exact[k][f] for k in cont
                    for f in ("step_s", "compute_s", "comm_s"))
        print("continued %s: %d pipelined rows (%s), peaks, bytes and refusals --plan-exact's: "
              "%s, times within 1e-4: %s" % (
                  name, len(cont), " ".join(sorted({"pp=%d" % k[2] for k in cont})), same,
                  close))

    # The bounds the search compiles in the order of: on every layout compiled above, the
    # step's bound is at most its predicted step and the states' bound at most its peak.
    # A search that keeps the 5 fastest (--plan-keep 5) compiles fewer, ranks the same 5 first
    # with the same figures, and every layout it left out for its states does not fit.
    # Also on two nodes of 2 with links 1000x slower, where the collectives' terms lead.
    slow = dict(CLUSTER, nodes=2, devices_per_node=2, intra_node_bandwidth_bytes_per_s=1e7,
                inter_node_bandwidth_bytes_per_s=1e6)
    with open(os.path.join(w, "slow.json"), "w") as f:
        json.dump(slow, f)
    q = subprocess.run(common[:common.index("--config")] + [
        "--config", os.path.join(w, "base.json"), "--plan", "--cluster",
        os.path.join(w, "slow.json"), "--global-batch", "8", "--plan-keep", "0",
        "--plan-out", os.devnull, "--plan-json", os.path.join(w, "slow-all.json")],
        capture_output=True, text=True)
    if q.returncode != 0:
        sys.exit("FAILED: --plan on slow links\n" + q.stderr)
    with open(os.path.join(w, "slow-all.json")) as f:
        slow_bounded = [c for c in json.load(f)["candidates"] if "peak_bytes" in c]
    bounded = [c for c in cands if "peak_bytes" in c] + slow_bounded
    print("bounds on %d compiled layouts: step's at most the predicted step: %s; states' at "
          "most the peak: %s" % (
              len(bounded), all(0 < c["bound_step_s"] <= c["step_s"] * (1 + 1e-9)
                                for c in bounded),
              all(0 < c["bound_peak_bytes"] <= c["peak_bytes"] for c in bounded)))
    print("  (on slow links: predicted step over its bound %.3g to %.3g)" % (
        min(c["step_s"] / c["bound_step_s"] for c in slow_bounded),
        max(c["step_s"] / c["bound_step_s"] for c in slow_bounded)))
    plain = [c for c in bounded if not c["recompute"]]
    print("without recomputation (%d), with one sample's activations too: %s" % (
        len(plain), all(0 < c["bound_activation_bytes"] and
                        c["bound_peak_bytes"] + c["bound_activation_bytes"] <= c["peak_bytes"]
                        for c in plain)))
    kept = os.path.join(w, "keep5.json")
    q = subprocess.run(common[:common.index("--config")] + [
        "--config", os.path.join(w, "base.json"), "--plan", "--cluster",
        os.path.join(w, "cluster.json"), "--global-batch", "8", "--plan-keep", "5",
        "--plan-rows", "5", "--plan-out", os.devnull, "--plan-json", kept],
        capture_output=True, text=True)
    if q.returncode != 0:
        sys.exit("FAILED: --plan --plan-keep 5\n" + q.stderr)
    with open(kept) as f:
        pruned = json.load(f)["candidates"]
    key = lambda c: tuple(c[f] for f in ("dp", "tp", "pp", "sp", "zero_stage", "micro_batch",
                                         "recompute", "virtual_stages"))
    figures = lambda c: (key(c), c.get("peak_bytes"), c.get("step_s"))
    # (without recompute: the exhaustive search retried with it what did not fit)
    layout = lambda c: key(c)[:6] + key(c)[7:]
    every = {layout(c): c for c in cands}
    states = [c for c in pruned if c["pruned"] and "states" in c["why"]]
    slower = [c for c in pruned if c["pruned"] and "states" not in c["why"]]
    fifth = sorted(c["step_s"] for c in cands if c["fits"])[4]
    print("--plan-keep 5: %d of %d compiled (%d left out for their states, %d for their "
          "bound); its 5 first the exhaustive's: %s; those left out for their states over the "
          "memory there: %s; for their bound, above its 5th step: %s" % (
              sum(not c["pruned"] for c in pruned), len(pruned), len(states), len(slower),
              [figures(c) for c in pruned[:5]] == [figures(c) for c in cands[:5]],
              all(not every[layout(c)]["fits"] and "peak_bytes" in every[layout(c)]
                  for c in states),
              all(c["bound_step_s"] > fifth for c in slower)))
    # Without recomputation allowed (--plan-fix recompute=0), a layout whose states and one
    # sample's activations exceed the memory is left out: each does not fit when compiled.
    runs = {}
    for keep in ("0", "5"):
        out = os.path.join(w, "norc-keep%s.json" % keep)
        q = subprocess.run(common[:common.index("--config")] + [
            "--config", os.path.join(w, "base.json"), "--plan", "--cluster",
            os.path.join(w, "cluster.json"), "--global-batch", "8", "--plan-fix",
            "recompute=0", "--plan-keep", keep, "--plan-rows", "5", "--plan-out", os.devnull,
            "--plan-json", out], capture_output=True, text=True)
        if q.returncode != 0:
            sys.exit("FAILED: --plan --plan-fix recompute=0 --plan-keep %s\n%s" % (keep, q.stderr))
        with open(out) as f:
            runs[keep] = {key(c): c for c in json.load(f)["candidates"]}
    acts = [k for k, c in runs["5"].items() if c["pruned"] and "activations" in c["why"]]
    print("without recomputation: %d left out for their activations, none fitting compiled: %s"
          % (len(acts), all(not runs["0"][k]["fits"] and "peak_bytes" in runs["0"][k]
                            for k in acts)))


if __name__ == "__main__":
    main()

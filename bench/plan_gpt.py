#!/usr/bin/python3
"""The planner measured: `ds-opt --plan` for the GPT of bench/mesh_gpt.py (d_model 512, 6
layers, 8 heads, seq 128, vocab 1024, 19.5M parameters, fp32 AdamW) at 4 ranks, global batch
16, on this machine as `mpirun -np 4 ds-run --probe-bandwidth` measures it (the cluster file
it writes). Every layout the planner calls fitting under --device-memory is then compiled from
the config the planner wrote for it (--plan-json) and trained with `mpirun -np 4 ds-run
--device-memory` (the arena refuses to pass the budget), and the table prints, per layout,
the predicted and measured step time (median of the steps after the first 3) and peak (the
fullest rank's arena high-water mark, counted by the runtime's allocator; and its RSS).

Summary lines: how the planner's first choice measures against the best measured layout, the
step-time errors' distribution, whether every predicted peak equals the measured one, and
whether any layout the planner called fitting failed. Last, DeepSpeed's memory estimators
(`estimate_zero2/3_model_states_mem_needs_all_live`, on the same GPT built in PyTorch) beside
ds's plan (its model states and its whole peak) and the measured peak, for dp 4 in bf16 with
ZeRO 2 and 3 (the mixed precision those estimators assume).

usage: .venv/bin/python bench/plan_gpt.py [--device-memory 170000000] [--steps 8]
       [--build build] [--limit N] [--work DIR]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, '..')
sys.path.insert(0, HERE)
from deepspeed_launch import WARM  # noqa: E402
from train_gpt import export  # noqa: E402

RANKS, BATCH, SEQ, VOCAB, D, LAYERS, HEADS = 4, 16, 128, 1024, 512, 6, 8
MPIRUN = ['mpirun', '--allow-run-as-root', '--oversubscribe', '-np', str(RANKS)]


def layout(c):
    """The layout with its schedule and recomputation: "dp=1 tp=1 pp=4 sp=1 v2 rc"."""
    return 'dp=%d tp=%d pp=%d sp=%d%s%s' % (
        c['dp'], c['tp'], c['pp'], c['sp'],
        ' v%d' % c['virtual_stages'] if c.get('virtual_stages', 1) > 1 else '',
        ' rc' if c.get('recompute') else '')


def measure(b, w, i, c, steps, budget):
    """Compiles and trains candidate c: (median step s, fullest device peak, largest RSS) or
    the reason it failed."""
    cfg, step, log = w('cfg-%s.json' % i), w('step-%s.mlir' % i), w('ds-%s.jsonl' % i)
    json.dump(c['config'], open(cfg, 'w'))
    mb = c['micro_batch']
    p = subprocess.run([b('ds-opt'), w('gpt.pt'), '--input', 'idx=tensor<%dx%dxi64>' % (mb, SEQ),
                        '--input', 'targets=tensor<%dx%dxi64>' % (mb, SEQ), '--config', cfg,
                        '--world-size', str(c['dp']), '-o', step],
                       capture_output=True, text=True)
    if p.returncode:
        return 'ds-opt: ' + p.stderr.strip().splitlines()[-1]
    limit = ['--device-memory', str(budget)] if budget else []
    p = subprocess.run(MPIRUN + [b('ds-run'), step, '--data', 'idx=' + w('idx.npy'), '--data',
                                 'targets=' + w('targets.npy'), '--steps', str(steps),
                                 '--log', log] + limit, capture_output=True, text=True)
    if p.returncode:
        return 'ds-run: ' + (p.stderr.strip().splitlines() or ['exit %d' % p.returncode])[-1]
    lines = [json.loads(l) for l in open(log)]
    lines = [l for l in lines if 'step_ms' in l]
    ms = statistics.median(l['step_ms'] for l in lines[WARM:])
    peak = max(r['device_peak_bytes'] for l in lines for r in l['ranks'])
    rss = max(r['host_peak_bytes'] for l in lines for r in l['ranks'])
    return ms / 1e3, peak, rss


def estimators(b, w, steps):
    """DeepSpeed's estimators beside ds's plan and the measured peak, dp 4, bf16, ZeRO 2/3."""
    import contextlib
    import io
    sys.path.insert(0, os.path.join(ROOT, 'test', 'models'))
    try:
        from make_models import GPT, GPTConfig
        from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs_all_live
        from deepspeed.runtime.zero.stage_1_and_2 import \
            estimate_zero2_model_states_mem_needs_all_live
    except ImportError as e:
        print('\nDeepSpeed\'s estimators: cannot import them (%s)' % e)
        return
    model = GPT(GPTConfig(vocab_size=VOCAB, block_size=SEQ, n_layer=LAYERS, n_head=HEADS,
                          n_embd=D))
    print('\nDeepSpeed\'s estimators beside ds (dp=4, micro-batch 4, bf16 AdamW; GB = 1e9 bytes '
          'per rank):')
    for stage, call in ((2, estimate_zero2_model_states_mem_needs_all_live),
                        (3, estimate_zero3_model_states_mem_needs_all_live)):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            call(model, num_gpus_per_node=RANKS, num_nodes=1)
        line = [l for l in out.getvalue().splitlines() if 'offload_optimizer=none' in l and
                ('zero_init' not in l or 'zero_init=1' in l) and 'offload_param=OffloadDevice'
                not in l][0]
        gpu = line.split('|')[1].strip()
        cfg = {'train_batch_size': BATCH, 'train_micro_batch_size_per_gpu': 4,
               'bf16': {'enabled': True}, 'zero_optimization': {'stage': stage},
               'optimizer': {'type': 'AdamW', 'params': {'lr': 1e-4}}, 'steps_per_print': 1000}
        c = {'config': cfg, 'micro_batch': 4, 'dp': RANKS}
        json.dump(cfg, open(w('est-cfg.json'), 'w'))
        report = subprocess.run([b('ds-opt'), w('gpt.pt'), '--input',
                                 'idx=tensor<4x%dxi64>' % SEQ, '--input',
                                 'targets=tensor<4x%dxi64>' % SEQ, '--config', w('est-cfg.json'),
                                 '--world-size', str(RANKS), '--memory-report', '-o',
                                 os.devnull], capture_output=True, text=True).stdout
        states = re.search(r'model states per rank \(GB = 1e9 bytes\): (\S+)', report).group(1)
        peak = max(int(l.split()[7]) for l in report.splitlines() if re.match(r'^\d+\s+\d+', l))
        m = measure(b, w, 'est%d' % stage, c, steps, 0)
        measured = '%.3f' % (m[1] / 1e9) if not isinstance(m, str) else m
        print('  ZeRO %d: DeepSpeed %s (its model states per GPU); ds model states %s, '
              'whole peak %.3f planned, %s measured' % (stage, gpu, states, peak / 1e9, measured))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--device-memory', type=int, default=170000000)
    ap.add_argument('--steps', type=int, default=8)
    ap.add_argument('--build', default=os.path.join(ROOT, 'build'))
    ap.add_argument('--limit', type=int, default=0, help='measure only the first N (0: all)')
    ap.add_argument('--work', default='')
    args = ap.parse_args()
    if args.steps < WARM + 1:
        ap.error('--steps must be at least %d' % (WARM + 1))
    b = lambda t: os.path.join(args.build, 'bin', t)
    work = args.work or tempfile.mkdtemp(prefix='ds-plan-bench-')
    os.makedirs(work, exist_ok=True)
    w = lambda f: os.path.join(work, f)
    export(w('gpt.pt'), D, LAYERS, HEADS, vocab=VOCAB, block=SEQ)
    rng = np.random.RandomState(0)
    idx = rng.randint(0, VOCAB, size=(args.steps * BATCH, SEQ)).astype(np.int64)
    np.save(w('idx.npy'), idx)
    np.save(w('targets.npy'), np.roll(idx, -1, axis=1))
    json.dump({'train_batch_size': BATCH, 'train_micro_batch_size_per_gpu': 1,
               'optimizer': {'type': 'AdamW', 'params': {'lr': 1e-4}},
               'steps_per_print': 1000}, open(w('base.json'), 'w'))

    probe = subprocess.run(MPIRUN + [b('ds-run'), '--probe-bandwidth', work, '--cluster-out',
                                     w('cluster.json')], capture_output=True, text=True)
    if probe.returncode:
        sys.exit('ds-run --probe-bandwidth failed:\n' + probe.stderr)
    cluster = json.load(open(w('cluster.json')))
    print('cluster (%s): fp32 %.1f GFLOP/s per rank, memory %.1f GB/s, link %.2f GB/s and %.1f us'
          % (cluster['name'], cluster['peak_flops']['fp32'] / 1e9,
             cluster['memory_bandwidth_bytes_per_s'] / 1e9,
             cluster['intra_node_bandwidth_bytes_per_s'] / 1e9,
             cluster['intra_node_latency_s'] * 1e6))
    plan = subprocess.run([b('ds-opt'), w('gpt.pt'), '--input', 'idx=tensor<1x%dxi64>' % SEQ,
                           '--input', 'targets=tensor<1x%dxi64>' % SEQ, '--config',
                           w('base.json'), '--plan', '--cluster', w('cluster.json'),
                           '--device-memory', str(args.device_memory), '--plan-out',
                           w('plan.json'), '--plan-json', w('candidates.json'),
                           '--plan-rows', '5', '--plan-keep', '0'],  # every layout measured
                          capture_output=True, text=True)
    if plan.returncode:
        sys.exit('ds-opt --plan failed:\n' + plan.stderr)
    print(plan.stdout.splitlines()[0])
    cands = json.load(open(w('candidates.json')))['candidates']
    fitting = [c for c in cands if c['fits']]
    if args.limit:
        fitting = fitting[:args.limit]
    print('measuring %d layouts (the planner\'s fitting ones), %d steps each, median of steps '
          '%d..%d, --device-memory %d on every rank' % (len(fitting), args.steps, WARM + 1,
                                                        args.steps, args.device_memory))
    print('%-4s %-30s %4s %5s %3s %11s %11s %5s %8s %8s %7s %8s' % (
        'plan', 'layout', 'zero', 'micro', 'gas', 'peak plan', 'measured', 'equal',
        'step pred', 'measured', 'error', 'RSS MiB'))
    rows = []
    for i, c in enumerate(fitting):
        m = measure(b, w, i, c, args.steps, args.device_memory)
        if isinstance(m, str):
            print('%-4d %-30s %4d %5d %3d FAILED: %s' % (c['rank'], layout(c), c['zero_stage'],
                                                        c['micro_batch'],
                                                        c['gradient_accumulation_steps'], m))
            rows.append((c, None))
            continue
        s, peak, rss = m
        err = (c['step_s'] - s) / s
        print('%-4d %-30s %4d %5d %3d %11d %11d %5s %8.3f %8.3f %+6.1f%% %8.0f' % (
            c['rank'], layout(c), c['zero_stage'], c['micro_batch'],
            c['gradient_accumulation_steps'], c['peak_bytes'], peak,
            'yes' if peak == c['peak_bytes'] else 'NO', c['step_s'], s, 100 * err,
            rss / 2**20), flush=True)
        rows.append((c, m))
    ok = [(c, m) for c, m in rows if m is not None]
    failed = len(rows) - len(ok)
    if not ok:
        sys.exit('no layout ran')
    best = min(ok, key=lambda r: r[1][0])
    first = rows[0]
    errs = sorted(100 * (c['step_s'] - m[0]) / m[0] for c, m in ok)
    q = lambda f: errs[min(len(errs) - 1, int(f * (len(errs) - 1) + 0.5))]
    print('\nfirst choice %s ZeRO %d micro %d: measured %s s; best measured %s ZeRO %d micro %d: '
          '%.3f s; first/best = %s' % (
              layout(first[0]), first[0]['zero_stage'], first[0]['micro_batch'],
              '%.3f' % first[1][0] if first[1] else 'FAILED', layout(best[0]),
              best[0]['zero_stage'], best[0]['micro_batch'], best[1][0],
              '%.3f' % (first[1][0] / best[1][0]) if first[1] else 'n/a'))
    print('step-time error (predicted - measured) / measured over %d layouts: min %+.1f%%, '
          'p10 %+.1f%%, median %+.1f%%, p90 %+.1f%%, max %+.1f%%; within +-25%%: %d' % (
              len(errs), errs[0], q(0.1), q(0.5), q(0.9), errs[-1],
              sum(abs(e) <= 25 for e in errs)))
    same = sum(m[1] == c['peak_bytes'] for c, m in ok)
    print('predicted peak = measured arena peak: %d of %d; layouts the planner called fitting '
          'that failed: %d' % (same, len(ok), failed))
    pred = [c['step_s'] for c, _ in ok]
    meas = [m[0] for _, m in ok]
    rank = lambda v: {x: i for i, x in enumerate(sorted(range(len(v)), key=lambda k: v[k]))}
    rp, rm = rank(pred), rank(meas)
    n = len(ok)
    rho = 1 - 6 * sum((rp[i] - rm[i]) ** 2 for i in range(n)) / (n * (n * n - 1)) if n > 1 else 1
    print('rank correlation (Spearman) of predicted and measured step times: %.2f' % rho)
    estimators(b, w, args.steps)


if __name__ == '__main__':
    main()

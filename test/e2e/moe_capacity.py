#!/usr/bin/env python3
"""Capacity-based token dropping judged by DeepSpeed's own gate: ds trains HF's Mixtral
(batched_mm export) with the config's `moe` block (capacity_factor, min_capacity,
drop_tokens), and a plain PyTorch loop (torch_loop.py) trains the same model whose routers
zero the pairs that deepspeed.moe.sharded_moe.top2gating drops on the router's logits
(make_models2.py hfmixtraldrop). Losses per step within --loss-rtol; the same loop on the
dropless model shows how far dropping moves the losses (a run that ignored the drop fails).

  moe_capacity.py --bin BUILD/bin --work DIR [--ranks N --ep N --zero JSON] [--steps 20]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'models'))
from train_compare import MODELS, MPIRUN, run, write_data  # noqa: E402
from make_models2 import MIXTRAL_DROP  # noqa: E402


def first_drops(work, data):
    """How many of each layer's routed rows DeepSpeed's gate drops in rank 0's first
    micro-batch, in eager PyTorch (make_models2's Mixtral, DeepSpeed's top2gating on the
    router's logits), and whether its choices are the router's."""
    import torch
    from deepspeed.moe.sharded_moe import top2gating
    import make_models2
    paths = dict(data[i + 1].split('=', 1) for i in range(0, len(data), 2))
    torch.manual_seed(0)
    model = make_models2.make_hf_mixtral('batched_mm').train()
    seen = []
    for layer in model.model.model.layers:
        def count(module, args, out):
            logits, _, indices = out
            routes = top2gating(logits.detach().float().clone(),
                                MIXTRAL_DROP['capacity_factor'], MIXTRAL_DROP['min_capacity'],
                                drop_tokens=True, top2_2nd_expert_sampling=False,
                                sparse_routes=True)[3].t().long()
            kept = routes >= 0
            seen.append(((~kept).sum().item(), routes.numel(),
                         torch.equal(routes[kept], indices[kept])))
        layer.mlp.gate.register_forward_hook(count)
    mb = int(open(os.path.join(work, 'hfmixtral.inputs')).readline().split('<')[1].split('x')[0])
    with torch.no_grad():
        model(*[torch.from_numpy(np.load(paths[n])[:mb]) for n in ('input_ids', 'labels')])
    return seen


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--work', required=True)
    ap.add_argument('--steps', type=int, default=20)
    ap.add_argument('--ranks', type=int, default=1)
    ap.add_argument('--ep', type=int, default=1)
    ap.add_argument('--zero', default='')
    ap.add_argument('--gas', type=int, default=2)
    ap.add_argument('--loss-rtol', type=float, default=1e-5)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    w = lambda f: os.path.join(args.work, f)
    b = lambda t: os.path.join(args.bin, t)
    python = os.environ.get('DS_TORCH_LOOP_PYTHON', sys.executable)

    subprocess.run([sys.executable, os.path.join(MODELS, 'make_models2.py'), args.work,
                    'hfmixtral:export', 'hfmixtraldrop:export'], check=True,
                   stdout=subprocess.DEVNULL)
    specs = [l.strip().split('=', 1) for l in open(w('hfmixtral.inputs')) if l.strip()]
    mb = int(specs[0][1][len('tensor<'):].split('x')[0])
    G = mb * args.gas * args.ranks
    data = write_data(specs, 'hfmixtral', args.steps * G, args.work, np.random.RandomState(0))

    cfg = {'train_batch_size': G, 'train_micro_batch_size_per_gpu': mb,
           'gradient_accumulation_steps': args.gas,
           'optimizer': {'type': 'AdamW', 'params': {'lr': 2e-3, 'weight_decay': 0.01}},
           'steps_per_print': args.steps,
           'moe': dict(MIXTRAL_DROP, drop_tokens=True)}
    if args.ep > 1:
        cfg['expert_parallel'] = {'enabled': True, 'autoep_size': args.ep}
    if args.zero:
        cfg['zero_optimization'] = json.loads(args.zero)
    json.dump(cfg, open(w('ds_config.json'), 'w'))

    run([b('ds-opt'), w('hfmixtral_export.pt2')] +
        sum([['--input', '%s=%s' % (n, t)] for n, t in specs], []) +
        ['--config', w('ds_config.json'), '-o', w('step.mlir')], w('ds-opt.log'))
    for line in open(w('ds-opt.log')):
        if 'token dropping' in line or 'experts takes at most' in line:
            print(line.rstrip())
    launch = MPIRUN + ['-np', str(args.ranks)] if args.ranks > 1 else []
    run(launch + [b('ds-run'), w('step.mlir'), '--steps', str(args.steps), '--threads', '1',
                  '--log', w('ds.jsonl')] + data, w('ds-run.log'))
    ds = [json.loads(l)['loss'] for l in open(w('ds.jsonl'))]

    def torch_loop(model, out):
        run([python, '-W', 'ignore', os.path.join(HERE, 'torch_loop.py'), '--model', w(model),
             '--config', w('ds_config.json'), '--steps', str(args.steps), '--out', w(out),
             '--inputs', ','.join(n for n, _ in specs)] + data, w(out + '.log'))
        return [json.loads(l)['loss'] for l in open(w(out))]

    drops = first_drops(args.work, data)
    print('DeepSpeed\'s gate drops %s of each layer\'s %d routed rows in the first micro-batch; '
          'its choices are the router\'s: %s' % (' and '.join(str(d) for d, _, _ in drops),
                                                 drops[0][1], all(s for _, _, s in drops)))
    judge = torch_loop('hfmixtraldrop_export.pt2', 'dropped.jsonl')
    dropless = torch_loop('hfmixtral_export.pt2', 'dropless.jsonl')
    print('step  ds loss       DeepSpeed gate  rel diff   dropless      rel diff')
    worst = moved = 0.0
    for s, (a, j, d) in enumerate(zip(ds, judge, dropless), 1):
        rel, away = abs(a - j) / abs(j), abs(d - j) / abs(j)
        worst, moved = max(worst, rel), max(moved, away)
        print('%4d  %.9f  %.9f  %.2e   %.9f  %.2e' % (s, a, j, rel, d, away))
    ok = len(ds) == len(judge) == args.steps and worst <= args.loss_rtol and \
        all(d > 0 and s for d, _, s in drops)
    print('%d steps against PyTorch with DeepSpeed\'s gate: worst loss rel diff %.2e -> %s' %
          (args.steps, worst, 'PASS' if ok else 'FAIL'))
    far = moved > 100 * args.loss_rtol
    print('dropping moves the losses up to %.2e from the dropless run (more than 100x the '
          'tolerance: %s)' % (moved, 'PASS' if far else 'FAIL'))
    sys.exit(0 if ok and far else 1)


if __name__ == '__main__':
    main()

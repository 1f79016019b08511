#!/usr/bin/python3
"""Resharding: a ZeRO run saved at 4 ranks resumes at 2 ranks (and in another stage) with the
same global batch, and its losses match the uninterrupted 4-rank run within 1e-5. The fp32
export (--save-weights) of the resumed run loads into the TorchScript module with
load_state_dict: every state_dict name and shape.

With --check-shards, the saved checkpoint is checked as well: one rank file per rank, each
holding no more than that rank's own model state and all of them together the model state
exactly once; every rank's save_host_peak_bytes and resume_host_peak_bytes within its own
model state plus the transfer buffer (DSRT_CHECKPOINT_BUFFER_BYTES); and `ds-checkpoint
export` of it equal, tensor for tensor, to the saving run's --save-weights, and loadable into
the TorchScript module.

With --save-tp/--save-sp/--save-pp and --resume-tp/--resume-sp/--resume-pp the layouts are
meshes: a checkpoint saved with tensor parallelism holds each split tensor's parts, and one
saved with pipeline parallelism each stage's tensors written by that stage's ranks, which any
other mesh reads.

usage: reshard.py --bin BUILD/bin --work DIR [--save-stage 1] [--resume-stage 2]
                  [--save-tp 2] [--resume-tp 1] [--resume-ranks 4]
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from train_compare import model_path, read_safetensors, run  # noqa: E402

MODELS = os.path.join(HERE, '..', 'models')
MPIRUN = ['mpirun', '--allow-run-as-root', '--oversubscribe']


def check_shards(args, w, b, ck, pt, buffer_bytes):
    """The checkpoint the 4-rank run saved: its files, their sizes, the save's host memory,
    and ds-checkpoint's export."""
    ok = True
    tag = open(os.path.join(ck, 'latest')).read().strip()
    where = os.path.join(ck, tag)
    names = sorted(os.listdir(where))
    want = ['checkpoint.json'] + ['rank-%05d-of-00004.safetensors' % r for r in range(4)]
    print('checkpoint %s: %s' % (tag, ' '.join(names)))
    ok = ok and names == want
    index = json.load(open(os.path.join(where, 'checkpoint.json')))
    size = lambda t: int(np.prod(t['dims'])) * {'f32': 4, 'bf16': 2, 'f16': 2, 'f64': 8,
                                                'i64': 8, 'i1': 1}[t['dtype']]
    logical = sum(size(t) for t in index['tensors'])
    # Buffers (the causal masks) are replicated: written once, a part by each rank.
    buffers = sum(size(t) for t in index['tensors'] if t['kind'] == 'buffer')
    saved = [json.loads(l) for l in open(w('first.jsonl'))][-1]['ranks']
    sizes = []
    for r in range(4):
        data = read_safetensors(os.path.join(where, 'rank-%05d-of-00004.safetensors' % r))
        sizes.append(sum(a.nbytes for a in data.values()))
    own = [k['parameter_bytes'] + k['optimizer_state_bytes'] for k in saved]
    print('rank files hold %s bytes; each rank holds %s bytes of parameters and optimizer '
          'state and a part of %d bytes of buffers; the model state once is %d bytes' %
          (sizes, own, buffers, logical))
    ok = ok and all(s <= o + buffers for s, o in zip(sizes, own)) and sum(sizes) == logical
    peaks = [(k['save_host_peak_bytes'], k['model_state_bytes']) for k in saved]
    within = all(p <= m + buffer_bytes for p, m in peaks)
    print('save_host_peak_bytes %s, each within its model state + the %d-byte buffer: %s' %
          (' '.join('%d' % p for p, _ in peaks), buffer_bytes, within))
    ok = ok and within
    # ds-checkpoint export: the saving run's own --save-weights, tensor for tensor.
    run([b('ds-checkpoint'), 'export', ck, '-o', w('offline.safetensors')], w('offline.log'))
    offline = read_safetensors(w('offline.safetensors'))
    direct = read_safetensors(w('first.safetensors'))
    same = sorted(offline) == sorted(direct) and all(
        np.array_equal(offline[k], direct[k]) for k in direct)
    sd = torch.jit.load(pt).state_dict()
    loadable = sorted(sd) == sorted(offline) and all(
        tuple(offline[k].shape) == tuple(sd[k].shape) for k in sd)
    if loadable:
        for k, v in sd.items():
            v.copy_(torch.from_numpy(np.array(offline[k])))
    print('ds-checkpoint export: %d tensors, equal to --save-weights: %s, loads into the '
          'TorchScript module: %s' % (len(offline), same, loadable))
    return ok and same and loadable


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--work', required=True)
    ap.add_argument('--save-stage', type=int, default=1)
    ap.add_argument('--resume-stage', type=int, default=2)
    ap.add_argument('--steps', type=int, default=12)
    ap.add_argument('--resume-ranks', type=int, default=2)
    ap.add_argument('--lr', type=float, default=1e-4)
    for when in ('save', 'resume'):
        ap.add_argument('--%s-tp' % when, type=int, default=1, help='tensor_parallel.autotp_size')
        ap.add_argument('--%s-sp' % when, type=int, default=1, help='sequence_parallel_size')
        ap.add_argument('--%s-pp' % when, type=int, default=1, help='pipeline.stages')
    ap.add_argument('--precision', default='', help='a DeepSpeed bf16 or fp16 section as '
                    'JSON, e.g. {"fp16": {"enabled": true}}')
    ap.add_argument('--loss-rtol', type=float, default=1e-5,
                    help='0 demands the very same losses')
    ap.add_argument('--family', default='gpt', help='gpt or gpt-wide (800K parameters)')
    ap.add_argument('--check-shards', action='store_true')
    for when in ('save', 'resume'):
        ap.add_argument('--%s-zero' % when, default='{}',
                        help='more zero_optimization keys as JSON (offload_optimizer, ...)')
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    w = lambda f: os.path.join(args.work, f)
    b = lambda t: os.path.join(args.bin, t)
    args.kind = 'script'
    pt, _ = model_path(args)
    buffer_bytes = 65536
    env = dict(os.environ, DSRT_CHECKPOINT_BUFFER_BYTES=str(buffer_bytes))
    mb, seq, vocab = 4, 16, 64
    G = 32  # 4 ranks x 2 accumulation steps, or 2 ranks x 4
    rng = np.random.RandomState(0)
    idx = rng.randint(0, vocab, size=(args.steps * G, seq)).astype(np.int64)
    np.save(w('idx.npy'), idx)
    np.save(w('targets.npy'), np.roll(idx, -1, axis=1))
    data = ['--data', 'idx=' + w('idx.npy'), '--data', 'targets=' + w('targets.npy'),
            '--threads', '1']
    steps = {}
    meshes = {}
    for role, ranks, stage, tp, sp, pp in (
            ('save', 4, args.save_stage, args.save_tp, args.save_sp, args.save_pp),
            ('resume', args.resume_ranks, args.resume_stage, args.resume_tp, args.resume_sp,
             args.resume_pp)):
        dp = ranks // (tp * sp * pp)
        meshes[role] = ' x '.join('%s=%d' % a for a in (('pp', pp), ('dp', dp), ('sp', sp),
                                                        ('tp', tp))
                                          if a[0] == 'dp' or a[1] > 1)
        cfg = {'train_batch_size': G, 'train_micro_batch_size_per_gpu': mb,
               'gradient_accumulation_steps': G // (mb * dp),
               'optimizer': {'type': 'AdamW', 'params': {'lr': args.lr, 'weight_decay': 0.01}},
               'zero_optimization': {'stage': stage, 'reduce_bucket_size': 5000,
                                     'stage3_param_persistence_threshold': 0},
               'steps_per_print': 1000}
        cfg['zero_optimization'].update(json.loads(getattr(args, role + '_zero')))
        cfg.update(json.loads(args.precision) if args.precision else {})
        if tp > 1:
            cfg['tensor_parallel'] = {'autotp_size': tp}
        if sp > 1:
            cfg['sequence_parallel_size'] = sp
        if pp > 1:
            cfg['pipeline'] = {'stages': pp}
        json.dump(cfg, open(w('cfg-%s.json' % role), 'w'))
        step = w('step-%s.mlir' % role)
        run([b('ds-opt'), pt, '--input', 'idx=tensor<%dx%dxi64>' % (mb, seq), '--input',
             'targets=tensor<%dx%dxi64>' % (mb, seq), '--config', w('cfg-%s.json' % role), '-o',
             step], w('ds-opt-%s.log' % role))
        steps[role] = step
    half = args.steps // 2
    ck = w('ckpt')
    shutil.rmtree(ck, ignore_errors=True)  # no checkpoint of an earlier run of this test
    first, second = steps['save'], steps['resume']
    run(MPIRUN + ['-np', '4', b('ds-run'), first] + data +
        ['--steps', str(args.steps), '--log', w('full.jsonl')], w('full.log'))
    run(MPIRUN + ['-np', '4', b('ds-run'), first] + data + ['--steps', str(half), '--save', ck,
                                                             '--log', w('first.jsonl'),
                                                             '--save-weights',
                                                             w('first.safetensors')],
        w('first.log'), env)
    shards_ok = check_shards(args, w, b, ck, pt, buffer_bytes) if args.check_shards else True
    run(MPIRUN + ['-np', str(args.resume_ranks), b('ds-run'), second] + data +
        ['--steps', str(args.steps), '--resume', ck, '--log', w('resumed.jsonl'),
         '--save-weights', w('export.safetensors')], w('resumed.log'), env)

    full = [json.loads(l) for l in open(w('full.jsonl'))][half:]
    resumed = [json.loads(l) for l in open(w('resumed.jsonl'))]
    ok = len(full) == len(resumed) == args.steps - half and shards_ok
    if args.check_shards:
        peaks = [(r['rank'], r['resume_host_peak_bytes'], r['model_state_bytes'])
                 for r in resumed[0]['ranks']]
        within = all(p <= m + buffer_bytes for _, p, m in peaks)
        print('resume at %d ranks: resume_host_peak_bytes %s, each within its model state + '
              'the %d-byte buffer: %s' % (args.resume_ranks, ' '.join('%d' % p for _, p, _ in peaks),
                                          buffer_bytes, within))
        ok = ok and within and all('resume_host_peak_bytes' not in r['ranks'][0]
                                   for r in resumed[1:])
    worst = 0.0
    for a, r in zip(full, resumed):
        rel = abs(a['loss'] - r['loss']) / abs(a['loss'])
        worst = max(worst, rel)
        ok = ok and a['step'] == r['step'] and rel <= args.loss_rtol
        if 'loss_scale' in a:  # fp16: the scaler's progress is part of the checkpoint
            ok = ok and (a['loss_scale'], a['skipped']) == (r['loss_scale'], r['skipped'])
    print('saved at 4 ranks (stage %d) after step %d, resumed at %d ranks (stage %d): steps '
          '%d..%d, worst loss rel diff %.2e against the uninterrupted 4-rank run' %
          (args.save_stage, half, args.resume_ranks, args.resume_stage, half + 1, args.steps,
           worst))
    print('meshes: %s -> %s' % (meshes['save'], meshes['resume']))
    if 'loss_scale' in full[0]:
        print('fp16 loss scales after the resume: %s (%d skipped), as uninterrupted: %s' %
              (' '.join('%d' % r['loss_scale'] for r in resumed),
               sum(r['skipped'] for r in resumed),
               all((a['loss_scale'], a['skipped']) == (r['loss_scale'], r['skipped'])
                   for a, r in zip(full, resumed))))

    # The fp32 export: the module's state_dict names and shapes, loadable as they are.
    module = torch.jit.load(pt)
    sd = module.state_dict()
    export = read_safetensors(w('export.safetensors'))
    missing = sorted(set(sd) - set(export))
    shapes = [k for k in sd if k in export and tuple(export[k].shape) != tuple(sd[k].shape)]
    if not missing and not shapes:
        for k, v in sd.items():
            v.copy_(torch.from_numpy(np.array(export[k])))
    print('export: %d of %d state_dict tensors, %d missing, %d of another shape -> %s' %
          (len(set(sd) & set(export)), len(sd), len(missing), len(shapes),
           'loaded' if not missing and not shapes else 'NOT LOADABLE'))
    ok = ok and not missing and not shapes
    print('-> PASS' if ok else '-> FAIL')
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()

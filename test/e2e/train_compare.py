#!/usr/bin/python3
"""Trains one model with ds (ds-opt --config, ds-run) and with ds-reference (LibTorch eager) on
the same data and config, and checks that they agree: per-step losses within --loss-rtol
relative, and after the last step every parameter p with ||p - p_ref|| <= --param-rtol ||p_ref||.

  train_compare.py --family gpt --kind script --bin BUILD/bin --work DIR [--steps 20] ...
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

from torch_loop import deepspeed_lr, load_module  # the oracle's schedules and its loader

HERE = os.path.dirname(os.path.abspath(__file__))
# How the tests launch ranks (as root in the CI's containers, more ranks than cores).
MPIRUN = ['mpirun', '--allow-run-as-root', '--oversubscribe']
MODELS = os.path.join(HERE, '..', 'models')

# Integer inputs are class indices: their exclusive upper bound per family.
CLASSES = {'mlp': 4, 'gpt': 64, 'gpt-wide': 64, 'gpt-d512': 1024, 'lm': 64, 'lm-nodrop': 64,
           'vit': 10, 'resnet18': 10, 'gpt2x': 64, 'gpt2xgqa': 64, 'lm2x': 64, 'ops2x': 64,
           'bn2x': 4,
           'hfgpt2': 64, 'hfllama': 64, 'hfllamaeager': 64, 'hfbert': 64, 'hfllamapad': 64,
           'hfqwen2pad': 64,
           'hfmistralpad': 64, 'hfphi3pad': 64, 'hfoptpad': 64, 'hfbertpad': 64,
           'hfberttypes': 64, 'hfllamapos': 64, 'hfllamalong': 64, 'hfgemma2pad': 64, 'hfmixtral': 64,
           'hfmixtralg': 64, 'hfqwenmoe': 64, 'hfqwenmoeg': 64, 'hfolmoe': 64,
           'hfqwen3moe': 64}
# Families fed padded batches (input_ids, attention_mask, labels), as HF's data collators make
# them: -100 labels on the padding, to lengths from half the window up. Left padding: with
# right padding a causal model's real tokens never see the padding, and a mask ignored would
# not show.
PADDED_FAMILIES = ('hfllamapad', 'hfqwen2pad', 'hfmistralpad', 'hfphi3pad', 'hfoptpad',
                   'hfbertpad', 'hfberttypes', 'hfllamapos', 'hfllamalong', 'hfgemma2pad')
# Families exported by PyTorch 2.x (test/models/make_models2.py; run this script with .venv's
# python, whose torch also judges step 1).
TORCH2_FAMILIES = ('gpt2x', 'gpt2xgqa', 'lm2x', 'ops2x', 'bn2x', 'hfgpt2', 'hfllama',
                   'hfllamaeager', 'hfbert', 'hfmixtral', 'hfmixtralg', 'hfqwenmoe',
                   'hfqwenmoeg', 'hfolmoe', 'hfqwen3moe') + PADDED_FAMILIES

_ST_DTYPES = {'F32': np.float32, 'F64': np.float64, 'I64': np.int64, 'I32': np.int32,
              'BOOL': np.bool_, 'F16': np.float16, 'BF16': np.uint16}


def read_safetensors(path):
    with open(path, 'rb') as f:
        n = int.from_bytes(f.read(8), 'little')
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k == '__metadata__':
            continue
        a, b = v['data_offsets']
        arr = np.frombuffer(data[a:b], dtype=_ST_DTYPES[v['dtype']]).reshape(v['shape'])
        if v['dtype'] == 'BF16':  # the upper half of an f32
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        out[k] = arr
    return out


def zero_model_state(psi, stage, n, shard, mixed=False, moments=2):
    """DeepSpeed's per-rank model state with Adam as (parameter, gradient, optimizer) bytes,
    with `shard` the elements a rank owns (P/N rounded up to the alignment, so that the flat
    buffers hold n * shard). fp32: stage 0 16P, stage 1 8P + 8P/N, stage 2 4P + 12P/N, stage 3
    16P/N. Mixed precision (16-bit parameters and gradients; fp32 masters and moments, 12 bytes
    of optimizer state): stage 0 16P, stage 1 4P + 12P/N, stage 2 2P + 14P/N, stage 3 16P/N."""
    k = 2 if mixed else 4  # bytes of a parameter or gradient element
    # Bytes of optimizer state per element: 4 per moment (Adam 2, SGD with momentum 1, plain
    # SGD 0), and the fp32 master in mixed precision.
    o = 4 * moments + (4 if mixed else 0)
    if n == 1 or stage == 0:
        return k * psi, k * psi, o * psi
    if stage == 1:
        return k * n * shard, k * n * shard, o * shard
    if stage == 2:
        return k * n * shard, k * shard, o * shard
    if stage == 3:  # every parameter partitioned (a persistence threshold of 0)
        return k * shard, k * shard, o * shard
    raise ValueError('stage %d' % stage)


def check_memory(args, cfg, w, b, ds_log):
    """Every rank's model-state bytes equal the ZeRO formula, and the compiler's planned peak
    is within 5% of the measured device peak of every rank."""
    import re
    psi = 0
    for line in open(w('step.mlir')):
        m = re.match(r'\s*ds.parameter @\S+ trainable : tensor<([0-9x]+)x?b?f(?:32|16)>', line)
        if m:
            psi += int(np.prod([int(d) for d in m.group(1).split('x') if d]))
    stage = cfg.get('zero_optimization', {}).get('stage', 0)
    # The shard: each flat parameter buffer (one; stage 2 one per gradient bucket) is padded to
    # a multiple of N x 64 bytes (16 f32 or 32 bf16 elements), so a rank owns P/N plus at most
    # that per buffer.
    mixed = bool(args.precision)
    # ZeRO partitions over the ranks that hold replicas of the parameters: dp x sp.
    n = args.ranks * args.sp
    align = 32 if mixed else 16
    flats = [int(m.group(1)) for m in re.finditer(
        r'ds.flat_buffer @zero.params\S* role params(?:_sharded)? .* : tensor<(\d+)xb?f(?:32|16)>',
        open(w('step.mlir')).read())]
    shard = sum(flats) // n if flats else -(-psi // n)
    ok = True
    if flats and not (psi / n <= shard <= psi / n + align * len(flats)):
        print('shard of %d elements is not P/N = %.1f plus at most %d per buffer (%d buffers)'
              % (shard, psi / n, align, len(flats)))
        ok = False
    opt = cfg['optimizer']
    moments = 2 if opt['type'] != 'SGD' else 1 if opt['params'].get('momentum', 0) else 0
    want_parts = zero_model_state(psi, stage, n, shard, mixed, moments)
    want = sum(want_parts)
    lowered = subprocess.run([b('ds-opt'), w('step.mlir'), '--ds-lower-to-runtime'],
                             capture_output=True, text=True).stdout
    plan = int(re.search(r'\\22peak_bytes\\22:(\d+)', lowered).group(1))
    for rec in ds_log:
        for r in rec['ranks']:
            got = (r['parameter_bytes'], r['gradient_bytes'], r['optimizer_state_bytes'])
            if r['model_state_bytes'] != want or got != want_parts:
                print('step %d rank %d: model state %d bytes %s, ZeRO formula %d %s' %
                      (rec['step'], r['rank'], r['model_state_bytes'], got, want, want_parts))
                ok = False
            if abs(plan - r['device_peak_bytes']) > 0.05 * r['device_peak_bytes']:
                print('step %d rank %d: planned peak %d bytes, measured %d' %
                      (rec['step'], r['rank'], plan, r['device_peak_bytes']))
                ok = False
    # The compiler's report (ds-opt --memory-report) names the same bytes per category.
    report = subprocess.run([b('ds-opt'), w('step.mlir'), '--memory-report', '-o', os.devnull],
                            capture_output=True, text=True).stdout.splitlines()
    row = [int(v) for v in report[2].split()[1:4]]
    if row != list(want_parts):
        print('memory report: parameters, gradients, optimizer %s, formula %s' % (row, want_parts))
        ok = False
    if stage == 3:
        ok = check_gathered(cfg, w, report, mixed) and ok
    r = ds_log[-1]['ranks'][0]
    print('memory: psi %d, stage %d, %d partitions: model state %d bytes per rank (parameters %d, '
          'gradients %d, optimizer %d; formula %d), planned peak %d, measured %d -> %s'
          % (psi, stage, n, r['model_state_bytes'], r['parameter_bytes'],
             r['gradient_bytes'], r['optimizer_state_bytes'], want, plan, r['device_peak_bytes'],
             'PASS' if ok else 'FAIL'))
    return ok


def lowered_plan(b, mlir):
    """The compiler's plan: the lowered program's metadata."""
    import re
    out = subprocess.run([b('ds-opt'), mlir, '--ds-lower-to-runtime'], capture_output=True,
                         text=True, check=True).stdout
    m = re.search(r'__ds_metadata\("(.*)\\00"\)', out)
    # MLIR's string escapes: \\ for a backslash, \XX (hex) for other bytes.
    text = re.sub(r'\\(\\|[0-9A-Fa-f]{2})',
                  lambda e: '\\' if e.group(1) == '\\' else chr(int(e.group(1), 16)), m.group(1))
    return json.loads(text)['plan']


def check_offload(w, b, ds_log, cfg):
    """ZeRO-Offload: every rank's bytes moved per tier in every step, and its host-space, NVMe
    and device peaks, equal the compiler's plan; the NVMe directory holds no swap file."""
    plan = lowered_plan(b, w('step.mlir'))
    want = {'moved': plan['moved_bytes_per_step'], 'host': plan['host_peak_bytes'],
            'nvme': plan['nvme_bytes'], 'device': plan['peak_bytes']}
    ok = True
    for rec in ds_log:
        for k in rec['ranks']:
            got = {'moved': k['moved_bytes'], 'host': k['host_space_peak_bytes'],
                   'nvme': k['nvme_peak_bytes'], 'device': k['device_peak_bytes']}
            if got != want:
                print('step %d rank %d: measured %s, planned %s' % (rec['step'], k['rank'], got,
                                                                    want))
                ok = False
    dirs = {o.get('nvme_path') for o in cfg.get('zero_optimization', {}).values()
            if isinstance(o, dict) and o.get('nvme_path')}
    if dirs:
        ok = check_nvme_io(ds_log) and ok
    left = [f for d in dirs for f in os.listdir(d)]
    if left:
        print('swap files left behind: %s' % left)
        ok = False
    print('offload: planned %s; measured the same on every rank and step, no swap file left: '
          '%s' % (want, 'PASS' if ok else 'FAIL'))
    return ok


def check_gathered(cfg, w, report, mixed):
    """ZeRO-3 keeps few parameters gathered: at the planned peak (which the measured one
    equals), the gathered buckets and the gradient bucket in flight hold at most what
    DeepSpeed's settings allow, by a formula that does not come from the compiler: the bucket
    in use and those prefetched within stage3_prefetch_bucket_size elements (capped by
    stage3_max_live_parameters), plus one gradient bucket being reduce-scattered. A bucket
    kept gathered longer than its last use (or into the backward past stage3_max_reuse_distance)
    exceeds it."""
    import re
    z = cfg['zero_optimization']
    if z.get('stage3_max_reuse_distance', 1000000000) != 0:
        print('ZeRO-3 gathered at the peak: not bounded (stage3_max_reuse_distance > 0 lets '
              'a bucket stay gathered from the forward into the backward)')
        return True
    es = 2 if mixed else 4
    buckets = [int(m.group(1)) for m in re.finditer(
        r'ds.flat_buffer @zero.params\S* role params_sharded .* : tensor<(\d+)xb?f(?:32|16)>',
        open(w('step.mlir')).read())]
    largest = max(buckets)
    live = min(largest + z.get('stage3_prefetch_bucket_size', 50000000),
               max(largest, z.get('stage3_max_live_parameters', 1000000000)))
    bound = es * (live + largest)
    header = report[1].split()
    held = int(report[2].split()[header.index('communication')])
    ok = held <= bound
    print('ZeRO-3 gathered at the peak: %d bytes; at most %d (the largest bucket %d elements '
          'and %d prefetched or live, one gradient bucket) -> %s' % (
              held, bound, largest, live - largest, 'PASS' if ok else 'FAIL'))
    return ok


def check_nvme_io(ds_log):
    """The swap file's bytes reached the disk: every rank used io_uring with O_DIRECT (the
    nvme_path is on a disk-backed file system here), and in every step the kernel's count of
    the process's block I/O (/proc/self/io) holds the bytes moved to and from NVMe: at least
    them, at most twice them plus 1 MiB of other I/O (requests are rounded up to 4 KiB). Reads
    from step 2: step 1 reads slots never written (the file is reserved, not written, so the
    file system returns their zeros without reading the disk)."""
    ok = True
    seen = []
    for rec in ds_log:
        for k in rec['ranks']:
            moved = k['moved_bytes']
            engine = k.get('nvme_engine')
            pairs = (('write', moved['host_to_nvme'], k.get('disk_write_bytes', -1)),
                     ('read', moved['nvme_to_host'], k.get('disk_read_bytes', -1)))
            for what, want, got in pairs:
                if what == 'read' and rec['step'] == 1:
                    continue
                seen.append((what, want, got))
                if not want <= got <= 2 * want + (1 << 20):
                    print('step %d rank %d: %d bytes moved to %s NVMe, the kernel counts %d'
                          % (rec['step'], k['rank'], want, what, got))
                    ok = False
            if engine != 'io_uring+O_DIRECT':
                print('step %d rank %d: the swap file used %s, not io_uring+O_DIRECT' %
                      (rec['step'], k['rank'], engine))
                ok = False
    w = [s for s in seen if s[0] == 'write']
    r = [s for s in seen if s[0] == 'read']
    print('nvme I/O: io_uring+O_DIRECT on every rank; per rank and step %d-%d bytes written '
          '(the kernel counts %d-%d), %d-%d read (%d-%d) -> %s' % (
              min(x[1] for x in w), max(x[1] for x in w), min(x[2] for x in w),
              max(x[2] for x in w), min(x[1] for x in r), max(x[1] for x in r),
              min(x[2] for x in r), max(x[2] for x in r), 'PASS' if ok else 'FAIL'))
    return ok


def check_pipeline_memory(args, w, b, ds_log):
    """A pipeline: each rank's planned peak (its stage's program, in-flight activations
    included) equals its measured device peak, and its logged model state equals the memory
    report's row for it; the first stage holds the most activations."""
    report = subprocess.run([b('ds-opt'), w('step.mlir'), '--memory-report', '-o', os.devnull],
                            capture_output=True, text=True).stdout.splitlines()
    rows = {}
    for line in report[2:]:
        f = line.split()
        if f and f[0].isdigit():
            rows[int(f[0])] = [int(v) for v in f[1:9]]
    ok = True
    for rec in ds_log:
        for r in rec['ranks']:
            row = rows[r['rank']]
            state = (r['parameter_bytes'], r['gradient_bytes'], r['optimizer_state_bytes'])
            if row[6] != r['device_peak_bytes'] or tuple(row[:3]) != state:
                print('step %d rank %d: planned peak %d, measured %d; model state %s, report %s'
                      % (rec['step'], r['rank'], row[6], r['device_peak_bytes'], state,
                         row[:3]))
                ok = False
    per_stage = len(rows) // args.pp
    acts = [rows[s * per_stage][3] for s in range(args.pp)]
    print('pipeline memory: planned = measured peak on every rank %s, activations by stage %s'
          ' -> %s' % ([rows[q][6] for q in sorted(rows)], acts, 'PASS' if ok else 'FAIL'))
    return ok


def deepspeed_loss_scales(fp16, skipped, zero_stage):
    """The loss scale DeepSpeed uses at each step, given which steps overflowed, written from
    DeepSpeed's sources: without ZeRO FP16_Optimizer._update_scale (fused_optimizer.py: every
    overflow halves, clamped at min_loss_scale), with ZeRO DynamicLossScaler.update_scale
    (loss_scaler.py: hysteresis); both double after loss_scale_window stable steps."""
    if fp16.get('loss_scale', 0):
        return [fp16['loss_scale']] * len(skipped)
    scale = 2.0 ** fp16.get('initial_scale_power', 16)
    window = fp16.get('loss_scale_window', 1000)
    shift = fp16.get('hysteresis', 2)
    consecutive = fp16.get('consecutive_hysteresis', False)
    min_scale = fp16.get('min_loss_scale', 1)
    hyst, last_overflow, it = shift, -1, 0
    out = []
    for overflow in skipped:
        out.append(scale)
        if zero_stage == 0:
            if overflow:
                scale = max(scale / 2, min_scale)
                last_overflow = it
            else:
                stable = it - last_overflow - 1
                if stable > 0 and stable % window == 0:
                    scale *= 2
        elif overflow:
            if shift == 1 or hyst == 1:
                scale = max(scale / 2, min_scale)
            else:
                hyst -= 1
            last_overflow = it
        else:
            if consecutive:
                hyst = shift
            stable = it - last_overflow - 1
            if stable > 0 and stable % window == 0:
                if not consecutive:
                    hyst = shift
                scale *= 2
        it += 1
    return out


def parse_type(t):
    # tensor<4x16xi64>
    body = t[len('tensor<'):-1].split('x')
    return [int(d) for d in body[:-1]], body[-1]


TOKEN_FAMILIES = ('gpt', 'gpt-d512', 'gpt-wide', 'lm', 'lm-nodrop', 'gpt2x', 'gpt2xgqa', 'lm2x',
                  'ops2x', 'hfgpt2', 'hfllama', 'hfllamaeager', 'hfbert', 'hfmixtral',
                  'hfmixtralg', 'hfqwenmoe', 'hfqwenmoeg', 'hfolmoe', 'hfqwen3moe')


def markov_tokens(n, vocab, rng, first=None):
    """A token stream a language model can learn: each token is followed by (5 t + 3) mod V
    with probability 0.8, else by one of the next two tokens."""
    out = np.empty(n, dtype=np.int64)
    out[0] = rng.randint(vocab) if first is None else (5 * first + 3) % vocab
    step = rng.choice(3, size=n, p=[0.8, 0.15, 0.05])
    for i in range(1, n):
        out[i] = (5 * out[i - 1] + 3 + step[i]) % vocab
    return out


def spare(rng):
    """The generator of the one spare sample the data carry beyond what the steps read (so that
    a data order off by one reads real data and shows in the losses instead of running off
    the end); separate, so that the samples the steps read do not depend on it."""
    return np.random.RandomState(12345)


def write_data(specs, family, samples, work, rng, learnable=True):
    """.npy data for the inputs `specs` ((name, type) pairs). Learnable (the default): a
    language model's tokens and targets are windows of a Markov chain and the same windows
    shifted by one; a classifier's label is the argmax of a fixed linear map of its input.
    Otherwise random: normal floats, class indices below the family's bound. Returns the
    --data flags."""
    arrays = {}
    extra = spare(rng)
    if len(specs) < 2:
        learnable = False  # a third input of its own (the token file feeds the first two)
    if learnable and family in PADDED_FAMILIES:
        (n0, t0), (nm, _), (nl, _) = specs[:3]
        T = parse_type(t0)[0][1]
        stream = markov_tokens((samples + 1) * T, CLASSES[family], rng)
        ids = stream.reshape(samples + 1, T)
        lengths = rng.randint(T // 2, T + 1, size=(samples + 1, 1))
        mask = (np.arange(T)[None, :] >= T - lengths).astype(np.int64)
        arrays[n0] = np.where(mask == 1, ids, 0).astype(np.int64)  # pad token 0
        arrays[nm] = mask
        arrays[nl] = np.where(mask == 1, ids, -100).astype(np.int64)  # HF shifts inside
        for name, _ in specs[3:]:
            if name == 'token_type_ids':  # sentence B from a random point of the real tokens
                split = T - rng.randint(1, lengths + 1)
                arrays[name] = (mask * (np.arange(T)[None, :] >= split)).astype(np.int64)
            elif name == 'position_ids':  # counted from each sample's first real token
                arrays[name] = np.maximum(np.cumsum(mask, axis=1) - 1, 0).astype(np.int64)
    elif learnable and family in TOKEN_FAMILIES:
        (n0, t0), (n1, _) = specs[0], specs[1]
        T = parse_type(t0)[0][1]
        stream = markov_tokens(samples * T + 1, CLASSES[family], rng)
        stream = np.concatenate([stream, markov_tokens(T, CLASSES[family], extra, stream[-1])])
        arrays[n0] = np.stack([stream[j * T:j * T + T] for j in range(samples + 1)])
        arrays[n1] = np.stack([stream[j * T + 1:j * T + T + 1] for j in range(samples + 1)])
    elif learnable:
        (nx, tx), (ny, _) = specs[0], specs[1]
        dims, _ = parse_type(tx)
        x = rng.randn(*([samples] + dims[1:])).astype(np.float32)
        feature = lambda x: x.reshape(len(x), dims[1], -1).mean(axis=2) if len(dims) > 2 else x
        w = rng.randn(feature(x).shape[1], CLASSES[family])
        x = np.concatenate([x, extra.randn(*([1] + dims[1:])).astype(np.float32)])
        arrays[nx], arrays[ny] = x, np.argmax(feature(x) @ w, axis=1).astype(np.int64)
    flags = []
    for name, t in specs:
        dims, dtype = parse_type(t)
        shape = [samples] + dims[1:]
        arr = arrays.get(name)
        if arr is None and dtype == 'f32':
            arr = np.concatenate([rng.randn(*shape), extra.randn(*([1] + dims[1:]))])
            arr = arr.astype(np.float32)
        elif arr is None:
            arr = np.concatenate([rng.randint(0, CLASSES[family], size=shape),
                                  extra.randint(0, CLASSES[family], size=[1] + dims[1:])])
            arr = arr.astype(np.int64)
        path = os.path.join(work, name + '.npy')
        np.save(path, arr)
        flags += ['--data', '%s=%s' % (name, path)]
    return flags


def run(cmd, log, env=None):
    with open(log, 'w') as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
    if r.returncode != 0:
        sys.stderr.write(open(log).read())
        sys.exit('FAILED (exit %d): %s' % (r.returncode, ' '.join(cmd)))


def python_step1_loss(pt, flags, specs, mb, gas, ranks):
    """Step 1's loss as PyTorch computes it here, from the module and the .npy files in
    `flags`, with the data order written out independently of dsrt::io: rank r's micro-batch
    k of step 1 is samples [(r gas + k) mb, +mb); the mean over the ranks' micro-batches."""
    import torch
    paths = {flags[i + 1].split('=', 1)[0]: flags[i + 1].split('=', 1)[1]
             for i in range(0, len(flags), 2) if flags[i] == '--data'}
    arrays = [np.load(paths[name]) for name, _ in specs]
    module = load_module(pt)  # a .pt2's GraphModule has no train()/eval() modes
    losses = []
    with torch.no_grad():
        for r in range(ranks):
            for k in range(gas):
                first = (r * gas + k) * mb
                out = module(*[torch.from_numpy(a[first:first + mb]) for a in arrays])
                losses.append(float((out[-1] if isinstance(out, tuple) else out).item()))
    return float(np.float32(np.mean(np.array(losses, dtype=np.float64))))


def torch_loop_python():
    """.venv's python, which runs torch_loop.py (DS_TORCH_LOOP_PYTHON)."""
    python = os.environ.get('DS_TORCH_LOOP_PYTHON', '')
    if not python or not os.path.exists(python):
        sys.exit('the independent oracle needs .venv\'s python (DS_TORCH_LOOP_PYTHON=%r, set by '
                 'lit from the build\'s DS_PYTHON_TORCH2): run scripts/setup.sh and reconfigure'
                 % python)
    return python


def torch_loop_losses(args, pt, cfg_path, specs, data_flags):
    """Every step as a plain PyTorch loop in Python trains the file (torch_loop.py, run by
    .venv's PyTorch: it shares no code with ds or with this script), or None with the reason
    it cannot: a module that is random in training mode (dropout)."""
    out = os.path.join(args.work, 'torch_loop.jsonl')
    run([torch_loop_python(), '-W', 'ignore', os.path.join(HERE, 'torch_loop.py'), '--model', pt,
         '--config', cfg_path, '--steps', str(args.steps), '--out', out,
         '--inputs', ','.join(n for n, _ in specs)] + data_flags,
        os.path.join(args.work, 'torch_loop.log'))
    rows = [json.loads(l) for l in open(out)]
    if rows and rows[0].get('random'):
        return None
    return rows


def model_path(args):
    if args.family in TORCH2_FAMILIES:
        name = '%s_%s.%s' % (args.family, args.kind, 'pt2' if 'export' in args.kind else 'pt')
        made = os.path.join(args.work, name)
        if not os.path.exists(made):
            subprocess.run([sys.executable, os.path.join(MODELS, 'make_models2.py'), args.work,
                            '%s:%s' % (args.family, args.kind)], check=True,
                           stdout=subprocess.DEVNULL)
        return made, os.path.join(args.work, args.family + '.inputs')
    name = '%s_%s.pt' % (args.family, args.kind)
    committed = os.path.join(MODELS, name)
    if os.path.exists(committed):
        return committed, os.path.join(MODELS, args.family + '.inputs')
    made = os.path.join(args.work, name)
    if not os.path.exists(made):
        subprocess.run(['/usr/bin/python3', os.path.join(MODELS, 'make_models.py'), args.work,
                        args.family], check=True, stdout=subprocess.DEVNULL)
    return made, os.path.join(args.work, args.family + '.inputs')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--family', required=True)
    ap.add_argument('--kind', default='script')
    ap.add_argument('--bin', required=True)
    ap.add_argument('--work', required=True)
    ap.add_argument('--steps', type=int, default=20)
    ap.add_argument('--lr', type=float, default=2e-3)
    ap.add_argument('--weight-decay', type=float, default=0.01)
    ap.add_argument('--gas', type=int, default=2)
    ap.add_argument('--mb', type=int, default=0, help='micro-batch (default: the .inputs one)')
    ap.add_argument('--clip', type=float, default=0.0)
    ap.add_argument('--loss-rtol', type=float, default=1e-5)
    ap.add_argument('--param-rtol', type=float, default=1e-4)
    ap.add_argument('--param-rtol-1d', type=float, default=None,
                    help='the bound for 1-D parameters (biases, norm weights); default '
                         '--param-rtol')
    # Gradient elements below this fraction of their tensor's largest at step 1 (of the model's
    # largest, for a tensor that is all below that) are rounding noise: an attention key bias has an exact gradient of zero (softmax ignores a per-row
    # shift), which every implementation computes as noise of ~1e-9 and Adam then turns into
    # steps of a sizable fraction of lr in implementation-specific directions. Such elements
    # are checked at the gradient level (|g - g_ref| <= max(noise, grad_rtol) * max|g_ref|) and left out of
    # the parameter distance; the script reports how many.
    ap.add_argument('--noise', type=float, default=1e-6)
    ap.add_argument('--grad-rtol', type=float, default=1e-5)
    ap.add_argument('--eps', type=float, default=1e-8)
    ap.add_argument('--scheduler', default='', help='a DeepSpeed scheduler object as JSON')
    ap.add_argument('--optimizer', default='', help='a DeepSpeed optimizer object as JSON '
                    '(default: AdamW with --lr, --eps, --weight-decay)')
    ap.add_argument('--ranks', type=int, default=1,
                    help='data-parallel ranks: ds-run under mpirun -np N, ds-reference --world-size N')
    ap.add_argument('--tp', type=int, default=1,
                    help='tensor-parallel ranks (tensor_parallel.autotp_size): ds-run under '
                         'mpirun -np ranks x tp; the reference stays at --world-size ranks')
    ap.add_argument('--sp', type=int, default=1,
                    help='sequence-parallel ranks (sequence_parallel_size): ds-run under '
                         'mpirun -np ranks x tp x sp; the reference stays at --world-size ranks')
    ap.add_argument('--ep', type=int, default=1,
                    help='expert-parallel ranks (expert_parallel.autoep_size), within the '
                         '--ranks data-parallel ones; the reference keeps every expert')
    ap.add_argument('--pp', type=int, default=1,
                    help='pipeline stages (the config\'s pipeline.stages): mpirun -np ranks x '
                         'tp x sp x pp; the reference stays at --world-size ranks')
    ap.add_argument('--schedule', default='1f1b', help='pipeline.schedule (1f1b, interleaved)')
    ap.add_argument('--virtual', type=int, default=1, help='pipeline.virtual_stages')
    ap.add_argument('--partition', default='', help='pipeline.partition')
    ap.add_argument('--max-activation-ratio', type=float, default=0,
                    help='the activation bytes of --memory-report at most this fraction of the '
                         'same model compiled for one rank (0: no check)')
    ap.add_argument('--max-param-ratio', type=float, default=0,
                    help='each rank\'s parameter_bytes at most this fraction of the whole '
                         'model\'s (0: no check)')
    ap.add_argument('--zero', default='', help='a DeepSpeed zero_optimization object as JSON')
    ap.add_argument('--extra', default='{}',
                    help='more top-level config keys for ds as JSON (activation_checkpointing)')
    ap.add_argument('--device-memory', type=int, default=0,
                    help='ds-run --device-memory (bytes)')
    ap.add_argument('--check-offload', action='store_true',
                    help='ZeRO-Offload: every rank\'s bytes moved per tier and step, host-space, '
                    'NVMe and device peaks equal the compiler\'s plan')
    ap.add_argument('--check-memory', action='store_true',
                    help='model-state bytes per rank equal the ZeRO formula (Adam, fp32); the '
                    'planned peak is within 5%% of the measured one')
    ap.add_argument('--tokens', default='', choices=['', 'uint16', 'uint32'],
                    help='feed the first two inputs from a token file of this dtype')
    ap.add_argument('--torch-loop', action='store_true',
                    help='also train with the plain PyTorch loop (torch_loop.py) on a run of '
                         'several ranks (single-rank and clipping runs always do)')
    ap.add_argument('--precision', default='', choices=['', 'bf16', 'fp16'],
                    help='train ds in 16 bits (DeepSpeed\'s bf16 or fp16 section): bf16 against '
                         'ds-reference\'s bf16 oracle, step-1 gradients too (--grad-rtol); fp16 '
                         'against the fp32 reference, step-1 gradients not compared')
    ap.add_argument('--fp16', default='{}', help='more keys of the fp16 section, as JSON')
    ap.add_argument('--random-data', action='store_true',
                    help='uniform random data instead of data the model can learn')
    ap.add_argument('--min-move', type=float, default=100,
                    help='every parameter tensor of the reference must move at least this many '
                         'times its tolerance (--param-rtol) from its initial value; 0: no check')
    ap.add_argument('--emulate', default='',
                    help='a QEMU CPU model (Haswell: AVX2 and FMA, no AVX-512): the step is '
                         'compiled here by ds-compile --cpu for that CPU and trained under '
                         'qemu-x86_64 -cpu MODEL, one rank; the runtime picks its kernels from '
                         'the emulated CPU')
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    pt, inputs_file = model_path(args)

    specs = [l.strip().split('=', 1) for l in open(inputs_file) if l.strip()]
    if args.mb:
        specs = [(n, 'tensor<%dx%s' % (args.mb, t[len('tensor<'):].split('x', 1)[1]))
                 for n, t in specs]
    mb = parse_type(specs[0][1])[0][0]
    G = mb * args.gas * args.ranks
    rng = np.random.RandomState(0)
    data_flags = []
    if args.tokens:
        # A nanoGPT-style .bin: the first input reads windows of T tokens, the second the same
        # windows shifted by one.
        T = parse_type(specs[0][1])[0][1]
        n_tok = args.steps * G * T + 1
        toks = (rng.randint(0, CLASSES[args.family], size=n_tok)
                if args.random_data else markov_tokens(n_tok, CLASSES[args.family], rng))
        extra = spare(rng)  # one spare window (see spare())
        toks = np.concatenate([toks, extra.randint(0, CLASSES[args.family], size=T)
                               if args.random_data else
                               markov_tokens(T, CLASSES[args.family], extra, toks[-1])])
        path = os.path.join(args.work, 'tokens.bin')
        toks.astype(np.uint16 if args.tokens == 'uint16' else np.uint32).tofile(path)
        data_flags += ['--tokens', path, '--seq-len', str(T), '--token-dtype', args.tokens]
        specs_data = specs[2:]
        # The same samples as .npy, windowed here from the definition (sample j is
        # tokens [jT, jT+T), its target shifted by one), to check ds-run's --tokens against.
        n = (len(toks) - 1) // T
        win = np.stack([toks[j * T:j * T + T] for j in range(n)]).astype(np.int64)
        tgt = np.stack([toks[j * T + 1:j * T + T + 1] for j in range(n)]).astype(np.int64)
        np.save(os.path.join(args.work, 'win.npy'), win)
        np.save(os.path.join(args.work, 'tgt.npy'), tgt)
        npy_flags = ['--data', '%s=%s' % (specs[0][0], os.path.join(args.work, 'win.npy')),
                     '--data', '%s=%s' % (specs[1][0], os.path.join(args.work, 'tgt.npy'))]
    else:
        specs_data = specs
    data_flags += write_data(specs_data, args.family, args.steps * G, args.work, rng,
                             learnable=not args.random_data)

    cfg = {'train_batch_size': G, 'train_micro_batch_size_per_gpu': mb,
           'gradient_accumulation_steps': args.gas,
           'optimizer': {'type': 'AdamW',
                         'params': {'lr': args.lr, 'eps': args.eps,
                                    'weight_decay': args.weight_decay}},
           'gradient_clipping': args.clip, 'steps_per_print': args.steps}
    if args.optimizer:
        cfg['optimizer'] = json.loads(args.optimizer)
        op = cfg['optimizer'].get('params', {})
        # The logged lr is the first group's: Muon's (muon_lr, else lr, else 0.02).
        args.lr = op.get('muon_lr', op.get('lr', 0.02)) if cfg['optimizer']['type'] == 'Muon' \
            else op['lr']
    scheduler = json.loads(args.scheduler) if args.scheduler else None
    if scheduler:
        cfg['scheduler'] = scheduler
    if args.zero:
        cfg['zero_optimization'] = json.loads(args.zero)
    ref_cfg = dict(cfg)
    if args.tp > 1:
        cfg['tensor_parallel'] = {'autotp_size': args.tp}
    if args.ep > 1:
        cfg['expert_parallel'] = {'enabled': True, 'autoep_size': args.ep}
    if args.sp > 1:
        cfg['sequence_parallel_size'] = args.sp
    if args.pp > 1:
        cfg['pipeline'] = {'stages': args.pp}
        if args.schedule != '1f1b':
            cfg['pipeline'].update(schedule=args.schedule, virtual_stages=args.virtual)
        if args.partition:
            cfg['pipeline']['partition'] = args.partition
    if args.precision:
        cfg[args.precision] = dict({'enabled': True},
                                   **(json.loads(args.fp16) if args.precision == 'fp16' else {}))
    if args.precision == 'fp16':
        # The reference trains in fp32 under DeepSpeed's loss scaler, deciding each step's
        # overflow from its own gradients (the overflow oracle).
        ref_cfg['fp16'] = cfg['fp16']
    cfg.update(json.loads(args.extra))
    cfg_path = os.path.join(args.work, 'ds_config.json')
    json.dump(cfg, open(cfg_path, 'w'))
    ref_cfg_path = os.path.join(args.work, 'ref_config.json')
    json.dump(ref_cfg, open(ref_cfg_path, 'w'))

    w = lambda f: os.path.join(args.work, f)
    b = lambda t: os.path.join(args.bin, t)
    run([b('ds-opt'), pt] + sum([['--input', '%s=%s' % (n, t)] for n, t in specs], []) +
        ['--config', cfg_path, '-o', w('step.mlir')], w('ds-opt.log'))
    common = data_flags + ['--steps', str(args.steps), '--threads', '1']
    launch = []
    if args.ranks * args.tp * args.sp * args.pp > 1:
        launch = MPIRUN + ['-np', str(args.ranks * args.tp * args.sp * args.pp)]
    budget = ['--device-memory', str(args.device_memory)] if args.device_memory else []
    trainer, env = [b('ds-run'), w('step.mlir')], None
    if args.emulate:
        if launch:
            sys.exit('--emulate trains one rank')
        run([b('ds-compile'), w('step.mlir'), '-o', w('step.exe'), '--cpu',
             args.emulate.lower()], w('ds-compile.log'))
        # OMP_WAIT_POLICY set: the executable does not re-exec itself (which would leave QEMU).
        # oneDNN kept to SSE4.1: QEMU 7.2 runs oneDNN's AVX2 JIT code wrong (its eltwise tanh
        # fails the kernel tests there, and passes on real AVX2 with ONEDNN_MAX_CPU_ISA=AVX2);
        # the runtime's own AVX2 loops are compiled code it runs right.
        trainer = ['qemu-x86_64', '-cpu', args.emulate, w('step.exe')]
        env = dict(os.environ, OMP_WAIT_POLICY='PASSIVE', ONEDNN_MAX_CPU_ISA='SSE41')
    run(launch + trainer + common + budget +
        ['--log', w('ds.jsonl'), '--save-weights', w('ds.safetensors'),
         '--dump-grads', w('ds_grads.safetensors')], w('ds-run.log'), env=env)
    # The 16-bit oracle: LibTorch trains in bf16 with fp32 masters (fp16 waits for LibTorch
    # 2.x's CPU kernels; its reference stays fp32). An HF model's is its eager module in
    # PyTorch (torch_loop.py --eager-family): its f32 islands (RMSNorm, the rotary tables, the
    # loss) are casts that a program exported in f32 has dropped, so LibTorch cannot run that
    # program in bf16.
    ref_files = ['--save-weights', w('ref.safetensors'), '--dump-grads',
                 w('ref_grads.safetensors')]
    if args.precision == 'bf16' and args.family.startswith('hf'):
        run([torch_loop_python(), '-W', 'ignore', os.path.join(HERE, 'torch_loop.py'),
             '--model', pt, '--config', ref_cfg_path, '--steps', str(args.steps),
             '--out', w('ref.jsonl'), '--inputs', ','.join(n for n, _ in specs),
             '--eager-family', args.family, '--precision', 'bf16'] + data_flags + ref_files,
            w('ref.log'))
        print('the bf16 oracle: the eager module of %s in PyTorch (torch_loop.py)' % args.family)
    else:
        ref_precision = ['--precision', 'bf16'] if args.precision == 'bf16' else []
        run([b('ds-reference'), pt, '--config', ref_cfg_path] + ref_precision + common +
            ['--log', w('ref.jsonl')] + ref_files, w('ref.log'))

    ds_log = [json.loads(l) for l in open(w('ds.jsonl'))]
    # The data order and the first forward, judged by PyTorch alone (no code shared with ds).
    py_flags = npy_flags + data_flags[6:] if args.tokens else data_flags
    py_loss = python_step1_loss(pt, py_flags, specs, mb, args.gas, args.ranks)
    py_rel = abs(ds_log[0]['loss'] - py_loss) / abs(py_loss)
    print('step 1 in PyTorch (data order written here): loss %.9g, ds %.9g, rel diff %.2e%s' %
          (py_loss, ds_log[0]['loss'], py_rel,
           '' if py_rel <= max(args.loss_rtol, 1e-5) else ' FAIL'))
    if args.tokens:
        run([b('ds-run'), w('step.mlir')] + npy_flags + ['--steps', str(args.steps), '--threads', '1', '--log', w('npy.jsonl')],
            w('ds-run-npy.log'))
        npy_log = [json.loads(l)['loss'] for l in open(w('npy.jsonl'))]
        same = npy_log == [l['loss'] for l in ds_log]
        print('--tokens against the same windows as .npy: %s' % ('identical' if same else 'DIFFERENT'))
        ok_tokens = same
    else:
        ok_tokens = True
    ref_log = [json.loads(l) for l in open(w('ref.jsonl'))]
    ok = len(ds_log) == len(ref_log) == args.steps and ok_tokens and \
        py_rel <= max(args.loss_rtol, 1e-5)
    # PyTorch's own module of a functionalized BatchNorm program (bn2x export-core) cannot run
    # backward in Python: it overwrites the running statistics that autograd saved.
    python_can_train = (args.family, args.kind) != ('bn2x', 'export-core')
    if not python_can_train:
        print('%d steps in PyTorch (Python): not run (torch.export.load(...).module() of this '
              'program fails backward in PyTorch itself)' % args.steps)
    # The independent oracle (a plain PyTorch loop, torch_loop.py) on every single-rank run,
    # every clipping run, every file PyTorch 2.x exported and where --torch-loop asks: ds-reference
    # shares ds's config parser, data order, schedules and .pt2 loader; this loop shares none.
    single = args.ranks * args.tp * args.sp * args.pp == 1
    if python_can_train and not args.precision and (
            single or args.clip or args.torch_loop or args.family in TORCH2_FAMILIES):
        rows = torch_loop_losses(args, pt, cfg_path, specs, data_flags)
        if rows is None:
            print('%d steps in PyTorch (Python): not run (the module is random in training '
                  'mode: dropout)' % args.steps)
        else:
            py_worst = max(abs(a['loss'] - p['loss']) / abs(p['loss'])
                           for a, p in zip(ds_log, rows))
            lr_ok = all(abs(a['lr'] - p['lr']) <= 1e-8 * max(abs(p['lr']), 1e-12)
                        for a, p in zip(ds_log, rows))
            print('%d steps in PyTorch (Python, torch_loop.py: torch.optim, the config read '
                  'there): worst loss rel diff %.2e, lr %s%s' % (
                      args.steps, py_worst, 'equal' if lr_ok else 'DIFFERENT',
                      '' if py_worst <= args.loss_rtol and len(rows) == len(ds_log) and lr_ok
                      else ' FAIL'))
            if args.clip:
                norms = [p['grad_norm'] for p in rows]
                print('gradient norm before clipping (PyTorch): %.3g to %.3g, clipped to %g on '
                      '%d of %d steps' % (min(norms), max(norms), args.clip,
                                          sum(n > args.clip for n in norms), len(norms)))
            ok = ok and py_worst <= args.loss_rtol and len(rows) == len(ds_log) and lr_ok
    worst = 0.0
    print('step  ds loss          reference loss   rel diff')
    for a, r in zip(ds_log, ref_log):
        rel = abs(a['loss'] - r['loss']) / max(abs(r['loss']), 1e-30)
        worst = max(worst, rel)
        flag = '' if rel <= args.loss_rtol else '  <-- exceeds %g' % args.loss_rtol
        print('%4d  %.9g  %.9g  %.2e%s' % (a['step'], a['loss'], r['loss'], rel, flag))
        ok = ok and rel <= args.loss_rtol and a['step'] == r['step']
        want = deepspeed_lr(scheduler, args.lr, a['step'])
        for who, got in (('ds', a['lr']), ('reference', r['lr'])):
            if abs(got - want) > 1e-8 * max(abs(want), 1e-12):
                print('step %d: %s lr %.9g, DeepSpeed applies %.9g' % (a['step'], who, got, want))
                ok = False
    if args.precision == 'fp16':
        # Every skipped step and every loss scale is pinned by the overflow oracle: the
        # reference decides overflow from PyTorch's gradients, and the scales follow from its
        # decisions by DeepSpeed's rule (transcribed here, independently of both). Each of its
        # decisions must be clear-cut: the largest scaled gradient at least 1.1x the fp16
        # limit, or at most 0.9x, so that fp16 rounding and the fp32 reference's own path
        # (its losses agree with ds's to about 2e-5) cannot tip it.
        import re
        oracle = [(int(m.group(1)), float(m.group(2))) for m in re.finditer(
            r'overflow-oracle step (\d+) .*\(([0-9.e+-]+|nan|inf) x the fp16 limit\)',
            open(w('ref.log')).read())]
        undecided = [(st, r) for st, r in oracle if 0.9 < r < 1.1]
        ref_skipped = [r['skipped'] for r in ref_log]
        ds_skipped = [r['skipped'] for r in ds_log]
        want = deepspeed_loss_scales(cfg['fp16'], ref_skipped,
                                     cfg.get('zero_optimization', {}).get('stage', 0))
        ref_scales = [r['loss_scale'] for r in ref_log]
        ds_scales = [r['loss_scale'] for r in ds_log]
        fmt = lambda xs: ' '.join('%d' % g if g == int(g) else '%g' % g for g in xs)
        print('fp16: the oracle skips steps %s; ds skips %s -> %s' %
              ([i + 1 for i, k in enumerate(ref_skipped) if k],
               [i + 1 for i, k in enumerate(ds_skipped) if k],
               'same' if ds_skipped == ref_skipped else 'DIFFERENT'))
        print('fp16: loss scales %s; the oracle\'s %s; DeepSpeed\'s rule on the oracle\'s '
              'overflows %s' % (fmt(ds_scales), 'equal' if ds_scales == ref_scales else
                                'DIFFER (%s)' % fmt(ref_scales),
                                'agrees' if ref_scales == want else 'DISAGREES (%s)' % fmt(want)))
        if undecided or len(oracle) != len(ref_log):
            print('fp16: the oracle cannot decide steps %s (largest scaled gradient / fp16 '
                  'limit): choose another initial_scale_power' % undecided)
        ok = ok and ds_skipped == ref_skipped and ds_scales == ref_scales == want and \
            not undecided and len(oracle) == len(ref_log)
    # Step-1 gradients (the backward of every op in the model against autograd).
    ds_g = read_safetensors(w('ds_grads.safetensors'))
    ref_g = read_safetensors(w('ref_grads.safetensors'))
    noise_masks = {}
    worst_g = 0.0
    # ZeRO stage 2 keeps no whole gradients: only the reference's, for the noise masks. (On a
    # pipeline the parameters that several stages hold keep whole gradients: those compared.)
    stage = cfg.get('zero_optimization', {}).get('stage', 0)
    stage2 = stage >= 2
    partitioned = not ds_g and stage2
    if partitioned:
        print('gradients are partitioned (ZeRO stage %d): step-1 gradients not compared' % stage)
    elif stage2:
        print('gradients are partitioned (ZeRO stage %d) but for %s: those compared'
              % (stage, ', '.join(sorted(ds_g))))
        ref_g = {k: v for k, v in ref_g.items() if k in ds_g}
    if args.precision == 'fp16':
        partitioned = True
        print('fp16 gradients (16-bit, loss-scaled; no fp16 oracle): step-1 gradients not '
              'compared')
    elif args.precision and (args.ranks > args.pp or args.tp > 1 or args.sp > 1):
        # Split rows (data or sequence parallel) or split products (tensor parallel) round
        # their 16-bit partial sums where one process does not: layer norm's weight gradients
        # (PyTorch sums rows into 16-bit buffers) come out up to 1.5% apart.
        partitioned = True
        print('bf16 gradients over split rows or products: their 16-bit partial sums round '
              'apart from one process\'s; step-1 gradients not compared')
    # A tensor whose every gradient is noise next to the model's largest (BERT's key biases, with
    # no query bias beside them to share a fused tensor) is noise as a whole.
    largest = max((float(np.abs(g).max()) for g in ref_g.values() if g.size), default=0.0)
    for k, g in ref_g.items():
        g = g.astype(np.float64)
        scale = float(np.abs(g).max()) if g.size else 0.0
        if scale <= args.noise * largest:
            scale = largest
        noise = np.abs(g) <= args.noise * scale
        noise_masks[k] = noise
        if partitioned:
            continue
        if k not in ds_g:
            print('gradient of %s missing in ds' % k)
            ok = False
            continue
        dg = ds_g[k].astype(np.float64)
        tol = max(args.noise, args.grad_rtol) * scale
        if np.any(np.abs(dg[noise] - g[noise]) > tol):
            print('gradient of %s: noise-level elements differ beyond %g of max'
                  % (k, max(args.noise, args.grad_rtol)))
            ok = False
        rel = np.linalg.norm((dg - g)[~noise]) / max(np.linalg.norm(g[~noise]), 1e-30)
        worst_g = max(worst_g, rel)
        if rel > args.grad_rtol:
            print('gradient of %s: relative distance %.2e > %g' % (k, rel, args.grad_rtol))
            ok = False
    ds_w = read_safetensors(w('ds.safetensors'))
    ref_w = read_safetensors(w('ref.safetensors'))
    worst_p = worst_1d = 0.0
    excluded = 0
    for k, ref in ref_w.items():
        if k not in ds_w:
            print('missing in ds: %s' % k)
            ok = False
            continue
        if ref.dtype.kind != 'f':
            same = np.array_equal(ds_w[k], ref)
            ok = ok and same
            if not same:
                print('buffer %s differs' % k)
            continue
        ref = ref.astype(np.float64)
        got = ds_w[k].astype(np.float64)
        mask = noise_masks.get(k)
        if mask is not None and mask.any():
            excluded += int(mask.sum())
            ref, got = ref[~mask], got[~mask]
        d = np.linalg.norm((got - ref).ravel())
        n = np.linalg.norm(ref.ravel())
        rel = d / n if n > 0 else d
        bound = args.param_rtol if ds_w[k].ndim != 1 or args.param_rtol_1d is None \
            else args.param_rtol_1d
        if ds_w[k].ndim == 1 and args.param_rtol_1d is not None:
            worst_1d = max(worst_1d, rel)
        else:
            worst_p = max(worst_p, rel)
        if rel > bound:
            print('parameter %s: relative distance %.2e > %g' % (k, rel, bound))
            ok = False
    print('%s %s: step-1 gradients worst rel distance %.2e (%d noise-level elements '
          'compared absolutely)' % (args.family, args.kind, worst_g, excluded))
    # The run must move every parameter far past the tolerance it is checked at, or a broken
    # update could pass: ||p_ref - p_init|| >= min_move * param_rtol * ||p_ref||.
    init = read_safetensors(w('step.safetensors'))
    import re
    trainable = set()
    for line in open(w('step.mlir')):
        m = re.match(r'\s*ds.parameter @"?([^" ]+)"? trainable : \S+(?: aliases \[(.*)\])?', line)
        if m:
            trainable.add(m.group(1))
            trainable.update(a.strip().strip('"') for a in (m.group(2) or '').split(',') if a)
    least, least_name = float('inf'), ''
    for k, ref in ref_w.items():
        if ref.dtype.kind != 'f' or k not in init or k not in trainable:
            continue
        ref = ref.astype(np.float64).ravel()
        start = init[k].astype(np.float64).ravel()
        mask = noise_masks.get(k)
        if mask is not None and mask.any():
            ref, start = ref[~mask.ravel()], start[~mask.ravel()]
        n = np.linalg.norm(ref)
        if n == 0:
            continue
        ratio = np.linalg.norm(ref - start) / (args.param_rtol * n)
        if ratio < least:
            least, least_name = ratio, k
    loss_move = abs(ref_log[-1]['loss'] - ref_log[0]['loss']) / abs(ref_log[0]['loss'])
    if args.precision:
        # 16-bit parameters are checked loosely (see --param-rtol-1d); the per-step loss is the
        # tight check, so it is the loss that must move far past its bound.
        moved = args.min_move <= 0 or loss_move >= args.min_move * args.loss_rtol
        print('%s %s: the reference loss moves %.3g relative, %.3g x its tolerance%s' %
              (args.family, args.kind, loss_move, loss_move / args.loss_rtol,
               '' if moved else ' (< %g: the test could not see a broken update) FAIL'
               % args.min_move))
    else:
        moved = args.min_move <= 0 or least >= args.min_move
        print('%s %s: the reference loss moves %.3g relative; the least-moved parameter %s '
              'moves %.3g x its tolerance%s' % (args.family, args.kind, loss_move, least_name,
                                                least, '' if moved else ' (< %g: the test could '
                                                'not see a broken update) FAIL' % args.min_move))
    ok = ok and moved
    if args.check_memory and args.pp > 1:
        ok = check_pipeline_memory(args, w, b, ds_log) and ok
    elif args.check_memory:
        ok = check_memory(args, cfg, w, b, ds_log) and ok
    if args.check_offload:
        ok = check_offload(w, b, ds_log, cfg) and ok
    if args.max_activation_ratio:
        # The compiler's plan (--memory-report's activations column) against one rank's.
        def activations(config, out):
            rep = subprocess.run([b('ds-opt'), pt] + sum([['--input', '%s=%s' % (n, t)]
                                                          for n, t in specs], []) +
                                 ['--config', config, '--memory-report', '-o', out],
                                 capture_output=True, text=True, check=True).stdout
            return int(rep.splitlines()[2].split()[4])
        one_cfg = dict(ref_cfg, train_batch_size=mb * args.gas)
        json.dump(one_cfg, open(w('one_config.json'), 'w'))
        mine, one = activations(cfg_path, os.devnull), activations(w('one_config.json'),
                                                                   os.devnull)
        good = mine <= args.max_activation_ratio * one
        print('activations per rank: %d bytes, one rank %d: %.3f x (at most %g) -> %s' % (
            mine, one, mine / float(one), args.max_activation_ratio, 'PASS' if good else 'FAIL'))
        ok = ok and good
    if args.max_param_ratio:
        # Each rank's trainable parameters (its parts of the split ones) against the whole
        # model's (the reference's tensors of the same names).
        import re
        # A pipeline stage holds the parameters marked with its index (ds.stages); world rank
        # q is on stage q // (ranks x sp x tp).
        per_stage = [0] * args.pp
        whole = 0
        for line in open(w('step.mlir')):
            m = re.match(r'\s*ds.parameter @(\S+) trainable : tensor<([0-9x]+)x?b?f(?:32|16)>'
                         r'(?:.*ds.stages = array<i64: ([0-9, ]+)>)?', line)
            if m:
                name = m.group(1).strip('"')
                n = int(np.prod([int(d) for d in m.group(2).split('x') if d]))
                stages = [int(v) for v in m.group(3).split(',')] if m.group(3) else \
                    list(range(args.pp))
                for st in stages:
                    per_stage[st] += n
                whole += ref_w[name].size
        es = 2 if args.precision else 4
        per_rank = args.ranks * args.sp * args.tp
        logged = max(r['parameter_bytes'] for rec in ds_log for r in rec['ranks'])
        # ZeRO stage 3 keeps only shards: at most the stage's parameters.
        partitioned = cfg.get('zero_optimization', {}).get('stage', 0) == 3
        held = lambda got, want: got <= want if partitioned else got == want
        exact = all(held(r['parameter_bytes'], per_stage[r['rank'] // per_rank] * es)
                    for rec in ds_log for r in rec['ranks']) if args.pp > 1 else True
        local = max(per_stage)
        ratio = logged / float(whole * es)
        good = exact and held(logged, local * es) and ratio <= args.max_param_ratio
        print('parameters per rank: %d bytes (%d of the model\'s %d elements), %.3f x the whole '
              'model (at most %g) -> %s' % (logged, local, whole, ratio, args.max_param_ratio,
                                            'PASS' if good else 'FAIL'))
        ok = ok and good
    if args.param_rtol_1d is not None:
        print('%s %s: worst 1-D parameter (bias, norm) rel distance %.2e' %
              (args.family, args.kind, worst_1d))
    print('%s %s: %d steps, worst loss rel diff %.2e, worst parameter rel distance %.2e '
          '(%d tensors) -> %s' % (args.family, args.kind, len(ds_log), worst, worst_p,
                                  len(ref_w), 'PASS' if ok else 'FAIL'))
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()

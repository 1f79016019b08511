#!/usr/bin/env python3
"""The independent oracle: trains a model file with a plain PyTorch loop that shares no code
with ds (not its config parser, data order, schedules, loader or mean loss), from the DeepSpeed
config ds was given, and writes one JSON line per optimizer step: the loss (the mean of the
step's micro-batch losses over every data-parallel rank), the lr applied and the global
gradient norm before clipping.

  torch_loop.py --model M.pt|M.pt2 --config ds_config.json --steps N --inputs a,b[,c]
                (--data NAME=FILE.npy ... | --tokens FILE.bin --token-dtype uint16 --seq-len T
                 [--data NAME=FILE.npy for the inputs after the first two]) --out LOSSES.jsonl

Everything DeepSpeed decides is written out here from its sources:
- the batch: train_batch_size = micro-batch x gradient_accumulation_steps x data-parallel
  ranks; optimizer step s (from 0) gives rank r's micro-batch k the samples
  [s G + (r gas + k) mb, + mb) (DeepSpeed's DistributedSampler without shuffling, each rank's
  micro-batches consecutive); each micro-batch's loss is divided by gas x ranks before backward
  (the engine's scale_wrt_gas and the all-reduce's mean); a token file's sample j is tokens
  [jT, jT + T) and its target the same window shifted by one (nanoGPT's .bin);
- the optimizers (deepspeed/runtime/engine.py _configure_basic_optimizer): Adam with
  adam_w_mode (default true: decoupled weight decay) and AdamW as torch.optim.AdamW, Adam with
  adam_w_mode false as torch.optim.Adam (L2), SGD as torch.optim.SGD, Muon as DeepSpeed pairs
  it: torch.optim.Muon for the >= 2-D hidden matrices and torch.optim.AdamW for the rest
  (MuonWithAuxAdam's defaults: lr 0.02, momentum 0.95; the AdamW group lr 3e-4, betas
  (0.9, 0.95), eps 1e-10);
- the schedules (deepspeed/runtime/lr_schedules.py), stepped after each optimizer step as the
  engine does, OneCycle cycling the momentum of an optimizer with betas (Adam's become
  (momentum, 0.99); SGD's momentum stays);
- gradient_clipping: torch.nn.utils.clip_grad_norm_ (DeepSpeed's clip_coef
  max_norm / (norm + 1e-6), applied when below 1).
"""
import argparse
import json
import math

import numpy as np

# Which parameters DeepSpeed's Muon updates by Newton-Schulz (engine.py set_optimizer_flags:
# >= 2-D and the name holds neither of these); the embedding tables and the output projection
# are left to AdamW whatever their names (the Muon paper's rule, which ds follows).
MUON_EXCLUDED_NAMES = ('embed', 'lm_head')


def deepspeed_lr(scheduler, lr, step):
    """The lr DeepSpeed applies at optimizer step `step` (from 1), written from
    deepspeed/runtime/lr_schedules.py and the engine's order (scheduler.step() after each
    optimizer step; step 1 uses the value set at construction)."""
    if not scheduler:
        return lr
    t, p = scheduler['type'], scheduler.get('params', {})
    it = step - 2
    if t == 'LRRangeTest':
        mn = p.get('lr_range_test_min_lr', 1e-3)
        if it < 0:
            return mn
        x = (it + 1) / p.get('lr_range_test_step_size', 2000)
        if p.get('lr_range_test_staircase', False):
            x = math.floor(x)
        return mn * (1 + p.get('lr_range_test_step_rate', 1.0) * x)
    if t == 'OneCycle':
        lo, hi = p['cycle_min_lr'], p['cycle_max_lr']
        if it < 0:
            return lo
        scale, total = one_cycle_scale(p, it)
        if scale is None:
            size, rate = p.get('decay_step_size', 0), p.get('decay_lr_rate', 0.)
            if size == 0 or rate == 0:
                return lo
            return lo / (1 + rate * (it - total + 1) / size)
        return lo + (hi - lo) * scale
    warm = max(2, p.get('warmup_num_steps', 1000))
    inv_log = 1.0 / math.log(warm)
    linear = p.get('warmup_type', 'log') == 'linear'

    def gamma_up(i):
        return i / warm if linear else inv_log * math.log(i + 1)

    if t == 'WarmupCosineLR':
        if it < 0:
            return 0.0
        if it < warm:
            mn = p.get('warmup_min_ratio', 0.0)
            return lr * (mn + gamma_up(it) * (1. - mn))
        cmin = p.get('cos_min_ratio', 0.0001)
        prog = min(1.0, (it - warm + 1) / max(1, p['total_num_steps'] - warm))
        return lr * max(0.0, cmin + (1. - cmin) * (1 + math.cos(math.pi * prog)) / 2)
    mn = p.get('warmup_min_lr', 0.0)
    mx = p.get('warmup_max_lr', 0.001 if t == 'WarmupDecayLR' else lr)
    if it < 0:
        return mn
    if it < warm:
        g = gamma_up(it)
    elif t == 'WarmupDecayLR':
        total = p['total_num_steps']
        g = max(0.0, float(total - it) / float(max(1.0, total - warm)))
    else:
        g = 1.0
    return mn + (mx - mn) * g


def one_cycle_scale(p, it):
    """OneCycle's _get_scale_factor at batch iteration `it` (>= 0), with the cycle's length;
    None after the cycle."""
    first = float(p.get('cycle_first_step_size', 2000))
    second = float(p.get('cycle_second_step_size', first))
    total = first + second
    if it >= total:
        return None, total
    n = it + 1
    x = 1. + n / total - math.floor(1 + n / total)
    up = x <= first / total
    scale = x / (first / total) if up else (x - 1) / (first / total - 1)
    stairs = p.get('cycle_first_stair_count', 0) if up else \
        p.get('cycle_second_stair_count', p.get('cycle_first_stair_count', 0))
    if stairs > 0:
        c = n % total
        pos = c * stairs / first if c <= first else (total - c) * stairs / second
        scale = math.floor(pos) / stairs
    return scale, total


def deepspeed_momentum(scheduler, step):
    """OneCycle's momentum at optimizer step `step` (from 1) when it cycles (the default), else
    None: the cycle's minimum at construction, max - (max - min) x scale within the cycle,
    max x (1 + decay_mom_rate x interval) after it. It becomes Adam's betas[0]; an optimizer
    without betas (SGD) keeps its momentum (_initialize_momentum turns cycling off)."""
    if not scheduler or scheduler['type'] != 'OneCycle':
        return None
    p = scheduler.get('params', {})
    if not p.get('cycle_momentum', True):
        return None
    lo, hi = p.get('cycle_min_mom', 0.8), p.get('cycle_max_mom', 0.9)
    it = step - 2
    if it < 0:
        return lo
    scale, total = one_cycle_scale(p, it)
    if scale is not None:
        return hi - (hi - lo) * scale
    size, rate = p.get('decay_step_size', 0), p.get('decay_mom_rate', 0.)
    if size == 0 or rate == 0:
        return hi
    return hi * (1 + rate * (it - total + 1) / size)


def newton_schulz_f32(grad, ns_coefficients, ns_steps, eps):
    """torch.optim.Muon's quintic Newton-Schulz iteration in f32 (PyTorch's and DeepSpeed's
    run it in bf16 for the GPU's speed; ds runs it in f32)."""
    import torch
    a, b, c = ns_coefficients
    x = grad.to(torch.float32, copy=True)
    tall = grad.size(0) > grad.size(1)
    if tall:
        x = x.T
    x.div_(x.norm().clamp(min=eps))
    for _ in range(ns_steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if tall else x


def build_optimizers(module, cfg):
    """DeepSpeed's optimizer of `cfg` over the module's trainable parameters (tied ones once),
    as a list of torch optimizers, and the names of the parameters each updates."""
    import torch
    named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
    opt = cfg.get('optimizer', {'type': 'Adam'})
    t, p = opt['type'], dict(opt.get('params', {}))
    params = [q for _, q in named]
    wd = p.get('weight_decay', 0.0)
    if t in ('Adam', 'AdamW'):
        kw = dict(lr=p.get('lr', 1e-3), betas=tuple(p.get('betas', (0.9, 0.999))),
                  eps=p.get('eps', 1e-8), weight_decay=wd)
        if t == 'Adam' and not p.get('adam_w_mode', True):
            return [torch.optim.Adam(params, **kw)]
        return [torch.optim.AdamW(params, **kw)]
    if t == 'SGD':
        return [torch.optim.SGD(params, lr=p['lr'], momentum=p.get('momentum', 0.0),
                                dampening=p.get('dampening', 0.0),
                                nesterov=p.get('nesterov', False), weight_decay=wd)]
    if t == 'Muon':
        import torch.optim._muon as muon
        muon._zeropower_via_newtonschulz = newton_schulz_f32
        excluded = embedding_and_head(module)
        hidden = [q for n, q in named if q.dim() >= 2 and id(q) not in excluded and
                  not any(s in n.lower() for s in MUON_EXCLUDED_NAMES)]
        rest = [q for q in params if all(q is not h for h in hidden)]
        lr = p.get('lr')
        muon_opt = torch.optim.Muon(
            hidden,
            lr=p.get('muon_lr', lr if lr is not None else 0.02),
            momentum=p.get('momentum', 0.95), weight_decay=wd)
        adam = torch.optim.AdamW(rest, lr=p.get('adam_lr', lr if lr is not None else 3e-4),
                                 betas=tuple(p.get('betas', (0.9, 0.95))),
                                 eps=p.get('eps', 1e-10), weight_decay=wd)
        return [muon_opt, adam]
    raise SystemExit('torch_loop.py: optimizer %s is not written out here' % t)


def embedding_and_head(module):
    """The ids of the embedding tables (the weights of Embedding modules) and of the output
    projection (the last Linear registered, whose output is the logits)."""
    out, last = set(), None
    for _, m in module.named_modules():
        kind = getattr(m, 'original_name', type(m).__name__)
        if kind == 'Embedding':
            out.add(id(m.weight))
        if kind in ('Linear', 'NonDynamicallyQuantizableLinear'):
            last = m.weight
    if last is not None:
        out.add(id(last))
    return out


def load_module(path):
    import torch
    if path.endswith('.pt2'):
        # HF's grouped_mm experts call a custom operator that importing transformers registers.
        import zipfile
        with zipfile.ZipFile(path) as z:
            if any(b'torch.ops.transformers.' in z.read(n) for n in z.namelist()
                   if n.endswith('.json') and '/models/' in n):
                import transformers.integrations.moe  # noqa: F401
        return torch.export.load(path).module()
    m = torch.jit.load(path)
    m.train()
    return m


def eager_module(family, path):
    """The eager PyTorch module of a model family (test/models/make_models2.py's constructor),
    with the exported file's weights loaded into it by name: the module as its author wrote it,
    with every dtype cast it makes (HF's RMSNorm, rotary tables and loss widen to f32), where a
    program traced or exported in f32 has dropped them as no-ops."""
    import os
    import sys
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'models'))
    import make_models2
    torch.manual_seed(0)
    module = make_models2.FAMILIES[family][0]()
    module.train()
    exported = load_module(path)
    missing, unexpected = module.load_state_dict(exported.state_dict(), strict=False)
    trained = {n for n, p in module.named_parameters()}
    if unexpected or trained & set(missing):
        raise SystemExit('torch_loop.py: %s does not hold the weights of family %s (missing %s, '
                         'unexpected %s)' % (path, family, sorted(trained & set(missing)),
                                             sorted(unexpected)))
    return module


class Bf16Module:
    """DeepSpeed's bf16 mode over an f32 module (runtime/bf16_optimizer.py, as ds-reference
    --precision bf16 writes it too): a bf16 copy runs forward and backward (its gradients
    accumulate in bf16 over the micro-batches), float inputs enter rounded, the loss is read in
    f32; the optimizer steps the f32 module (the masters) from the widened gradients, and the
    bf16 copy becomes the masters' rounding."""

    def __init__(self, masters):
        import copy
        import torch
        self.masters = masters
        self.work = copy.deepcopy(masters).to(torch.bfloat16)
        self.pairs = [(m, w) for m, w in zip(masters.parameters(), self.work.parameters())
                      if m.requires_grad]

    def __call__(self, *inputs):
        import torch
        return self.work(*[x.to(torch.bfloat16) if x.is_floating_point() else x
                           for x in inputs])

    def widen_gradients(self):
        for m, w in self.pairs:
            m.grad = None if w.grad is None else w.grad.float()
            w.grad = None

    def round_parameters(self):
        import torch
        with torch.no_grad():
            for m, w in self.pairs:
                w.copy_(m)


def load_samples(args, names):
    """The inputs' arrays in the forward's order, indexed by sample."""
    files = dict(d.split('=', 1) for d in args.data)
    arrays = []
    if args.tokens:
        toks = np.fromfile(args.tokens, dtype=np.dtype(args.token_dtype)).astype(np.int64)
        T = args.seq_len
        n = (len(toks) - 1) // T
        arrays.append(np.stack([toks[j * T:j * T + T] for j in range(n)]))
        arrays.append(np.stack([toks[j * T + 1:j * T + T + 1] for j in range(n)]))
        names = names[2:]
    return arrays + [np.load(files[n]) for n in names]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--model', required=True)
    ap.add_argument('--config', required=True)
    ap.add_argument('--steps', type=int, required=True)
    ap.add_argument('--inputs', required=True, help='the forward\'s inputs, in order')
    ap.add_argument('--data', action='append', default=[])
    ap.add_argument('--tokens', default='')
    ap.add_argument('--token-dtype', default='uint16')
    ap.add_argument('--seq-len', type=int, default=0)
    ap.add_argument('--out', required=True)
    ap.add_argument('--eager-family', default='',
                    help='train the eager module of this family (make_models2.py) with the '
                         'file\'s weights rather than the file\'s program')
    ap.add_argument('--precision', default='', choices=['', 'bf16'],
                    help='bf16: DeepSpeed\'s bf16 mode (bf16 forward and backward, f32 masters)')
    ap.add_argument('--dump-grads', default='',
                    help='write step 1\'s gradients (safetensors, by parameter name)')
    ap.add_argument('--save-weights', default='',
                    help='write the parameters after the last step (safetensors, f32)')
    args = ap.parse_args()
    import torch
    torch.manual_seed(0)
    torch.set_num_threads(1)
    cfg = json.load(open(args.config))
    mb = cfg['train_micro_batch_size_per_gpu']
    gas = cfg.get('gradient_accumulation_steps', 1)
    G = cfg['train_batch_size']
    ranks = G // (mb * gas)
    arrays = load_samples(args, args.inputs.split(','))
    module = eager_module(args.eager_family, args.model) if args.eager_family else \
        load_module(args.model)
    opts = build_optimizers(module, cfg)
    params = [p for p in module.parameters() if p.requires_grad]
    names = [n for n, p in module.named_parameters() if p.requires_grad]
    bf16 = Bf16Module(module) if args.precision == 'bf16' else None
    forward = bf16 if bf16 else module
    grads_of = (lambda: [w.grad for _, w in bf16.pairs]) if bf16 else \
        (lambda: [p.grad for p in params])
    sched = cfg.get('scheduler')
    base_lrs = [[g['lr'] for g in o.param_groups] for o in opts]
    clip = cfg.get('gradient_clipping', 0.0)
    with open(args.out, 'w') as out:
        with torch.no_grad():  # a module random in training mode (dropout) cannot be judged
            batch = [torch.from_numpy(a[:mb]) for a in arrays]
            twice = [forward(*batch) for _ in range(2)]
            twice = [r[-1] if isinstance(r, tuple) else getattr(r, 'loss', r) for r in twice]
            if not torch.equal(twice[0], twice[1]):
                out.write(json.dumps({'random': True}) + '\n')
                return
        for s in range(args.steps):
            for o in opts:
                o.zero_grad()
            losses = []
            for r in range(ranks):
                for k in range(gas):
                    first = s * G + (r * gas + k) * mb
                    res = forward(*[torch.from_numpy(a[first:first + mb]) for a in arrays])
                    loss = res[-1] if isinstance(res, tuple) else getattr(res, 'loss', res)
                    (loss / (gas * ranks)).backward()
                    losses.append(float(loss.float().item()))
            if s == 0 and args.dump_grads:
                save_tensors(args.dump_grads, names, grads_of(), params)
            if bf16:
                bf16.widen_gradients()
            norm = float(torch.linalg.vector_norm(
                torch.stack([torch.linalg.vector_norm(p.grad) for p in params
                             if p.grad is not None])))  # an unused parameter has none
            if clip > 0:
                torch.nn.utils.clip_grad_norm_(params, clip)
            mom = deepspeed_momentum(sched, s + 1)
            for o, bases in zip(opts, base_lrs):
                for g, base in zip(o.param_groups, bases):
                    g['lr'] = deepspeed_lr(sched, base, s + 1)
                    if mom is not None and 'betas' in o.defaults:
                        g['betas'] = (mom, 0.99)
                o.step()
            if bf16:
                bf16.round_parameters()
            out.write(json.dumps({
                'step': s + 1,
                'loss': float(np.float32(np.mean(np.array(losses, dtype=np.float64)))),
                'lr': opts[0].param_groups[0]['lr'], 'grad_norm': norm}) + '\n')
    if args.save_weights:
        save_tensors(args.save_weights, names, params, params)


def save_tensors(path, names, tensors, like):
    """Tensors by name as safetensors (a parameter with no gradient as zeros)."""
    import torch
    from safetensors.torch import save_file
    save_file({n: (t if t is not None else torch.zeros_like(p)).detach().contiguous()
               for n, t, p in zip(names, tensors, like)}, path)


if __name__ == '__main__':
    main()

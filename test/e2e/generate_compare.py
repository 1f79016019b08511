"""ds-generate against HF's greedy `generate` on an exported HF causal LM (export_causal_lm.py):
the same tokens, and the logits each token was chosen from within a bound, step by step.

    python generate_compare.py --family llama --bin BUILD/bin --work DIR [--new-tokens 64]

Three prompts of 5, 21 and 37 tokens (prefill chunks of 16 and pages of 8, so prompts span
chunks and pages) generate together in ds (one batch, continuous decoding); HF generates each
alone (fp32, greedy, no end-of-sequence stop). A token may differ only where HF's two best
logits were within 1e-4 (reported; the rest of that sequence is then not compared). Prints
one line per prompt and exits 1 on a mismatch.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_causal_lm import make  # noqa: E402

LOGITS_ATOL = 1e-5
TIE = 1e-4


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--family', required=True)
    ap.add_argument('--bin', required=True)
    ap.add_argument('--work', required=True)
    ap.add_argument('--new-tokens', type=int, default=64)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run([sys.executable, os.path.join(here, 'export_causal_lm.py'), '--family',
                    a.family, '--out', a.work], check=True)
    config = os.path.join(a.work, 'gen.json')
    with open(config, 'w') as f:
        json.dump({'dtype': 'fp32', 'max_tokens': 512, 'max_batch': 4, 'page_size': 8,
                   'prefill_chunk': 16}, f)
    gen = os.path.join(a.work, f'{a.family}.mlir')
    subprocess.run([os.path.join(a.bin, 'ds-opt'), os.path.join(a.work, f'{a.family}.pt2'),
                    '--inference', '--config', config, '-o', gen], check=True)
    g = torch.Generator().manual_seed(7)
    prompts = [torch.randint(1, 64, (n,), generator=g).tolist() for n in (5, 21, 37)]
    logits_path = os.path.join(a.work, f'{a.family}.logits.npy')
    cmd = [os.path.join(a.bin, 'ds-generate'), gen, '--max-new-tokens', str(a.new_tokens),
           '--logits', logits_path]
    for p in prompts:
        cmd += ['--prompt-ids', ','.join(map(str, p))]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split('\n')
    ds_tokens = [list(map(int, line.split())) for line in out[:len(prompts)]]
    ds_logits = np.load(logits_path)  # [steps, prompts, vocab]

    model = make(a.family)
    model.generation_config.eos_token_id = None
    failed = False
    for i, p in enumerate(prompts):
        with torch.no_grad():
            r = model.generate(torch.tensor([p]), max_new_tokens=a.new_tokens, do_sample=False,
                               pad_token_id=0, output_logits=True,
                               return_dict_in_generate=True)
        hf_tokens = r.sequences[0, len(p):].tolist()
        compared, diff, note = 0, 0.0, ''
        for s, (x, y) in enumerate(zip(ds_tokens[i], hf_tokens)):
            hf_step = r.logits[s][0]
            diff = max(diff, float((torch.from_numpy(ds_logits[s, i]) - hf_step).abs().max()))
            if x != y:
                top2 = hf_step.topk(2).values
                gap = float(top2[0] - top2[1])
                if gap < TIE:
                    note = f', step {s} a tie (HF top-2 within {gap:.1e}): not compared after'
                    break
                note = f', step {s}: ds {x} != HF {y} (HF top-2 {gap:.3g} apart)'
                failed = True
                break
            compared += 1
        if len(ds_tokens[i]) != a.new_tokens:
            failed = True
            note += f', ds generated {len(ds_tokens[i])}'
        if diff > LOGITS_ATOL:
            failed = True
        print(f'{a.family} prompt {len(p)} tokens: {compared}/{a.new_tokens} tokens equal to '
              f"HF generate, logits within {'%.1e' % diff} "
              f"({'ok' if diff <= LOGITS_ATOL else 'OVER'} {LOGITS_ATOL:g}){note}")
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()

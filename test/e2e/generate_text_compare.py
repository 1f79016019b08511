"""Text in, text out: ds-generate --prompt TEXT --tokenizer F against HF `tokenizers` and
`generate` (greedy, fp32) on a small causal LM whose vocabulary is the tokenizer's.

    python generate_text_compare.py --family llama --tokenizer llama3 --bin BUILD/bin --work DIR

The tokenizer is one of tokenizer_compare.py's (trained by HF `tokenizers`); HF encodes each
prompt with it, generates 24 tokens and decodes them with special tokens skipped; ds does all
three itself (lib/Tokenizer, the generator). Prints one line per prompt; exits 1 on a
difference.
"""
import argparse
import json
import os
import subprocess
import sys

import torch
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_causal_lm import make  # noqa: E402
from tokenizer_compare import FAMILIES, write_tokenizer  # noqa: E402

PROMPTS = ['The compiler splits the model', 'Ünïcödé 你好 👍 and numbers 12345',
           'def step(x):\n    return x']
NEW = 24


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--family', required=True)
    ap.add_argument('--tokenizer', choices=sorted(FAMILIES), required=True)
    ap.add_argument('--bin', required=True)
    ap.add_argument('--work', required=True)
    a = ap.parse_args()
    tok_path = write_tokenizer(a.tokenizer, a.work)
    tok = Tokenizer.from_file(tok_path)
    vocab = tok.get_vocab_size()
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run([sys.executable, os.path.join(here, 'export_causal_lm.py'), '--family',
                    a.family, '--out', a.work, '--vocab', str(vocab)], check=True)
    config = os.path.join(a.work, 'gen.json')
    with open(config, 'w') as f:
        json.dump({'dtype': 'fp32', 'max_tokens': 256, 'max_batch': 2, 'page_size': 8,
                   'prefill_chunk': 16}, f)
    gen = os.path.join(a.work, 'gen.mlir')
    subprocess.run([os.path.join(a.bin, 'ds-opt'), os.path.join(a.work, f'{a.family}.pt2'),
                    '--inference', '--config', config, '-o', gen], check=True)
    model = make(a.family, vocab)
    model.generation_config.eos_token_id = None
    failed = False
    for text in PROMPTS:
        # ds-generate finds tokenizer.json beside GEN.mlir.
        ds = subprocess.run([os.path.join(a.bin, 'ds-generate'), gen, '--prompt', text,
                             '--max-new-tokens', str(NEW)], check=True, capture_output=True,
                            text=True).stdout
        ds = ds[:-1] if ds.endswith('\n') else ds
        ids = tok.encode(text).ids
        with torch.no_grad():
            # The mask given: HF would mask a BOS whose id is the pad id.
            x = torch.tensor([ids])
            out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=NEW,
                                 do_sample=False, pad_token_id=0)
        hf = tok.decode(out[0, len(ids):].tolist(), skip_special_tokens=True)
        same = ds == hf
        failed |= not same
        print(f'{a.family} with a {a.tokenizer} tokenizer, prompt of {len(ids)} tokens: '
              f"{'text equal to HF' if same else 'DIFFERENT'}"
              f"{'' if same else f': ds {ds!r} HF {hf!r}'}")
    # --eos-id: a sequence ends at that token (printed), the others run on.
    gen_ids = [os.path.join(a.bin, 'ds-generate'), gen, '--max-new-tokens', str(NEW),
               '--prompt-ids', '5,6,7', '--prompt-ids', '8,9']
    full = subprocess.run(gen_ids, check=True, capture_output=True, text=True).stdout.split('\n')
    first = full[0].split()
    eos = first[4]
    stopped = subprocess.run(gen_ids + ['--eos-id', eos], check=True, capture_output=True,
                             text=True).stdout.split('\n')
    want = [' '.join(x.split()[:x.split().index(eos) + 1] if eos in x.split() else x.split())
            for x in full[:2]]
    ok = stopped[:2] == want
    failed |= not ok
    print(f"--eos-id {eos}: {'each sequence ends at it' if ok else f'WRONG: {stopped[:2]}'}"
          f" ({len(want[0].split())} and {len(want[1].split())} tokens)")
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()

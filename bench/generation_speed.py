"""Generation's speed on a ~100M-parameter Llama (random weights, fp32, one process): ds against
HF `generate` (PyTorch eager, static cache), at batch 1 and through ds-serve.

    .venv/bin/python bench/generation_speed.py [--threads N] [--requests R]

Batch 1 (a 128-token prompt, 128 new tokens, end of sequence ignored): the time to the first
token and the decoding rate, ds-generate --timing against HF `generate` timed the same way
(the first token's time from a run of one new token), with its static cache (what the issue
names) and its default dynamic one (faster here), medians of 3 after a warm-up.
Throughput: R requests (prompts of 32-256 tokens, 16-256 new tokens, seeded, end of sequence
ignored) through ds-serve (one GEN.mlir of 32 rows) at 1, 8 and 32 concurrent clients, new
tokens per second of wall time, against HF `generate` (dynamic cache) on the same requests in
batches of 1, 8 and 32 (left-padded, each batch running to its longest request; only the
requested tokens counted). llama.cpp is not measured here yet (docs/design/inference.md). Prints two tables.
"""
import argparse
import concurrent.futures as cf
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import torch
import transformers as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, 'build', 'bin')
VOCAB = 32000


def make_model():
    # ~100M parameters: untied 32000 x 768 embeddings (49M) and 8 layers of 6.3M.
    cfg = tf.LlamaConfig(vocab_size=VOCAB, hidden_size=768, intermediate_size=2048,
                         num_hidden_layers=8, num_attention_heads=12, num_key_value_heads=4,
                         max_position_embeddings=1024, use_cache=False)
    cfg._attn_implementation = 'sdpa'
    torch.manual_seed(0)
    return tf.LlamaForCausalLM(cfg).eval()


def export(model, path):
    ids = torch.randint(0, VOCAB, (2, 8))
    kwargs = {'input_ids': ids, 'attention_mask': torch.ones_like(ids),
              'position_ids': torch.arange(8).expand(2, 8).contiguous()}
    batch, tokens = torch.export.Dim('batch'), torch.export.Dim('tokens')
    dims = {k: {0: batch, 1: tokens} for k in kwargs}
    torch.export.save(torch.export.export(model, (), kwargs, dynamic_shapes=dims), path)


def compile_gen(work, name, rows, max_tokens):
    config = os.path.join(work, name + '.json')
    with open(config, 'w') as f:
        json.dump({'dtype': 'fp32', 'max_tokens': max_tokens, 'max_batch': rows,
                   'page_size': 16, 'prefill_chunk': 128}, f)
    gen = os.path.join(work, name + '.mlir')
    subprocess.run([os.path.join(BIN, 'ds-opt'), os.path.join(work, 'model.pt2'),
                    '--inference', '--config', config, '-o', gen], check=True)
    return gen


def hf_batch1(model, prompt, new, cache):
    x = torch.tensor([prompt])
    kw = dict(attention_mask=torch.ones_like(x), do_sample=False, pad_token_id=0,
              eos_token_id=None)
    if cache != 'dynamic':
        kw['cache_implementation'] = cache
    with torch.no_grad():
        model.generate(x, max_new_tokens=8, **kw)  # warm-up
        ttft, total = [], []
        for _ in range(3):
            t0 = time.perf_counter()
            model.generate(x, max_new_tokens=1, **kw)
            t1 = time.perf_counter()
            model.generate(x, max_new_tokens=new, **kw)
            t2 = time.perf_counter()
            ttft.append(t1 - t0)
            total.append(t2 - t1)
    t, T = statistics.median(ttft), statistics.median(total)
    return t, (new - 1) / (T - t)


def ds_batch1(gen, prompt, new, threads):
    ttft, rate = [], []
    for _ in range(4):  # the first a warm-up
        err = subprocess.run([os.path.join(BIN, 'ds-generate'), gen, '--prompt-ids',
                              ','.join(map(str, prompt)), '--max-new-tokens', str(new),
                              '--timing', '--compute-threads', str(threads)],
                             check=True, capture_output=True, text=True).stderr
        line = [x for x in err.splitlines() if x.startswith('time to first token')][-1]
        ttft.append(float(line.split()[4]) / 1e3)
        rate.append(float(line.split('decoding ')[1].split()[0]))
    return statistics.median(ttft[1:]), statistics.median(rate[1:])


def workload(n):
    rng = random.Random(0)
    return [([rng.randrange(VOCAB) for _ in range(rng.randrange(32, 257))],
             rng.randrange(16, 257)) for _ in range(n)]


def serve_throughput(gen, reqs, concurrency, threads):
    p = subprocess.Popen([os.path.join(BIN, 'ds-serve'), gen, '--port', '0', '--max-queue',
                          '1000', '--compute-threads', str(threads)],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = 'http://127.0.0.1:' + p.stdout.readline().split('127.0.0.1:')[1].split()[0]

    def one(r):
        body = json.dumps({'prompt': r[0], 'max_tokens': r[1], 'temperature': 0,
                           'ignore_eos': True}).encode()
        req = urllib.request.Request(url + '/v1/completions', body,
                                     {'Content-Type': 'application/json'})
        with urllib.request.urlopen(req, timeout=3600) as res:
            return json.loads(res.read())['usage']['completion_tokens']

    try:
        one(reqs[0])  # warm-up
        t0 = time.perf_counter()
        with cf.ThreadPoolExecutor(concurrency) as pool:
            tokens = sum(pool.map(one, reqs))
        return tokens / (time.perf_counter() - t0)
    finally:
        p.terminate()
        p.wait()


def hf_throughput(model, reqs, batch):
    tokens, t0 = 0, time.perf_counter()
    with torch.no_grad():
        for k in range(0, len(reqs), batch):
            group = reqs[k:k + batch]
            width = max(len(p) for p, _ in group)
            ids = torch.tensor([[0] * (width - len(p)) + p for p, _ in group])
            mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p, _ in group])
            model.generate(ids, attention_mask=mask, max_new_tokens=max(n for _, n in group),
                           do_sample=False, pad_token_id=0, eos_token_id=None)
            tokens += sum(n for _, n in group)
    return tokens / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--threads', type=int, default=os.cpu_count())
    ap.add_argument('--requests', type=int, default=32)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = make_model()
    params = sum(p.numel() for p in model.parameters())
    work = tempfile.mkdtemp()
    export(model, os.path.join(work, 'model.pt2'))
    # Exported without a cache (its forward returns the logits); HF generates with one.
    model.config.use_cache = True
    model.generation_config.use_cache = True
    gen1 = compile_gen(work, 'batch1', 1, 512)
    gen32 = compile_gen(work, 'batch32', 32, 32 * 512)
    prompt = random.Random(1).sample(range(VOCAB), 128)
    print(f'Llama-style, {params / 1e6:.0f}M parameters, fp32, {a.threads} threads; '
          f'{os.uname().machine} {torch.__config__.parallel_info().splitlines()[0]}')
    print('\nbatch 1 (128-token prompt, 128 new tokens)  time to first token   decode tokens/s')
    ds_t, ds_r = ds_batch1(gen1, prompt, 128, a.threads)
    print(f'  ds-generate                               {1e3 * ds_t:8.1f} ms     {ds_r:10.1f}')
    for cache in ('static', 'dynamic'):
        hf_t, hf_r = hf_batch1(model, prompt, 128, cache)
        print(f'  HF generate ({cache} cache){" " * (19 - len(cache))}{1e3 * hf_t:8.1f} ms'
              f'     {hf_r:10.1f}   (ds: {hf_t / ds_t:.2f}x the first token\'s speed, '
              f'{ds_r / hf_r:.2f}x the decoding rate)')
    reqs = workload(a.requests)
    print(f'\nthroughput, {len(reqs)} requests (prompts 32-256, 16-256 new tokens), new tokens/s')
    print('  concurrent   ds-serve   HF generate (batched)   ds / HF')
    for c in (1, 8, 32):
        ds = serve_throughput(gen32, reqs, c, a.threads)
        hf = hf_throughput(model, reqs, c)
        print(f'  {c:10d} {ds:10.1f} {hf:23.1f} {ds / hf:9.2f}x')


if __name__ == '__main__':
    main()

"""The GPU check's throughput table: ds's and PyTorch's step time on the GPT-2-small-sized
model, tokens/s and model FLOP utilization (nanoGPT's FLOPs per token, against PEAK TFLOP/s:
989, the H200's dense bf16 peak).
usage: throughput.py DS_LOG.jsonl TORCH.json DEVICE [PEAK]"""
import json
import statistics
import sys

from gpt2_model import SEQ, flops_per_token

ds = [json.loads(x) for x in open(sys.argv[1])]
pt = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
device = sys.argv[3]
peak = float(sys.argv[4]) if len(sys.argv) > 4 else 989.0
tokens = pt['tokens_per_step']
ds_ms = statistics.median(r['step_ms'] for r in (ds[2:] if len(ds) > 3 else ds))
rows = [('ds (bf16, --device %s)' % device, ds_ms), (pt['who'] + ' on ' + device, pt['step_ms'])]
print('GPT-2 small (12 layers, d_model 768, 12 heads, seq %d), %d tokens per step, %d params'
      % (SEQ, tokens, pt['params']))
print('| who | step ms (median) | tokens/s | MFU |')
print('|---|---|---|---|')
for who, ms in rows:
    tps = tokens / (ms / 1e3)
    mfu = flops_per_token(pt['params']) * tps / (peak * 1e12)
    print('| %s | %.1f | %.0f | %.1f%% |' % (who, ms, tps, 100 * mfu))
print('ds / PyTorch step time: %.2fx (MFU against %.0f TFLOP/s)' % (ds_ms / pt['step_ms'], peak))

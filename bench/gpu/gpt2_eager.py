"""PyTorch eager's step time on the GPU check's GPT-2-small-sized model, given its best: bf16
autocast over fp32 weights (mixed precision as DeepSpeed's bf16 keeps fp32 masters), fused
AdamW, TF32 off for the remaining fp32 products as in ds. Prints one JSON line.
usage: gpt2_eager.py DEVICE BATCH STEPS"""
import json
import statistics
import sys
import time

import torch

from gpt2_model import SEQ, VOCAB, flops_per_token, gpt2_small

device, batch, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.backends.cuda.matmul.allow_tf32 = False
model = gpt2_small().to(device).train()
n = sum(p.numel() for p in model.parameters())
opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), eps=1e-8,
                        weight_decay=0.1, fused=device == 'cuda')
g = torch.Generator().manual_seed(0)
times = []
for s in range(steps):
    x = torch.randint(0, VOCAB, (batch, SEQ), generator=g).to(device)
    y = torch.randint(0, VOCAB, (batch, SEQ), generator=g).to(device)
    if device == 'cuda':
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.autocast(device_type=device, dtype=torch.bfloat16):
        loss = model(x, y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if device == 'cuda':
        torch.cuda.synchronize()
    times.append((time.perf_counter() - t0) * 1e3)
ms = statistics.median(times[2:] if len(times) > 3 else times)
print(json.dumps({'who': 'PyTorch eager (bf16 autocast, fused AdamW)', 'step_ms': ms,
                  'params': n, 'tokens_per_step': batch * SEQ,
                  'flops_per_step': flops_per_token(n) * batch * SEQ,
                  'loss': float(loss.item())}))

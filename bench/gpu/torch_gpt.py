"""PyTorch eager's side of the GPU check's loss comparison: trains the same TorchScript export
on the same data in the same order with torch.optim.AdamW (single-tensor, as ds's update), on
DEVICE, TF32 off, and writes each step's loss as ds's log does ({"step": s, "loss": l}).
usage: torch_gpt.py DIR STEPS DEVICE LOG   (DIR as bench/gpu/prepare.sh writes build-gpu/gpt)"""
import json
import sys

import numpy as np
import torch

work, steps, device, log = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
cfg = json.load(open(work + '/config.json'))
p = cfg['optimizer']['params']
batch = cfg['train_batch_size']
model = torch.jit.load(work + '/model.pt', map_location=device)
model.train()
params = [q for q in model.parameters() if q.requires_grad]
opt = torch.optim.AdamW(params, lr=p['lr'], betas=tuple(p['betas']), eps=p['eps'],
                        weight_decay=p['weight_decay'], foreach=False)
idx, targets = np.load(work + '/idx.npy'), np.load(work + '/targets.npy')
with open(log, 'w') as f:
    for s in range(steps):  # step s + 1 reads samples [s G, (s + 1) G)
        x = torch.from_numpy(idx[s * batch:(s + 1) * batch]).to(device)
        y = torch.from_numpy(targets[s * batch:(s + 1) * batch]).to(device)
        opt.zero_grad()
        out = model(x, y)
        loss = out[-1] if isinstance(out, tuple) else out
        loss.backward()
        opt.step()
        f.write(json.dumps({'step': s + 1, 'loss': float(loss.item())}) + '\n')

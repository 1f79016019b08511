"""Exports the GPU check's GPT-2-small-sized model with torch.export (here, PyTorch 2.15 in
.venv): bench/gpu/prepare.sh imports it with ds-opt.
usage: .venv/bin/python bench/gpu/export_gpt2.py OUT.pt2 BATCH"""
import sys

import torch

from gpt2_model import SEQ, gpt2_small

model = gpt2_small().train()
batch = int(sys.argv[2])
example = (torch.zeros(batch, SEQ, dtype=torch.long), torch.zeros(batch, SEQ, dtype=torch.long))
torch.export.save(torch.export.export(model, example), sys.argv[1])
print('exported %s (%d parameters)' % (sys.argv[1], sum(p.numel() for p in model.parameters())))

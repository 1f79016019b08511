"""Exports the example GPT (nanoGPT with F.scaled_dot_product_attention and tied weights, as
in test/models/make_models2.py) with torch.export, as a user of PyTorch 2.x would.

Usage: .venv/bin/python examples/gpt/export_gpt.py OUT.pt2
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', 'test', 'models'))
from make_models2 import GPT  # noqa: E402

torch.manual_seed(0)
model = GPT().train()
example = (torch.zeros(4, 16, dtype=torch.long), torch.zeros(4, 16, dtype=torch.long))
torch.export.save(torch.export.export(model, example), sys.argv[1])
print('exported %s (%d parameters)' % (sys.argv[1], sum(p.numel() for p in model.parameters())))

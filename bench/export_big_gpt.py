"""Exports a GPT-2-medium-sized GPT (24 layers, d_model 1024, 16 heads, vocab 50304, block 1024)
as TorchScript for bench/import_gpt.sh. usage: /usr/bin/python3 export_big_gpt.py OUT.pt"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "models"))
from make_models import GPT, GPTConfig  # noqa: E402

torch.manual_seed(0)
model = GPT(GPTConfig(vocab_size=50304, block_size=1024, n_layer=24, n_head=16, n_embd=1024))
model.train()
n = sum(p.numel() for p in model.parameters())
torch.jit.save(torch.jit.script(model), sys.argv[1])
print("exported %s: %.1fM parameters" % (sys.argv[1], n / 1e6))

"""Exports a GPT (pre-norm blocks, causal SDPA, GELU MLP, tied embeddings: GPT-2/GPT-3's
shape) on the meta device with torch.export: the .pt2 holds shapes and no weights, so models of
any size export in seconds. Prints the parameter count (tied weights once).

usage: python meta_gpt.py OUT.pt2 --layers L --d D --heads H --vocab V --block T
                          [--batch B] [--seq S] [--device meta|cpu]"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(c, dim=2)
        q, k, v = [y.view(b, t, self.heads, c // self.heads).transpose(1, 2) for y in (q, k, v)]
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.out(F.gelu(self.fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, layers, d, heads, vocab, block):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(block, d)
        self.h = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.h:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def export(out, layers, d, heads, vocab, block, batch=1, seq=0, device="meta",
           dynamic_batch=False):
    """Writes the GPT's program to `out` (on `device`: meta, fake or cpu; with a dynamic batch
    dimension if asked, so that it imports at any micro-batch) and returns its parameter
    count."""
    torch.manual_seed(0)
    if device == "fake":
        from torch._subclasses.fake_tensor import FakeTensorMode
        context = FakeTensorMode()
    else:
        context = torch.device(device)
    with context:
        model = GPT(layers, d, heads, vocab, block)
        idx = torch.zeros(batch, seq or block, dtype=torch.long)
        dynamic = None
        if dynamic_batch:
            b = torch.export.Dim("batch", min=1, max=1 << 16)
            dynamic = ({0: b}, {0: b})
        program = torch.export.export(model, (idx, idx), dynamic_shapes=dynamic)
    torch.export.save(program, out)
    return sum(p.numel() for p in model.parameters())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    for name in ("layers", "d", "heads", "vocab", "block"):
        ap.add_argument("--" + name, type=int, required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=0, help="default: --block")
    ap.add_argument("--device", default="meta", choices=["meta", "fake", "cpu"],
                    help="meta: torch.device('meta'); fake: FakeTensorMode; cpu: real weights")
    ap.add_argument("--dynamic-batch", action="store_true",
                    help="export the batch dimension as dynamic (any micro-batch imports)")
    a = ap.parse_args()
    n = export(a.out, a.layers, a.d, a.heads, a.vocab, a.block, a.batch, a.seq, a.device,
               a.dynamic_batch)
    print("parameters: %d" % n)


if __name__ == "__main__":
    main()

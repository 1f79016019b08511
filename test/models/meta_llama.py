"""Exports a Llama (RMSNorm, rotary positions, grouped-query causal SDPA, SwiGLU, an untied
head: Llama 3's shape, as HF's LlamaForCausalLM computes it) on the meta device with
torch.export: the .pt2 holds shapes and no weights, so a 70B model exports in seconds. Plain
PyTorch rather than transformers' class: HF's mask builder gives the step a (seq x seq)
boolean mask to compute and hold (64 MB at 8192), where this model's SDPA is causal alone.
Prints the parameter count.

usage: python meta_llama.py OUT.pt2 --layers L --d D --heads H --kv-heads K --ffn F --vocab V
                            --seq S [--batch B]"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class Layer(nn.Module):
    def __init__(self, d, heads, kv_heads, ffn):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
        self.input_layernorm = RMSNorm(d)
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.v_proj = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)
        self.post_attention_layernorm = RMSNorm(d)
        self.gate_proj = nn.Linear(d, ffn, bias=False)
        self.up_proj = nn.Linear(d, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, d, bias=False)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(b, t, self.heads, self.hd).transpose(1, 2)
        k = self.k_proj(h).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        v = self.v_proj(h).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o_proj(y.transpose(1, 2).reshape(b, t, d))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    def __init__(self, layers, d, heads, kv_heads, ffn, vocab, theta):
        super().__init__()
        self.hd, self.theta = d // heads, theta
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList([Layer(d, heads, kv_heads, ffn) for _ in range(layers)])
        self.norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, input_ids, labels):
        t = input_ids.shape[1]
        # The rotary angles from the positions (computed, not a stored buffer: nothing real to
        # keep on the meta device).
        inv = 1.0 / self.theta ** (torch.arange(0, self.hd, 2, device=input_ids.device).float()
                                   / self.hd)
        angles = torch.arange(t, device=input_ids.device).float()[:, None] * inv[None, :]
        emb = torch.cat((angles, angles), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten())


def export(out, layers, d, heads, kv_heads, ffn, vocab, seq, batch=1, theta=500000.0):
    """Writes the weight-free program to `out`; returns the parameter count."""
    with torch.device("meta"):
        model = Llama(layers, d, heads, kv_heads, ffn, vocab, theta)
        ids = torch.zeros(batch, seq, dtype=torch.long)
        program = torch.export.export(model, (ids, ids))
    torch.export.save(program, out)
    return sum(p.numel() for p in model.parameters())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    for name in ("layers", "d", "heads", "kv-heads", "ffn", "vocab", "seq"):
        ap.add_argument("--" + name, type=int, required=True)
    ap.add_argument("--batch", type=int, default=1)
    a = ap.parse_args()
    print(export(a.out, a.layers, a.d, a.heads, a.kv_heads, a.ffn, a.vocab, a.seq, a.batch))


if __name__ == "__main__":
    main()

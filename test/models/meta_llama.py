"""Exports HF transformers' LlamaForCausalLM (RMSNorm, rotary positions, grouped-query SDPA,
SwiGLU, an untied head: Llama 3's shape) on the meta device with torch.export: the .pt2 holds
shapes and no weights, so a 70B model exports in seconds. Prints the parameter count.

usage: python meta_llama.py OUT.pt2 --layers L --d D --heads H --kv-heads K --ffn F --vocab V
                            --seq S [--batch B]"""
import argparse

import torch
import torch.nn as nn


class LlamaLoss(nn.Module):
    """The causal LM's loss of (input_ids, labels), as HF computes it (labels shifted)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, labels):
        return self.model(input_ids=input_ids, labels=labels, use_cache=False).loss


def export(out, layers, d, heads, kv_heads, ffn, vocab, seq, batch=1, rope_theta=500000.0):
    """Writes the weight-free program to `out`; returns the parameter count."""
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=d, intermediate_size=ffn,
                      num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=kv_heads, max_position_embeddings=seq,
                      rope_theta=rope_theta, tie_word_embeddings=False, attention_dropout=0.0)
    cfg._attn_implementation = "sdpa"
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    with torch.device("meta"):
        model = LlamaLoss(LlamaForCausalLM(cfg))
    # The rotary frequencies are a buffer the program computes with: kept real (on the CPU).
    model.model.model.rotary_emb = LlamaRotaryEmbedding(config=cfg)
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

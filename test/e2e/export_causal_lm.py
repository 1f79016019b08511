"""Exports small HF causal LMs as users export them for generation: the model itself (no
wrapper; config.use_cache off, so forward returns the logits without a cache object), with
input_ids, attention_mask and position_ids of dynamic batch and length.

    python export_causal_lm.py --family llama|qwen2|gpt2 --out DIR [--vocab N]
                                                       (writes DIR/FAMILY.pt2)
"""
import argparse
import os

import torch


def make(family, vocab=64):
    import transformers as tf
    common = dict(vocab_size=vocab, max_position_embeddings=128, use_cache=False)
    if family == 'llama':  # grouped-query heads, rotary positions
        cfg = tf.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, **common)
        cls = tf.LlamaForCausalLM
    elif family == 'qwen2':  # biased q/k/v projections, grouped-query heads
        cfg = tf.Qwen2Config(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, **common)
        cls = tf.Qwen2ForCausalLM
    elif family == 'gpt2':  # learned positions, fused qkv, tied head
        cfg = tf.GPT2Config(vocab_size=vocab, n_positions=128, n_embd=32, n_layer=2, n_head=4,
                            bos_token_id=0, eos_token_id=0, use_cache=False)
        cls = tf.GPT2LMHeadModel
    else:
        raise SystemExit(f'unknown family {family}')
    cfg._attn_implementation = 'sdpa'
    torch.manual_seed(0)
    return cls(cfg).eval()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--family', required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--vocab', type=int, default=64)
    a = ap.parse_args()
    model = make(a.family, a.vocab)
    ids = torch.randint(0, 64, (2, 8))
    kwargs = {'input_ids': ids, 'attention_mask': torch.ones_like(ids),
              'position_ids': torch.arange(8).expand(2, 8).contiguous()}
    batch, tokens = torch.export.Dim('batch'), torch.export.Dim('tokens')
    dims = {k: {0: batch, 1: tokens} for k in kwargs}
    program = torch.export.export(model, (), kwargs, dynamic_shapes=dims)
    os.makedirs(a.out, exist_ok=True)
    torch.export.save(program, os.path.join(a.out, f'{a.family}.pt2'))


if __name__ == '__main__':
    main()

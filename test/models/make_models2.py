"""Generate the PyTorch 2.x test models for ds, with the torch installed in .venv.

Usage: .venv/bin/python make_models2.py OUTDIR [NAME...]   (no names = all)

For each family NAME and each of its kinds writes OUTDIR/NAME_KIND.pt (TorchScript: `script`,
`trace`) or OUTDIR/NAME_KIND.pt2 (torch.export: `export` as exported, the ATen training IR;
`export-core` after .run_decompositions(), the core ATen IR; `export-dynamic` with a dynamic
batch dimension, `export-bf16` of the model cast to bf16 first, as users export a bf16
model), OUTDIR/NAME.inputs (one line
per forward input: NAME=tensor<AxBxTYPE>), and for a .pt2 OUTDIR/NAME_KIND.pt2.state.pth, the
eager module's state_dict (torch.save), which a .pt2's import must reproduce (a TorchScript
archive's is that of torch.jit.load(file)). Models are built under torch.manual_seed(0). After saving, each file is loaded back and its loss compared to eager.
"""
import copy
import inspect
import os
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.filterwarnings('ignore')  # TorchScript's deprecation and tracer warnings


# --------------------------------------------------------------------------
# gpt2x: nanoGPT as written for PyTorch 2.x (F.scaled_dot_product_attention, tied weights)
# --------------------------------------------------------------------------
class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head
        self.n_embd = n_embd
        self.dropout = 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None,
                                           dropout_p=self.dropout if self.training else 0.0,
                                           is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class GroupedQueryAttention(nn.Module):
    """gpt2xgqa's attention: n_head query heads over n_kv key/value heads (SDPA enable_gqa)."""

    def __init__(self, n_embd: int, n_head: int, n_kv: int):
        super().__init__()
        self.width = n_embd // n_head
        self.c_attn = nn.Linear(n_embd, (n_head + 2 * n_kv) * self.width)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_kv, self.n_embd = n_head, n_kv, n_embd

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        kv = self.n_kv * self.width
        q, k, v = self.c_attn(x).split([self.n_embd, kv, kv], dim=2)
        q = q.view(B, T, self.n_head, self.width).transpose(1, 2)
        k = k.view(B, T, self.n_kv, self.width).transpose(1, 2)
        v = v.view(B, T, self.n_kv, self.width).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int, n_kv_head: int = 0):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = (GroupedQueryAttention(n_embd, n_head, n_kv_head) if n_kv_head
                     else CausalSelfAttention(n_embd, n_head))
        self.ln_2 = nn.LayerNorm(n_embd)
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, vocab: int = 64, block_size: int = 16, n_layer: int = 2,
                 n_head: int = 2, n_embd: int = 32, n_kv_head: int = 0):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head, n_kv_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.wte.weight = self.lm_head.weight  # weight tying
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


# --------------------------------------------------------------------------
# lm2x: nn.TransformerEncoder (its attention calls SDPA in 2.x), no dropout
# --------------------------------------------------------------------------
class TransformerLM(nn.Module):
    def __init__(self, vocab: int = 64, block_size: int = 16, d_model: int = 32):
        super().__init__()
        self.vocab = vocab
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.randn(block_size, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model=d_model, nhead=2, dim_feedforward=64,
                                           dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        T = idx.size(1)
        x = self.tok(idx) + self.pos[:T]
        mask = torch.triu(torch.full((T, T), float('-inf'), device=idx.device), diagonal=1)
        x = self.encoder(x, mask=mask, is_causal=True)
        logits = self.head(x)
        return F.cross_entropy(logits.view(-1, self.vocab), targets.view(-1))


# --------------------------------------------------------------------------
# ops2x: every variant of the 2.x ops ds decomposes, in one small LM: SDPA with a bool mask,
# an explicit scale and grouped-query heads, SDPA with an additive float mask, nn.RMSNorm with
# and without eps, a SwiGLU MLP (F.silu)
# --------------------------------------------------------------------------
class OpsLM(nn.Module):
    def __init__(self, vocab: int = 64, block_size: int = 16, d: int = 32):
        super().__init__()
        self.vocab = vocab
        self.emb = nn.Embedding(vocab, d)
        self.norm1 = nn.RMSNorm(d)
        self.q = nn.Linear(d, d, bias=False)
        self.kv = nn.Linear(d, d, bias=False)  # 2 key/value heads of 8 for 4 query heads
        self.o = nn.Linear(d, d)
        self.norm2 = nn.RMSNorm(d, eps=1e-5)
        self.gate = nn.Linear(d, 64, bias=False)
        self.up = nn.Linear(d, 64, bias=False)
        self.down = nn.Linear(64, d, bias=False)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        B, T = idx.size()
        x = self.emb(idx)
        h = self.norm1(x)
        q = self.q(h).view(B, T, 4, 8).transpose(1, 2)
        k, v = self.kv(h).view(B, T, 2, 16).transpose(1, 2).split(8, dim=-1)
        band = torch.ones(T, T, dtype=torch.bool, device=idx.device).tril().triu(-4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=band, scale=0.3, enable_gqa=True)
        pos = torch.arange(T, device=idx.device)
        bias = -0.1 * (pos[:, None] - pos[None, :]).abs().float()
        a = F.scaled_dot_product_attention(a, a, a, attn_mask=bias)
        x = x + self.o(a.transpose(1, 2).reshape(B, T, 32))
        h = self.norm2(x)
        x = x + self.down(F.silu(self.gate(h)) * self.up(h))
        logits = self.head(x)
        return F.cross_entropy(logits.view(-1, self.vocab), targets.view(-1))


# --------------------------------------------------------------------------
# bn2x: BatchNorm in training mode, whose running statistics a .pt2 updates in place (ATen
# training IR) or returns as buffer mutations (core ATen IR)
# --------------------------------------------------------------------------
class BNNet(nn.Module):
    def __init__(self):
        super().__init__()
        # No bias before BatchNorm: its gradient is zero up to rounding, which Adam amplifies.
        self.fc1 = nn.Linear(16, 32, bias=False)
        self.bn = nn.BatchNorm1d(32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.fc2(F.relu(self.bn(self.fc1(x)))), y)


# --------------------------------------------------------------------------
# HF transformers, small configs (no download); forward(input_ids, labels) -> loss
# --------------------------------------------------------------------------
class HFLoss(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, labels=labels, use_cache=False).loss


class HFMaskedLoss(nn.Module):
    """A padded batch as a data collator makes it: the mask and -100 labels on the padding."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                labels: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask, labels=labels,
                          use_cache=False).loss


class HFMaskedTypesLoss(HFMaskedLoss):
    """BERT's collator batch with its token types (two segments) as an input too."""

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                labels: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask, labels=labels,
                          token_type_ids=token_type_ids).loss


class HFMaskedPositionsLoss(HFMaskedLoss):
    """A left-padded batch with its position ids as an input (counted from each sample's
    first real token, as HF's generate and packed-sequence collators give them)."""

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                labels: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask, labels=labels,
                          position_ids=position_ids, use_cache=False).loss


def make_hf_padded(arch, positions=16):
    """A small decoder of `arch` fed padded batches (HFMaskedLoss) of up to `positions`."""
    import transformers
    config, model = {
        'llama': ('LlamaConfig', 'LlamaForCausalLM'),
        'qwen2': ('Qwen2Config', 'Qwen2ForCausalLM'),
        'mistral': ('MistralConfig', 'MistralForCausalLM'),
        'phi3': ('Phi3Config', 'Phi3ForCausalLM'),
        'opt': ('OPTConfig', 'OPTForCausalLM'),
        'gemma2': ('Gemma2Config', 'Gemma2ForCausalLM'),
    }[arch]
    extra = {'sliding_window': 8} if arch == 'mistral' else {}
    if arch == 'phi3':
        extra = {'pad_token_id': 0, 'resid_pdrop': 0.0, 'embd_pdrop': 0.0}
    if arch == 'gemma2':
        # Gemma2: soft-capped attention scores and logits, every other layer a sliding window,
        # a tied vocabulary with padding_idx 0, GeGLU.
        extra = {'head_dim': 8, 'sliding_window': 8, 'query_pre_attn_scalar': 8}
    if arch == 'opt':
        # OPT: learned positions from the mask's cumsum, padding_idx 1, biases everywhere.
        extra = {'pad_token_id': 1, 'dropout': 0.0, 'ffn_dim': 64, 'word_embed_proj_dim': 32}
    else:
        extra.update(intermediate_size=64, num_key_value_heads=2)
    cfg = getattr(transformers, config)(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=positions, attention_dropout=0.0, **extra)
    # Gemma2's soft-capping needs HF's eager attention (no SDPA path in transformers).
    cfg._attn_implementation = 'eager' if arch == 'gemma2' else 'sdpa'
    return lambda: HFMaskedLoss(getattr(transformers, model)(cfg))


def _small_bert():
    from transformers import BertConfig, BertForMaskedLM
    cfg = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=16, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
    cfg._attn_implementation = 'sdpa'
    return BertForMaskedLM(cfg)


def make_hf_bert_padded():
    # BERT (MLM) fed a collator's batch: its attention_mask becomes the encoder's additive
    # mask (HF's masking utilities index it), labels -100 on the padding.
    return HFMaskedLoss(_small_bert())


def make_hf_bert_types():
    return HFMaskedTypesLoss(make_hf_bert_padded().model)


def make_hf_llama_positions():
    return HFMaskedPositionsLoss(make_hf_padded('llama')().model)


def make_hf_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0,
                     eos_token_id=0)
    cfg._attn_implementation = 'sdpa'
    return HFLoss(GPT2LMHeadModel(cfg))


def make_hf_llama(attention='sdpa'):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16,
                      attention_dropout=0.0)
    cfg._attn_implementation = attention
    return HFLoss(LlamaForCausalLM(cfg))


def make_hf_mixtral(experts, attention='sdpa'):
    # Mixtral: 4 experts, top-2 routing renormalised, SwiGLU experts, the router's auxiliary
    # load-balancing loss in .loss (coefficient 0.05, so a wrong aux term moves the loss). The
    # eager experts do not export (FACTS.md); `experts` is HF's batched_mm or grouped_mm form.
    from transformers import MixtralConfig, MixtralForCausalLM
    cfg = MixtralConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16,
                        num_local_experts=4, num_experts_per_tok=2, output_router_logits=True,
                        router_aux_loss_coef=0.05, router_jitter_noise=0.0,
                        attention_dropout=0.0, experts_implementation=experts)
    cfg._attn_implementation = attention
    return HFLoss(MixtralForCausalLM(cfg))


# The capacity that moe.test drops Mixtral's tokens at (ds's `moe` block, DeepSpeed-MoE's
# arguments): C = ceil(64 tokens / 4 experts x 0.75 x 2 choices) = 24 of a micro-batch's 128
# routed rows per expert, so about a third of the rows are dropped.
MIXTRAL_DROP = {'capacity_factor': 0.75, 'min_capacity': 4}


def make_hf_mixtral_dropped():
    # The judge of ds's token dropping: Mixtral (batched_mm) whose routers keep their choices
    # but zero the weights of the token-expert pairs that DeepSpeed-MoE's own gate
    # (deepspeed.moe.sharded_moe.top2gating, on the router's logits, without the 2nd-expert
    # sampling) drops past the capacity; the kept pairs keep the router's weights. The same
    # parameters and names as hfmixtral (the forwards are replaced per instance).
    import types
    from deepspeed.moe.sharded_moe import top2gating
    model = make_hf_mixtral('batched_mm')

    def gate_forward(self, hidden_states):
        logits, scores, indices = self.dropless_forward(hidden_states)
        routes = top2gating(logits.detach().float().clone(), MIXTRAL_DROP['capacity_factor'],
                            MIXTRAL_DROP['min_capacity'], drop_tokens=True,
                            top2_2nd_expert_sampling=False, sparse_routes=True)[3]
        kept = routes.t() >= 0  # [tokens, 2] in the router's choice order, -1: dropped
        return logits, torch.where(kept, scores, torch.zeros_like(scores)), indices

    for layer in model.model.model.layers:
        gate = layer.mlp.gate
        gate.dropless_forward = gate.forward
        gate.forward = types.MethodType(gate_forward, gate)
    return model


def make_hf_qwen_moe(experts):
    # Qwen2-MoE: 8 experts, top-2 without renormalisation (norm_topk_prob False), a shared
    # expert behind a sigmoid gate beside the routed ones, the aux loss at 0.05.
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM
    cfg = Qwen2MoeConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                         moe_intermediate_size=24, shared_expert_intermediate_size=40,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=16, num_experts=8, num_experts_per_tok=2,
                         norm_topk_prob=False, output_router_logits=True,
                         router_aux_loss_coef=0.05, attention_dropout=0.0,
                         experts_implementation=experts)
    cfg._attn_implementation = 'sdpa'
    return HFLoss(Qwen2MoeForCausalLM(cfg))


def make_hf_moe(arch):
    # OLMoE (8 experts, top-2 not renormalised, q/k norms) and Qwen3-MoE (8 experts, top-2
    # renormalised, per-head q/k norms), batched_mm experts, the aux loss at 0.05.
    import transformers
    common = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=16, attention_dropout=0.0,
                  num_experts=8, num_experts_per_tok=2, output_router_logits=True,
                  router_aux_loss_coef=0.05, experts_implementation='batched_mm')
    if arch == 'olmoe':
        cfg = transformers.OlmoeConfig(intermediate_size=24, **common)
        model = transformers.OlmoeForCausalLM
    else:
        cfg = transformers.Qwen3MoeConfig(intermediate_size=48, moe_intermediate_size=24,
                                          norm_topk_prob=True, head_dim=8, **common)
        model = transformers.Qwen3MoeForCausalLM
    cfg._attn_implementation = 'sdpa'
    return HFLoss(model(cfg))


def make_hf_bert():
    # A traced BERT reads its token types by a gather from an integer buffer (no
    # token_type_ids given), its positions by a slice of another.
    return HFLoss(_small_bert())


def _tokens(hi, shape):
    return lambda g: torch.randint(0, hi, shape, generator=g, dtype=torch.int64)


LM_INPUTS = [('idx', (4, 16), torch.int64, _tokens(64, (4, 16))),
             ('targets', (4, 16), torch.int64, _tokens(64, (4, 16)))]
def _padding_mask(shape):
    # Left padding (as train_compare.py writes the data), each sample at least half its length.
    def make(g):
        lengths = torch.randint(shape[1] // 2, shape[1] + 1, (shape[0], 1), generator=g)
        return (torch.arange(shape[1])[None, :] >= shape[1] - lengths).to(torch.int64)
    return make


HF_PADDED_INPUTS = [('input_ids', (4, 16), torch.int64, _tokens(64, (4, 16))),
                    ('attention_mask', (4, 16), torch.int64, _padding_mask((4, 16))),
                    ('labels', (4, 16), torch.int64, _tokens(64, (4, 16)))]
HF_TYPES_INPUTS = HF_PADDED_INPUTS + [('token_type_ids', (4, 16), torch.int64,
                                       _tokens(2, (4, 16)))]
HF_POSITIONS_INPUTS = HF_PADDED_INPUTS + [('position_ids', (4, 16), torch.int64,
                                           _tokens(16, (4, 16)))]
# Past 2048 tokens HF's causal mask (seq x seq) is too large a constant to fold: the importer
# computes it in the step.
LONG = (2, 3072)
HF_LONG_INPUTS = [('input_ids', LONG, torch.int64, _tokens(64, LONG)),
                  ('attention_mask', LONG, torch.int64, _padding_mask(LONG)),
                  ('labels', LONG, torch.int64, _tokens(64, LONG))]
HF_INPUTS = [('input_ids', (4, 16), torch.int64, _tokens(64, (4, 16))),
             ('labels', (4, 16), torch.int64, _tokens(64, (4, 16)))]

# name: (constructor, inputs, kinds)
FAMILIES = {
    'gpt2x': (GPT, LM_INPUTS, ['script', 'trace', 'export', 'export-core', 'export-dynamic']),
    # 4 query heads over 2 key/value heads: sp 4 divides the query heads, not the others.
    'gpt2xgqa': (lambda: GPT(n_head=4, n_kv_head=2), LM_INPUTS, ['export']),
    'lm2x': (TransformerLM, LM_INPUTS, ['script', 'export']),
    'ops2x': (OpsLM, LM_INPUTS, ['script', 'export', 'export-core']),
    'bn2x': (BNNet, [('x', (8, 16), torch.float32, lambda g: torch.randn((8, 16), generator=g)),
                     ('y', (8,), torch.int64, _tokens(4, (8,)))], ['export', 'export-core']),
    # .run_decompositions() fails on HF GPT-2 (a view of a non-contiguous tensor; FACTS.md).
    'hfgpt2': (make_hf_gpt2, HF_INPUTS, ['trace', 'export']),
    'hfllama': (make_hf_llama, HF_INPUTS, ['trace', 'export', 'export-core', 'export-bf16']),
    # Eager attention (its softmax in f32 inside a bf16 model, as HF writes it).
    'hfllamaeager': (lambda: make_hf_llama('eager'), HF_INPUTS, ['export', 'export-bf16']),
    'hfbert': (make_hf_bert, HF_INPUTS, ['trace', 'export']),
    'hfmixtral': (lambda: make_hf_mixtral('batched_mm'), HF_INPUTS, ['export']),
    'hfmixtralg': (lambda: make_hf_mixtral('grouped_mm'), HF_INPUTS, ['export']),
    'hfmixtraldrop': (make_hf_mixtral_dropped, HF_INPUTS, ['export']),
    # Eager attention: PyTorch's FlopCounterMode counts its products as ds counts ds.attention
    # (flops.test; an SDPA's backward it counts with the recomputed scores, one product more).
    'hfmixtrale': (lambda: make_hf_mixtral('batched_mm', 'eager'), HF_INPUTS, ['export']),
    'hfqwenmoe': (lambda: make_hf_qwen_moe('batched_mm'), HF_INPUTS, ['export']),
    'hfolmoe': (lambda: make_hf_moe('olmoe'), HF_INPUTS, ['export']),
    'hfqwen3moe': (lambda: make_hf_moe('qwen3'), HF_INPUTS, ['export']),
    'hfqwenmoeg': (lambda: make_hf_qwen_moe('grouped_mm'), HF_INPUTS, ['export']),
    'hfllamapad': (lambda: make_hf_padded('llama')(), HF_PADDED_INPUTS, ['trace', 'export']),
    'hfqwen2pad': (lambda: make_hf_padded('qwen2')(), HF_PADDED_INPUTS, ['trace', 'export']),
    'hfmistralpad': (lambda: make_hf_padded('mistral')(), HF_PADDED_INPUTS, ['trace', 'export']),
    'hfphi3pad': (lambda: make_hf_padded('phi3')(), HF_PADDED_INPUTS, ['trace', 'export']),
    'hfoptpad': (lambda: make_hf_padded('opt')(), HF_PADDED_INPUTS, ['trace', 'export']),
    'hfgemma2pad': (lambda: make_hf_padded('gemma2')(), HF_PADDED_INPUTS, ['trace', 'export']),
    'hfbertpad': (make_hf_bert_padded, HF_PADDED_INPUTS, ['trace', 'export']),
    'hfberttypes': (make_hf_bert_types, HF_TYPES_INPUTS, ['trace', 'export']),
    'hfllamapos': (make_hf_llama_positions, HF_POSITIONS_INPUTS, ['trace', 'export']),
    'hfllamalong': (lambda: make_hf_padded('llama', LONG[1])(), HF_LONG_INPUTS, ['export']),
}

_MLIR_DTYPE = {torch.float32: 'f32', torch.int64: 'i64', torch.float16: 'f16',
               torch.bfloat16: 'bf16', torch.int32: 'i32', torch.bool: 'i1'}


def mlir_type(shape, dtype) -> str:
    return 'tensor<' + ''.join('%dx' % d for d in shape) + _MLIR_DTYPE[dtype] + '>'


def path_of(outdir, name, kind):
    return os.path.join(outdir, '%s_%s.%s' % (name, kind, 'pt2' if 'export' in kind else 'pt'))


def save(model, kind, inputs, path):
    if kind == 'script':
        torch.jit.save(torch.jit.script(model), path)
    elif kind == 'trace':
        torch.jit.save(torch.jit.trace(model, inputs, check_trace=False), path)
    else:
        dynamic = None
        if kind == 'export-dynamic':  # the batch dimension of every input declared dynamic
            batch = torch.export.Dim('batch')
            names = inspect.signature(model.forward).parameters
            dynamic = {n: {0: batch} for n in names}
        if kind == 'export-bf16':  # as a user exports a model loaded or cast to bf16
            model = copy.deepcopy(model).to(torch.bfloat16)
        ep = torch.export.export(model, inputs, dynamic_shapes=dynamic)
        if kind == 'export-core':
            ep = ep.run_decompositions()
        torch.export.save(ep, path)


def load(kind, path):
    if 'export' in kind:
        m = torch.export.load(path).module()
        return m, None
    m = torch.jit.load(path)
    m.train()
    return m, m.state_dict()


def build(name: str, outdir: str, kinds) -> bool:
    ctor, specs, all_kinds = FAMILIES[name]
    torch.manual_seed(0)
    model = ctor()
    model.train()
    g = torch.Generator().manual_seed(0)
    inputs = tuple(s[3](g) for s in specs)
    with open(os.path.join(outdir, name + '.inputs'), 'w') as f:
        for (iname, shape, dtype, _) in specs:
            f.write('%s=%s\n' % (iname, mlir_type(shape, dtype)))
    with torch.no_grad():
        ref = model(*inputs)
    ok = True
    for kind in kinds or all_kinds:
        if kind not in all_kinds:
            print('%s has no kind %r; its kinds: %s' % (name, kind, ', '.join(all_kinds)))
            return False
        p = path_of(outdir, name, kind)
        save(model, kind, inputs, p)
        loaded, sd = load(kind, p)
        with torch.no_grad():
            got = loaded(*inputs)
            want = copy.deepcopy(model).to(torch.bfloat16)(*inputs) if kind == 'export-bf16' \
                else ref
        same = torch.allclose(want, got, rtol=1e-5, atol=1e-6)
        ok = ok and same
        if sd is None:
            saved = copy.deepcopy(model).to(torch.bfloat16) if kind == 'export-bf16' else model
            torch.save({k: v.detach().clone() for k, v in saved.state_dict().items()},
                       p + '.state.pth')
        print('check %-8s %-11s eager=%.6f loaded=%.6f %s' % (
            name, kind, ref.item(), got.item(), 'OK' if same else 'MISMATCH'))
    return ok


def main(argv) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    outdir = argv[1]
    os.makedirs(outdir, exist_ok=True)
    requests = argv[2:] or list(FAMILIES)
    ok = True
    for r in requests:  # NAME or NAME:KIND
        name, _, kind = r.partition(':')
        if name not in FAMILIES:
            print('unknown model %r; known: %s' % (name, ', '.join(FAMILIES)))
            return 2
        ok = build(name, outdir, [kind] if kind else None) and ok
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv))

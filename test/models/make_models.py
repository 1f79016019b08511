#!/usr/bin/python3
"""Generate small TorchScript test models for ds.

Usage: /usr/bin/python3 make_models.py OUTDIR [NAME...]   (no names = all)

For each family NAME writes:
  OUTDIR/NAME_script.pt   torch.jit.script(model), training mode, not frozen
  OUTDIR/NAME_trace.pt    torch.jit.trace(model, example_inputs), training mode
  OUTDIR/NAME.inputs      one line per forward input: NAME=tensor<AxBxTYPE>
Models are built under torch.manual_seed(0), so output is deterministic.
After saving, each archive is loaded back and its loss compared to eager.
"""
import math
import os
import sys
from typing import List, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F


# --------------------------------------------------------------------------
# mlp
# --------------------------------------------------------------------------
class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.act1 = nn.ReLU()
        self.fc2 = nn.Linear(32, 32)
        self.act2 = nn.GELU()
        self.fc3 = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = self.fc3(self.act2(self.fc2(self.act1(self.fc1(x)))))
        return F.cross_entropy(logits, y)


# --------------------------------------------------------------------------
# gpt: nanoGPT-style
# --------------------------------------------------------------------------
class GPTConfig:
    def __init__(self, vocab_size=64, block_size=16, n_layer=2, n_head=2,
                 n_embd=32, dropout=0.0, bias=True, gelu='none'):
        self.vocab_size = vocab_size
        self.block_size = block_size
        self.n_layer = n_layer
        self.n_head = n_head
        self.n_embd = n_embd
        self.dropout = dropout
        self.bias = bias
        self.gelu = gelu  # nn.GELU's approximate: 'none' (erf) or 'tanh' (GPT-2's gelu_new)


class LayerNorm(nn.Module):
    """LayerNorm with optional bias (as in nanoGPT); bias=True here."""

    def __init__(self, ndim: int, bias: bool):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        self.register_buffer(
            "bias",
            torch.tril(torch.ones(config.block_size, config.block_size))
            .view(1, 1, config.block_size, config.block_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        y = self.resid_dropout(self.c_proj(y))
        return y


class GPTMLP(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU(approximate=getattr(config, 'gelu', 'none'))
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.c_fc(x)
        x = self.gelu(x)
        x = self.c_proj(x)
        x = self.dropout(x)
        return x


class Block(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = GPTMLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.block_size = config.block_size
        self.vocab_size = config.vocab_size
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        # weight tying
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith('c_proj.weight'):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        b, t = idx.size()
        assert t <= self.block_size
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        tok_emb = self.transformer.wte(idx)
        pos_emb = self.transformer.wpe(pos)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


# --------------------------------------------------------------------------
# lm: nn.TransformerEncoder based
# --------------------------------------------------------------------------
class TransformerLM(nn.Module):
    def __init__(self, vocab: int = 64, block_size: int = 16, d_model: int = 32,
                 dropout: float = 0.1):
        super().__init__()
        self.vocab = vocab
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.randn(block_size, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model=d_model, nhead=2, dim_feedforward=64,
                                           dropout=dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        T = idx.size(1)
        x = self.tok(idx) + self.pos[:T]
        mask = torch.triu(torch.full((T, T), float('-inf'), device=idx.device), diagonal=1)
        x = self.encoder(x, mask=mask)
        logits = self.head(x)
        return F.cross_entropy(logits.view(-1, self.vocab), targets.view(-1))


# --------------------------------------------------------------------------
# torchvision wrappers
# --------------------------------------------------------------------------
class ClsLoss(nn.Module):
    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.net(x), y)


def make_vit():
    import torchvision
    net = torchvision.models.VisionTransformer(
        image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
        mlp_dim=64, num_classes=10)
    # torchvision zero-initialises the classifier head, which makes the loss
    # exactly log(10) independent of the input; give it small random weights
    # so that numerical tests actually exercise the encoder.
    nn.init.normal_(net.heads.head.weight, std=0.02)
    return ClsLoss(net)


def make_resnet18():
    import torchvision
    return ClsLoss(torchvision.models.resnet18(num_classes=10))


# --------------------------------------------------------------------------
# registry: name -> (constructor, [(input name, shape, dtype, sampler)])
# --------------------------------------------------------------------------
def _randn(shape):
    return lambda g: torch.randn(shape, generator=g)


def _randint(hi, shape):
    return lambda g: torch.randint(0, hi, shape, generator=g, dtype=torch.int64)


FAMILIES = {
    'mlp': (MLP, [('x', (8, 16), torch.float32, _randn((8, 16))),
                  ('y', (8,), torch.int64, _randint(4, (8,)))]),
    'gpt': (lambda: GPT(GPTConfig()),
            [('idx', (4, 16), torch.int64, _randint(64, (4, 16))),
             ('targets', (4, 16), torch.int64, _randint(64, (4, 16)))]),
    # The GPT at 800K parameters, for tests whose measure needs megabytes of model state.
    'gpt-wide': (lambda: GPT(GPTConfig(n_layer=4, n_head=4, n_embd=128)),
                 [('idx', (4, 16), torch.int64, _randint(64, (4, 16))),
                  ('targets', (4, 16), torch.int64, _randint(64, (4, 16)))]),
    # The GPT of the benchmarks (d_model 512, 6 layers, 8 heads, vocab 1024, block 128: 19.5M
    # parameters) at micro-batch 2, for the offload tests whose budget needs real model state.
    'gpt-d512': (lambda: GPT(GPTConfig(vocab_size=1024, block_size=128, n_layer=6, n_head=8,
                                       n_embd=512)),
                 [('idx', (2, 128), torch.int64, _randint(1024, (2, 128))),
                  ('targets', (2, 128), torch.int64, _randint(1024, (2, 128)))]),
    'lm': (TransformerLM,
           [('idx', (4, 16), torch.int64, _randint(64, (4, 16))),
            ('targets', (4, 16), torch.int64, _randint(64, (4, 16)))]),
    # The LM without dropout, for training-fidelity tests against PyTorch.
    'lm-nodrop': (lambda: TransformerLM(dropout=0.0),
                  [('idx', (4, 16), torch.int64, _randint(64, (4, 16))),
                   ('targets', (4, 16), torch.int64, _randint(64, (4, 16)))]),
    'vit': (make_vit, [('x', (2, 3, 32, 32), torch.float32, _randn((2, 3, 32, 32))),
                       ('y', (2,), torch.int64, _randint(10, (2,)))]),
    'resnet18': (make_resnet18, [('x', (2, 3, 32, 32), torch.float32, _randn((2, 3, 32, 32))),
                                 ('y', (2,), torch.int64, _randint(10, (2,)))]),
}

_MLIR_DTYPE = {torch.float32: 'f32', torch.int64: 'i64', torch.float16: 'f16',
               torch.bfloat16: 'bf16', torch.int32: 'i32', torch.bool: 'i1'}


def mlir_type(shape, dtype) -> str:
    return 'tensor<' + ''.join('%dx' % d for d in shape) + _MLIR_DTYPE[dtype] + '>'


def _loss_of(out):
    return out[1] if isinstance(out, (tuple, list)) else out


def _run(m, inputs):
    # Reseed so that dropout masks are identical across eager/script/trace.
    torch.manual_seed(1234)
    with torch.no_grad():
        return m(*inputs)


def build(name: str, outdir: str) -> bool:
    ctor, specs = FAMILIES[name]
    torch.manual_seed(0)
    model = ctor()
    model.train()
    g = torch.Generator().manual_seed(0)
    inputs = tuple(s[3](g) for s in specs)
    nparams = sum(p.numel() for p in model.parameters())

    with open(os.path.join(outdir, name + '.inputs'), 'w') as f:
        for (iname, shape, dtype, _) in specs:
            f.write('%s=%s\n' % (iname, mlir_type(shape, dtype)))

    scripted = torch.jit.script(model)
    scripted.train()
    # check_trace=False: its re-run comparison trips on dropout in training mode.
    traced = torch.jit.trace(model, inputs, check_trace=False)
    traced.train()
    paths = {}
    for kind, m in (('script', scripted), ('trace', traced)):
        p = os.path.join(outdir, '%s_%s.pt' % (name, kind))
        torch.jit.save(m, p)
        paths[kind] = p

    ok = True
    ref = _loss_of(_run(model, inputs))
    for kind, p in paths.items():
        loaded = torch.jit.load(p)
        got = _loss_of(_run(loaded, inputs))
        same = torch.allclose(ref, got, rtol=1e-5, atol=1e-6)
        exact = torch.equal(ref, got)
        ok = ok and same
        print('check %-9s %-6s params=%-8d eager=%.6f loaded=%.6f %s%s' % (
            name, kind, nparams, ref.item(), got.item(),
            'OK' if same else 'MISMATCH', ' (bitwise)' if exact else ''))
    return ok


def main(argv: List[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    outdir = argv[1]
    names = argv[2:] or list(FAMILIES)
    for n in names:
        if n not in FAMILIES:
            print('unknown model %r; known: %s' % (n, ', '.join(FAMILIES)))
            return 2
    os.makedirs(outdir, exist_ok=True)
    ok = True
    for n in names:
        ok = build(n, outdir) and ok
    return 0 if ok else 1


if __name__ == '__main__':
    # TorchScript serialises module constants (Final attributes) in set
    # iteration order, which depends on string hash randomisation; pin it so
    # the archives are byte-for-byte reproducible.
    if os.environ.get('PYTHONHASHSEED') != '0':
        env = dict(os.environ, PYTHONHASHSEED='0')
        os.execve(sys.executable, [sys.executable] + sys.argv, env)
    sys.exit(main(sys.argv))

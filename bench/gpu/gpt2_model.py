"""The GPT-2-small-sized model of the GPU check (12 layers, d_model 768, 12 heads, seq 1024,
vocab 50304): test/models/make_models2.py's nanoGPT (SDPA, tied weights), built under
torch.manual_seed(0). Imported by export_gpt2.py here and by the GPU machine's scripts."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', 'test', 'models'))
from make_models2 import GPT  # noqa: E402

VOCAB, SEQ, LAYERS, HEADS, D = 50304, 1024, 12, 12, 768


def gpt2_small():
    import torch
    torch.manual_seed(0)
    return GPT(vocab=VOCAB, block_size=SEQ, n_layer=LAYERS, n_head=HEADS, n_embd=D)


def flops_per_token(n_params):
    """Model FLOPs per trained token (nanoGPT's estimate_mfu): 6 N for the weights' forward
    and backward, plus 12 L T d for attention's scores and values."""
    return 6 * n_params + 12 * LAYERS * SEQ * D

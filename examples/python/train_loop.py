"""A plain ds.initialize training loop, as DeepSpeed users write it (DeepSpeed's engine API).

    .venv/bin/python examples/python/train_loop.py            # one rank
    .venv/bin/ds-launch -np 2 examples/python/train_loop.py   # two ranks (ZeRO-2 here)

A small GPT-2 from a config (no download) learns to continue a repeating token pattern; each
rank reads its own micro-batches (a DistributedSampler's share). Every 10 steps ds prints the
loss, lr, samples/s and memory on stderr; at the end the checkpoint is saved and the trained
weights come back as a torch state_dict.
"""
import os
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel

import ds

SEQ, VOCAB, MICRO = 32, 128, 4
config = {
    "train_micro_batch_size_per_gpu": MICRO,
    "gradient_accumulation_steps": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.01}},
    "scheduler": {"type": "WarmupDecayLR",
                  "params": {"warmup_num_steps": 10, "total_num_steps": 60, "warmup_type": "linear"}},
    "gradient_clipping": 1.0,
    "zero_optimization": {"stage": 2},
    "steps_per_print": 10,
}


def samples(rank, ranks):
    """This rank's share of an endless stream of (input_ids, labels) micro-batches."""
    g = torch.Generator().manual_seed(rank)
    while True:
        start = torch.randint(0, VOCAB, (MICRO, 1), generator=g)
        ids = (start + torch.arange(SEQ) * 3) % VOCAB  # a pattern the model can learn
        yield {"input_ids": ids, "labels": ids}


def main():
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=64, n_layer=2,
                                       n_head=4, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0))
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    ranks = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    data = samples(rank, ranks)
    engine, optimizer, _, scheduler = ds.initialize(model=model, config=config,
                                                    example_inputs=next(data))
    for step in range(60):
        loss = engine.train_batch(data)
    if engine.global_rank == 0:
        print(f"{engine.global_steps} steps, final loss {loss.item():.4f}, lr {engine.get_lr()[0]:.2e}")
    out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/ds-train-loop"
    engine.save_checkpoint(out)
    state = engine.module_state_dict()
    if state is not None:
        print(f"checkpoint in {out}; {len(state)} tensors in the state_dict")
    engine.destroy()


if __name__ == "__main__":
    main()

"""The README's quick start: a small Llama trained by ds from Python (.venv/bin/python)."""
import torch, ds
from transformers import LlamaConfig, LlamaForCausalLM
model = LlamaForCausalLM(LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                                     num_hidden_layers=2, num_attention_heads=4))
config = {"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}
ids = torch.randint(0, 256, (4, 32))
engine, *_ = ds.initialize(model=model, config=config, example_inputs={"input_ids": ids, "labels": ids})
for step in range(20):
    print(step, engine.train_batch([{"input_ids": ids, "labels": ids}]).item())

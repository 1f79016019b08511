"""A Hugging Face Trainer script trained by ds: the only change from a plain HF script is the
import line (`from ds.hf import ...` for `from transformers import ...`) and the
`deepspeed=` argument, which names examples/python/hf_ds_config.json ("auto" values filled from
the TrainingArguments as HF's DeepSpeed integration fills them).

    .venv/bin/python examples/python/hf_trainer.py [OUT_DIR]
    .venv/bin/ds-launch -np 2 examples/python/hf_trainer.py [OUT_DIR]

A small Llama made from a config learns the project's own design notes (docs/design/*.md),
tokenized by a BPE tokenizer trained here on the same text (no downloads), in padded batches
(DataCollatorForLanguageModeling), with AdamW, a linear warm-up and decay and gradient
clipping. Rank 0 writes the Trainer's log history to OUT_DIR/log_history.json.
"""
import glob
import json
import os
import sys

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import (DataCollatorForLanguageModeling, LlamaConfig, LlamaForCausalLM,
                          PreTrainedTokenizerFast)
from ds.hf import Trainer, TrainingArguments

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = sys.argv[1] if len(sys.argv) > 1 else "/tmp/ds-hf-trainer"


def design_notes():
    return [open(p).read() for p in sorted(glob.glob(os.path.join(ROOT, "docs/design/*.md")))]


def train_tokenizer(texts):
    bpe = Tokenizer(models.BPE(unk_token="[UNK]"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=512, special_tokens=["[PAD]", "[UNK]"], show_progress=False))
    return PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="[PAD]", unk_token="[UNK]")


texts = design_notes()
tokenizer = train_tokenizer(texts)
lines = [l.strip() for t in texts for l in t.split("\n") if len(l.strip()) > 40]
dataset = [{"input_ids": tokenizer(l, truncation=True, max_length=48)["input_ids"]}
           for l in lines[:320]]

torch.manual_seed(0)
config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                     max_position_embeddings=64, pad_token_id=tokenizer.pad_token_id)
config._attn_implementation = "sdpa"
model = LlamaForCausalLM(config)

args = TrainingArguments(
    output_dir=OUT,
    per_device_train_batch_size=4,
    gradient_accumulation_steps=2,
    learning_rate=3e-3,
    weight_decay=0.0,
    lr_scheduler_type="linear",
    warmup_steps=4,
    max_steps=20,
    max_grad_norm=0.5,
    logging_steps=1,
    save_strategy="no",
    report_to=[],
    seed=0,
    use_cpu=True,
    deepspeed=os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_ds_config.json"),
)
trainer = Trainer(model=model, args=args, train_dataset=dataset,
                  data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
                  processing_class=tokenizer)
trainer.train()
if int(os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0"))) == 0:
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "log_history.json"), "w") as f:
        json.dump(trainer.state.log_history, f)
# Under torchrun, torch.distributed's process group ends before Python does: gloo's threads
# outliving the interpreter abort the process at exit (pytorch/pytorch#179291).
if torch.distributed.is_initialized():
    torch.distributed.destroy_process_group()

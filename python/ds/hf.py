"""The Hugging Face Trainer on ds: change the import, keep the script.

    from ds.hf import Trainer, TrainingArguments     # was: from transformers import ...
    args = TrainingArguments(..., deepspeed="ds_config.json")

The Trainer reads the same DeepSpeed config HF's DeepSpeed integration reads and fills its
"auto" values from the TrainingArguments as HF does; without an "optimizer" block it compiles
the AdamW HF would make, and without a "scheduler" block each step's learning rate comes from
HF's own scheduler (args.lr_scheduler_type). The loss is normalised as the Trainer does
(num_items_in_batch over the accumulation steps and, with average_tokens_across_devices, over
the ranks). Batches are padded on the right to the longest sequence of the dataset (the shape
the step is compiled for). Launched under mpirun (ds-launch), ds owns the ranks: HF and
Accelerate see one process and each rank reads every world-size-th batch, as Accelerate's
sharding gives it. Losses and learning rates reach the Trainer's own logging and callbacks.
"""
import contextlib
import copy
import json
import os
import random

import numpy as np
import torch
import transformers

from . import engine as _engine
from . import launcher_env
from .engine import DSError

# What the launchers tell each process, which HF and Accelerate would read as a
# torch.distributed job of their own.
_LAUNCHER_PREFIXES = ("OMPI_", "PMI_", "PMIX_", "MV2_")


@contextlib.contextmanager
def _one_process():
    """HF and Accelerate set themselves up as one process (ds runs the ranks)."""
    hidden = {k: v for k, v in os.environ.items() if k.startswith(_LAUNCHER_PREFIXES)}
    for k in hidden:
        del os.environ[k]
    try:
        yield
    finally:
        os.environ.update(hidden)


class TrainingArguments(transformers.TrainingArguments):
    """HF's TrainingArguments; `deepspeed` names the config ds compiles (HF's own DeepSpeed
    integration, which needs the deepspeed package, stays off)."""

    def __post_init__(self):
        self.ds_config = self.deepspeed
        self.deepspeed = None
        with _one_process():
            super().__post_init__()
            _ = self.device  # Accelerate's state, made here as one process

    # HF sees one process; the launcher's rank 0 logs and saves for the job.
    @property
    def should_log(self):
        return launcher_env.world()[1] == 0 and super().should_log

    @property
    def should_save(self):
        return launcher_env.world()[1] == 0 and super().should_save


class _CountedLoss(torch.nn.Module):
    """The model's loss normalised by a token count passed per micro-batch (HF's
    num_items_in_batch, as the Trainer passes it to models that accept it)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, **inputs):
        n = inputs.pop("num_items_in_batch")
        if getattr(getattr(self.model, "config", None), "use_cache", None) is not None:
            inputs["use_cache"] = False
        return self.model(**inputs, num_items_in_batch=n[0]).loss


class _RankShard:
    """Every world-size-th batch of a dataloader, from this rank's: what Accelerate's
    BatchSamplerShard gives a rank of a torch.distributed job."""

    def __init__(self, loader, ranks, rank):
        self.loader, self.ranks, self.rank = loader, ranks, rank

    def __len__(self):
        return len(self.loader) // self.ranks

    def set_epoch(self, epoch):
        if hasattr(self.loader, "set_epoch"):
            self.loader.set_epoch(epoch)

    def __iter__(self):
        for i, b in enumerate(self.loader):
            if i // self.ranks >= len(self):
                return
            if i % self.ranks == self.rank:
                yield b


def _fill_auto(config, args, model, max_steps, ranks, tp):
    """HF's "auto" rules (transformers.integrations.deepspeed) with these arguments."""
    config = copy.deepcopy(config)
    dp = ranks // tp
    values = {
        ("train_micro_batch_size_per_gpu",): args.per_device_train_batch_size,
        ("gradient_accumulation_steps",): args.gradient_accumulation_steps,
        ("train_batch_size",):
            dp * args.per_device_train_batch_size * args.gradient_accumulation_steps,
        ("gradient_clipping",): args.max_grad_norm,
        ("optimizer", "params", "lr"): args.learning_rate,
        ("optimizer", "params", "betas"): [args.adam_beta1, args.adam_beta2],
        ("optimizer", "params", "eps"): args.adam_epsilon,
        ("optimizer", "params", "weight_decay"): args.weight_decay,
        ("scheduler", "params", "warmup_min_lr"): 0,
        ("scheduler", "params", "warmup_max_lr"): args.learning_rate,
        ("scheduler", "params", "total_num_steps"): max_steps,
        ("scheduler", "params", "warmup_num_steps"): max(1, args.get_warmup_steps(max_steps)),
        ("fp16", "enabled"): bool(args.fp16 or args.fp16_full_eval),
        ("bf16", "enabled"): bool(args.bf16 or args.bf16_full_eval),
    }
    hidden = getattr(getattr(model, "config", None), "hidden_size", None)
    if hidden:
        values[("zero_optimization", "reduce_bucket_size")] = hidden * hidden
        values[("zero_optimization", "stage3_prefetch_bucket_size")] = int(0.9 * hidden * hidden)
        values[("zero_optimization", "stage3_param_persistence_threshold")] = 10 * hidden
    for path, value in values.items():
        node = config
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and node.get(path[-1]) == "auto":
            node[path[-1]] = value
    left = [".".join(p) for p in _auto_keys(config)]
    if left:
        raise DSError(f"the DeepSpeed config has 'auto' values ds cannot fill from the "
                      f"TrainingArguments: {', '.join(left)}; give them values")
    if "optimizer" not in config:  # the AdamW HF's Trainer makes (args.optim)
        optim = getattr(args.optim, "value", args.optim)
        if "adamw" not in str(optim).lower():
            raise DSError(f"TrainingArguments.optim is '{optim}'; without an 'optimizer' "
                          f"block ds compiles AdamW only: add an 'optimizer' block to the config")
        config["optimizer"] = {"type": "AdamW", "params": {
            "lr": args.learning_rate, "betas": [args.adam_beta1, args.adam_beta2],
            "eps": args.adam_epsilon, "weight_decay": args.weight_decay}}
    if "gradient_clipping" not in config and args.max_grad_norm:
        config["gradient_clipping"] = args.max_grad_norm
    return config


def _auto_keys(node, path=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _auto_keys(v, path + (k,))
    elif node == "auto":
        yield path


@contextlib.contextmanager
def _same_random_state():
    """Runs the body and puts back every random state it may draw from."""
    states = (torch.get_rng_state(), random.getstate(), np.random.get_state())
    try:
        yield
    finally:
        torch.set_rng_state(states[0])
        random.setstate(states[1])
        np.random.set_state(states[2])


class Trainer(transformers.Trainer):
    """HF's Trainer, its optimizer steps compiled and run by ds (see the module's doc)."""

    def __init__(self, *a, **k):
        with _one_process():
            super().__init__(*a, **k)
        self.ds_engine = None

    def is_world_process_zero(self):
        return launcher_env.world()[1] == 0

    def is_local_process_zero(self):
        return launcher_env.world()[1] == 0

    # --- the data, as each rank reads it -------------------------------------------
    def get_train_dataloader(self):
        loader = super().get_train_dataloader()
        ranks, rank = launcher_env.world()
        return _RankShard(loader, ranks, rank) if ranks > 1 else loader

    def _pad(self, batch, seq):
        """`batch` padded on the right to `seq` tokens and to the micro-batch's rows (rows of
        padding attend to themselves and carry no labels, so they add nothing to the loss)."""
        rows = self.args.per_device_train_batch_size
        pad_id = getattr(self.processing_class, "pad_token_id", None) or 0
        out = {}
        for k, v in batch.items():
            if not isinstance(v, torch.Tensor) or v.dim() != 2:
                raise DSError(f"batch entry '{k}' is not a (batch, sequence) tensor; ds.hf "
                              f"trains causal LMs fed by padding collators")
            fill = -100 if k == "labels" else 0 if k == "attention_mask" else pad_id
            more = seq - v.shape[1]
            if more < 0:
                raise DSError(f"a batch has {v.shape[1]} tokens, more than the {seq} the step "
                              f"was compiled for")
            v = torch.nn.functional.pad(v, (0, more), value=fill)
            if v.shape[0] < rows:
                fill_row = -100 if k == "labels" else 1 if k == "attention_mask" else pad_id
                v = torch.cat([v, v.new_full((rows - v.shape[0], seq), fill_row)])
            out[k] = v
        return out

    def _longest(self):
        """The longest sequence of the training data, as the collator pads it."""
        with _same_random_state(), _one_process():
            return max(b["input_ids"].shape[1] for b in super().get_train_dataloader())

    # --- the step: compiled at the start of training ---------------------------------
    def _prepare_for_training(self, max_steps, train_dataloader, resume_from_checkpoint):
        if resume_from_checkpoint is not None:
            raise DSError("resume_from_checkpoint is not supported by ds.hf yet")
        source = getattr(self.args, "ds_config", None)
        if not source:
            raise DSError("ds.hf.Trainer compiles the step from a DeepSpeed config: pass "
                          "TrainingArguments(deepspeed='ds_config.json') (from ds.hf)")
        if isinstance(source, (str, os.PathLike)):
            with open(source) as f:
                source = json.load(f)
        ranks, _ = launcher_env.world()
        tp = source.get("tensor_parallel", {}).get("autotp_size", 1)
        config = _fill_auto(source, self.args, self.model, max_steps, ranks, tp)
        self._ds_dp = ranks // (tp if isinstance(tp, int) else 1)
        # Each step's lr from HF's own scheduler unless the config has a scheduler block.
        scheduler = None
        if "scheduler" not in config:
            stand_in = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))],
                                       lr=self.args.learning_rate)
            self.lr_scheduler = None
            scheduler = self.create_scheduler(num_training_steps=max_steps, optimizer=stand_in)
        self._ds_seq = self._longest()
        first = next(iter(train_dataloader))
        self._ds_counted = self.model_accepts_loss_kwargs and "labels" in first
        example = self._pad(first, self._ds_seq)
        model = self.model
        if self._ds_counted:
            example["num_items_in_batch"] = torch.ones(example["labels"].shape[0])
            model = _CountedLoss(self.model)
        self.ds_engine, self.optimizer, _, sched = _engine.initialize(
            model=model, config=config, example_inputs=example, lr_scheduler=scheduler)
        self.lr_scheduler = sched
        for attr in ("model", "optimizer", "lr_scheduler"):
            setattr(self.callback_handler, attr, getattr(self, attr))
        self.callback_handler.train_dataloader = train_dataloader
        return self.model, train_dataloader

    def _run_epoch(self, model, epoch, train_dataloader, steps_in_epoch,
                   num_update_steps_per_epoch, trial, ignore_keys_for_eval, start_time,
                   resume_from_checkpoint, epochs_trained, steps_trained_in_current_epoch):
        gas = self.args.gradient_accumulation_steps
        if hasattr(train_dataloader, "set_epoch"):
            train_dataloader.set_epoch(epoch)
        it = iter(train_dataloader)
        lr = None
        for update_step in range(num_update_steps_per_epoch):
            batches = [b for _, b in zip(range(gas), it)]
            if len(batches) < gas:
                raise DSError(f"the epoch ends with {len(batches)} micro-batches where a step "
                              f"takes gradient_accumulation_steps = {gas}; use a dataset whose "
                              f"batches divide into steps, or dataloader_drop_last")
            self.control = self.callback_handler.on_step_begin(self.args, self.state,
                                                               self.control)
            micro = [self._pad(b, self._ds_seq) for b in batches]
            if self._ds_counted:
                self._add_item_counts(micro, batches)
            lr = self.ds_engine.get_lr()[0]  # the lr this step applies
            loss = self.ds_engine.train_batch(micro)
            self._tr_loss += loss.to(self._tr_loss.dtype)
            self.state.global_step += 1
            self.state.epoch = epoch + (update_step + 1) * gas / steps_in_epoch
            self.control = self.callback_handler.on_step_end(self.args, self.state, self.control)
            self._maybe_log_save_evaluate(self._tr_loss, None, model, trial, epoch,
                                          ignore_keys_for_eval, start_time, learning_rate=lr)
            if self.control.should_epoch_stop or self.control.should_training_stop:
                break
        self.control = self.callback_handler.on_epoch_end(self.args, self.state, self.control)
        self._maybe_log_save_evaluate(self._tr_loss, None, model, trial, epoch,
                                      ignore_keys_for_eval, start_time, learning_rate=lr)

    def _add_item_counts(self, micro, batches):
        """num_items_in_batch as the Trainer counts it (labels that are not -100, shifted for
        a causal LM), across the ranks with average_tokens_across_devices; each micro-batch
        gets count / gas (/ dp), which ds's mean over them turns back into the sum."""
        labels = [b["labels"][..., 1:] if self._loss_shifts_labels else b["labels"]
                  for b in batches]
        n = float(sum(int(l.ne(-100).sum()) for l in labels))
        dp = self._ds_dp
        if self.args.average_tokens_across_devices and dp > 1:
            # N / dp: the tp ranks of a data-parallel group hold the same count
            n = sum(self.ds_engine.all_gather(n)) / self.ds_engine.world_size
        per = n / len(micro)
        for m in micro:
            m["num_items_in_batch"] = torch.full((m["labels"].shape[0],), per,
                                                 dtype=torch.float32)

    def _save_checkpoint(self, model, trial):
        run_dir = self._get_output_dir(trial=trial)
        self.ds_engine.save_checkpoint(os.path.join(run_dir, "ds_checkpoint"))

    def _finalize_training(self, trial, num_train_samples, start_time):
        # The trained weights back into the model (rank 0 gathers them), so that save_model,
        # evaluate and push_to_hub see them.
        state = self.ds_engine.module_state_dict()
        if state is not None:
            prefix = "model." if self._ds_counted else ""
            state = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
            self.model.load_state_dict(state, strict=False)
        return super()._finalize_training(trial, num_train_samples, start_time)

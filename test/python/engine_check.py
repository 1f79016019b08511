"""ds.initialize against a plain PyTorch loop (torch.optim.AdamW), step by step.

    engine_check.py MODEL [--mode train_batch|forward] [--zero S] [--tp N] [--gas G]
                    [--steps N] [--save DIR] [--resume DIR]

MODEL is `gpt` (the test GPT: forward(idx, targets) -> loss), `llama` or `qwen2` (HF causal
LMs from small configs, fed padded batches as a collator makes them: attention_mask and -100
labels; no wrapper). Run directly or under `mpirun -np N`: each rank passes its own
micro-batches. The judge is written here, sharing nothing with ds: each step zeroes the
gradients, back-propagates every data-parallel rank's micro-batch losses / (gas x dp) and steps
AdamW; ds's step losses must match it within 1e-5, with torch's autograd and optimizers patched
to raise while ds trains. --save DIR saves a checkpoint after the last step; --resume DIR
(a new process) loads it and checks the steps after it. Prints PASS on rank 0.
"""
import argparse
import copy
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))

TOL = 1e-5
# Weights after 20 AdamW steps: a parameter whose gradient is near zero moves by up to lr per
# step on rounding alone (Adam divides by the gradient's own size), so the gathered weights are
# held to 1e-4 (and must have moved 100 times that).
WEIGHT_TOL = 1e-4
SEQ, VOCAB, MB = 16, 64, 2


def build(name):
    torch.manual_seed(0)
    if name == "gpt":
        from make_models2 import GPT
        return GPT()
    import transformers
    cls = {"llama": ("LlamaConfig", "LlamaForCausalLM"),
           "qwen2": ("Qwen2Config", "Qwen2ForCausalLM")}[name]
    cfg = getattr(transformers, cls[0])(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=SEQ,
        attention_dropout=0.0)
    cfg._attn_implementation = "sdpa"
    return getattr(transformers, cls[1])(cfg)


def batch(name, step, dp, k):
    """Micro-batch k of data-parallel rank dp at `step`: the same on every process."""
    g = torch.Generator().manual_seed(1000 * step + 10 * dp + k)
    ids = torch.randint(0, VOCAB, (MB, SEQ), generator=g)
    if name == "gpt":
        return {"idx": ids, "targets": torch.randint(0, VOCAB, (MB, SEQ), generator=g)}
    lengths = torch.randint(SEQ // 2, SEQ + 1, (MB, 1), generator=g)
    mask = (torch.arange(SEQ)[None, :] >= SEQ - lengths).to(torch.int64)  # left padding
    labels = torch.where(mask.bool(), ids, torch.full_like(ids, -100))
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def loss_of(out):
    return out if isinstance(out, torch.Tensor) else out.loss


def reference(model, name, steps, gas, dp):
    """The plain PyTorch loop: the mean loss of each step."""
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.1)
    means = []
    for step in range(1, steps + 1):
        opt.zero_grad()
        total = 0.0
        for r in range(dp):
            for k in range(gas):
                loss = loss_of(model(**batch(name, step, r, k)))
                (loss / (gas * dp)).backward()
                total += loss.item()
        opt.step()
        means.append(total / (gas * dp))
    return means, {k: v.detach().clone() for k, v in model.state_dict().items()}


class NoTorchTraining:
    """Torch's autograd and optimizers raise while ds trains."""

    def __enter__(self):
        def refuse(*_a, **_k):
            raise AssertionError("torch autograd or a torch optimizer ran inside the engine")
        self.saved = [(torch.Tensor, "backward"), (torch.autograd, "backward"),
                      (torch.autograd, "grad"), (torch.optim.AdamW, "step"),
                      (torch.optim.Adam, "step"), (torch.optim.SGD, "step")]
        self.saved = [(o, n, getattr(o, n)) for o, n in self.saved]
        for o, n, _ in self.saved:
            setattr(o, n, refuse)

    def __exit__(self, *exc):
        for o, n, f in self.saved:
            setattr(o, n, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=["gpt", "llama", "qwen2"])
    ap.add_argument("--mode", choices=["train_batch", "forward"], default="train_batch")
    ap.add_argument("--zero", type=int, default=0)
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--gas", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--save")
    ap.add_argument("--resume")
    a = ap.parse_args()

    import ds
    from ds.launcher_env import world
    ranks, rank = world()  # mpirun's, srun's or MPICH's variables
    dp = ranks // a.tp
    dp_index = rank // a.tp  # the mesh is dp x tp, tp fastest

    model = build(a.model)
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    expected, final = reference(copy.deepcopy(model), a.model, a.steps, a.gas, dp)
    config = {"train_micro_batch_size_per_gpu": MB, "gradient_accumulation_steps": a.gas,
              "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "betas": [0.9, 0.95],
                                                        "eps": 1e-8, "weight_decay": 0.1}},
              "zero_optimization": {"stage": a.zero}, "steps_per_print": 10}
    if a.tp > 1:
        config["tensor_parallel"] = {"autotp_size": a.tp}
    engine, _, _, _ = ds.initialize(model=model, config=config,
                                    example_inputs=batch(a.model, 1, dp_index, 0))
    first = 1
    if a.resume:
        engine.load_checkpoint(a.resume)
        first = engine.global_steps + 1
        assert first > 1, "the checkpoint holds no steps"
    worst = 0.0
    with NoTorchTraining():
        for step in range(first, a.steps + 1):
            micro = [batch(a.model, step, dp_index, k) for k in range(a.gas)]
            if a.mode == "train_batch":
                got = float(engine.train_batch(iter(micro)))
            else:
                local = []
                for b in micro:
                    loss = engine(**b)
                    engine.backward(loss)
                    engine.step()
                    local.append(float(loss))
                assert engine.global_steps == step
                # this rank's micro-batch losses against the reference's mean when dp == 1
                got = sum(local) / len(local) if dp == 1 else engine._last[0]
            err = abs(got - expected[step - 1])
            worst = max(worst, err)
            if rank == 0:
                print(f"step {step} ds {got:.7f} torch {expected[step - 1]:.7f} "
                      f"diff {err:.2e}", flush=True)
            assert err <= TOL, f"step {step}: ds {got} vs torch {expected[step - 1]}"
    if a.save:
        engine.save_checkpoint(a.save)
    state = engine.module_state_dict()
    if rank == 0:
        # The weights, gathered, are the reference's; they moved 100x the bound from the start.
        trained = [k for k, p in model.named_parameters() if p.requires_grad]
        assert set(state) >= set(trained), sorted(set(trained) - set(state))
        off = max((state[k] - final[k]).abs().max().item() for k in trained)
        moved = max((final[k] - initial[k]).abs().max().item() for k in trained)
        assert off <= WEIGHT_TOL, f"the weights differ from PyTorch's by {off}"
        assert moved > 100 * WEIGHT_TOL, f"the weights moved only {moved}: the check could not fail"
        print(f"PASS {a.model} {a.mode} ranks={ranks} zero={a.zero} tp={a.tp} gas={a.gas} "
              f"steps {first}-{a.steps} worst {worst:.2e} weights {off:.1e} (moved {moved:.1e})", flush=True)
    engine.destroy()


if __name__ == "__main__":
    main()

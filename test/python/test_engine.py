"""ds.initialize and DeepSpeed's engine API, judged by a plain PyTorch loop (engine_check.py),
at one rank and under mpirun; and the errors a user meets, raised as exceptions."""
import os
import shutil
import subprocess
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "engine_check.py")
MPIRUN = ["mpirun", "--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])


def run(args, ranks=1, cwd=None):
    cmd = [sys.executable, CHECK] + args
    if ranks > 1:
        cmd = MPIRUN + ["-np", str(ranks)] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=cwd)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    assert "PASS" in p.stdout, out[-4000:]
    print(next(l for l in p.stdout.splitlines() if l.startswith("PASS")))  # pytest -s shows it
    return out


@pytest.mark.parametrize("args", [
    ["gpt"],                                   # the test GPT, train_batch
    ["gpt", "--mode", "forward", "--gas", "2"],  # engine(batch) / backward / step
    ["llama"],                                 # HF models with no wrapper, padded batches
    ["llama", "--mode", "forward", "--gas", "2"],
    ["qwen2"],
    ["qwen2", "--mode", "forward", "--gas", "2"],
])
def test_one_rank(args):
    run(args)


@pytest.mark.parametrize("args", [
    ["llama", "--zero", "3"],
    ["qwen2", "--tp", "2", "--mode", "forward"],
    ["gpt", "--zero", "3", "--mode", "forward", "--gas", "2"],
])
def test_two_ranks(args):
    run(args, ranks=2)


def test_checkpoint_continues_in_a_new_process(tmp_path):
    ck = str(tmp_path / "ck")
    run(["llama", "--zero", "2", "--steps", "10", "--save", ck], ranks=2)
    assert os.path.exists(os.path.join(ck, "latest"))
    # A new process, ZeRO-1 instead of 2: steps 11..20 match PyTorch's 20-step run.
    out = run(["llama", "--zero", "1", "--steps", "20", "--resume", ck], ranks=2)
    assert "steps 11-20" in out


# --- the errors users meet, as exceptions naming the cause and the fix ---

class TwoInputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x, y):
        return torch.nn.functional.cross_entropy(self.lin(x), y)


CONFIG = {"train_micro_batch_size_per_gpu": 2,
          "optimizer": {"type": "SGD", "params": {"lr": 0.1}}}


def example():
    return {"x": torch.randn(2, 4), "y": torch.tensor([0, 2])}


@pytest.fixture(scope="module")
def engine():
    import ds
    e, _, _, _ = ds.initialize(model=TwoInputs(), config=CONFIG, example_inputs=example())
    yield e
    e.destroy()


def test_tuple_and_numpy_inputs(engine):
    x, y = example()["x"], example()["y"]
    l1 = float(engine.train_batch([(x.numpy(), y.numpy())]))
    l2 = float(engine.train_batch([{"x": x, "y": y}]))
    assert l2 < l1  # SGD moved the weights
    assert engine.global_steps == 2


def test_train_batch_takes_an_iterator(engine):
    import ds
    with pytest.raises(ds.DSError, match=r"pass iter\(loader\)"):
        engine.train_batch(torch.utils.data.DataLoader([example()], batch_size=None))
    engine.train_batch(iter([example()]))


def test_another_shape_is_refused_by_name(engine):
    import ds
    with pytest.raises(ds.DSError, match=r"input 'x' has shape \[3, 4\] but the step was "
                                         r"compiled for \[2, 4\]"):
        engine.train_batch([{"x": torch.randn(3, 4), "y": torch.tensor([0, 1, 2])}])
    with pytest.raises(ds.DSError, match=r"missing \['y'\]"):
        engine.train_batch([{"x": torch.randn(2, 4)}])
    # the engine still trains after the refusals
    engine.train_batch([example()])


def test_forward_order_is_checked(engine):
    import ds
    loss = engine(**example())
    with pytest.raises(ds.DSError, match="before engine.backward"):
        engine.step()
    engine.backward(loss)
    engine.step()
    with pytest.raises(ds.DSError, match="takes the loss of the last engine"):
        engine.backward(loss)


def test_eval_batch_is_not_there_yet(engine):
    import ds
    with pytest.raises(ds.DSError, match="eval_batch is not implemented"):
        engine.eval_batch(iter([example()]))


def test_deepspeed_argparse_flags(tmp_path):
    import argparse
    import json
    import ds
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(CONFIG))
    args = ds.add_config_arguments(argparse.ArgumentParser()).parse_args(
        ["--deepspeed", "--deepspeed_config", str(path)])
    ds.init_distributed()
    e, _, _, _ = ds.initialize(args=args, model=TwoInputs(), example_inputs=example())
    e.train_batch([example()])
    assert e.global_steps == 1
    e.destroy()


def test_config_errors_raise(tmp_path):
    import ds
    with pytest.raises(ds.DSError, match="train_micro_batch_size_per_gpu|train_batch_size"):
        ds.initialize(model=TwoInputs(), config={"optimizer": {"type": "SGD",
                                                               "params": {"lr": 0.1}}},
                      example_inputs=example())
    with pytest.raises(ds.DSError, match="zero_optimisation"):
        ds.initialize(model=TwoInputs(), config=dict(CONFIG, zero_optimisation={"stage": 1}),
                      example_inputs=example())
    with pytest.raises(ds.DSError, match="example_inputs"):
        ds.initialize(model=TwoInputs(), config=CONFIG)
    with pytest.raises(ds.DSError, match="does not exist"):
        ds.initialize(model=TwoInputs(), config=str(tmp_path / "nope.json"),
                      example_inputs=example())
    with pytest.raises(ds.DSError, match="optimizer"):
        ds.initialize(model=TwoInputs(), config=CONFIG, example_inputs=example(),
                      optimizer=torch.optim.SGD(TwoInputs().parameters(), lr=0.1))


def test_a_bad_batch_on_one_rank_fails_every_rank(tmp_path):
    script = tmp_path / "one_bad_rank.py"
    script.write_text(f"""
import os, sys, torch
sys.path.insert(0, {HERE!r})
import ds
from test_engine import TwoInputs, CONFIG, example
rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
e, _, _, _ = ds.initialize(model=TwoInputs(), config=CONFIG, example_inputs=example())
e.train_batch([example()])
bad = {{"x": torch.randn(3, 4), "y": torch.tensor([0, 1, 2])}} if rank == 1 else example()
try:
    e.train_batch([bad])
except ds.DSError as err:
    print(f"rank {{rank}} raised: {{err}}", flush=True)
try:
    ds.initialize(model=TwoInputs(), config=CONFIG, example_inputs=example())
except ds.DSError as err:
    print(f"rank {{rank}} second engine: {{err}}", flush=True)
""")
    p = subprocess.run(MPIRUN + ["-np", "2", sys.executable, str(script)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "rank 1 raised: input 'x' has shape [3, 4]" in p.stdout, p.stdout + p.stderr
    assert "rank 0 raised: rank 1 failed: input 'x' has shape [3, 4]" in p.stdout, p.stdout
    assert "rank 1 second engine: this process already made an engine" in p.stdout, p.stdout


def test_ds_launch(tmp_path):
    launcher = shutil.which("ds-launch", path=os.path.dirname(sys.executable))
    assert launcher, "ds-launch is not in the venv's bin (the build writes it)"
    out = subprocess.run([launcher, "-np", "2", CHECK, "gpt", "--zero", "1", "--steps", "6"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "PASS gpt train_batch ranks=2" in out.stdout, \
        out.stdout + out.stderr


class LogitsOnly(TwoInputs):
    def forward(self, x, y):
        return self.lin(x)


def test_more_user_errors(engine, monkeypatch):
    import ds
    with pytest.raises(ds.DSError, match="config is a list"):
        ds.initialize(model=TwoInputs(), config=[1], example_inputs=example())
    with pytest.raises(ds.DSError, match="needs model= and config="):
        ds.initialize(config=CONFIG, example_inputs=example())
    with pytest.raises(ds.DSError, match="lr_scheduler must be a torch LR scheduler"):
        ds.initialize(model=TwoInputs(), config=CONFIG, example_inputs=example(),
                      lr_scheduler=object())
    with pytest.raises(ds.DSError, match="returns no loss"):
        ds.initialize(model=LogitsOnly(), config=CONFIG, example_inputs=example())
    with pytest.raises(ds.DSError, match="input 'y' is a scalar"):
        ds.initialize(model=TwoInputs(), config=CONFIG,
                      example_inputs={"x": torch.randn(2, 4), "y": torch.tensor(1)})
    with pytest.raises(ds.DSError, match="3 positional inputs, but forward takes 2"):
        ds.initialize(model=TwoInputs(), config=CONFIG, example_inputs=(1, 2, 3))
    # A launcher's 3 ranks with tp 2: the job's size does not divide.
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "3")
    with pytest.raises(ds.DSError, match="the job has 3 ranks, not a multiple of"):
        ds.initialize(model=TwoInputs(), config=dict(CONFIG, tensor_parallel={"autotp_size": 2}),
                      example_inputs=example())
    monkeypatch.delenv("OMPI_COMM_WORLD_SIZE")
    # The engine's own order and arguments.
    loss = engine(**example())
    with pytest.raises(ds.DSError, match="twice without engine.backward"):
        engine(**example())
    engine.backward(loss)
    with pytest.raises(ds.DSError, match="in the middle of an engine"):
        engine.train_batch([example()])
    engine.step()
    with pytest.raises(ds.DSError, match="got 2 micro-batches"):
        engine.train_batch([example(), example()])
    with pytest.raises(ds.DSError, match="needs the micro-batches"):
        engine.train_batch()
    with pytest.raises(ds.DSError, match="tag and client_state are not supported"):
        engine.save_checkpoint("/tmp/unused", tag="x")
    with pytest.raises(ds.DSError, match="loads_nothing_here|no 'latest' file"):
        engine.load_checkpoint("/nonexistent/ds-checkpoint")


def test_hf_errors(tmp_path):
    import ds
    from ds import hf
    from transformers import TrainingArguments
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[],
                             optim="sgd")
    with pytest.raises(ds.DSError, match="'auto' values ds cannot fill.*zero_optimization.stage"):
        hf._fill_auto({"zero_optimization": {"stage": "auto"}}, args, None, 10, 1, 1)
    with pytest.raises(ds.DSError, match="optim is 'sgd'"):
        hf._fill_auto({}, args, None, 10, 1, 1)
    from transformers import LlamaConfig, LlamaForCausalLM
    model = LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=1, num_attention_heads=2))
    data = [{"input_ids": torch.arange(8), "labels": torch.arange(8)}] * 4
    trainer = hf.Trainer(model=model, args=hf.TrainingArguments(
        output_dir=str(tmp_path), use_cpu=True, report_to=[], max_steps=1,
        per_device_train_batch_size=2), train_dataset=data)
    with pytest.raises(ds.DSError, match="TrainingArguments\\(deepspeed='ds_config.json'\\)"):
        trainer.train()


def test_ds_launch_refuses_no_ranks():
    p = subprocess.run([shutil.which("ds-launch", path=os.path.dirname(sys.executable)), "-np",
                        "0", CHECK], capture_output=True, text=True)
    assert p.returncode != 0 and "-np must be at least 1" in p.stderr, p.stderr

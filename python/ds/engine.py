"""DeepSpeed's engine API over a compiled ds training step (ds.initialize)."""
import json
import os
import shutil
import sys
import tempfile
import warnings

import torch

from . import _ds, export, launcher_env


class DSError(RuntimeError):
    """An error ds reports: the cause and the fix, the same on every rank."""


def _raise(fn, *args):
    try:
        return fn(*args)
    except RuntimeError as e:
        raise DSError(str(e)) from None


def _raise_as_ds(fn, *args):
    """A bad argument (TypeError, ValueError) as ds's error."""
    try:
        return fn(*args)
    except (TypeError, ValueError) as e:
        raise DSError(str(e)) from None


def _config_path(config, workdir):
    """The DeepSpeed config as a file: a path as given, a dict written into `workdir`."""
    if isinstance(config, (str, os.PathLike)):
        if not os.path.exists(config):
            raise DSError(f"config '{config}' does not exist (pass a DeepSpeed JSON config "
                          f"file or a dict)")
        return os.fspath(config)
    if isinstance(config, dict):
        path = os.path.join(workdir, "ds_config.json")
        with open(path, "w") as f:
            json.dump(config, f)
        return path
    raise DSError(f"config is a {type(config).__name__}; pass a DeepSpeed config file's path "
                  f"or a dict")


def add_config_arguments(parser):
    """DeepSpeed's `deepspeed.add_config_arguments`: --deepspeed and --deepspeed_config, which
    ds.initialize(args=...) reads."""
    group = parser.add_argument_group("DeepSpeed", "DeepSpeed configurations")
    group.add_argument("--deepspeed", default=False, action="store_true",
                       help="train with ds (DeepSpeed's flag; kept for its scripts)")
    group.add_argument("--deepspeed_config", default=None, type=str,
                       help="the DeepSpeed JSON config")
    return parser


def init_distributed(*_a, **_k):
    """DeepSpeed's `deepspeed.init_distributed`: nothing to do, ds.initialize joins the ranks
    the launcher started."""


def initialize(args=None, model=None, optimizer=None, model_parameters=None,
               training_data=None, lr_scheduler=None, config=None, config_params=None,
               example_inputs=None, device=None, threads=None, workdir=None, log=None):
    """DeepSpeed's `deepspeed.initialize`: returns (engine, optimizer, None, lr_scheduler).

    `model` is an nn.Module whose forward returns the loss (a scalar, a tuple holding it, or an
    HF ModelOutput with .loss); `config` a DeepSpeed config (path or dict) whose
    "optimizer" and "scheduler" blocks ds compiles; `example_inputs` one micro-batch of this
    rank (a dict of forward's keyword arguments, or a tuple of positional ones), whose shapes
    the step is compiled for. `device` ("cpu", "cuda"), `threads` (compute threads per rank)
    `workdir` (where the export and the weights go; default a temporary folder) and `log` (a
    JSON line per step, as ds-run --log writes) are ds's.
    """
    if config is None:
        config = config_params if config_params is not None else getattr(args, "deepspeed_config",
                                                                          None)
    if model is None or config is None:
        raise DSError("ds.initialize needs model= and config= (a DeepSpeed config path or dict)")
    if optimizer is not None:
        raise DSError("ds compiles the optimizer from the config's 'optimizer' block; pass it "
                      "there, not as an object")
    if lr_scheduler is not None and not hasattr(lr_scheduler, "get_last_lr"):
        raise DSError("lr_scheduler must be a torch LR scheduler (its lr is applied at each "
                      "step and it is stepped after each, as DeepSpeed does with a client "
                      "scheduler), or left out to use the config's 'scheduler' block")
    if example_inputs is None:
        raise DSError("ds.initialize needs example_inputs= (one micro-batch of this rank: a "
                      "dict of forward's keyword arguments or a tuple of positional ones), to "
                      "compile the step for its shapes")
    return (lambda e: (e, e.optimizer, None, e.lr_scheduler))(
        Engine(model, config, example_inputs, device=device, threads=threads, workdir=workdir,
               log=log, lr_scheduler=lr_scheduler))


class _Optimizer:
    """The compiled optimizer, as DeepSpeed's engine hands it back: its param_groups' lr."""

    def __init__(self, engine):
        self._engine = engine

    @property
    def param_groups(self):
        return [{"lr": self._engine.get_lr()[0]}]

    def zero_grad(self, set_to_none=True):
        """The compiled update zeroes the gradients itself."""

    def step(self, *a, **k):
        raise DSError("the optimizer steps inside the compiled step: call engine.step() or "
                      "engine.train_batch()")


class _Scheduler:
    """The compiled LR schedule, as a torch scheduler is read."""

    def __init__(self, engine):
        self._engine = engine

    def get_last_lr(self):
        return self._engine.get_lr()

    def get_lr(self):
        return self._engine.get_lr()

    def step(self, *a, **k):
        """The schedule advances with the engine's steps."""


# Under a launcher the runtime joins MPI once per process (MPI cannot start again after it
# ends): the engine that did is the process's only one.
_joined_mpi = False


class Engine:
    """A compiled training step and the session training it (DeepSpeed's DeepSpeedEngine)."""

    def __init__(self, model, config, example_inputs, device=None, threads=None, workdir=None,
                 log=None, lr_scheduler=None):
        global _joined_mpi
        self.module = model
        self.ranks, self.rank_hint = launcher_env.world()
        if self.ranks > 1 and _joined_mpi:
            raise DSError("this process already made an engine under the launcher: MPI joins "
                          "once per process, so a multi-rank job has one engine per process "
                          "(reuse it, or start another job)")
        self._own_workdir = workdir is None
        self.workdir = workdir or tempfile.mkdtemp(prefix="ds-")
        os.makedirs(self.workdir, exist_ok=True)
        self.config_path = _config_path(config, self.workdir)
        forward = getattr(model, "forward", model)
        inputs = _raise_as_ds(export.named_inputs, forward, example_inputs)
        model_path = os.path.join(self.workdir, "model.pt2")
        self.weights_path = os.path.join(self.workdir, "model.safetensors")
        try:
            specs = export.export(model, inputs, model_path)
        except (TypeError, ValueError) as e:
            raise DSError(str(e)) from None
        except Exception as e:  # noqa: BLE001 - torch.export's own errors, named as such
            raise DSError(f"torch.export of the model failed: {type(e).__name__}: {e}") from e
        self._step = _raise(_ds.Step, model_path, specs, -1, self.config_path, self.ranks,
                            self.weights_path)
        self.metadata = json.loads(self._step.metadata)
        flags = ["--weights", self.weights_path]
        if device:
            flags += ["--device", device]
        if threads:
            flags += ["--threads", str(threads)]
        if log:
            flags += ["--log", os.fspath(log)]
        if self.rank_hint == 0 and self._step.summary:
            sys.stderr.write("".join(f"ds: {line.removeprefix('ds-opt: ')}\n" for line in
                                     self._step.summary.rstrip("\n").split("\n")))
        _joined_mpi = _joined_mpi or self.ranks > 1
        self._session = _raise(_ds.Session, self._step, flags)
        run = self.metadata["run"]
        self._gas = run["accumulation"]
        self._per_call = self.metadata.get("pipeline", {}).get("micro_batches", 1)
        self._inputs = self.metadata["inputs"]  # name, dtype, dims: what each call takes
        self._micro = 0          # micro-batches run in the current step
        self._pending = None     # the loss engine(batch) returned, before backward
        self._last = None        # (loss, lr) of the last ended step
        self.optimizer = _Optimizer(self)
        # A client scheduler (a torch LR scheduler) sets each step's lr in place of the
        # config's schedule, and is stepped after each step.
        self._client_scheduler = lr_scheduler
        self.lr_scheduler = lr_scheduler or _Scheduler(self)

    # DeepSpeed's batch accessors.
    def train_micro_batch_size_per_gpu(self):
        return self.metadata["run"]["micro_batch"]

    def gradient_accumulation_steps(self):
        return self._gas

    def train_batch_size(self):
        return self.metadata["run"]["global_batch"]

    @property
    def global_rank(self):
        return self._session.rank

    @property
    def world_size(self):
        return self._session.world_size

    @property
    def global_steps(self):
        """Optimizer steps taken (resumed ones included)."""
        return self._session.next_step - 1

    def get_lr(self):
        """The learning rate the next step applies (DeepSpeed's, after its scheduler)."""
        if self._client_scheduler is not None:
            return [float(self._client_scheduler.get_last_lr()[0])]
        return [self._session.next_lr]

    def all_gather(self, value):
        """Every rank's float `value`, in rank order (a small exchange between the ranks)."""
        return self._session.all_gather(float(value))

    def is_gradient_accumulation_boundary(self):
        return self._micro == self._gas

    def memory_report(self):
        """The compiler's memory plan of this rank's step (bytes by buffer and category)."""
        return dict(self.metadata.get("plan", {}))

    # The data of one micro-batch, as the step's inputs.
    def _arrays(self, batch):
        forward = getattr(self.module, "forward", self.module)
        named = _raise_as_ds(export.named_inputs, forward, batch)
        missing = [i["name"] for i in self._inputs if i["name"] not in named]
        extra = [n for n in named if n not in {i["name"] for i in self._inputs}]
        if missing or extra:
            raise DSError(f"the batch has inputs {sorted(named)}; the step was compiled for "
                          f"{[i['name'] for i in self._inputs]} (missing {missing}, unknown "
                          f"{extra})")
        arrays = []
        for spec in self._inputs:
            name = spec["name"]
            t = _raise_as_ds(export.as_tensor, named[name], name)
            if list(t.shape) != spec["dims"]:
                raise DSError(f"input '{name}' has shape {list(t.shape)} but the step was "
                              f"compiled for {spec['dims']} (one micro-batch of this rank); "
                              f"pad or cut batches to that shape, or initialize with "
                              f"example_inputs of the shape you train with")
            want = export.torch_dtype(spec["dtype"])
            if t.dtype != want:
                t = t.to(want)
            arrays.append(t.contiguous())  # no copy when it already is
        return arrays

    def _call(self, batches):
        # A bad batch on one rank fails every rank (the others would wait in the step's
        # collectives): the checks pass an agreement point first.
        try:
            keep = [a for b in batches for a in self._arrays(b)]
            problem = ""
        except DSError as e:
            problem = str(e)
        if self._session.world_size > 1 or problem:
            _raise(self._session.agree, problem)
        if self._micro == 0:
            self._session.begin_step()
        pointers = [a.data_ptr() for a in keep]
        losses = _raise(self._session.call, pointers, len(batches))
        self._micro += len(batches)
        return losses

    def _end(self):
        if self._client_scheduler is not None:
            self._session.set_lr(self.get_lr()[0])
        loss, lr, _ = _raise(self._session.end_step)
        if self._client_scheduler is not None:
            with warnings.catch_warnings():  # "lr_scheduler.step() before optimizer.step()"
                warnings.simplefilter("ignore")
                self._client_scheduler.step()
        self._micro = 0
        self._last = (loss, lr)
        return loss

    def forward(self, *args, **kwargs):
        """One micro-batch through the compiled forward and backward (its gradients
        accumulate): returns this rank's loss. engine.backward(loss) and engine.step() follow."""
        if self._per_call > 1:
            raise DSError("a pipeline-parallel step runs all its micro-batches together: use "
                          "engine.train_batch() (as DeepSpeed's PipelineEngine)")
        if self._pending is not None:
            raise DSError("engine(batch) twice without engine.backward(loss) in between")
        batch = kwargs if kwargs else (args[0] if len(args) == 1 and isinstance(args[0], dict)
                                       else args)
        (loss,) = self._call([batch])
        self._pending = torch.tensor(loss)
        return self._pending

    __call__ = forward

    def backward(self, loss, **_):
        """The gradients of engine(batch)'s loss were computed with it; this checks the order."""
        if self._pending is None or loss is not self._pending:
            raise DSError("engine.backward(loss) takes the loss of the last engine(batch)")
        self._pending = None
        return loss

    def step(self):
        """The optimizer update at the accumulation boundary (every gradient_accumulation_steps
        micro-batches), as DeepSpeed's engine.step()."""
        if self._pending is not None:
            raise DSError("engine.step() before engine.backward(loss)")
        if self._micro == self._gas:
            self._end()

    def train_batch(self, data_iter=None):
        """One optimizer step over gradient_accumulation_steps micro-batches of this rank,
        taken from an iterator or a list; returns the step's mean loss over every
        data-parallel rank (DeepSpeed's PipelineEngine.train_batch)."""
        if self._micro or self._pending is not None:
            raise DSError("train_batch in the middle of an engine(batch)/step() accumulation")
        if data_iter is None:
            raise DSError("train_batch needs the micro-batches: an iterator or a list of "
                          f"{self._gas}")
        if isinstance(data_iter, (list, tuple)):
            if len(data_iter) != self._gas:
                raise DSError(f"train_batch got {len(data_iter)} micro-batches; a step takes "
                              f"gradient_accumulation_steps = {self._gas}")
            batches = list(data_iter)
        elif hasattr(data_iter, "__next__"):
            batches = [next(data_iter) for _ in range(self._gas)]
        else:
            raise DSError(f"train_batch takes an iterator or a list of micro-batches, not a "
                          f"{type(data_iter).__name__}: pass iter(loader) once and reuse it")
        for k in range(0, self._gas, self._per_call):
            self._call(batches[k:k + self._per_call])
        return torch.tensor(self._end())

    def eval_batch(self, *_a, **_k):
        raise DSError("eval_batch is not implemented yet: ds compiles a training step only "
                      "(a forward-only program over the same weights is future work)")

    def save_checkpoint(self, save_dir, tag=None, client_state=None, **_):
        """Saves ds's sharded checkpoint into save_dir (every rank writes its part)."""
        if tag is not None or client_state:
            raise DSError("ds names checkpoints by step (save_dir/latest); tag and "
                          "client_state are not supported")
        _raise(self._session.save, os.fspath(save_dir))
        return True

    def load_checkpoint(self, load_dir, tag=None, **_):
        """Continues from load_dir's latest checkpoint (or load_dir/tag), written by any mesh
        or ZeRO stage; returns (path, {})."""
        path = os.fspath(load_dir) if tag is None else os.path.join(load_dir, str(tag))
        _raise(self._session.load, path)
        return path, {}

    def module_state_dict(self):
        """The fp32 weights as torch tensors under the model's state_dict keys, gathered: on
        rank 0 (None on the others)."""
        from safetensors.torch import load_file
        path = os.path.join(self.workdir, "state_dict.safetensors")
        _raise(self._session.export_weights, path)
        if self._session.rank != 0:
            return None
        tensors = load_file(path)
        os.remove(path)
        p = export.PREFIX
        return {k[len(p):] if k.startswith(p) else k: v for k, v in tensors.items()}

    def destroy(self):
        """Leaves the group and frees the step (every rank together)."""
        if self._session is not None:
            self._session.close()
            self._session = None
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __del__(self):
        try:
            self.destroy()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

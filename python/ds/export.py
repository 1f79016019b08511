"""The user's model as ds imports it: a loss-returning forward exported with torch.export."""
import inspect
import keyword

import numpy as np
import torch

# torch's element types and the names ds's types use (MLIR's, which the runtime's dtypes share).
_DTYPES = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64", torch.int32: "i32",
           torch.bool: "i1", torch.bfloat16: "bf16", torch.float16: "f16"}
_TORCH_OF = {name: dtype for dtype, name in _DTYPES.items()}


def torch_dtype(name):
    """The torch dtype of a ds element type name ("i64")."""
    return _TORCH_OF[name]


def as_tensor(value, name):
    """A batch entry (torch tensor, numpy array, nested list) as a CPU torch tensor."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu() if value.device.type != "cpu" else value.detach()
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    try:
        return torch.as_tensor(value)
    except Exception as e:  # noqa: BLE001 - reraised with the input's name
        raise TypeError(f"input '{name}' is a {type(value).__name__}, not a tensor or array: "
                        f"pass torch tensors or numpy arrays") from e


def named_inputs(forward, batch):
    """`batch` (a dict of keyword arguments, a tuple or list of positional ones, or one tensor)
    as an ordered dict of the forward's argument names."""
    if isinstance(batch, dict):
        return dict(batch)
    if not isinstance(batch, (tuple, list)):
        batch = (batch,)
    params = [p for p in inspect.signature(forward).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(batch) > len(params):
        raise TypeError(f"{len(batch)} positional inputs, but forward takes "
                        f"{len(params)} ({', '.join(p.name for p in params)})")
    return {p.name: v for p, v in zip(params, batch)}


def loss_of(output):
    """The loss in what a forward returns: a scalar tensor, the first scalar of a tuple or list
    (HF's `return_dict=False` puts it first, nanoGPT's `(logits, loss)` last), or an HF
    ModelOutput's `.loss`."""
    loss = getattr(output, "loss", None)
    if loss is None and isinstance(output, dict):
        loss = output.get("loss")
    if loss is None and isinstance(output, (tuple, list)):
        loss = next((o for o in output if isinstance(o, torch.Tensor) and o.dim() == 0), None)
    if loss is None and isinstance(output, torch.Tensor):
        loss = output
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        raise TypeError("the model's forward returns no loss (a scalar tensor, a tuple holding "
                        "one, or a ModelOutput with .loss); pass the labels "
                        "in the inputs, or wrap the model so that forward returns the loss")
    return loss


def _wrapper(model, names):
    """A module whose forward takes `names` and returns `model`'s loss."""
    for n in names:
        if not n.isidentifier() or keyword.iskeyword(n):
            raise ValueError(f"input name '{n}' is not a Python identifier")
    call = ", ".join(f"{n}={n}" for n in names)
    extra = ", use_cache=False" if _takes_use_cache(model, names) else ""
    source = (f"def forward(self, {', '.join(names)}):\n"
              f"    return loss_of(self.model({call}{extra}))\n")
    scope = {"loss_of": loss_of}
    exec(compile(source, "<ds.export>", "exec"), scope)  # noqa: S102 - names checked above

    class LossOf(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        forward = scope["forward"]

    return LossOf()


def _takes_use_cache(model, names):
    # HF models build a KV cache when their config asks; training never reads it.
    if "use_cache" in names or getattr(getattr(model, "config", None), "use_cache", None) is None:
        return False
    return "use_cache" in inspect.signature(model.forward).parameters


# The wrapper's parameters are the model's under this prefix.
PREFIX = "model."


def export(model, inputs, path):
    """Exports `model` with `inputs` (name -> tensor) as a program returning its loss, saved to
    `path`; returns the importer's input specs ("name=tensor<8x16xi64>")."""
    names = list(inputs)
    wrapper = _wrapper(model, names)
    tensors = {n: as_tensor(v, n) for n, v in inputs.items()}
    specs = []
    for n, t in tensors.items():
        if t.dtype not in _DTYPES:
            raise TypeError(f"input '{n}' is {t.dtype}; ds takes {sorted(map(str, _DTYPES))}")
        if t.dim() == 0:
            raise ValueError(f"input '{n}' is a scalar; ds's inputs are batches (the first "
                             f"dimension is the micro-batch)")
        specs.append(f"{n}=tensor<{'x'.join(map(str, t.shape))}x{_DTYPES[t.dtype]}>")
    program = torch.export.export(wrapper, (), tensors, strict=False)
    torch.export.save(program, path)
    return specs

"""ds from Python: DeepSpeed's engine API over ds's compiled training step.

    import ds
    engine, optimizer, _, scheduler = ds.initialize(model=model, config="ds_config.json",
                                                    example_inputs=batch)
    for batch in loader:
        loss = engine.train_batch([batch])

The model is exported with torch.export, its training step (forward, backward, optimizer, the
ZeRO / tensor / pipeline split the config asks for) compiled in-process by ds's C API, and
trained by ds's runtime; torch's autograd and optimizers never run in the engine.
"""
import os

# The runtime's OpenMP threads sleep when idle instead of spinning (read when it loads).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .engine import (DSError, Engine, add_config_arguments, init_distributed,  # noqa: E402
                     initialize)

__all__ = ["initialize", "add_config_arguments", "init_distributed", "Engine", "DSError"]

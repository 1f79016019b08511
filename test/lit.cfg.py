# lit configuration of the ds test suite.
import os
import lit.formats

config.name = "ds"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["models", "make_models2.py", "unit", "fuzz", "train_compare.py", "torch_loop.py", "offload_budget.py", "recompute.py", "op_gradients.py", "compile_compare.py", "checkpoint_kill.py", "reshard.py", "trace_check.py", "make_data.py", "lit.cfg.py", "CMakeLists.txt", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.ds_obj_root, "test")

path = [os.path.join(config.ds_obj_root, "bin"), config.llvm_tools_dir]
config.environment["PATH"] = os.pathsep.join(path + [config.environment.get("PATH", "")])

config.substitutions.append(("%models", os.path.join(config.ds_src_root, "test", "models")))
config.substitutions.append(("%ds_src", config.ds_src_root))
config.substitutions.append(("%ds_obj", config.ds_obj_root))
config.substitutions.append(("%python_torch2", config.python_torch2 or "false"))
config.substitutions.append(("%python_torch", config.python_torch or "false"))
# The bounds of the 16-bit tests (test/e2e/mixed-precision.test).
config.substitutions.append(("%{bf16}", "--lr 3e-3 --loss-rtol 2e-3 --param-rtol 5e-2 --param-rtol-1d 1 --grad-rtol 5e-3"))
config.substitutions.append(("%{fp16}", "--lr 4e-3 --loss-rtol 2e-3 --param-rtol 5e-2 --param-rtol-1d 1"))
# Clipping that shows (SGD sees the norm; Adam does not see a norm off by a constant factor):
# the GPT's gradient norm is about 1.1, so 0.5 clips the steps.
config.substitutions.append(("%{sgd-clip}", "--clip 0.5 --optimizer '{\"type\": \"SGD\", \"params\": {\"lr\": 1.0, \"momentum\": 0.9}}'"))
config.substitutions.append(("%unit", os.path.join(config.ds_obj_root, "test", "unit")))

if config.ds_enable_torch:
    config.available_features.add("torch")
if config.python_torch:
    config.available_features.add("python-torch")
if config.python_torch2:
    config.available_features.add("python-torch2")
# The independent oracle (test/e2e/torch_loop.py) runs on .venv's PyTorch.
config.environment["DS_TORCH_LOOP_PYTHON"] = config.python_torch2 or ""

# Whether the runtime's CUDA device plugin was built (nvcc found): FileCheck prefixes for the
# lines that differ (test/Runtime/devices.test).
cuda_built = os.path.exists(os.path.join(config.ds_obj_root, "lib", "libdsrt_cuda.so"))
config.substitutions.append(("%cuda_built", "CUDA" if cuda_built else "NOCUDA"))

# OpenMPI runs here as root and with more ranks than cores.
import shutil
if shutil.which("mpirun"):
    config.available_features.add("mpi")
# QEMU's user-mode emulator (scripts/setup.sh installs qemu-user): other CPUs than this one.
if shutil.which("qemu-x86_64"):
    config.available_features.add("qemu")
# Under CI (CI=true) a missing feature is a failure, not a quiet skip of the tests needing it.
if os.environ.get("CI") == "true":
    wanted = {"torch": "LibTorch (configure with DS_ENABLE_TORCH=ON after scripts/setup.sh)",
              "python-torch": "Debian's python3-torch", "python-torch2": ".venv (scripts/setup.sh)",
              "mpi": "mpirun (openmpi-bin)", "qemu": "qemu-x86_64 (qemu-user)"}
    missing = [why for f, why in wanted.items() if f not in config.available_features]
    if missing:
        lit_config.fatal("CI=true: lit would skip the tests needing " + "; ".join(missing))
config.substitutions.append(("%mpirun", "mpirun --allow-run-as-root --oversubscribe"))

# lit configuration of the ds test suite.
import os
import lit.formats

config.name = "ds"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["models", "make_models2.py", "unit", "fuzz", "train_compare.py", "offload_budget.py", "recompute.py", "op_gradients.py", "compile_compare.py", "checkpoint_kill.py", "reshard.py", "trace_check.py", "make_data.py", "lit.cfg.py", "CMakeLists.txt", "Inputs"]
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
config.substitutions.append(("%unit", os.path.join(config.ds_obj_root, "test", "unit")))

if config.ds_enable_torch:
    config.available_features.add("torch")
if config.python_torch:
    config.available_features.add("python-torch")
if config.python_torch2:
    config.available_features.add("python-torch2")

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
config.substitutions.append(("%mpirun", "mpirun --allow-run-as-root --oversubscribe"))

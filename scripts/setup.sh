#!/usr/bin/env bash
# Installs everything ds needs: Debian's packages, then PyTorch 2.x (pinned) in the project's
# virtual environment .venv, whose LibTorch builds the importer and ds-reference and whose Python
# exports the PyTorch 2.x test models. Safe to run again (idempotent).
# Slurm and munge (3.5 MB) are for the test that launches ds-run with srun
# (test/e2e/slurm_launch.py, which skips without them); DS_WITHOUT_SLURM=1 leaves them out.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

pkgs=(
  cmake ninja-build ccache g++ lld
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  libtorch-dev python3-torch python3-torchvision python3-numpy python3-venv
  # Python's headers: the package ds's extension (python/, nanobind).
  python3-dev
  libopenmpi-dev openmpi-bin
  # The NVMe tier (io_uring), fio to measure it against, libaio for DeepSpeed's async_io
  # (bench/offload_gpt.py).
  liburing-dev fio libaio-dev
  libgtest-dev
  # ICU: the Unicode categories, case folding and NFC of tokenizer.json files (lib/Tokenizer).
  libicu-dev
  bc
  clang-22 libclang-rt-22-dev
  # QEMU's user-mode emulator: the runtime's kernels and a compiled step on a CPU without
  # AVX-512 (runtime/test's runtime-kernels-avx2-emulated, test/e2e/other-cpus.test).
  qemu-user
  # Headless Chromium opens ds-opt --plan-report's page in test/e2e/plan-report.test.
  chromium
)
# Slurm and munge, for the test that launches ds-run with srun on a single-node Slurm of its own
# (test/e2e/slurm_launch.py; it skips without them).
if [ "${DS_WITHOUT_SLURM:-0}" != 1 ]; then
  pkgs+=(slurm-wlm munge)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#pkgs[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# PyTorch 2.x from PyPI: the CUDA build (about 3 GB with its nvidia-* packages); ds uses its CPU
# part. Pinned, so that test models and the oracle do not move under the tests.
# oneDNN 3.2 (the CPU runtime's GEMM and convolutions) from PyPI's OpenMP build, 160 MB in
# .venv/lib and .venv/include: its convolutions are PyTorch 2.15's bit for bit (PyTorch bundles
# oneDNN 3.13; Debian's libdnnl 2.6 rounds differently). PyPI's newer `onednn` 2026.1 is the
# SYCL build: TBB threading, which ignores ds's OpenMP thread count, and 1.9 GB of Intel
# compiler and SYCL runtimes.
# nanobind builds the package ds's extension (python/); pytest runs its tests; accelerate is
# what HF's Trainer needs (ds.hf and the HF Trainer it is judged by). DeepSpeed (its Python
# only, no ops built) is what the benchmarks set ds beside: ALST's TiledMLP and tiled loss in
# bench/long_sequence.py. openai is the client that ds-serve's test (test/e2e/serve_openai.py)
# answers.
py_pkgs=('torch==2.15.*' 'transformers==5.24.*' 'numpy<3' 'nanobind==3.1.*' 'pytest==9.*'
         'accelerate==1.16.*' 'openai==3.*'
         'onednn-cpu-gomp==2023.2.0' 'onednn-devel-cpu-gomp==2023.2.0')
venv="$root/.venv"
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
if "$venv/bin/python" - <<'PY' 2>/dev/null
import importlib.metadata as m
assert m.version("torch").startswith("2.15.") and m.version("transformers").startswith("5.24.")
m.version("numpy")
assert m.version("nanobind").startswith("3.1.") and m.version("pytest").startswith("9.")
assert m.version("accelerate").startswith("1.16.") and m.version("deepspeed").startswith("0.19.")
assert m.version("openai").startswith("3.")
assert m.version("onednn-cpu-gomp") == m.version("onednn-devel-cpu-gomp") == "2023.2.0"
PY
then
  echo "setup: PyTorch $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("torch"))') present in .venv"
else
  echo "setup: installing ${py_pkgs[*]} in .venv (about 3 GB)"
  # pip unpacks into TMPDIR and keeps every wheel a second time in its cache: a machine whose
  # /tmp is small, or whose disk holds 3 GB but not 9, stopped CI with "No space left on
  # device". Unpack beside .venv, on the disk that receives it, and keep no cache.
  pip_tmp="$venv/.pip-tmp"
  mkdir -p "$pip_tmp"
  TMPDIR="$pip_tmp" "$venv/bin/pip" install -q --no-cache-dir "${py_pkgs[@]}"
  # DeepSpeed's setup.py imports torch: after it.
  TMPDIR="$pip_tmp" "$venv/bin/pip" install -q --no-cache-dir 'deepspeed==0.19.*'
  rm -rf "$pip_tmp"
fi

# The cuDNN frontend's C++ headers (3 MB in .venv/cudnn-frontend/include), from PyPI's
# nvidia-cudnn-frontend wheel: they build cuDNN's fused attention into the CUDA device
# (runtime/src/cuda/cudnn_attention.cpp). Only the headers: pip would install the wheel's
# Python module and its dependencies (CUTLASS's DSL, 600 MB), which ds does not use.
fe="$venv/cudnn-frontend"
if grep -qs 'CUDNN_FRONTEND_MINOR_VERSION 32$' "$fe/include/cudnn_frontend_version.h"; then
  echo "setup: the cuDNN frontend's headers present in $fe"
else
  echo "setup: installing the cuDNN frontend's headers (nvidia-cudnn-frontend 1.32) in $fe"
  rm -rf "$fe" "$venv/.fe-tmp"
  "$venv/bin/pip" download -q --no-deps --no-cache-dir -d "$venv/.fe-tmp" \
    'nvidia-cudnn-frontend==1.32.*'
  "$venv/bin/python" - "$venv"/.fe-tmp/*.whl "$fe" <<'PY'
import sys, zipfile
wheel = zipfile.ZipFile(sys.argv[1])
wheel.extractall(sys.argv[2], [n for n in wheel.namelist() if n.startswith("include/")])
PY
  rm -rf "$venv/.fe-tmp"
fi

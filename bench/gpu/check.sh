#!/usr/bin/env bash
# The CUDA backend's GPU check: everything the GPU machine is for, in one script of a few
# minutes. Run bench/gpu/prepare.sh here first, then, through the device tool:
#   run(command="bash bench/gpu/check.sh", carry=["build-gpu"], timeout_s=420)
# It
#   1. builds the runtime there from source (cmake -S runtime: CUDA for sm_90, GoogleTest from
#      the carried sources; no oneDNN or MPI there, so the CPU reference uses plain loops),
#   2. runs the device conformance suite (every kernel on cuda against the CPU),
#   3. trains the test GPT 20 steps with ds on the GPU and with PyTorch eager on the same GPU
#      (the same TorchScript export, TF32 off) and compares the losses (bound 1e-4 relative),
#   4. times a GPT-2-small-sized step in bf16, ds against PyTorch eager, tokens/s and MFU (ds's
#      attention on cuDNN's fused SDPA, then on ds's own kernels), and traces one more ds step
#      to show where its time goes (bench/gpu/trace_top.py).
# Results go to $OUT (the device tool brings them back): summary.md and the logs. Here, without
# a GPU, `DEVICE=cpu PY=.venv/bin/python GPT2_STEPS=0 bash bench/gpu/check.sh` runs the same
# steps on the CPU, to check the script itself.
set -uo pipefail
cd "$(dirname "$0")/../.."
DEVICE=${DEVICE:-cuda}
PY=${PY:-python3}
OUT=${OUT:-build-gpu/out}
ARCH=${ARCH:-90-real}
GPT2_STEPS=${GPT2_STEPS:-8}
B=${B:-/tmp/ds-gpu-build}
mkdir -p "$OUT"
OUT=$(realpath "$OUT") # the GPT-2 steps run from bench/gpu
case $PY in */*) PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY") ;; esac # not realpath: a venv's python is a link
summary="$OUT/summary.md"
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
t0=$(date +%s)
phase() { say "## $1 (at $(($(date +%s) - t0)) s)"; }
status=0

phase "machine"
{ nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"; nvcc --version 2>/dev/null | tail -1
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())'
} 2>&1 | tee -a "$summary"

phase "build the runtime"
# NCCL there is pip's nvidia-nccl-cu13 (include/nccl.h and lib/libnccl.so.2 in site-packages).
NCCL_ROOT=${NCCL_ROOT:-$("$PY" -c '
import glob, os, site
for d in site.getsitepackages():
    for h in glob.glob(os.path.join(d, "nvidia", "**", "include", "nccl.h"), recursive=True):
        print(os.path.dirname(os.path.dirname(h))); raise SystemExit' 2>/dev/null)}
say "NCCL_ROOT=${NCCL_ROOT:-(beside CUDA)}"
# cuDNN's fused attention: the frontend's headers carried in build-gpu/cudnn-frontend/include
# (prepare.sh), cuDNN's beside CUDA or pip's nvidia-cudnn-cu13 (PyTorch's).
CUDNN_INC=${CUDNN_INC:-$("$PY" -c '
import glob, os, site
for d in site.getsitepackages():
    for h in glob.glob(os.path.join(d, "nvidia", "**", "include", "cudnn.h"), recursive=True):
        print(os.path.dirname(h)); raise SystemExit' 2>/dev/null)}
[ -z "$CUDNN_INC" ] && [ -f /usr/local/cuda/include/cudnn.h ] && CUDNN_INC=/usr/local/cuda/include
fe=build-gpu/cudnn-frontend/include
if [ -n "$CUDNN_INC" ] && [ -f "$fe/cudnn_frontend.h" ]; then
  dnn=(-DCUDNN_INCLUDE_DIR="$CUDNN_INC"
       -DCUDNN_FRONTEND_INCLUDE_DIR="$PWD/$fe")
  say "cuDNN headers: $CUDNN_INC; frontend: $fe"
else
  dnn=(-DDSRT_CUDNN_ATTENTION=OFF)
  say "cuDNN's fused attention NOT built: cudnn.h (${CUDNN_INC:-not found}) or $fe missing"
fi
cmake -S runtime -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
  -DGTEST_SOURCE_DIR="$PWD/build-gpu/googletest" -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON \
  ${NCCL_ROOT:+-DNCCL_ROOT="$NCCL_ROOT"} "${dnn[@]}" >"$OUT/cmake.log" 2>&1 &&
  ninja -C "$B" >"$OUT/build.log" 2>&1
rc=$?
say "build exit code $rc"
if [ $rc -ne 0 ]; then tail -n 40 "$OUT/build.log" "$OUT/cmake.log"; exit 1; fi
"$B/bin/ds-report" | tee -a "$summary"

phase "conformance ($DEVICE against cpu)"
# 16-bit attention alone, second: on cuDNN (DSRT_CUDA_ATTENTION=cudnn) a case cuDNN refuses
# ends the process, naming why, and must not take the other cases' results with it.
for part in "-*AttentionHalf*" "*AttentionHalf*"; do
  DSRT_CONFORMANCE_DEVICES=$DEVICE "$B/test/ds-runtime-conformance-tests" \
    --gtest_filter="$part" >"$OUT/conformance.txt" 2>&1
  rc=$?
  cat "$OUT/conformance.txt" >>"$OUT/conformance-all.txt"
  grep -E "^\[  (FAILED|PASSED|SKIPPED) +\]|tests? ran|Failure|differ|error|cuDNN" \
    "$OUT/conformance.txt" | head -40 | tee -a "$summary"
  say "conformance ($part) exit code $rc"
  [ $rc -eq 0 ] || status=1
done

link() { # STEP.o EXE
  cc "$1" -o "$2" -L"$B/lib" -Wl,-rpath,"$B/lib" -ldsrt_main -ldsrt -lstdc++
}

phase "test GPT, 20 steps: ds --device $DEVICE against PyTorch eager on $DEVICE"
g=build-gpu/gpt
if link "$g/step.o" "$B/gpt-train" &&
  "$B/gpt-train" --device "$DEVICE" --data idx="$g/idx.npy" --data targets="$g/targets.npy" \
    --steps 20 --weights "$g/weights.safetensors" --log "$OUT/gpt-ds.jsonl" >"$OUT/gpt-ds.txt" 2>&1 &&
  "$PY" bench/gpu/torch_gpt.py "$g" 20 "$DEVICE" "$OUT/gpt-torch.jsonl" >"$OUT/gpt-torch.txt" 2>&1
then
  "$PY" bench/gpu/compare_losses.py "$OUT/gpt-ds.jsonl" "$OUT/gpt-torch.jsonl" 1e-4 |
    tee -a "$summary"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
else
  say "test GPT run failed:"; tail -n 20 "$OUT"/gpt-*.txt | tee -a "$summary"; status=1
fi

if [ "$GPT2_STEPS" -gt 0 ]; then
  phase "GPT-2 small, bf16, $GPT2_STEPS steps: ds against PyTorch eager"
  w=/tmp/ds-gpt2s
  mkdir -p "$w"
  if (cd bench/gpu && "$PY" gpt2_inputs.py "$w" "$GPT2_STEPS" 8) >"$OUT/gpt2s-inputs.txt" 2>&1 &&
    link build-gpu/gpt2s/step.o "$B/gpt2s-train" &&
    "$B/gpt2s-train" --device "$DEVICE" --tokens "$w/tokens.bin" --seq-len 1024 \
      --steps "$GPT2_STEPS" --weights "$w/weights.safetensors" --log "$OUT/gpt2s-ds.jsonl" \
      >"$OUT/gpt2s-ds.txt" 2>&1 &&
    (cd bench/gpu && "$PY" gpt2_eager.py "$DEVICE" 8 "$GPT2_STEPS") >"$OUT/gpt2s-torch.json" 2>&1
  then
    (cd bench/gpu && "$PY" throughput.py "$OUT/gpt2s-ds.jsonl" "$OUT/gpt2s-torch.json" "$DEVICE") |
      tee -a "$summary"
    # The same steps with ds's own attention kernels in place of cuDNN's fused SDPA.
    say "### ds with its own attention kernels (DSRT_CUDA_ATTENTION=ds) against PyTorch eager"
    if DSRT_CUDA_ATTENTION=ds "$B/gpt2s-train" --device "$DEVICE" --tokens "$w/tokens.bin" \
      --seq-len 1024 --steps "$GPT2_STEPS" --weights "$w/weights.safetensors" \
      --log "$OUT/gpt2s-ds-own-attention.jsonl" >"$OUT/gpt2s-ds-own-attention.txt" 2>&1; then
      (cd bench/gpu && "$PY" throughput.py "$OUT/gpt2s-ds-own-attention.jsonl" \
        "$OUT/gpt2s-torch.json" "$DEVICE") | tee -a "$summary"
    else
      say "run with ds's attention failed:"; tail -n 20 "$OUT/gpt2s-ds-own-attention.txt" |
        tee -a "$summary"; status=1
    fi
    # Where ds's step goes: the third of 3 steps traced (each call waits for the stream).
    say "### ds's step 3 traced (--trace): its own time by call and by ds op"
    if "$B/gpt2s-train" --device "$DEVICE" --tokens "$w/tokens.bin" --seq-len 1024 --steps 3 \
      --weights "$w/weights.safetensors" --trace "$w/trace.json" --trace-steps 3 \
      >"$OUT/gpt2s-trace.txt" 2>&1; then
      "$PY" bench/gpu/trace_top.py "$w/trace.json" 15 2>&1 | tee -a "$summary"
    else
      say "traced run failed:"; tail -n 20 "$OUT/gpt2s-trace.txt" | tee -a "$summary"; status=1
    fi
  else
    say "GPT-2 small run failed:"; tail -n 20 "$OUT"/gpt2s-*.txt "$OUT/gpt2s-torch.json" |
      tee -a "$summary"; status=1
  fi
fi
phase "done, exit code $status"
exit $status

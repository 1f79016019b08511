#!/usr/bin/env bash
# Fuzzes the readers of what users hand ds: .npy and safetensors files, checkpoint indexes,
# DeepSpeed configs and ds-dialect programs, each for SECONDS (default 600) with libFuzzer under
# AddressSanitizer and UndefinedBehaviorSanitizer (clang-22 from scripts/setup.sh).
#
#   bash bench/fuzz.sh [SECONDS] [TARGET ...]     (targets: npy safetensors checkpoint_index
#                                                   config ds_dialect; default all)
#
# Builds build-fuzz/ (-DDS_FUZZ=ON), starts each target from its committed corpus
# (test/fuzz/corpus/TARGET), writes crashing inputs to build-fuzz/findings/TARGET/, merges the
# inputs that add coverage back into the committed corpus (which ctest replays: fuzz-corpus-*),
# and prints a table. Never part of the test run.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(npy safetensors checkpoint_index config ds_dialect)

if ! command -v clang++-22 >/dev/null; then
  echo "fuzz.sh: clang++-22 is missing; run scripts/setup.sh" >&2
  exit 1
fi
mkdir -p build-fuzz
cmake -S . -B build-fuzz -G Ninja -DDS_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 >build-fuzz/build.log 2>&1 ||
  { cat build-fuzz/build.log; exit 1; }
ninja -C build-fuzz ds-fuzz-targets >>build-fuzz/build.log 2>&1 ||
  { tail -40 build-fuzz/build.log; exit 1; }

declare -A maxlen=([npy]=4096 [safetensors]=4096 [checkpoint_index]=16384 [config]=4096
                   [ds_dialect]=4096)
rows=()
for t in "${targets[@]}"; do
  work=build-fuzz/corpus/$t findings=build-fuzz/findings/$t
  mkdir -p "$work" "$findings"
  cp -n test/fuzz/corpus/$t/* "$work"/ 2>/dev/null || true
  log=build-fuzz/$t.log
  dict=()
  [ -f test/fuzz/$t.dict ] && dict=(-dict=test/fuzz/$t.dict)
  echo "fuzz.sh: $t for $seconds s (log: $log)"
  # -fork: a crash is written to findings/ and the search goes on, so one run finds them all.
  rc=0
  # allow_user_poisoning=0: LLVM's allocators poison their slabs by hand when the code that
  # includes their headers is built with ASan, but Debian's libMLIR/libLLVM are not, and a slab
  # one side poisons the other then hands out: a false use-after-poison inside MLIR's
  # StorageUniquer (seen here). ASan's own redzones and checks stay on.
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allow_user_poisoning=0 UBSAN_OPTIONS=print_stacktrace=1 \
    build-fuzz/test/fuzz/ds-fuzz-$t "$work" "${dict[@]}" -max_total_time="$seconds" \
    -max_len="${maxlen[$t]}" -timeout=10 -rss_limit_mb=2048 -fork=1 -ignore_crashes=1 \
    -ignore_timeouts=1 -ignore_ooms=1 -artifact_prefix="$findings/" -print_final_stats=1 \
    >"$log" 2>&1 || rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || true)
  [ -n "$execs" ] || execs=$(grep -o 'exec/s\|#[0-9]*' "$log" | grep -o '[0-9]*' | sort -n | tail -1 || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  # Keep the inputs that add coverage, minimized, in the committed corpus.
  merged=build-fuzz/merged/$t
  rm -rf "$merged" && mkdir -p "$merged"
  ASAN_OPTIONS=detect_leaks=0:allow_user_poisoning=0 build-fuzz/test/fuzz/ds-fuzz-$t -merge=1 "$merged" \
    test/fuzz/corpus/$t "$work" -max_len="${maxlen[$t]}" >>"$log" 2>&1 || true
  if [ -n "$(ls -A "$merged")" ]; then
    rm -rf test/fuzz/corpus/$t && mkdir -p test/fuzz/corpus/$t && cp "$merged"/* test/fuzz/corpus/$t/
  fi
  found=$(ls "$findings" | grep -c . || true)
  rows+=("$(printf '| %-16s | %7s | %10s | %7s | %6s | %8s |' "$t" "$seconds" "$execs" "$cov" \
    "$(ls test/fuzz/corpus/$t | wc -l)" "$found")")
done
echo
echo "| target           | seconds | executions | edges   | corpus | findings |"
echo "|------------------|---------|------------|---------|--------|----------|"
printf '%s\n' "${rows[@]}"
echo
echo "Findings (crashing inputs) are in build-fuzz/findings/TARGET/; replay one with"
echo "build-fuzz/test/fuzz/ds-fuzz-TARGET FILE. The corpora in test/fuzz/corpus/ were updated."

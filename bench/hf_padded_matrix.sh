#!/usr/bin/env bash
# Today's HF models as users train them, every layout: Llama, Qwen2, Mistral, Phi3, OPT and
# Gemma2 (causal LMs) and BERT (MLM), small configs, fed padded batches (a collator's attention_mask
# and -100 labels, left-padded, lengths varying within each batch), traced and exported with
# torch.export, each trained 20 AdamW steps at 1 rank, ZeRO-3 over 2 ranks, tp2 and pp2
# against ds-reference (LibTorch eager); tp2 runs of the decoders also check each rank's
# parameter bytes (at most 0.55x the model's; BERT's embeddings of positions and token types,
# its norms and biases stay whole, 0.551x). Prints one row per run: the worst per-step loss difference,
# the worst final parameter distance, PASS or FAIL. ctest runs a subset
# (test/e2e/torch2-hf-padded.test); this is the whole matrix (about 15 minutes here).
#
#   bash bench/hf_padded_matrix.sh [WORK] [FAMILY...]     (default WORK: build-bench/hf-padded)
set -uo pipefail
cd "$(dirname "$0")/.."
work=$(realpath -m "${1:-build-bench/hf-padded}")
shift || true
families=${*:-hfllamapad hfqwen2pad hfmistralpad hfphi3pad hfoptpad hfbertpad hfgemma2pad}
export DS_TORCH_LOOP_PYTHON=$PWD/.venv/bin/python
mkdir -p "$work"
printf '%-14s %-7s %-8s %-14s %-16s %-10s %s\n' family kind layout 'loss rel diff' \
  'param rel dist' 'params/rank' result
fails=0
for f in $families; do
  for kind in trace export; do
    for layout in 1 z3 tp2 pp2; do
      case $layout in
        1) flags=() ;;
        z3) flags=(--ranks 2 --zero '{"stage": 3, "stage3_param_persistence_threshold": 0}') ;;
        tp2) flags=(--tp 2) ; [[ $f == hfbert* ]] || flags+=(--max-param-ratio 0.55) ;;
        pp2) flags=(--pp 2) ;;
      esac
      dir=$work/$f-$kind-$layout
      out=$(.venv/bin/python test/e2e/train_compare.py --family "$f" --kind "$kind" \
            "${flags[@]}" --bin build/bin --work "$dir" 2>&1)
      summary=$(grep -E "^$f $kind: 20 steps" <<<"$out" | tail -1)
      loss=$(sed -n 's/.*worst loss rel diff \([^,]*\),.*/\1/p' <<<"$summary")
      dist=$(sed -n 's/.*worst parameter rel distance \([^ ]*\) .*/\1/p' <<<"$summary")
      ratio=$(sed -n 's/.*, \([0-9.]*\) x the whole model.*/\1/p' <<<"$out")
      result=FAIL
      if [[ $summary == *"-> PASS" ]] && ! grep -q FAIL <<<"$out"; then
        result=PASS
      else
        fails=$((fails + 1))
        grep -E "rror|FAIL" <<<"$out" | head -3 > "$dir.why" 2>/dev/null || true
      fi
      printf '%-14s %-7s %-8s %-14s %-16s %-10s %s\n' "$f" "$kind" "$layout" "${loss:--}" \
        "${dist:--}" "${ratio:--}" "$result"
    done
  done
done
echo "$fails failed"
[ "$fails" = 0 ]

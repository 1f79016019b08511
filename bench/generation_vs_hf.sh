#!/usr/bin/env bash
# Greedy generation with ds-opt --inference and ds-generate against HF `generate`, token by
# token and logit by logit, on small Llama, Qwen2 and GPT-2 (test/e2e/generate_compare.py:
# prompts of 5, 21 and 37 tokens batched together, 64 new tokens, fp32). The figures the
# README and docs/design/inference.md quote. Needs a build (ninja -C build) and .venv.
#
#   bash bench/generation_vs_hf.sh [NEW_TOKENS]
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for family in llama qwen2 gpt2; do
  .venv/bin/python test/e2e/generate_compare.py --family "$family" --bin build/bin \
    --work "$work" --new-tokens "${1:-64}" 2>/dev/null
done

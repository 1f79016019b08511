#!/usr/bin/env bash
# Shows that the tests can fail: applies deliberate bugs, one at a time, to a scratch copy of
# the source, rebuilds it and runs the tests each bug names (lit paths under test/, or
# ctest:NAME); every bug must make at least one of them fail, within MUTANT_TIMEOUT seconds
# (default 900; a timeout counts as missed). Prints a table. Never part of the test run. The
# mutants come in groups, each under 45 minutes here (2 cores): optimizer (optimizers,
# schedules, data, clipping), parallel (ZeRO, tp, sp, pp), memory (offload, recomputation,
# resharding, kernels), import (HF's masks), python (ds.initialize and ds.hf), attention (the
# fused attention kernels, its fold, the tiled loss and MLP, ring attention, bf16 HF models as
# PyTorch rounds them), moe (the routed
# experts' kernels, their import and fold, their cost, expert parallelism's exchange and update),
# plan (weight-free import, the model-state figures, the cluster's communication model),
# inference (generation's paged key/value cache, its ops' memory plan and lowering, the
# generator's continuous batching, the tokenizer, chat templates and the server).
#
#   bash bench/mutants.sh [SCRATCH] [GROUP]   (default SCRATCH: build-mutants/, GROUP: all)
#   MUTANT_NAMES='OneCycle|Muon' bash bench/mutants.sh     (those whose names match)
#   MUTANT_BASELINE=0 ...                                   (skip the unmutated run)
#
# The scratch copy is the working tree as it is (tracked and untracked files that git does not
# ignore); its build is kept between runs, so a second run rebuilds only what a bug touches.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=$(realpath -m "${1:-build-mutants}")
group=${2:-all}
timeout_s=${MUTANT_TIMEOUT:-900}
src=$scratch/src
# The scratch copy follows the working tree: files whose content differs are copied (so the
# build redoes what changed), files gone from the tree are removed.
mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard | /usr/bin/python3 -c '
import os, shutil, sys
src = sys.argv[1]
want = {p for p in sys.stdin.read().split("\0") if p and os.path.isfile(p)}
for p in want:
    dst = os.path.join(src, p)
    if not os.path.exists(dst) or open(p, "rb").read() != open(dst, "rb").read():
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(p, dst)
for root, _, files in os.walk(src):
    for f in files:
        rel = os.path.relpath(os.path.join(root, f), src)
        if rel not in want:
            os.remove(os.path.join(root, f))
' "$src"
# The project's .venv (LibTorch, oneDNN, PyTorch 2.x for the tests) is shared, not copied.
[ -e "$src/.venv" ] || ln -s "$PWD/.venv" "$src/.venv"
export CCACHE_BASEDIR=$scratch CCACHE_NOHASHDIR=1
echo "mutants: building the scratch copy in $scratch/build (log: $scratch/build.log)"
cmake -S "$src" -B "$scratch/build" -G Ninja >"$scratch/build.log" 2>&1
ninja -C "$scratch/build" >>"$scratch/build.log" 2>&1 || { tail -30 "$scratch/build.log"; exit 1; }
lit=/usr/lib/llvm-22/bin/lit

# group | name | file | text | replacement | tests (lit paths under test/, or ctest:NAME).
# Several replacements are separated by @@ (undone in reverse order).
mutants=$(cat <<'EOF'
optimizer|drop weight decay|dialects/ds/Transforms/Optimizer.cpp|e().constant(f64, decoupled ? opt.weightDecay : 0.0)|e().constant(f64, 0.0)|e2e/optimizers.test
optimizer|drop Adam's bias correction|dialects/ds/Transforms/Optimizer.cpp|bc1 = e().sub(one64, e().pow(beta1Value, step64));@@bc2 = e().sub(one64, e().pow(e().constant(f64, opt.beta2), step64));|bc1 = one64;@@bc2 = one64;|e2e/gpt-fidelity.test
optimizer|clip by the squared norm|dialects/ds/Transforms/Optimizer.cpp|Value norm = e().sqrt(total);|Value norm = total;|e2e/optimizers.test
optimizer|double the loss-scale window|runtime/src/driver/loss_scaler.h|window = spec.window;|window = 2 * spec.window;|e2e/mixed-precision.test
optimizer|shift the data order by one sample|runtime/src/driver/data.cpp|int64_t first = io::sampleOffset(step, rank, k, p.G, p.mb, p.gas);|int64_t first = io::sampleOffset(step, rank, k, p.G, p.mb, p.gas) + 1;|e2e/gpt-fidelity.test
optimizer|OneCycle's momentum rising with the lr|runtime/src/io/schedule.cpp|mom = maxMom - (maxMom - minMom) * scale;|mom = minMom + (maxMom - minMom) * scale;|e2e/schedules.test
optimizer|Muon's default momentum 0.9|dialects/ds/Transforms/DeepSpeedDefaults.h|kMuonMomentum = 0.95|kMuonMomentum = 0.9|e2e/optimizers.test
parallel|tp clipping: split squares not summed over tp|dialects/ds/Transforms/Optimizer.cpp|bool tpPart = tpAxis && splitsOver(params[i].first.getShardingAttr(), MeshAxis::tp);|bool tpPart = false;|e2e/tensor-parallel.test
parallel|all-reduce with the wrong scale|dialects/ds/Transforms/Autodiff.cpp|double scale = 1.0 / double(gas * dataParallelRanks);|double scale = 1.0 / double(gas);|e2e/data-parallel.test
parallel|skip one bucket's reduce-scatter|dialects/ds/Transforms/Zero.cpp|Value reduced = shard::ReduceScatterOp::create(b, loc, shardType, dp.grid, dp.axes(), packed,|Value reduced = k == 0 ? Value(shard::AllSliceOp::create(b, loc, shardType, dp.grid, dp.axes(), packed, APInt(64, 0)).getResult()) : (Value)shard::ReduceScatterOp::create(b, loc, shardType, dp.grid, dp.axes(), packed,|e2e/zero.test
parallel|ZeRO-3 keeps every bucket gathered for the backward|dialects/ds/Transforms/Zero.cpp|if (between < maxReuseDistance)|if (true)|e2e/zero.test
parallel|sp all-to-all: strided pieces, not blocks|dialects/ds/Transforms/SequenceParallel.cpp|s1.push_back(s[d] / sp);@@SmallVector<int64_t> perm{scatter};@@if (d != scatter)|s1.push_back(s[d] / sp); std::swap(s1[s1.size() - 1], s1[s1.size() - 2]);@@SmallVector<int64_t> perm{scatter + 1};@@if (d != scatter + 1)|e2e/sequence-parallel.test
parallel|drop a tied parameter's other stage's gradient|dialects/ds/Transforms/PipelineOptimizer.cpp|sum = AddOp::create(b, loc, t, sum, part[h[i]]);|sum = i ? sum : part[h[i]];|e2e/pipeline-parallel.test
parallel|warm 1F1B up with one forward too many|dialects/ds/Transforms/Pipeline.cpp|int64_t warm = std::min(p - r - 1, m);|int64_t warm = std::min(p - r, m);|Transforms/pipeline-order.mlir
parallel|interleaved: backward chunks in forward order|dialects/ds/Transforms/Pipeline.cpp|int64_t local = v - 1 - (k / p) % v;|int64_t local = 0 + (k / p) % v;|Transforms/pipeline-order.mlir e2e/pipeline-parallel.test
memory|plan the swap file as host memory|lib/Analysis/ArenaModel.h|return {&nvmeInUse, &nvmePeak};|return {&hostInUse, &hostPeak};|e2e/offload.test
memory|transfers run on the compute thread|runtime/src/core/spaces.cpp|      jobs.push_back(std::move(job));|      return job();|ctest:trace-overlap
memory|the swap file without io_uring|runtime/src/core/spaces.cpp|file->uring = u == 0;|file->uring = false;|e2e/offload.test
memory|a transfer waited after its use|lib/Analysis/MemoryPlanner.cpp|llvm::is_contained(op->getOperands(), v))|false && llvm::is_contained(op->getOperands(), v))|e2e/offload.test
memory|recomputation reads the forward's values|dialects/ds/Transforms/ActivationCheckpoint.cpp|        recompute(u, s);|        (void)0;|e2e/recompute.test
memory|resume reads every tp rank's part 0|runtime/src/driver/checkpointing.cpp|const int64_t part = t.split.whole() ? 0 : g_.indexOn(t.splitAxis);|const int64_t part = 0;|e2e/reshard.test
memory|reduction drops the tail's last element|runtime/src/cpu/reduce.cpp|(__mmask16)((1u << (e - i)) - 1)|(__mmask16)((1u << (e - i - 1)) - 1)|ctest:runtime-kernels
memory|gelu's gradient skips the scalar tail|runtime/src/cpu/gelu_grad.cpp|  for (; i < n; ++i)|  for (; i < 0; ++i)|ctest:runtime-kernels
import|index: negative indices not wrapped|lib/Importer/TorchScript/CoreAtenOps.cpp|TRY(pos, where(I, *negative, *wrapped, *idx, i64));|TRY(pos, where(I, *negative, *idx, *idx, i64));|e2e/op-gradients.test
import|a split vocabulary's padding row takes gradient|dialects/ds/Transforms/VocabParallel.cpp|kept = WhereOp::create(b, loc, et, padMask, StopGradientOp::create(b, loc, kept), kept);|kept = WhereOp::create(b, loc, et, padMask, kept, kept);|e2e/torch2-hf-padded.test
import|the descriptor forgets a split's unequal segment sizes|lib/Conversion/DSToRuntime/ProgramDescriptor.cpp|split["segment_sizes"] = llvm::json::Array(s.splitSizes);|(void)0;|e2e/torch2-hf-padded.test
import|attention: a query row with no key divides by zero (NaN)|runtime/src/cpu/attention.cpp|            if (l[r] == 0.f) {|            if (false) {|e2e/torch2-hf-padded.test
attention|online softmax keeps the accumulator unrescaled|runtime/src/cpu/attention.cpp|                scaleRow(acc.data() + r * Ev, Ev, alpha);|                (void)alpha;|ctest:runtime-kernels
attention|causal limit one key too far|runtime/src/cpu/attention.cpp|std::max<int64_t>(0, i0 + r - j0 + 1)|std::max<int64_t>(0, i0 + r - j0 + 2)|ctest:runtime-kernels e2e/torch2-gpt-fidelity.test
attention|bf16 probabilities by an exact exp, not ATen's fast one|runtime/src/cpu/attention.cpp|                      : cpu::vexpShiftSumHalfSoftmax(P + r * nk, row, mnew, nk);|                      : (float)cpu::vexpShiftSum(P + r * nk, row, mnew, nk, true);|ctest:runtime-kernels e2e/long-sequence.test
attention|fast exp's vectors 8 wide on an AVX-512 CPU (ATen's are 16)|runtime/src/cpu/fast_exp.cpp|  return avx512Bf16Lanes() ? rowAvx512(dst, x, shift, n) : rowLanes<8>(dst, x, shift, n);|  return rowLanes<8>(dst, x, shift, n);|ctest:runtime-kernels e2e/long-sequence.test
attention|grouped query heads read the wrong key/value head|runtime/src/cpu/attention.cpp|nq = std::min(bq, s.L - i0), hk = h / group;|nq = std::min(bq, s.L - i0), hk = h % s.Hk;|e2e/torch2-lm-fidelity.test
attention|backward drops rowsum(do * o)|runtime/src/cpu/attention.cpp|softmaxGradRow(dp + r * nk, p + r * nk, nk, D[r]);|softmaxGradRow(dp + r * nk, p + r * nk, nk, 0.f);|e2e/torch2-gpt-fidelity.test
attention|fold keeps masked_fill's dropped keys|dialects/ds/Transforms/FuseAttention.cpp|        case CmpPredicate::eq: return CmpPredicate::ne;|        case CmpPredicate::eq: return CmpPredicate::eq;|e2e/gpt-fidelity.test
attention|tiled loss: the tiles' sums not added|runtime/src/core/tiled_loss.cpp|      dsrt_binary(ctx, DSRT_ADD, loss, loss, &part);|      (void)part;|e2e/long-sequence.test
attention|tiled loss: the tiles' weight gradients not added|runtime/src/core/tiled_loss.cpp|      dsrt_binary(ctx, DSRT_ADD, dw, dw, &dwPart);|      (void)dwPart;|e2e/long-sequence.test
attention|ring: a block's partial result not merged|runtime/src/core/ring_attention.cpp|      dsrt_binary(ctx, DSRT_ADD, out, out, &O);|      (void)O;|e2e/ring-attention.test
memory|checkpoint segments cut at the first parameter read|dialects/ds/Transforms/ActivationCheckpoint.cpp|    starts[s] = ops[best];|    (void)best;|Transforms/activation-checkpoint-cut.mlir
memory|a pipeline's recomputation runs in the forward phase|dialects/ds/Transforms/ActivationCheckpoint.cpp|      clone->setAttr(kBackwardAttrName, b.getUnitAttr());|      (void)0;|Transforms/activation-checkpoint-pipeline.mlir e2e/recompute.test
memory|recomputed segments cross a pipeline's chunks|dialects/ds/Transforms/ActivationCheckpoint.cpp|    groups = splitAtChunks(segmentOf, *chunkOf, loss);|    (void)splitAtChunks;|Transforms/activation-checkpoint-pipeline.mlir e2e/pipeline-parallel.test
memory|bf16 widenings made where the parameter is read (the export's top)|dialects/ds/Transforms/MixedPrecision.cpp|      b.setInsertionPoint(use->getOwner());|      (void)0;|e2e/weight-free.test
memory|a pipeline's rematerialized widenings stay in the forward phase|dialects/ds/Transforms/Autodiff.cpp|      joinPhaseOf(c, first);|      (void)c;|e2e/pipeline-parallel.test
attention|ring: striped later blocks see their diagonal|runtime/src/core/ring_attention.cpp|return src <= rank ? DSRT_CAUSAL : DSRT_CAUSAL_STRICT;|return DSRT_CAUSAL;|e2e/ring-attention.test
attention|ring: strict causal keeps the diagonal|runtime/src/cpu/attention.cpp|const int64_t from = causal == DSRT_CAUSAL_STRICT ? 0 : 1;|const int64_t from = 1;|e2e/ring-attention.test
attention|sp: a striped ring fed blocks in sequence order|dialects/ds/Transforms/SequenceParallel.cpp|const bool stripes = sequence && striped;|const bool stripes = false;|e2e/ring-attention.test
attention|sp: the rank's labels sliced before the shift|dialects/ds/Transforms/SequenceParallel.cpp|sliceLocal(b, sl.getLoc(), sl.getResult(), dim);|sliceLocal(b, sl.getLoc(), c.getInputs()[0], dim);|e2e/ring-attention.test
attention|checkpointing keeps the all-to-alls|dialects/ds/Transforms/ActivationCheckpoint.cpp|  if (isa<shard::AllToAllOp>(op))|  if (false)|Transforms/activation-checkpoint-sequence-parallel.mlir
attention|ring backward: key gradients left behind|runtime/src/core/ring_attention.cpp|      dsrt_binary(ctx, DSRT_ADD, &GK, &GK, &DK);|      (void)DK;|e2e/ring-attention.test
attention|mlp tiles: the tiles' results joined in reverse|dialects/ds/Transforms/TileMlp.cpp|    pieces.push_back(map.lookup(exit));|    pieces.insert(pieces.begin(), map.lookup(exit));|e2e/long-sequence.test
attention|16-bit forward: probabilities kept in f32 for their product|runtime/src/cpu/attention.cpp|              roundRow(s.dtype, P + r * nk, nk);|              (void)0;|ctest:runtime-kernels e2e/long-sequence.test
attention|16-bit backward: score gradients kept in f32|runtime/src/cpu/attention.cpp|              roundRow(s.dtype, dp, nq * nk);|              (void)0;|ctest:runtime-kernels e2e/long-sequence.test
attention|16-bit backward: key gradients' running sums kept in f32|runtime/src/cpu/attention.cpp|              roundRow(s.dtype, dKh + j0 * E, nk * E);|              (void)0;|ctest:runtime-kernels e2e/long-sequence.test
attention|bf16 attention computed in f32 and rounded|dialects/ds/Transforms/Widen16Bit.cpp|isa<MatmulOp, LinearOp, LinearGradWeightOp, AttentionOp, AttentionGradOp>(op)|isa<MatmulOp, LinearOp, LinearGradWeightOp, LinearGradWeightOp>(op)|Transforms/widen-16bit-products.mlir e2e/long-sequence.test
attention|--device-memory never tries sequence tiling|lib/Pipelines/FitBudget.cpp|      if (!tileable)|      if (true)|e2e/long-sequence.test
attention|the exponentials' lanes miss a NaN argument|runtime/src/cpu/vector_math.cpp|_mm512_mask_cmp_ps_mask(m, a, hi, _CMP_NLE_UQ);|_mm512_mask_cmp_ps_mask(m, a, hi, _CMP_GT_OQ);|ctest:runtime-kernels
attention|bf16: silu rounded twice (its sigmoid not a fused step)|lib/Importer/TorchScript/TransformerOps.cpp|  s->setAttr(kFusedAttrName, I.b().getUnitAttr());|  (void)0;|e2e/hf-bf16.test
attention|bf16: silu's steps read a widening each|dialects/ds/Transforms/MixedPrecision.cpp|      Operation *whole = fusedComputation(owner);|      Operation *whole = owner;|Transforms/mixed-precision-fused.mlir e2e/hf-bf16.test
attention|bf16: a broadcast operand's gradient summed before its rounding|dialects/ds/IR/DSGradients.cpp|if (from.getElementType().getIntOrFloatBitWidth() == 16 && gt.getElementType().isF32())|if (false)|Transforms/mixed-precision-16bit-model.mlir e2e/hf-bf16.test
attention|bf16 export: element moves not rounded|dialects/ds/Transforms/MixedPrecision.cpp|        r.setType(wide(r));|        r.setType(wide(r)); if (movesElementsOnly(&op)) continue;|Transforms/mixed-precision-16bit-model.mlir e2e/hf-bf16.test
attention|repeat_kv under a causal mask not read as grouped-query attention|dialects/ds/Transforms/FuseAttention.cpp|if (!a.getMask() && k && v &&|if (false && k && v &&|Transforms/fuse-attention.mlir e2e/hf-bf16.test
attention|bf16: the embedding's gradient summed in f32|dialects/ds/Transforms/Widen16Bit.cpp|            EmbeddingGradOp>(op)|            AttentionGradOp>(op)|Transforms/widen-16bit-products.mlir
attention|bf16: a Python number's op on bf16 tensors in bf16 (the number rounded)|lib/Importer/TorchScript/OpHelpers.h|    if (half && half.getWidth() == 16 && (a.isNumber()|    if (false && (a.isNumber()|Importer/PyTorch2/import.test e2e/hf-bf16.test
attention|bf16 export: the backward reads an author's f32 value rounded|dialects/ds/Transforms/MixedPrecision.cpp|          op.setAttr(kModelCastAttrName, UnitAttr::get(ctx));|          (void)0;|Transforms/mixed-precision-16bit-model.mlir e2e/hf-bf16.test
inference|paged attention sees one position fewer|runtime/src/cpu/paged_attention.cpp|const int64_t keys = t < ql ? cl - ql + t + 1 : 0;|const int64_t keys = t < ql ? cl - ql + t : 0;|ctest:runtime-kernels
inference|paged attention reads the wrong query heads of a key/value head|runtime/src/cpu/paged_attention.cpp|const int64_t qRow0 = (b * s.Hq + kh * G) * s.T + t;|const int64_t qRow0 = (b * s.Hq + kh) * s.T + t;|ctest:runtime-kernels
inference|cache_write puts a token at the next offset of its page|runtime/src/cpu/paged_attention.cpp|const int64_t page = at / s.P, off = at % s.P;|const int64_t page = at / s.P, off = (at + 1) % s.P;|ctest:runtime-kernels
inference|sampling ignores the temperature|runtime/src/kernels/sampling.h|auto z = [&](int64_t i) { return logit(i) / temperature; };|auto z = [&](int64_t i) { return logit(i); };|ctest:runtime-kernels
inference|top-p keeps the tokens whose mass passes top_p, not 1 - top_p|runtime/src/kernels/sampling.h|if (cumulative > 1.f - topP)|if (cumulative > topP)|ctest:runtime-kernels
inference|the draw is not uniform over the kept mass|runtime/src/kernels/sampling.h|const double target = u * total;|const double target = u * u * total;|ctest:runtime-kernels
inference|a cache read elsewhere in the program is still written in place|lib/Analysis/MemoryPlanner.cpp|  return !readElsewhere;|  return true;|Conversion/lower-generation.mlir
inference|a cache that does not go back to its state is written in place|lib/Analysis/MemoryPlanner.cpp|  if (writes != 1)|  if (writes > 1)|Conversion/lower-generation.mlir
inference|a copied cache is not copied before the write|lib/Conversion/DSToRuntime/MemoryPatterns.cpp|      if (plan.results[i].kind != Placement::ViewOf)|      if (false)|Conversion/lower-generation.mlir
inference|a generation program's second result is not returned|lib/Conversion/DSToRuntime/FunctionPatterns.cpp|      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {|      for (auto [i, v] : llvm::enumerate(ret.getOperands().take_front(1))) {|Conversion/lower-generation.mlir
inference|generation caches the repeated keys of grouped-query heads|dialects/ds/Transforms/DeriveGeneration.cpp|    if (Value base = repeatedHeads(k))|    if (Value base = Value())|Transforms/derive-generation.mlir e2e/generation-programs.test
inference|generation keeps the logits of the token after the last real one|dialects/ds/Transforms/DeriveGeneration.cpp|  Value last = SubOp::create(b, loc, rowType, qLens, scalar(1));|  Value last = SubOp::create(b, loc, rowType, qLens, scalar(0));|Transforms/derive-generation.mlir
inference|prefill's LM head runs on every row before the last is kept|dialects/ds/Transforms/DeriveGeneration.cpp|  if (head && result.hasOneUse() && typeOf(head.getInput()).getRank() == 3) {|  if (false) {|Transforms/derive-generation.mlir
inference|the generator writes the padding tokens to the cache's first slot|runtime/src/generate/generator.cpp|call.names[k] == "slots" ? -1 : 0);|call.names[k] == "slots" ? 0 : 0);|e2e/generation-hf.test
inference|the generator gives a later chunk's tokens the chunk's positions, not the sequence's|runtime/src/generate/generator.cpp|      positions[b * T + t] = pos;|      positions[b * T + t] = t;|e2e/generation-hf.test
inference|the generator gives every row the first row's pages|runtime/src/generate/generator.cpp|q.pages.end(), pages.begin() + b * maxPages_);|q.pages.end(), pages.begin());|e2e/generation-hf.test
inference|the generator never frees a finished sequence's pages|runtime/src/generate/generator.cpp|    freePages_.push_back(*p);|    (void)*p;|e2e/generation-hf.test
inference|the server's queue has no bound|tools/ds-serve/Scheduler.cpp|  if (queue_.size() + sequences.size() > maxQueue_)|  if (false)|e2e/serve-openai.test
inference|a stream sends the start of a stop string before seeing the rest|tools/ds-serve/OpenAI.cpp|    holdback = std::max(holdback, t.size() - 1);|    holdback = 0;|e2e/serve-openai.test
inference|the tokenizer skips NFC|lib/Tokenizer/TextSteps.cpp|    return nfc(text);|    return std::string(text);|e2e/tokenizer-hf.test
inference|the tokenizer's byte fallback off|lib/Tokenizer/Bpe.cpp|      bool bytes = byteFallback_;|      bool bytes = false;|e2e/tokenizer-hf.test
inference|a regex's bounded repeat {1,3} unbounded|lib/Tokenizer/Regex.cpp|    while (run < n.max && at + run < t.size()|    while (at + run < t.size()|e2e/tokenizer-hf.test
inference|invalid bytes decode as one U+FFFD, not one per byte|lib/Tokenizer/TextSteps.cpp|        for (size_t k = 0; k < pending.size(); ++k)|        for (size_t k = 0; k < 1; ++k)|e2e/tokenizer-hf.test
inference|Metaspace's decoder keeps the first token's spaces|lib/Tokenizer/TextSteps.cpp|k == 0 && prependScheme != "never" ? "" : " ");|k == 0 && prependScheme != "never" ? " " : " ");|e2e/tokenizer-hf.test
inference|trim_blocks' newline not a line start for lstrip_blocks|lib/Tokenizer/ChatTemplate.cpp|      lineStart = true;|      (void)lineStart;|e2e/chat-template.test
inference|loop.last one past the end|lib/Tokenizer/ChatTemplate.cpp|Value::boolean(k + 1 == kept.size())|Value::boolean(k == kept.size())|e2e/chat-template.test
moe|expert weight gradient in the other layout|runtime/src/cpu/experts.cpp|    if (transposed) // [in, out] = x^T dy|    if (!transposed) // [in, out] = x^T dy|e2e/moe.test
moe|top_k gradient to the unchosen experts|dialects/ds/IR/DSGradients.cpp|Value hit = cmp(b, loc, CmpPredicate::eq, idxColumn, positions, pairs);|Value hit = cmp(b, loc, CmpPredicate::ne, idxColumn, positions, pairs);|e2e/moe.test
moe|batched_mm's gathered weights not folded|dialects/ds/Transforms/FuseExperts.cpp|      fuse(m);|      (void)m;|Transforms/fuse-experts.mlir e2e/moe.test
moe|histc's last bin open|lib/Importer/TorchScript/ExpertOps.cpp|return b + 1 == bins ? std::numeric_limits<double>::infinity() : (double)(b + 1);|return (double)(b + 1);|e2e/moe.test
moe|grouped_mm rows past their expert's end|lib/Importer/TorchScript/ExpertOps.cpp|TRY(passed, compare(I, CmpPredicate::le, *endsRow, *rows));|TRY(passed, compare(I, CmpPredicate::lt, *endsRow, *rows));|e2e/moe.test
moe|floor_divide rounding exact quotients down|lib/Importer/TorchScript/ExpertOps.cpp|TRY(off, compare(I, CmpPredicate::lt, *rb, AV::integer(0)));|TRY(off, compare(I, CmpPredicate::le, *rb, AV::integer(0)));|e2e/moe.test
moe|expert products counted once|dialects/ds/IR/DSCost.cpp|    int64_t f = 2 * x[0] * x[1] * width;|    int64_t f = x[0] * x[1] * width;|e2e/flops.test
moe|expert route: ids not renumbered from the rank's first expert|runtime/src/comm/expert_exchange.cpp|outgoing[plan[n]] = static_cast<Id>(id % perRank);|outgoing[plan[n]] = static_cast<Id>(id);|ctest:runtime-mesh e2e/moe.test
moe|expert route: unused receive rows keep stale ids|runtime/src/comm/expert_exchange.cpp|    localIds[i] = -1;|    localIds[i] = 0;|ctest:runtime-mesh
moe|expert dispatch: unused receive rows not zeroed|runtime/src/comm/expert_exchange.cpp|        std::memset(out + received * row, 0, (capacity - received) * row);|        (void)received;|ctest:runtime-mesh
moe|expert parallelism: the experts' gradients summed over dp x ep|dialects/ds/Transforms/Optimizer.cpp|(isExpertPart(i) ? experts : whole).push_back|whole.push_back|Transforms/optimizer-experts.mlir e2e/moe.test
moe|expert parallelism: the experts' gradients not summed over their dp replicas|dialects/ds/Transforms/Optimizer.cpp|  if (expertReplicas)|  if (false)|Transforms/optimizer-experts.mlir e2e/moe.test
moe|expert parallelism: ZeRO buckets the experts|dialects/ds/Transforms/Zero.cpp|return param && splitsOver(param.getShardingAttr(), MeshAxis::ep);|return false;|Transforms/optimizer-experts.mlir e2e/moe.test
moe|expert parallelism: the experts' squares left out of the norm's dp sum|dialects/ds/Transforms/Optimizer.cpp|    add(total, allReduce(*expertAxis, experts));|    add(total, experts);|Transforms/optimizer-experts.mlir
moe|--dump-grads sums the experts' parts over dp|runtime/src/driver/weights.cpp|    const int32_t replicas = split ? shardGroup & ~g.groupOf(split->splitAxis) : shardGroup;|    const int32_t replicas = shardGroup;|e2e/moe.test
moe|expert products: a run taken in place writes the rows at the buffer's start|runtime/src/cpu/experts.cpp|[&](int64_t r, int64_t m) { product(X + r * s.in, Y + r * s.out, m); });|[&](int64_t r, int64_t m) { product(X + r * s.in, Y, m); });|ctest:runtime-kernels e2e/moe.test
moe|expert weight gradient: each run overwrites the runs before it|runtime/src/cpu/experts.cpp|      beta = 1.f;|      beta = 0.f;|ctest:runtime-kernels e2e/moe.test
moe|capacity: the tokens queued token by token, not choice by choice|runtime/src/cpu/experts.cpp|      const int64_t n = t * s.choices + j;|      const int64_t n = j * s.tokens + t;|ctest:runtime-kernels e2e/moe-capacity.test
moe|capacity: one row past the capacity kept|runtime/src/cpu/experts.cpp|taken[e]++ >= capacity ? Id(-1) : e;|taken[e]++ > capacity ? Id(-1) : e;|ctest:runtime-kernels e2e/moe-capacity.test
moe|capacity: a token's choices counted as one|dialects/ds/Transforms/ExpertCapacity.cpp|capacityOf(rows / k, experts, capacityFactor, k, minCapacity);|capacityOf(rows / k, experts, capacityFactor, 1, minCapacity);|Transforms/expert-capacity.mlir e2e/moe-capacity.test
moe|swiglu gradient: the gate's without the sigmoid's own term|runtime/src/cpu/swiglu.cpp|    dx[j] = dy[j] * u[j] * (s * (1.f + g * (1.f - s)));|    dx[j] = dy[j] * u[j] * s;|ctest:runtime-kernels e2e/moe.test
moe|swiglu: the padding rows computed, not zeroed|runtime/src/cpu/swiglu.cpp|    if (!skipped(rows, r))|    if (true)|ctest:runtime-kernels
moe|swiglu fold: the halves' offsets not checked|dialects/ds/Transforms/FuseSwiglu.cpp|      static_cast<int64_t>(s.getStart()) != start)|      false)|Transforms/fuse-swiglu.mlir
moe|expert side: a swiglu keeps the tokens' ids|dialects/ds/Transforms/ExpertParallel.cpp|    mapped.map(ids, route.getLocalIds());|    (void)route;|Transforms/expert-parallel.mlir
moe|unrouted rows left unwritten under a reader that sums them|lib/Conversion/DSToRuntime/Experts.cpp|      if (unroutedRowsUnread(p.getResult(), p.getExpertIds()))|      if (true)|Conversion/lower-expert-rows.mlir
moe|expert products: the flag's meaning inverted for negative ids|runtime/src/cpu/experts.cpp|(e < 0 && !keepNegative))|(e < 0 && keepNegative))|ctest:runtime-kernels
moe|expert parallelism: the SwiGLU between two products not moved to the experts' side|dialects/ds/Transforms/ExpertParallel.cpp|    Value sent = ExpertSide(plan, rows, received).get(x, b);|    Value sent;|Transforms/expert-parallel.mlir e2e/moe.test
moe|expert parallelism: a reshape's rows not carried to the experts' side|dialects/ds/Transforms/ExpertParallel.cpp|    bool reshapes = isa<SliceOp, ReshapeOp, ConvertOp>(def);|    bool reshapes = false;|e2e/moe.test
moe|capacity: any where over the ids taken for the wrap of negative ids|dialects/ds/Transforms/ExpertCapacity.cpp|  if (lt && lt.getPredicate() == CmpPredicate::lt && add|  if (lt && add|Transforms/expert-capacity-errors.mlir
moe|capacity: min_capacity ignored|dialects/ds/Transforms/ExpertCapacity.cpp|  return std::max(static_cast<int64_t>(std::ceil(scaled)), least);|  return static_cast<int64_t>(std::ceil(scaled));|Transforms/expert-capacity.mlir
moe|capacity: receive buffers sized for half the kept rows|dialects/ds/Transforms/ExpertParallel.cpp|return std::clamp<int64_t>(cap.getExperts() * cap.getCapacity(), 1, rows * ranks);|return std::clamp<int64_t>(cap.getExperts() * cap.getCapacity() / 2, 1, rows * ranks);|e2e/moe-capacity.test
parallel|pipeline: a widened parameter read computed once and sent on|dialects/ds/Transforms/PipelineReads.h|  return convert && convert.getInput().getDefiningOp<GetParameterOp>();|  return false;|Transforms/pipeline-partition-16bit.mlir
parallel|--dump-grads: a 16-bit gradient of several stages refused|runtime/src/driver/weights.cpp|} else if (isHalfType(s.dtype)) {|} else if (false) {|e2e/pipeline-parallel.test
plan|--plan-fix with dp given computes dp 1|lib/Pipelines/Plan.cpp|    f.dp = ranks / (f.tp * f.pp * f.sp);|    f.dp = ranks / product;|e2e/plan.test
plan|weight-free: tied weights never found|lib/Importer/Export/ExportedProgram.cpp|    if (matches != 1)|    if (true)|e2e/weight-free.test
plan|weight-free: a FakeTensorMode export's empty records read as weights|lib/Importer/Export/ExportedProgram.cpp|archive.getRecordSize(path) == 0|archive.getRecordSize(path) == ~size_t(0)|e2e/weight-free.test
plan|model states: the optimizer's left out|lib/Pipelines/MemoryReport.cpp|gb(fullest.params + fullest.grads + fullest.optim)|gb(fullest.params + fullest.grads)|e2e/weight-free.test
plan|recomputation never tried where a layout does not fit|lib/Pipelines/Plan.cpp|      again.recompute = true;|      again.recompute = false;|e2e/plan.test
plan|verify-collectives traces rank 0 alone|dialects/ds/Transforms/VerifyCollectives.cpp|      if (!t.rankDependent)|      if (true)|Transforms/verify-collectives.mlir
plan|comm model: an all-reduce priced as one pass|lib/Analysis/Cluster.cpp|    return 2 * ringPass(bytes, calls);|    return 1 * ringPass(bytes, calls);|ctest:contract-unit Tools/cluster-comm.mlir
plan|comm model: each device's network share not divided by the node's devices|lib/Analysis/Cluster.cpp|(m - 1) / m * (b / k) / c.interNodeBandwidth|(m - 1) / m * b / c.interNodeBandwidth|ctest:contract-unit
plan|placement: the first axis fastest|lib/Analysis/Cluster.cpp|    for (size_t i = a + 1; i < shape.size(); ++i)|    for (size_t i = 0; i < a; ++i)|ctest:contract-unit
plan|comm report: the rows priced on a node each|lib/Pipelines/CommReport.cpp|  return placeGroup(mesh ? mesh.getShape() : ArrayRef<int64_t>{}, axes, cluster.devicesPerNode);|  return placeGroup(mesh ? mesh.getShape() : ArrayRef<int64_t>{}, axes, 1);|Tools/cluster-comm.mlir
plan|--plan: communication left out of the step time|lib/Pipelines/Plan.cpp|  c.stepSeconds = c.computeSeconds + c.commSeconds;|  c.stepSeconds = c.computeSeconds;|e2e/plan.test
plan|--plan: the layout's micro-batch not in its config|lib/Pipelines/Plan.cpp|  cfg["train_micro_batch_size_per_gpu"] = c.microBatch;|  cfg["train_micro_batch_size_per_gpu"] = 1;|e2e/plan.test
plan|--plan: over-memory layouts called fitting|lib/Pipelines/Plan.cpp|    if (c.peakBytes + c.paddingBytes > req.deviceMemory)|    if (c.peakBytes + c.paddingBytes > 2 * req.deviceMemory)|e2e/plan.test
import|a long sequence's causal mask (too large to fold) refused, not imported as ops|lib/Importer/TorchScript/ConstantFolding.cpp|        folded = false;                       // of a long sequence): nothing reported|        return error() << "too large", failure();|e2e/torch2-hf-padded.test
plan|--memory-report: a row for each of 512 alike ranks|lib/Pipelines/MemoryReport.cpp|  bool fold = ranks > kMaxRankRows;|  bool fold = false;|e2e/weight-free.test
plan|--plan: interleaving stretched as 1F1B|lib/Pipelines/Plan.cpp|  double chunks = static_cast<double>(c.gas * c.virtualStages);|  double chunks = static_cast<double>(c.gas);|e2e/plan.test
plan|--plan: a pipeline's figures continued one period short|lib/Pipelines/Plan.cpp|    return x0 + slope * static_cast<decltype(slope)>((m - m1) / d);|    return x0 + slope * static_cast<decltype(slope)>((m - m1) / d - 1);|e2e/plan.test
plan|--plan: ranked by peak, not time|lib/Pipelines/Plan.cpp|    return a.fits() ? a.stepSeconds < b.stepSeconds : a.peakBytes < b.peakBytes;|    return a.peakBytes < b.peakBytes;|e2e/plan.test
plan|--plan: every step priced at the fp32 peak|lib/Pipelines/Plan.cpp|  Precision precision = run ? run.getPrecision() : Precision::fp32;|  Precision precision = Precision::fp32;|e2e/plan.test
plan|--plan: ranks sharing cores judged as devices of their own|lib/Pipelines/Plan.cpp|  if (cl.sharesCores()) {|  if (false) {|e2e/plan.test
plan|--plan-fix: the fixed axes not kept|lib/Pipelines/Plan.cpp|              if (matches(req.fixed, c))|              if (true)|e2e/plan.test
plan|--plan: the step's bound not spread over the ranks|lib/Pipelines/Plan.cpp|  double mean = (m.perSample * batch + m.perUpdate) / ranks;|  double mean = 2 * (m.perSample * batch + m.perUpdate) / ranks;|e2e/plan.test
plan|--plan: the states' bound with the optimizer state unpartitioned|lib/Pipelines/Plan.cpp|                 m.optimizerBytes / split / (c.zeroStage >= 1 ? replicas : 1);|                 m.optimizerBytes / split;|e2e/plan.test
plan|--plan: the gradients' reduction bounded at four passes|lib/Pipelines/Plan.cpp|        2 * cheapestCall("reduce_scatter",|        8 * cheapestCall("reduce_scatter",|e2e/plan.test
plan|--plan: the probed collectives not spread over the data-parallel samples|lib/Pipelines/Plan.cpp|                                     perSample * batch / static_cast<double>(c.dp * c.pp),|                                     perSample * batch / static_cast<double>(c.pp),|e2e/plan.test
plan|--plan: one sample's activations counted four times in the bound|lib/Pipelines/Plan.cpp|          c.boundActivationBytes = model->activationBytes / (c.tp * c.sp * c.pp);|          c.boundActivationBytes = 4 * model->activationBytes / (c.tp * c.sp * c.pp);|e2e/plan.test
plan|--plan: pruned past the fastest, not the keep-th|lib/Pipelines/Plan.cpp|                  c.boundSeconds > *fastest.rbegin();|                  c.boundSeconds > *fastest.begin();|e2e/plan.test
plan|will it fit: the allocator's padding left out|lib/Pipelines/Plan.cpp|    int64_t need = s.first + s.second;|    int64_t need = s.first;|e2e/plan.test
plan|will it fit: layouts that do not fit offered|lib/Pipelines/Plan.cpp|    if (c.fits() && !changes(c).empty())|    if (!changes(c).empty())|e2e/plan.test
plan|--plan-report: a stage's memory shown as the whole step's|lib/Pipelines/PlanReport.cpp|    RankMemory m = rankMemory(plan, plan.ranks.empty() ? -1 : r);|    RankMemory m = rankMemory(plan, -1);|e2e/plan-report.test
plan|--plan-report: the schedule's backward phases dropped|lib/Pipelines/CommReport.cpp|          spans[r].push_back({clock[r], clock[r] + cost, t.str(), backward});|          if (!backward) spans[r].push_back({clock[r], clock[r] + cost, t.str(), backward});|e2e/plan-report.test
python|train_batch skips a step's last micro-batch|python/ds/engine.py|for k in range(0, self._gas, self._per_call):|for k in range(0, self._gas - 1, self._per_call):|ctest:python-engine
python|ds.hf: each micro-batch divided by the step's whole token count|python/ds/hf.py|per = n / len(micro)|per = n|ctest:python-engine
python|ds.hf: every rank reads every batch|python/ds/hf.py|if i % self.ranks == self.rank:|if True:|ctest:python-engine
python|a client scheduler's lr never reaches the step|python/ds/engine.py|self._session.set_lr(self.get_lr()[0])|float(self.get_lr()[0])|ctest:python-engine
EOF
)
if [ "$group" != all ]; then
  mutants=$(grep "^$group|" <<<"$mutants" || true)
  [ -n "$mutants" ] || { echo "mutants: no group '$group' (optimizer, parallel, memory, import, python, attention, moe, plan, inference, all)" >&2; exit 1; }
fi
# MUTANT_NAMES: an extended regular expression that picks mutants by name.
if [ -n "${MUTANT_NAMES:-}" ]; then
  mutants=$(awk -F'|' -v re="$MUTANT_NAMES" '$2 ~ re' <<<"$mutants")
fi

# Applies (or with --revert undoes) one mutant's replacements; fails when a text is missing,
# so that a mutant cannot silently stop applying after the code moves.
mutate() {
  /usr/bin/python3 - "$@" <<'EOF'
import sys
path, texts, repls, mode = sys.argv[1], sys.argv[2].split('@@'), sys.argv[3].split('@@'), sys.argv[4]
s = open(path).read()
pairs = list(zip(texts, repls))
for a, b in (reversed(pairs) if mode == 'revert' else pairs):
    if mode == 'revert':
        a, b = b, a
    if s.count(a) != 1:
        sys.exit('mutants: %r occurs %d times in %s' % (a, s.count(a), path))
    s = s.replace(a, b)
open(path, 'w').write(s)
EOF
}

# Runs tests (lit paths under test/, or ctest:NAME) of the scratch build, each command within
# the timeout; lit's and ctest's output go to LOG.
run_tests() {
  local log=$1 rc=0 lits=() t
  shift
  for t in "$@"; do
    case $t in
      ctest:*) timeout "$timeout_s" ctest --test-dir "$scratch/build" --output-on-failure \
                 -R "^${t#ctest:}\$" >>"$log" 2>&1 || { rc=1; echo "FAIL: ctest :: ${t#ctest:}" >>"$log"; } ;;
      *) lits+=("$scratch/build/test/$t") ;;
    esac
  done
  if [ ${#lits[@]} -gt 0 ]; then
    timeout "$timeout_s" $lit -v "${lits[@]}" >>"$log" 2>&1 || rc=$?
  fi
  return $rc
}

# The named tests pass unmutated first (MUTANT_BASELINE=0 skips it, when they just passed).
all_tests=$(echo "$mutants" | cut -d'|' -f6 | tr ' ' '\n' | sort -u)
echo "mutants: group $group, the named tests unmutated: $(echo $all_tests | wc -w)"
: >"$scratch/baseline.log"
if [ "${MUTANT_BASELINE:-1}" != 0 ] && ! run_tests "$scratch/baseline.log" $all_tests </dev/null; then
  tail -30 "$scratch/baseline.log"
  echo "mutants: the tests fail without a mutant; fix that first" >&2
  exit 1
fi

rows=()
missed=0
n=0
while IFS='|' read -r grp name file text repl tests; do
  [ -n "$name" ] || continue
  n=$((n + 1))
  log=$scratch/mutant-$n.log
  : >"$log"
  start=$(date +%s)
  mutate "$src/$file" "$text" "$repl" apply
  result= evidence=
  if ! ninja -C "$scratch/build" >"$log" 2>&1 </dev/null; then
    result="DOES NOT BUILD"
    missed=$((missed + 1))
  else
    rc=0
    run_tests "$log" $tests </dev/null || rc=$?
    if [ $rc -eq 0 ]; then
      result="MISSED"
      missed=$((missed + 1))
    elif [ $rc -eq 124 ]; then
      result="TIMED OUT (${timeout_s}s)"
      missed=$((missed + 1))
    else
      result="caught by $(grep -oE '^FAIL: (ds|ctest) :: [^ ]*' "$log" | sed -E 's/FAIL: (ds|ctest) :: //' | sort -u | tr '\n' ' ')"
      # The line of the failing run that says what was wrong, the most telling kind first.
      evidence=
      for pat in ' +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.e+-]+ +<-- exceeds [0-9.e+-]+' \
                 'parameter [^ ]+: relative distance [0-9.e+-]+ > [0-9.e+-]+' \
                 'worst loss rel diff [0-9.e+-]+, lr [A-Za-z]+ FAIL' \
                 'the swap file used [^|]*' \
                 'fp16: [^|]*(DIFFERENT|DIFFER|DISAGREES)[^|]*' 'step 1 in PyTorch[^|]*FAIL' \
                 '[^|]*-> FAIL' 'step [0-9]+ rank [0-9]+: [^|]*' 'Expected[^|]*' \
                 'dsrt: [^|]*' 'error: [A-Z0-9]+: expected[^|]*'; do
        evidence=$(grep -m1 -oE "$pat" "$log" | sed 's/^ *//' | cut -c1-70 || true)
        [ -z "$evidence" ] || break
      done
    fi
  fi
  mutate "$src/$file" "$text" "$repl" revert
  rows+=("$(printf '| %-9s | %-34s | %-38s | %-32s | %-70s | %4ds |' "$grp" "$name" "$file" "$result" "$evidence" $(( $(date +%s) - start )))")
  echo "mutants: $name: $result $evidence"
done <<<"$mutants"
ninja -C "$scratch/build" >/dev/null 2>&1 || true # back to the unmutated build

echo
echo "| group | mutant | file | result | what the test saw | time |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
[ "$missed" -eq 0 ] || { echo "mutants: $missed not caught" >&2; exit 1; }

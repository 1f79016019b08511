//===- DSGenerateOps.cpp - verifiers of generation's cache and sampling ops ---===//
#include "ds/IR/DSOps.h"
#include "ds/IR/DSShapes.h"

using namespace mlir;
using namespace mlir::ds;

namespace {
ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }
Type elementOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

/// `v` has `shape` (named `what` in the error).
LogicalResult expectShape(Operation *op, Value v, ArrayRef<int64_t> shape, StringRef what) {
  if (shapeOf(v) == shape)
    return success();
  return op->emitOpError() << what << " has shape " << formatShape(shapeOf(v)) << ", expected "
                           << formatShape(shape);
}

/// The caches `[N, Hk, P, E]` and `[N, Hk, P, Ev]` of one element type.
LogicalResult verifyCaches(Operation *op, Value k, Value v) {
  if (shapeOf(k).size() != 4 || shapeOf(v).size() != 4)
    return op->emitOpError() << "caches must be of rank 4 [pages, heads, page size, width], not "
                             << formatShape(shapeOf(k)) << " and " << formatShape(shapeOf(v));
  if (shapeOf(k).take_front(3) != shapeOf(v).take_front(3))
    return op->emitOpError() << "the key cache " << formatShape(shapeOf(k))
                             << " and the value cache " << formatShape(shapeOf(v))
                             << " differ in pages, heads or page size";
  if (elementOf(k) != elementOf(v))
    return op->emitOpError() << "the caches differ in element type: " << elementOf(k) << " and "
                             << elementOf(v);
  return success();
}
} // namespace

LogicalResult CacheWriteOp::verify() {
  if (failed(verifyCaches(*this, getKCache(), getVCache())))
    return failure();
  ArrayRef<int64_t> kc = shapeOf(getKCache()), vc = shapeOf(getVCache()), k = shapeOf(getKey());
  if (k.size() != 4)
    return emitOpError() << "key must be of rank 4 [batch, heads, tokens, width], not "
                         << formatShape(k);
  int64_t ks[4] = {k[0], kc[1], k[2], kc[3]}, vs[4] = {k[0], kc[1], k[2], vc[3]},
          ss[2] = {k[0], k[2]};
  if (failed(expectShape(*this, getKey(), ks, "key")) ||
      failed(expectShape(*this, getValue(), vs, "value")) ||
      failed(expectShape(*this, getSlots(), ss, "slots")))
    return failure();
  if (elementOf(getKey()) != elementOf(getKCache()) ||
      elementOf(getValue()) != elementOf(getKCache()))
    return emitOpError() << "keys and values must be of the caches' element type "
                         << elementOf(getKCache());
  return success();
}

LogicalResult PagedAttentionOp::verify() {
  double scale = getScale().convertToDouble();
  if (!(scale > 0) && !(scale < 0))
    return emitOpError() << "scale must be nonzero";
  if (failed(verifyCaches(*this, getKCache(), getVCache())))
    return failure();
  ArrayRef<int64_t> q = shapeOf(getQuery()), kc = shapeOf(getKCache()),
                    vc = shapeOf(getVCache());
  if (q.size() != 4)
    return emitOpError() << "query must be of rank 4 [batch, heads, tokens, width], not "
                         << formatShape(q);
  if (q[3] != kc[3])
    return emitOpError() << "query width " << q[3] << " differs from the key cache's " << kc[3];
  if (q[1] % kc[1] != 0)
    return emitOpError() << "the cache's " << kc[1] << " key/value heads do not divide the "
                         << q[1] << " query heads";
  if (shapeOf(getPages()).size() != 2 || shapeOf(getPages())[0] != q[0])
    return emitOpError() << "pages has shape " << formatShape(shapeOf(getPages()))
                         << ", expected [" << q[0] << ", max pages]";
  int64_t b[1] = {q[0]}, rs[4] = {q[0], q[1], q[2], vc[3]};
  if (failed(expectShape(*this, getContextLens(), b, "context_lens")) ||
      failed(expectShape(*this, getQLens(), b, "q_lens")) ||
      failed(expectShape(*this, getResult(), rs, "result")))
    return failure();
  if (elementOf(getQuery()) != elementOf(getKCache()) ||
      elementOf(getResult()) != elementOf(getKCache()))
    return emitOpError() << "query and result must be of the caches' element type "
                         << elementOf(getKCache());
  return success();
}

LogicalResult SampleOp::verify() {
  ArrayRef<int64_t> l = shapeOf(getLogits());
  if (l.size() != 2)
    return emitOpError() << "logits must be of rank 2 [batch, vocabulary], not "
                         << formatShape(l);
  int64_t b[1] = {l[0]};
  if (failed(expectShape(*this, getTemperature(), b, "temperature")) ||
      failed(expectShape(*this, getTopK(), b, "top_k")) ||
      failed(expectShape(*this, getTopP(), b, "top_p")) ||
      failed(expectShape(*this, getSeeds(), b, "seeds")) ||
      failed(expectShape(*this, getSteps(), b, "steps")) ||
      failed(expectShape(*this, getTokens(), b, "tokens")))
    return failure();
  return success();
}

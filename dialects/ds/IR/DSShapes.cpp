//===- DSShapes.cpp - PyTorch's shape rules for ds ops ---------------------===//
#include "ds/IR/DSShapes.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::ds;

int64_t mlir::ds::tensorBytes(Type t) {
  auto rt = dyn_cast<RankedTensorType>(t);
  if (!rt || !rt.hasStaticShape())
    return 0;
  return rt.getNumElements() * std::max<int64_t>(1, rt.getElementTypeBitWidth() / 8);
}

int64_t mlir::ds::numElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string mlir::ds::formatShape(ArrayRef<int64_t> shape) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleaveComma(shape, os);
  os << "]";
  return s;
}

FailureOr<Shape> mlir::ds::broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b,
                                           EmitErrorFn emit) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      return emit() << "shapes " << formatShape(a) << " and " << formatShape(b)
                    << " do not broadcast: dimension " << rank - 1 - i << " is " << da
                    << " vs " << db;
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

LogicalResult mlir::ds::checkBroadcastTo(ArrayRef<int64_t> in, ArrayRef<int64_t> out,
                                         EmitErrorFn emit) {
  if (in.size() > out.size())
    return emit() << "cannot broadcast " << formatShape(in) << " to the lower-rank "
                  << formatShape(out);
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t di = in[in.size() - 1 - i], dout = out[out.size() - 1 - i];
    if (di != dout && di != 1)
      return emit() << "cannot broadcast " << formatShape(in) << " to " << formatShape(out)
                    << ": dimension " << in.size() - 1 - i << " is " << di << ", not 1 or "
                    << dout;
  }
  return success();
}

FailureOr<Shape> mlir::ds::matmulShape(ArrayRef<int64_t> a, ArrayRef<int64_t> b,
                                       EmitErrorFn emit) {
  if (a.size() < 2 || b.size() < 2)
    return emit() << "matmul operands must have rank >= 2, got " << formatShape(a) << " and "
                  << formatShape(b);
  int64_t k1 = a.back(), k2 = b[b.size() - 2];
  if (k1 != k2)
    return emit() << "matmul contraction mismatch: " << formatShape(a) << " x "
                  << formatShape(b) << " (" << k1 << " vs " << k2 << ")";
  auto batch = broadcastShapes(a.drop_back(2), b.drop_back(2), emit);
  if (failed(batch))
    return failure();
  Shape out = *batch;
  out.push_back(a[a.size() - 2]);
  out.push_back(b.back());
  return out;
}

FailureOr<Shape> mlir::ds::linearShape(ArrayRef<int64_t> x, ArrayRef<int64_t> w,
                                       std::optional<ArrayRef<int64_t>> bias,
                                       EmitErrorFn emit) {
  if (w.size() != 2)
    return emit() << "linear weight must be 2-D [out, in], got " << formatShape(w);
  if (x.empty())
    return emit() << "linear input must have rank >= 1";
  if (x.back() != w[1])
    return emit() << "linear input " << formatShape(x) << " has " << x.back()
                  << " features but the weight " << formatShape(w) << " expects " << w[1];
  if (bias && (bias->size() != 1 || (*bias)[0] != w[0]))
    return emit() << "linear bias must be [" << w[0] << "], got " << formatShape(*bias);
  Shape out(x.begin(), x.end());
  out.back() = w[0];
  return out;
}

FailureOr<Shape> mlir::ds::embeddingShape(ArrayRef<int64_t> w, ArrayRef<int64_t> idx,
                                          EmitErrorFn emit) {
  if (w.size() != 2)
    return emit() << "embedding weight must be 2-D [num, dim], got " << formatShape(w);
  Shape out(idx.begin(), idx.end());
  out.push_back(w[1]);
  return out;
}

FailureOr<Shape> mlir::ds::expertLinearShape(ArrayRef<int64_t> x, ArrayRef<int64_t> w,
                                             ArrayRef<int64_t> ids, bool transposed,
                                             EmitErrorFn emit) {
  if (x.size() != 2 || w.size() != 3 || ids.size() != 1 || ids[0] != x[0])
    return emit() << "expert_linear takes input [N, in], weight [E, out, in] and ids [N], got "
                  << formatShape(x) << ", " << formatShape(w) << " and " << formatShape(ids);
  int64_t in = w[transposed ? 1 : 2], out = w[transposed ? 2 : 1];
  if (x[1] != in)
    return emit() << "input " << formatShape(x) << " has " << x[1] << " features, the weight "
                  << formatShape(w) << (transposed ? " (transposed)" : "") << " takes " << in;
  return Shape{x[0], out};
}

FailureOr<Shape> mlir::ds::swigluShape(ArrayRef<int64_t> x,
                                       std::optional<ArrayRef<int64_t>> rows, EmitErrorFn emit) {
  if (x.empty() || x.back() % 2 != 0)
    return emit() << "swiglu takes the gate and the up projection side by side, a last "
                  << "dimension of 2F values, got " << formatShape(x);
  if (rows && (x.size() != 2 || rows->size() != 1 || (*rows)[0] != x[0]))
    return emit() << "swiglu's rows [R] go with an input [R, 2F], got " << formatShape(*rows)
                  << " and " << formatShape(x);
  Shape out(x.begin(), x.end());
  out.back() /= 2;
  return out;
}

FailureOr<Shape> mlir::ds::reduceShape(ArrayRef<int64_t> in, ArrayRef<int64_t> dims,
                                       bool keepdim, EmitErrorFn emit) {
  llvm::SmallVector<bool> reduced(in.size(), false);
  for (int64_t d : dims) {
    if (d < 0 || d >= (int64_t)in.size())
      return emit() << "reduction dimension " << d << " is out of range for rank "
                    << in.size();
    if (reduced[d])
      return emit() << "reduction dimension " << d << " appears twice";
    reduced[d] = true;
  }
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!reduced[i])
      out.push_back(in[i]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

FailureOr<Shape> mlir::ds::transposeShape(ArrayRef<int64_t> in, ArrayRef<int64_t> perm,
                                          EmitErrorFn emit) {
  if (perm.size() != in.size())
    return emit() << "permutation has " << perm.size() << " entries for rank " << in.size();
  llvm::SmallVector<bool> used(in.size(), false);
  Shape out;
  for (int64_t p : perm) {
    if (p < 0 || p >= (int64_t)in.size() || used[p])
      return emit() << "[" << llvm::make_range(perm.begin(), perm.end())
                    << "] is not a permutation of [0, " << in.size() << ")";
    used[p] = true;
    out.push_back(in[p]);
  }
  return out;
}

FailureOr<Shape> mlir::ds::sliceShape(ArrayRef<int64_t> in, int64_t dim, int64_t start,
                                      int64_t end, int64_t step, EmitErrorFn emit) {
  if (dim < 0 || dim >= (int64_t)in.size())
    return emit() << "slice dimension " << dim << " is out of range for rank " << in.size();
  if (step < 1)
    return emit() << "slice step must be >= 1, got " << step;
  if (start < 0 || start > end || end > in[dim])
    return emit() << "slice [" << start << ":" << end << "] is out of range for dimension "
                  << dim << " of size " << in[dim];
  Shape out(in.begin(), in.end());
  out[dim] = (end - start) / step + ((end - start) % step != 0);
  return out;
}

FailureOr<Shape> mlir::ds::concatShape(ArrayRef<Shape> ins, int64_t dim, EmitErrorFn emit) {
  if (ins.empty())
    return emit() << "concat needs at least one input";
  const Shape &first = ins.front();
  if (dim < 0 || dim >= (int64_t)first.size())
    return emit() << "concat dimension " << dim << " is out of range for rank "
                  << first.size();
  Shape out = first;
  for (const Shape &s : ins.drop_front()) {
    if (s.size() != first.size())
      return emit() << "concat inputs have different ranks: " << formatShape(first) << " and "
                    << formatShape(s);
    for (size_t i = 0; i < s.size(); ++i)
      if ((int64_t)i != dim && s[i] != first[i])
        return emit() << "concat inputs " << formatShape(first) << " and " << formatShape(s)
                      << " differ in dimension " << i;
    out[dim] += s[dim];
  }
  return out;
}

FailureOr<Shape> mlir::ds::crossEntropyShape(ArrayRef<int64_t> logits,
                                             ArrayRef<int64_t> target, bool reduced,
                                             EmitErrorFn emit) {
  if (logits.size() == 1) {
    if (!target.empty())
      return emit() << "cross_entropy of logits " << formatShape(logits)
                    << " needs a scalar target, got " << formatShape(target);
    return Shape{};
  }
  if (logits.size() != 2)
    return emit() << "cross_entropy logits must be [N, C] or [C], got " << formatShape(logits)
                  << " (reshape extra dimensions into N)";
  if (target.size() != 1 || target[0] != logits[0])
    return emit() << "cross_entropy target must be [" << logits[0] << "] for logits "
                  << formatShape(logits) << ", got " << formatShape(target);
  return reduced ? Shape{} : Shape{logits[0]};
}

LogicalResult mlir::ds::checkNormParams(ArrayRef<int64_t> expected,
                                        std::optional<ArrayRef<int64_t>> w,
                                        std::optional<ArrayRef<int64_t>> b, StringRef what,
                                        EmitErrorFn emit) {
  if (w && *w != expected)
    return emit() << what << " weight must be " << formatShape(expected) << ", got "
                  << formatShape(*w);
  if (b && *b != expected)
    return emit() << what << " bias must be " << formatShape(expected) << ", got "
                  << formatShape(*b);
  return success();
}

FailureOr<Shape> mlir::ds::conv2dShape(ArrayRef<int64_t> in, ArrayRef<int64_t> w,
                                       std::optional<ArrayRef<int64_t>> bias,
                                       ArrayRef<int64_t> stride, ArrayRef<int64_t> padding,
                                       ArrayRef<int64_t> dilation, int64_t groups,
                                       EmitErrorFn emit) {
  if (in.size() != 4)
    return emit() << "conv2d input must be [N, C, H, W], got " << formatShape(in);
  if (w.size() != 4)
    return emit() << "conv2d weight must be [O, C/groups, KH, KW], got " << formatShape(w);
  if (groups < 1 || in[1] % groups || w[0] % groups)
    return emit() << "conv2d groups " << groups << " must divide input channels " << in[1]
                  << " and output channels " << w[0];
  if (w[1] * groups != in[1])
    return emit() << "conv2d input " << formatShape(in) << " has " << in[1]
                  << " channels but the weight " << formatShape(w) << " expects "
                  << w[1] * groups;
  if (bias && (bias->size() != 1 || (*bias)[0] != w[0]))
    return emit() << "conv2d bias must be [" << w[0] << "], got " << formatShape(*bias);
  Shape out{in[0], w[0], 0, 0};
  for (int i = 0; i < 2; ++i) {
    if (stride[i] < 1 || dilation[i] < 1 || padding[i] < 0)
      return emit() << "conv2d needs stride >= 1, dilation >= 1 and padding >= 0";
    int64_t eff = dilation[i] * (w[2 + i] - 1) + 1;
    int64_t span = in[2 + i] + 2 * padding[i] - eff;
    if (span < 0)
      return emit() << "conv2d kernel " << formatShape(w.drop_front(2))
                    << " (dilated) is larger than the padded input "
                    << formatShape(in.drop_front(2));
    out[2 + i] = span / stride[i] + 1;
  }
  return out;
}

FailureOr<Shape> mlir::ds::pool2dShape(ArrayRef<int64_t> in, ArrayRef<int64_t> kernel,
                                       ArrayRef<int64_t> stride, ArrayRef<int64_t> padding,
                                       ArrayRef<int64_t> dilation, bool ceilMode,
                                       EmitErrorFn emit) {
  if (in.size() != 4)
    return emit() << "pool2d input must be [N, C, H, W], got " << formatShape(in);
  Shape out(in.begin(), in.end());
  for (int i = 0; i < 2; ++i) {
    if (kernel[i] < 1 || stride[i] < 1 || dilation[i] < 1)
      return emit() << "pool2d needs kernel, stride and dilation >= 1";
    if (padding[i] < 0 || padding[i] > kernel[i] / 2)
      return emit() << "pool2d padding " << padding[i] << " must be in [0, kernel/2 = "
                    << kernel[i] / 2 << "]";
    int64_t num = in[2 + i] + 2 * padding[i] - dilation[i] * (kernel[i] - 1) - 1;
    if (num < 0)
      return emit() << "pool2d window is larger than the padded input "
                    << formatShape(in.drop_front(2));
    int64_t o = (ceilMode ? (num + stride[i] - 1) / stride[i] : num / stride[i]) + 1;
    // PyTorch drops a last window that would start inside the right padding.
    if (ceilMode && (o - 1) * stride[i] >= in[2 + i] + padding[i])
      --o;
    out[2 + i] = o;
  }
  return out;
}

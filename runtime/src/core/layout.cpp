//===- layout.cpp - the strided copies behind the data-movement kernels -------===//
//
// transpose, broadcast, slice and insert_slice are each one strided copy; these functions
// check the shapes and compute it, for every device (the CPU copies with stridedCopy, CUDA
// with one kernel).
//
#include "internal.h"
#include "../kernels/windows.h"

#include <algorithm>

namespace dsrt {

CopyLayout transposeLayout(const dsrt_tensor *out, const dsrt_tensor *in, const int64_t *perm) {
  if (out->rank != in->rank || out->dtype != in->dtype)
    fail("transpose", "result %s does not match operand %s", shapeString(out).c_str(),
         shapeString(in).c_str());
  CopyLayout c;
  c.rank = out->rank;
  int64_t inStrides[DSRT_MAX_RANK];
  contiguousStrides(in->rank, in->dims, inStrides);
  contiguousStrides(out->rank, out->dims, c.dst);
  unsigned seen = 0;
  for (int i = 0; i < out->rank; ++i) {
    int64_t p = perm[i];
    if (p < 0 || p >= in->rank || (seen & (1u << p)) || out->dims[i] != in->dims[p])
      fail("transpose", "bad permutation for %s -> %s", shapeString(in).c_str(),
           shapeString(out).c_str());
    seen |= 1u << p;
    c.src[i] = inStrides[p];
    c.dims[i] = out->dims[i];
  }
  return c;
}

CopyLayout broadcastLayout(const dsrt_tensor *out, const dsrt_tensor *in) {
  checkDtype("broadcast", in, out->dtype, "operand");
  const dsrt_tensor *ins[1] = {in};
  Broadcast bc("broadcast", out, ins, 1);
  CopyLayout c;
  c.rank = bc.nd;
  for (int d = 0; d < bc.nd; ++d) {
    c.dims[d] = bc.dims[d];
    c.src[d] = bc.strides[0][d];
  }
  contiguousStrides(bc.nd, bc.dims, c.dst);
  return c;
}

namespace {
/// Strides of `big` with `dim` stepped by `step`, and the offset of element `start`.
int64_t sliceStrides(const char *kernel, const dsrt_tensor *big, const dsrt_tensor *small,
                     int64_t dim, int64_t start, int64_t step, int64_t *strides) {
  if (big->rank != small->rank || dim < 0 || dim >= big->rank || step <= 0 || start < 0 ||
      big->dtype != small->dtype)
    fail(kernel, "bad slice of %s to %s (dim %lld, start %lld, step %lld)",
         shapeString(big).c_str(), shapeString(small).c_str(), (long long)dim, (long long)start,
         (long long)step);
  for (int i = 0; i < big->rank; ++i)
    if (i != dim && big->dims[i] != small->dims[i])
      fail(kernel, "%s and %s differ outside dim %lld", shapeString(big).c_str(),
           shapeString(small).c_str(), (long long)dim);
  if (small->dims[dim] > 0 && start + step * (small->dims[dim] - 1) >= big->dims[dim])
    fail(kernel, "slice [%lld::%lld] x %lld out of bounds of %s", (long long)start, (long long)step,
         (long long)small->dims[dim], shapeString(big).c_str());
  contiguousStrides(big->rank, big->dims, strides);
  int64_t offset = start * strides[dim];
  strides[dim] *= step;
  return offset;
}
} // namespace

CopyLayout sliceLayout(const dsrt_tensor *out, const dsrt_tensor *in, int64_t dim, int64_t start,
                       int64_t step) {
  CopyLayout c;
  c.srcOffset = sliceStrides("slice", in, out, dim, start, step, c.src);
  contiguousStrides(out->rank, out->dims, c.dst);
  c.rank = out->rank;
  for (int d = 0; d < out->rank; ++d)
    c.dims[d] = out->dims[d];
  return c;
}

CopyLayout insertSliceLayout(const dsrt_tensor *out, const dsrt_tensor *in, int64_t dim,
                             int64_t start, int64_t step) {
  CopyLayout c;
  c.dstOffset = sliceStrides("insert_slice", out, in, dim, start, step, c.dst);
  contiguousStrides(in->rank, in->dims, c.src);
  c.rank = in->rank;
  for (int d = 0; d < in->rank; ++d)
    c.dims[d] = in->dims[d];
  return c;
}

} // namespace dsrt

namespace dsrt {

MatmulShape matmulShape(const dsrt_tensor *out, const dsrt_tensor *a, const dsrt_tensor *b,
                        bool trans_a, bool trans_b) {
  const char *k = "matmul";
  if (a->rank < 1 || b->rank < 1)
    fail(k, "operands must have rank >= 1");
  // Vectors act as a row (lhs) or a column (rhs) whose unit dim is absent from the result.
  bool aVec = a->rank == 1, bVec = b->rank == 1;
  if ((aVec && trans_a) || (bVec && trans_b))
    fail(k, "cannot transpose a vector operand");
  MatmulShape s;
  s.M = aVec ? 1 : (trans_a ? a->dims[a->rank - 1] : a->dims[a->rank - 2]);
  s.K = aVec ? a->dims[0] : (trans_a ? a->dims[a->rank - 2] : a->dims[a->rank - 1]);
  int64_t Kb = bVec ? b->dims[0] : (trans_b ? b->dims[b->rank - 1] : b->dims[b->rank - 2]);
  s.N = bVec ? 1 : (trans_b ? b->dims[b->rank - 2] : b->dims[b->rank - 1]);
  int aBatch = aVec ? 0 : a->rank - 2, bBatch = bVec ? 0 : b->rank - 2;
  s.outBatch = out->rank - (aVec ? 0 : 1) - (bVec ? 0 : 1);
  bool ok = s.K == Kb && s.outBatch >= 0 && s.outBatch >= aBatch && s.outBatch >= bBatch;
  if (ok && !aVec)
    ok = out->dims[s.outBatch] == s.M;
  if (ok && !bVec)
    ok = out->dims[out->rank - 1] == s.N;
  if (!ok)
    fail(k, "shapes %s%s x %s%s do not give %s", shapeString(a).c_str(), trans_a ? "^T" : "",
         shapeString(b).c_str(), trans_b ? "^T" : "", shapeString(out).c_str());
  // Batch strides with 0 on broadcast dims.
  int64_t strideA = s.M * s.K, strideB = s.K * s.N;
  for (int d = s.outBatch - 1, ea = aBatch - 1, eb = bBatch - 1; d >= 0; --d, --ea, --eb) {
    int64_t od = out->dims[d];
    int64_t ad = ea >= 0 ? a->dims[ea] : 1, bd = eb >= 0 ? b->dims[eb] : 1;
    if ((ad != od && ad != 1) || (bd != od && bd != 1))
      fail(k, "batch dims of %s and %s do not broadcast to %s", shapeString(a).c_str(),
           shapeString(b).c_str(), shapeString(out).c_str());
    s.sa[d] = ad == od && od != 1 ? strideA : 0;
    s.sb[d] = bd == od && bd != 1 ? strideB : 0;
    if (ad != od)
      s.aContig = false;
    if (s.sb[d] != 0)
      s.bShared = false;
    s.batchDims[d] = od;
    strideA *= ad;
    strideB *= bd;
    s.batch *= od;
  }
  s.lda = trans_a ? s.M : s.K;
  s.ldb = trans_b ? s.K : s.N;
  return s;
}

MatmulViews matmulViews(const dsrt_tensor *out, const dsrt_tensor *a, const dsrt_tensor *b,
                        const int64_t *views) {
  const char *k = "matmul_view";
  if (out->dtype != DSRT_F32 && out->dtype != DSRT_BF16 && out->dtype != DSRT_F16)
    fail(k, "result is %s: expected f32, bf16 or f16", dtypeName(out->dtype));
  checkDtype(k, a, out->dtype, "lhs");
  checkDtype(k, b, out->dtype, "rhs");
  MatmulViews v;
  v.b0 = views[0], v.b1 = views[1], v.M = views[2], v.N = views[3], v.K = views[4];
  if (v.b0 < 0 || v.b1 < 0 || v.M < 0 || v.N < 0 || v.K < 0)
    fail(k, "negative size in %lld x %lld batches of %lld x %lld x %lld", (long long)v.b0,
         (long long)v.b1, (long long)v.M, (long long)v.N, (long long)v.K);
  // One operand: its view, checked against its tensor; `canTranspose`: a strided column
  // dimension is allowed (the matrix is then read transposed).
  auto matrix = [&](const char *what, const dsrt_tensor *t, const int64_t *w, int64_t rows,
                    int64_t cols) {
    MatmulViews::Matrix m;
    m.offset = w[0], m.s0 = w[1], m.s1 = w[2];
    int64_t sr = w[3], sc = w[4];
    if (m.offset < 0 || m.s0 < 0 || m.s1 < 0 || sr < 0 || sc < 0)
      fail(k, "%s view has a negative offset or stride", what);
    if (v.b0 && v.b1 && rows && cols) {
      int64_t last = m.offset + (v.b0 - 1) * m.s0 + (v.b1 - 1) * m.s1 + (rows - 1) * sr +
                     (cols - 1) * sc;
      if (last >= t->numel)
        fail(k, "%s view reaches element %lld of a tensor of %lld (%s)", what, (long long)last,
             (long long)t->numel, shapeString(t).c_str());
    }
    if (sc == 1 || cols == 1) {
      m.ld = std::max<int64_t>({sr, cols, 1});
      if (rows > 1 && sr < cols)
        fail(k, "%s view's rows overlap (row stride %lld < %lld columns)", what, (long long)sr,
             (long long)cols);
    } else if (sr == 1 || rows == 1) {
      m.trans = true;
      m.ld = std::max<int64_t>({sc, rows, 1});
      if (cols > 1 && sc < rows)
        fail(k, "%s view's columns overlap (column stride %lld < %lld rows)", what,
             (long long)sc, (long long)rows);
    } else {
      fail(k, "%s view has neither unit row nor unit column stride (%lld, %lld)", what,
           (long long)sr, (long long)sc);
    }
    return m;
  };
  v.a = matrix("lhs", a, views + 5, v.M, v.K);
  v.b = matrix("rhs", b, views + 10, v.K, v.N);
  v.c = matrix("result", out, views + 15, v.M, v.N);
  if (v.c.trans) { // C^T = op(B)^T op(A)^T: swap the operands and flip their flags
    std::swap(v.a, v.b);
    std::swap(v.M, v.N);
    v.a.trans = !v.a.trans, v.b.trans = !v.b.trans, v.c.trans = false;
    v.swapped = true;
  }
  return v;
}

void MatmulShape::offsets(int64_t bi, int64_t &oa, int64_t &ob) const {
  oa = ob = 0;
  for (int d = outBatch - 1; d >= 0; --d) {
    int64_t i = bi % batchDims[d];
    bi /= batchDims[d];
    oa += i * sa[d];
    ob += i * sb[d];
  }
}

} // namespace dsrt

namespace dsrt::ops {

PoolShape poolShape(const char *k, const dsrt_tensor *x, const dsrt_tensor *y) {
  checkDtype(k, x, DSRT_F32, "input");
  checkDtype(k, y, DSRT_F32, "output");
  if (!(x->rank == 3 || x->rank == 4) || y->rank != x->rank)
    fail(k, "bad shapes x %s, y %s", shapeString(x).c_str(), shapeString(y).c_str());
  for (int d = 0; d < x->rank - 2; ++d)
    if (x->dims[d] != y->dims[d])
      fail(k, "x %s and y %s differ in leading dims", shapeString(x).c_str(),
           shapeString(y).c_str());
  int r = x->rank;
  PoolShape s{1, x->dims[r - 2], x->dims[r - 1], y->dims[r - 2], y->dims[r - 1]};
  for (int d = 0; d < r - 2; ++d)
    s.planes *= x->dims[d];
  return s;
}

ConvShape convShape(const char *k, const dsrt_tensor *x, const dsrt_tensor *w,
                    const dsrt_tensor *y, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                    int64_t dh, int64_t dw, int64_t g) {
  checkDtype(k, x, DSRT_F32, "input");
  checkDtype(k, w, DSRT_F32, "weight");
  checkDtype(k, y, DSRT_F32, "output");
  bool batched = x->rank == 4;
  if (!(x->rank == 4 || x->rank == 3) || y->rank != x->rank || w->rank != 4 || g <= 0 || sh <= 0 ||
      sw <= 0 || dh <= 0 || dw <= 0 || ph < 0 || pw < 0)
    fail(k, "bad shapes x %s, w %s, y %s", shapeString(x).c_str(), shapeString(w).c_str(),
         shapeString(y).c_str());
  int o = batched ? 1 : 0;
  ConvShape c;
  c.N = batched ? x->dims[0] : 1;
  c.C = x->dims[o];
  c.H = x->dims[o + 1];
  c.W = x->dims[o + 2];
  c.O = w->dims[0];
  c.KH = w->dims[2];
  c.KW = w->dims[3];
  c.OH = y->dims[o + 1];
  c.OW = y->dims[o + 2];
  c.sh = sh;
  c.sw = sw;
  c.ph = ph;
  c.pw = pw;
  c.dh = dh;
  c.dw = dw;
  c.groups = g;
  int64_t eOH = (c.H + 2 * ph - (dh * (c.KH - 1) + 1)) / sh + 1;
  int64_t eOW = (c.W + 2 * pw - (dw * (c.KW - 1) + 1)) / sw + 1;
  if (c.C % g || c.O % g || w->dims[1] != c.C / g || y->dims[o] != c.O || c.OH != eOH ||
      c.OW != eOW || (batched && y->dims[0] != c.N))
    fail(k, "x %s, w %s (groups %lld) do not give y %s", shapeString(x).c_str(),
         shapeString(w).c_str(), (long long)g, shapeString(y).c_str());
  return c;
}

} // namespace dsrt::ops

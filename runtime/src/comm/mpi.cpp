//===- mpi.cpp - the MPI channel ----------------------------------------------===//
//
// MPI_COMM_WORLD as the data-parallel group. MPI is initialized, called and finalized on the
// communication thread only (MPI_THREAD_FUNNELED from that thread's point of view).
//
#include "channel.h"

#include "../core/half.h"
#include "dsrt/dsrt.h"

#include <cstdio>
#include <cstdlib>

#ifdef DSRT_HAVE_MPI
// The C API only: OpenMPI's and MPICH's headers otherwise pull in the C++ bindings library.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace dsrt {

bool launchedByMpiLauncher() {
  for (const char *v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS",
                        "SLURM_STEP_NUM_TASKS"})
    if (std::getenv(v))
      return true;
  return false;
}

#ifdef DSRT_HAVE_MPI
namespace {
MPI_Datatype mpiType(int32_t dtype) {
  switch (dtype) {
  case DSRT_F32:
    return MPI_FLOAT;
  case DSRT_F64:
    return MPI_DOUBLE;
  case DSRT_I64:
    return MPI_INT64_T;
  case DSRT_I32:
    return MPI_INT32_T;
  default:
    std::fprintf(stderr, "dsrt: mpi: reductions of dtype %d are not implemented\n", dtype);
    std::abort();
  }
}
// bf16 and f16 travel as 16-bit words (MPI has no such floating types); their sums are
// user operations that add in f32 and round once per pair.
void sumBf16(void *in, void *inout, int *len, MPI_Datatype *) {
  halfAccumulate(DSRT_BF16, static_cast<uint16_t *>(inout), static_cast<const uint16_t *>(in),
                 *len);
}
void sumF16(void *in, void *inout, int *len, MPI_Datatype *) {
  halfAccumulate(DSRT_F16, static_cast<uint16_t *>(inout), static_cast<const uint16_t *>(in),
                 *len);
}
MPI_Datatype mpiReductionType(int32_t dtype) {
  return isHalfType(dtype) ? MPI_UINT16_T : mpiType(dtype);
}
MPI_Op mpiOp(int32_t reduction, int32_t dtype) {
  if (isHalfType(dtype)) {
    if (reduction != DSRT_COMM_SUM) {
      std::fprintf(stderr, "dsrt: mpi: only sums of bf16 and f16 are implemented\n");
      std::abort();
    }
    static MPI_Op ops[2] = {MPI_OP_NULL, MPI_OP_NULL};
    MPI_Op &op = ops[dtype == DSRT_F16];
    if (op == MPI_OP_NULL)
      MPI_Op_create(dtype == DSRT_F16 ? sumF16 : sumBf16, /*commute=*/1, &op);
    return op;
  }
  return reduction == DSRT_COMM_MAX ? MPI_MAX : reduction == DSRT_COMM_MIN ? MPI_MIN : MPI_SUM;
}
void check(int rc, const char *what) {
  if (rc == MPI_SUCCESS)
    return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  std::fprintf(stderr, "dsrt: mpi: %s failed: %.*s\n", what, len, msg);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

class Mpi : public Channel {
public:
  Mpi() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~Mpi() override { MPI_Finalize(); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char *name() const override { return "mpi"; }
  void allReduce(void *out, const void *in, int64_t count, int32_t dtype,
                 int32_t reduction) override {
    check(MPI_Allreduce(out == in ? MPI_IN_PLACE : in, out, (int)count,
                        mpiReductionType(dtype), mpiOp(reduction, dtype), MPI_COMM_WORLD),
          "MPI_Allreduce");
  }
  void allGather(void *out, const void *in, int64_t bytes) override {
    // In place when this rank's part already sits at its position in the output.
    bool inPlace = in == static_cast<const char *>(out) + bytes * rank_;
    check(MPI_Allgather(inPlace ? MPI_IN_PLACE : in, (int)bytes, MPI_BYTE, out, (int)bytes,
                        MPI_BYTE, MPI_COMM_WORLD),
          "MPI_Allgather");
  }
  void reduceScatter(void *out, const void *in, int64_t count, int32_t dtype,
                     int32_t reduction) override {
    check(MPI_Reduce_scatter_block(in, out, (int)count,
                                   mpiReductionType(dtype), mpiOp(reduction, dtype),
                                   MPI_COMM_WORLD),
          "MPI_Reduce_scatter_block");
  }
  void broadcast(void *data, int64_t bytes, int root) override {
    check(MPI_Bcast(data, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
  }

private:
  int rank_ = 0, size_ = 1;
};
} // namespace

std::unique_ptr<Channel> makeMpiChannel(std::string &err) {
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    err = "MPI_Init_thread failed";
    return nullptr;
  }
  return std::make_unique<Mpi>();
}
#else
std::unique_ptr<Channel> makeMpiChannel(std::string &err) {
  err = "this runtime was built without MPI (install libopenmpi-dev and rebuild)";
  return nullptr;
}
#endif

} // namespace dsrt

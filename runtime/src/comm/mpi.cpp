//===- mpi.cpp - the MPI channel ----------------------------------------------===//
//
// MPI_COMM_WORLD and the mesh's groups split from it. MPI is initialized and finalized on the
// world's communication thread; each group calls MPI on a thread of its own, so a mesh of
// several axes needs MPI_THREAD_MULTIPLE and a single group MPI_THREAD_FUNNELED; a library that
// provides less is refused. Every collective is nonblocking and polled,
// so that a wait can time out: the rank then tells every other rank where it is stuck, hears
// back from the ranks that are alive, prints which ranks did not answer, and ends the job.
// Counts beyond INT_MAX elements (or the test limit DSRT_TEST_MPI_MAX_COUNT) are split, since
// OpenMPI 4.1 has no large-count calls.
//
#include "channel.h"

#include "../core/half.h"
#include "dsrt/dsrt.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sched.h>
#include <time.h>
#include <string>
#include <thread>
#include <vector>

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

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

[[noreturn]] void abortWorld(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code); // MPI_Abort does not return; this is for the compiler
}

[[noreturn]] void unsupported(const char *what) {
  std::fprintf(stderr, "dsrt: mpi: %s\n", what);
  abortWorld(1);
}

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
    unsupported("reductions of this element type are not implemented");
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
    if (reduction != DSRT_COMM_SUM)
      unsupported("only sums of bf16 and f16 are implemented");
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
  abortWorld(1);
}

std::string threadLevelName(int level) {
  return level == MPI_THREAD_SINGLE     ? "MPI_THREAD_SINGLE"
         : level == MPI_THREAD_FUNNELED ? "MPI_THREAD_FUNNELED"
         : level == MPI_THREAD_SERIALIZED ? "MPI_THREAD_SERIALIZED"
                                          : "MPI_THREAD_MULTIPLE";
}

/// Where a rank is, as it tells its peers after a timeout.
struct Position {
  int64_t rank = -1;
  int64_t waiting = 0;  ///< 1: inside collective `seq`; 0: computing after collective `seq`
  int64_t timedOut = 0; ///< 1: its own wait ran past the timeout
  int64_t seq = 0;
  double waited = 0; ///< seconds in the collective so far
  char name[24] = {};
  char detail[64] = {};
};
constexpr int kReportTag = 7001;
constexpr int kP2pTag = 7002; ///< sendRecv's messages (on the group's own communicator)
constexpr int kAllToAllVTag = 7003; ///< allToAllV's messages

std::string rankList(const std::vector<int> &ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

std::string collective(const Position &p) {
  std::string d = std::string(p.name) + " #" + std::to_string(p.seq);
  return p.detail[0] ? d + " (" + p.detail + ")" : d;
}

std::string describe(const Position &p) {
  if (!p.waiting)
    return "computing after collective #" + std::to_string(p.seq);
  return "waiting in " + collective(p);
}

/// The thread level MPI_Init_thread provided.
int providedThreadLevel = MPI_THREAD_SINGLE;

class Mpi : public Channel {
public:
  /// `comm`: MPI_COMM_WORLD (this channel then finalizes MPI) or a communicator split from it,
  /// which this channel frees.
  Mpi(CommControl &control, MPI_Comm comm) : control_(control), comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    // Reports name world ranks.
    int me = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    world_.resize(size_);
    MPI_Allgather(&me, 1, MPI_INT, world_.data(), 1, MPI_INT, comm_);
    // Timeout reports travel on their own communicator, never mixed with collectives.
    MPI_Comm_dup(comm_, &reports_);
    maxCount_ = INT_MAX;
    if (const char *v = std::getenv("DSRT_TEST_MPI_MAX_COUNT")) // tests of the split
      maxCount_ = std::max<int64_t>(1, std::atoll(v));
  }
  ~Mpi() override {
    MPI_Comm_free(&reports_);
    if (comm_ == MPI_COMM_WORLD)
      MPI_Finalize();
    else
      MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char *name() const override { return "mpi"; }

  void allReduce(const CommOp &op, void *out, const void *in, int64_t count, int32_t dtype,
                 int32_t reduction) override {
    Scope s(*this, op);
    size_t es = dsrt_dtype_size(dtype);
    forEachChunk(count, maxCount_, [&](int64_t off, int64_t n) {
      char *o = static_cast<char *>(out) + off * es;
      const char *i = static_cast<const char *>(in) + off * es;
      MPI_Request r;
      check(MPI_Iallreduce(out == in ? MPI_IN_PLACE : i, o, static_cast<int>(n),
                           mpiReductionType(dtype), mpiOp(reduction, dtype), comm_, &r),
            "MPI_Iallreduce");
      wait(r);
    });
  }

  void allGather(const CommOp &op, void *out, const void *in, int64_t bytes) override {
    Scope s(*this, op);
    char *o = static_cast<char *>(out);
    // In place when this rank's part already sits at its position in the output.
    bool inPlace = in == o + bytes * rank_;
    MPI_Request r;
    if (bytes <= maxCount_) {
      check(MPI_Iallgather(inPlace ? MPI_IN_PLACE : in, static_cast<int>(bytes), MPI_BYTE, o,
                           static_cast<int>(bytes), MPI_BYTE, comm_, &r),
            "MPI_Iallgather");
      wait(r);
      return;
    }
    // Chunk k of every rank's part: a block of n bytes whose extent is a whole part, so that
    // rank q's block lands at out + q * bytes + k.
    forEachStridedChunk(bytes, [&](int64_t off, int64_t n, MPI_Datatype strided) {
      const void *send = inPlace ? MPI_IN_PLACE : static_cast<const char *>(in) + off;
      check(MPI_Iallgather(send, static_cast<int>(n), MPI_BYTE, o + off, 1, strided,
                           comm_, &r),
            "MPI_Iallgather");
      wait(r);
    });
  }

  void reduceScatter(const CommOp &op, void *out, const void *in, int64_t count, int32_t dtype,
                     int32_t reduction) override {
    Scope s(*this, op);
    MPI_Datatype type = mpiReductionType(dtype);
    MPI_Op mop = mpiOp(reduction, dtype);
    size_t es = dsrt_dtype_size(dtype);
    const char *src = static_cast<const char *>(in);
    char *dst = static_cast<char *>(out);
    bool overlap = dst < src + count * es * size_ && src < dst + count * es;
    if (count <= maxCount_ && (out == in || !overlap)) {
      MPI_Request r;
      check(MPI_Ireduce_scatter_block(out == in ? MPI_IN_PLACE : in, out,
                                      static_cast<int>(count), type, mop, comm_, &r),
            "MPI_Ireduce_scatter_block");
      wait(r);
      return;
    }
    // Larger parts (or an output inside the input): chunk by chunk, one reduction to each
    // rank.
    bool ownInPlace = src + count * es * rank_ == dst;
    std::vector<char> scratch;
    forEachChunk(count, maxCount_, [&](int64_t off, int64_t n) {
      bool aliased = !ownInPlace && overlap;
      if (aliased)
        scratch.resize(n * es);
      char *result = aliased ? scratch.data() : dst + off * es;
      std::vector<MPI_Request> rs(size_);
      for (int q = 0; q < size_; ++q) {
        const char *part = src + (q * count + off) * es;
        const void *send = q == rank_ && ownInPlace ? MPI_IN_PLACE : part;
        check(MPI_Ireduce(send, q == rank_ ? result : nullptr, static_cast<int>(n), type, mop, q,
                          comm_, &rs[q]),
              "MPI_Ireduce");
      }
      for (MPI_Request &r : rs)
        wait(r);
      if (aliased)
        std::memcpy(dst + off * es, scratch.data(), n * es);
    });
  }

  void broadcast(const CommOp &op, void *data, int64_t bytes, int root) override {
    Scope s(*this, op);
    forEachChunk(bytes, maxCount_, [&](int64_t off, int64_t n) {
      MPI_Request r;
      check(MPI_Ibcast(static_cast<char *>(data) + off, static_cast<int>(n), MPI_BYTE, root,
                       comm_, &r),
            "MPI_Ibcast");
      wait(r);
    });
  }

  void gather(const CommOp &op, void *out, const void *in, const std::vector<int64_t> &bytes,
              int root) override {
    Scope s(*this, op);
    std::vector<int> counts(size_), displs(size_);
    int64_t at = 0;
    for (int q = 0; q < size_; ++q) {
      if (at + bytes[q] > INT_MAX)
        unsupported("a gather of more than INT_MAX bytes (the caller splits it)");
      counts[q] = static_cast<int>(bytes[q]);
      displs[q] = static_cast<int>(at);
      at += bytes[q];
    }
    MPI_Request r;
    check(MPI_Igatherv(in, counts[rank_], MPI_BYTE, out, counts.data(), displs.data(), MPI_BYTE,
                       root, comm_, &r),
          "MPI_Igatherv");
    wait(r);
  }

  void allToAll(const CommOp &op, void *out, const void *in, int64_t bytes) override {
    Scope s(*this, op);
    const char *src = static_cast<const char *>(in);
    char *dst = static_cast<char *>(out);
    MPI_Request r;
    if (bytes <= maxCount_) {
      check(MPI_Ialltoall(src, static_cast<int>(bytes), MPI_BYTE, dst, static_cast<int>(bytes),
                          MPI_BYTE, comm_, &r),
            "MPI_Ialltoall");
      wait(r);
      return;
    }
    // Piece k of every block: n bytes whose extent is a whole block (as allGather).
    forEachStridedChunk(bytes, [&](int64_t off, int64_t, MPI_Datatype strided) {
      check(MPI_Ialltoall(src + off, 1, strided, dst + off, 1, strided, comm_, &r),
            "MPI_Ialltoall");
      wait(r);
    });
  }

  void allToAllV(const CommOp &op, void *out, const std::vector<int64_t> &recvBytes,
                 const void *in, const std::vector<int64_t> &sendBytes) override {
    Scope s(*this, op);
    // Point to point, so that counts and offsets are 64-bit: every receive posted first, in
    // calls of at most maxCount_ bytes, then every send; this rank's own block is a copy.
    const char *src = static_cast<const char *>(in);
    char *dst = static_cast<char *>(out);
    std::vector<MPI_Request> rs;
    auto post = [&](bool receive) {
      int64_t at = 0;
      const std::vector<int64_t> &bytes = receive ? recvBytes : sendBytes;
      for (int q = 0; q < size_; ++q) {
        if (q != rank_ && bytes[q] > 0)
          forEachChunk(bytes[q], maxCount_, [&](int64_t off, int64_t n) {
            rs.push_back(MPI_REQUEST_NULL);
            int count = static_cast<int>(n);
            if (receive)
              check(MPI_Irecv(dst + at + off, count, MPI_BYTE, q, kAllToAllVTag, comm_,
                              &rs.back()),
                    "MPI_Irecv");
            else
              check(MPI_Isend(src + at + off, count, MPI_BYTE, q, kAllToAllVTag, comm_,
                              &rs.back()),
                    "MPI_Isend");
          });
        at += bytes[q];
      }
    };
    post(true);
    post(false);
    int64_t ownFrom = 0, ownTo = 0;
    for (int q = 0; q < rank_; ++q) {
      ownFrom += sendBytes[q];
      ownTo += recvBytes[q];
    }
    if (recvBytes[rank_] > 0)
      std::memcpy(dst + ownTo, src + ownFrom, recvBytes[rank_]);
    for (MPI_Request &r : rs)
      wait(r);
  }

  std::unique_ptr<Channel> split(int color, int key, std::string &why) override {
    if (providedThreadLevel < MPI_THREAD_MULTIPLE) {
      why = "the MPI library provides thread level " + threadLevelName(providedThreadLevel) +
            " but a mesh of several axes needs MPI_THREAD_MULTIPLE (each group calls MPI on a "
            "thread of its own); use an MPI built with it (OpenMPI's default)";
      return nullptr;
    }
    MPI_Comm sub = MPI_COMM_NULL;
    check(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split");
    return std::make_unique<Mpi>(control_, sub);
  }

  void sendRecv(const CommOp &op, void *out, int64_t recvBytes, int src, const void *in,
                int64_t sendBytes, int dst) override {
    Scope s(*this, op);
    // In calls of at most maxCount_ bytes, the same on both sides (the sizes match), each
    // posting its receive before its send.
    const int64_t total = std::max(src >= 0 ? recvBytes : 0, dst >= 0 ? sendBytes : 0);
    forEachChunk(total, maxCount_, [&](int64_t off, int64_t) {
      MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
      if (src >= 0 && off < recvBytes)
        check(MPI_Irecv(static_cast<char *>(out) + off,
                        static_cast<int>(std::min(maxCount_, recvBytes - off)), MPI_BYTE, src,
                        kP2pTag, comm_, &r[0]),
              "MPI_Irecv");
      if (dst >= 0 && off < sendBytes)
        check(MPI_Isend(static_cast<const char *>(in) + off,
                        static_cast<int>(std::min(maxCount_, sendBytes - off)), MPI_BYTE, dst,
                        kP2pTag, comm_, &r[1]),
              "MPI_Isend");
      for (MPI_Request &q : r)
        if (q != MPI_REQUEST_NULL)
          wait(q);
    });
  }

  void barrier(const CommOp &op) override {
    Scope s(*this, op);
    MPI_Request r;
    check(MPI_Ibarrier(comm_, &r), "MPI_Ibarrier");
    wait(r);
  }

  void idle() override { serve(); }

  [[noreturn]] void abort(int code) override { abortWorld(code); }

private:
  CommControl &control_;
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::vector<int> world_; ///< the world rank of each rank of comm_
  MPI_Comm reports_ = MPI_COMM_NULL;
  int64_t maxCount_ = INT_MAX;
  const CommOp *current_ = nullptr; ///< the collective in progress
  int64_t finished_ = 0;            ///< the last one completed
  Clock::time_point started_;

  /// Splits per-rank blocks of `bytes` into calls of at most maxCount_ bytes: f(offset, n,
  /// type) with `type` n bytes whose extent is a whole block, so that one element of it per
  /// rank covers piece [offset, offset + n) of every rank's block.
  template <class F> void forEachStridedChunk(int64_t bytes, F &&f) {
    forEachChunk(bytes, maxCount_, [&](int64_t off, int64_t n) {
      MPI_Datatype block, strided;
      MPI_Type_contiguous(static_cast<int>(n), MPI_BYTE, &block);
      MPI_Type_create_resized(block, 0, static_cast<MPI_Aint>(bytes), &strided);
      MPI_Type_commit(&strided);
      f(off, n, strided);
      MPI_Type_free(&strided);
      MPI_Type_free(&block);
    });
  }

  /// Marks the collective in progress for the reports.
  struct Scope {
    Mpi &m;
    Scope(Mpi &m, const CommOp &op) : m(m) {
      m.current_ = &op;
      m.started_ = Clock::now();
    }
    ~Scope() {
      m.finished_ = m.current_->seq;
      m.current_ = nullptr;
    }
  };

  /// Polls `r` to completion; past the timeout, ends the job with a report. A wait that
  /// outlasts its first kSpinPolls polls sleeps between the next ones, from 8 us doubling to
  /// 256 us: a thread that spins (with sched_yield too, which the fair scheduler barely
  /// honours) takes its share of a core from the threads that compute, and ranks share cores
  /// whenever they and their communication threads outnumber them (4 ranks on 2 cores, as in
  /// bench/moe_ep.py).
  void wait(MPI_Request &r) {
    constexpr uint32_t kSpinPolls = 16;
    constexpr long kFirstSleepNs = 8000, kLongestSleepNs = 256000;
    long sleepNs = 0;
    for (uint32_t i = 0;; ++i) {
      int done = 0;
      check(MPI_Test(&r, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done)
        return;
      if ((i & 63) == 0) {
        serve();
        double limit = control_.timeoutSeconds.load();
        if (limit > 0 && secondsSince(started_) > limit)
          endAfterTimeout(nullptr);
      }
      if (i < kSpinPolls) {
        sched_yield();
        continue;
      }
      sleepNs = sleepNs ? std::min(2 * sleepNs, kLongestSleepNs) : kFirstSleepNs;
      timespec ts{0, sleepNs};
      nanosleep(&ts, nullptr);
    }
  }

  /// Another thread's request to end the job, or a peer's timeout report.
  void serve() {
    int code = control_.abortCode.load();
    if (code >= 0)
      abortWorld(code);
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, kReportTag, reports_, &flag, &st);
    if (!flag)
      return;
    Position p;
    MPI_Recv(&p, sizeof p, MPI_BYTE, st.MPI_SOURCE, kReportTag, reports_, MPI_STATUS_IGNORE);
    endAfterTimeout(&p);
  }

  Position here(bool timedOut) const {
    Position p;
    p.rank = rank_;
    p.timedOut = timedOut;
    if (current_) {
      p.waiting = 1;
      p.seq = current_->seq;
      p.waited = secondsSince(started_);
      std::snprintf(p.name, sizeof p.name, "%s", current_->name);
      std::snprintf(p.detail, sizeof p.detail, "%s", current_->detail.c_str());
    } else {
      p.seq = finished_;
    }
    return p;
  }

  /// Every rank that is alive sends its position to every other and collects theirs for a
  /// grace period; the ranks that stay silent are stopped, hung or dead. Prints this rank's
  /// report and ends the job.
  [[noreturn]] void endAfterTimeout(const Position *peer) {
    double limit = control_.timeoutSeconds.load();
    std::vector<Position> pos(size_);
    std::vector<bool> heard(size_, false);
    Position mine = here(/*timedOut=*/peer == nullptr);
    pos[rank_] = mine;
    heard[rank_] = true;
    if (peer && peer->rank >= 0 && peer->rank < size_) {
      pos[peer->rank] = *peer;
      heard[peer->rank] = true;
    }
    std::vector<MPI_Request> sends;
    for (int q = 0; q < size_; ++q)
      if (q != rank_) {
        sends.emplace_back();
        MPI_Isend(&mine, sizeof mine, MPI_BYTE, q, kReportTag, reports_, &sends.back());
      }
    double grace = std::min(5.0, std::max(0.5, limit / 4));
    auto t0 = Clock::now();
    auto heardAll = [&] {
      for (bool h : heard)
        if (!h)
          return false;
      return true;
    };
    while (secondsSince(t0) < grace && !heardAll()) {
      int flag = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, kReportTag, reports_, &flag, &st);
      if (flag) {
        Position p;
        MPI_Recv(&p, sizeof p, MPI_BYTE, st.MPI_SOURCE, kReportTag, reports_, MPI_STATUS_IGNORE);
        if (st.MPI_SOURCE >= 0 && st.MPI_SOURCE < size_) {
          pos[st.MPI_SOURCE] = p;
          heard[st.MPI_SOURCE] = true;
        }
        continue;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::fprintf(stderr, "dsrt: rank %d: %s\n", world_[rank_], report(pos, heard, limit).c_str());
    std::fflush(stderr);
    // Let the other ranks print theirs before the first abort ends them.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    abortWorld(1);
  }

  std::string report(const std::vector<Position> &pos, const std::vector<bool> &heard,
                     double limit) const {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", limit);
    const Position &mine = pos[rank_];
    std::string s;
    // Which rank's timer ran out first: this one, or the one that told us.
    int first = -1;
    for (int q = 0; q < size_; ++q)
      if (heard[q] && pos[q].timedOut && (first < 0 || pos[q].waited > pos[first].waited))
        first = q;
    if (mine.timedOut)
      s = "waited " + std::string(buf) + " s (--comm-timeout) in " + collective(mine);
    else if (first >= 0)
      s = describe(mine) + " when rank " + std::to_string(world_[first]) + " timed out after " + buf +
          " s in " + collective(pos[first]);
    else
      s = describe(mine);
    std::vector<int> silent;
    for (int q = 0; q < size_; ++q)
      if (!heard[q])
        silent.push_back(world_[q]);
    if (!silent.empty()) {
      s += "; " + rankList(silent) + (silent.size() == 1 ? " did not answer: it is" :
                                                           " did not answer: they are") +
           " stopped, hung or dead";
    } else {
      // Everyone is alive: either some rank is slower than the timeout, or the ranks wait in
      // different collectives.
      std::vector<int> computing, other;
      for (int q = 0; q < size_; ++q) {
        if (!pos[q].waiting)
          computing.push_back(world_[q]);
        else if (std::strcmp(pos[q].name, mine.name) != 0 || pos[q].seq != mine.seq)
          other.push_back(q);
      }
      if (!computing.empty())
        s += "; " + rankList(computing) + " answered but " +
             (computing.size() == 1 ? "is" : "are") +
             " still computing (a step longer than the timeout: raise --comm-timeout)";
      for (int q : other)
        s += "; rank " + std::to_string(world_[q]) + " is " + describe(pos[q]);
      if (!other.empty())
        s += " (the ranks issued different collectives: a bug in the compiled program; please "
             "report it)";
      if (computing.empty() && other.empty())
        s += "; every rank waits in it (the transport is stuck)";
    }
    return s + "; ending the job";
  }
};
} // namespace

std::unique_ptr<Channel> makeMpiChannel(CommControl &control, std::string &err) {
  // The world's communication thread initializes MPI; the groups of a mesh of several axes
  // call it from threads of their own (MPI_THREAD_MULTIPLE, asked for here and checked when a
  // group is split off).
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    err = "MPI_Init_thread failed";
    return nullptr;
  }
  if (const char *v = std::getenv("DSRT_TEST_MPI_THREAD_LEVEL")) // tests of the refusals
    provided = std::strcmp(v, "single") == 0     ? MPI_THREAD_SINGLE
               : std::strcmp(v, "funneled") == 0 ? std::min(provided, static_cast<int>(MPI_THREAD_FUNNELED))
                                                 : provided;
  providedThreadLevel = provided;
  int isMain = 0;
  MPI_Is_thread_main(&isMain);
  if (provided < MPI_THREAD_FUNNELED || !isMain) {
    MPI_Finalize();
    err = "the MPI library provides thread level " + threadLevelName(provided) +
          " but dsrt needs MPI_THREAD_FUNNELED (every MPI call is made by its communication "
          "thread); use an MPI built with thread support (OpenMPI's default)";
    return nullptr;
  }
  return std::make_unique<Mpi>(control, MPI_COMM_WORLD);
}

std::string mpiLibraryVersion() {
  char v[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  MPI_Get_library_version(v, &len); // callable before MPI_Init
  std::string s(v, len > 0 ? len : 0);
  size_t end = s.find_first_of(",\n");
  return end == std::string::npos ? s : s.substr(0, end);
}
#else
std::string mpiLibraryVersion() { return ""; }

std::unique_ptr<Channel> makeMpiChannel(CommControl &, std::string &err) {
  err = "this runtime was built without MPI (install libopenmpi-dev and rebuild)";
  return nullptr;
}
#endif

} // namespace dsrt

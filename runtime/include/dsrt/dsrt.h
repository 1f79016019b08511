/* dsrt: the ds runtime's C ABI (no LLVM, no LibTorch behind it). */
#ifndef DSRT_DSRT_H
#define DSRT_DSRT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/*===--------------------------------------------------------------------===*
 * Objects
 *===--------------------------------------------------------------------===*/

/** One rank's execution context: a device (its arena and budget), a compute stream, threads,
 *  the random generator, and the persistent slots (parameters, buffers, gradients, optimizer
 *  state). Equivalent to: a CUDA context + stream, or a torch device + allocator. */
typedef struct dsrt_context dsrt_context;

/** Reference-counted memory of one tensor, allocated from the context's device arena (or
 *  borrowed constant memory). Views (reshape, parameter reads) share it. */
typedef struct dsrt_storage dsrt_storage;

/* The contract's enums are each written once, as a list of X(ENUMERATOR, name, ...) entries:
 * the C enum, its names and (for roles, spaces, precisions and schedules) the ds dialect's ODS
 * enum are all made from the list, the ODS one by cmake/DSRuntimeEnums.cmake, so that adding
 * an entry here reaches every switch over it in the runtime and in the compiler (both build
 * with -Werror=switch). A description (the last, quoted field) holds no semicolon: CMake reads
 * the lists. */
#define DSRT_ENUMERATOR_(e, ...) e,
#define DSRT_NAME_CASE_(e, name, ...)                                                          \
  case e:                                                                                      \
    return #name;
#define DSRT_FROM_NAME_(e, name, ...)                                                          \
  if (strcmp(text, #name) == 0)                                                                \
    return e;
/* `name_fn(value)`: the name of a value of the enum of list LIST, or NULL; `from_fn(text)`:
 * the value named `text`, or -1. */
#define DSRT_ENUM_NAMES_(LIST, name_fn, from_fn)                                               \
  static inline const char *name_fn(int32_t value) {                                           \
    switch (value) { LIST(DSRT_NAME_CASE_) }                                                   \
    return NULL;                                                                               \
  }                                                                                            \
  static inline int32_t from_fn(const char *text) {                                            \
    LIST(DSRT_FROM_NAME_)                                                                      \
    return -1;                                                                                 \
  }

/** Element types, as X(ENUMERATOR, name, bytes, safetensors name). DSRT_I1 is stored as one byte
 *  per element (0 or 1). */
#define DSRT_DTYPES(X)                                                                         \
  X(DSRT_F32, f32, 4, F32)                                                                     \
  X(DSRT_F64, f64, 8, F64)                                                                     \
  X(DSRT_I64, i64, 8, I64)                                                                     \
  X(DSRT_I32, i32, 4, I32)                                                                     \
  X(DSRT_I1, i1, 1, BOOL)                                                                      \
  X(DSRT_BF16, bf16, 2, BF16)                                                                  \
  X(DSRT_F16, f16, 2, F16)
typedef enum dsrt_dtype { DSRT_DTYPES(DSRT_ENUMERATOR_) } dsrt_dtype;
/* dsrt_dtype_name (NULL for a code that is not one) and dsrt_dtype_from_name (-1). */
DSRT_ENUM_NAMES_(DSRT_DTYPES, dsrt_dtype_name, dsrt_dtype_from_name)

#define DSRT_MAX_RANK 8
/** The device allocator gives each tensor's storage a multiple of this many bytes (at least
 *  one): the padding the memory plan reports beside its exact counts. */
#define DSRT_ALLOCATION_GRANULE 64

/** A dense row-major tensor: a shape over (part of) a storage. Equivalent to: at::Tensor
 *  restricted to contiguous layouts. Kernels read shapes from here; outputs are allocated by
 *  the caller (the compiled program) before the kernel runs. */
typedef struct dsrt_tensor {
  void *data;
  int64_t numel;
  int32_t dtype;
  int32_t rank;
  int64_t dims[DSRT_MAX_RANK];
  dsrt_storage *storage;
} dsrt_tensor;

/** Bytes of one element of `dtype`. */
size_t dsrt_dtype_size(int32_t dtype);

/*===--------------------------------------------------------------------===*
 * Context, arena, tensors
 *===--------------------------------------------------------------------===*/

/** Creates a context. `device_budget` is the arena's byte limit (0 = unlimited); `threads`
 *  the compute threads (0 = default: max(1, cores / local ranks)); `seed` seeds dropout. */
dsrt_context *dsrt_context_create(uint64_t device_budget, int32_t threads, uint64_t seed);
/** Creates a context on `device`: "cpu", "cuda", or NULL/"" for dsrt_default_device(). Returns
 *  NULL when the device cannot be used here, with "device NAME unavailable: REASON" in `err`
 *  (`cap` bytes, NUL-terminated). */
dsrt_context *dsrt_context_create_on(const char *device, uint64_t device_budget, int32_t threads,
                                     uint64_t seed, char *err, size_t cap);
void dsrt_context_destroy(dsrt_context *ctx);
/** The context's device: "cpu" or "cuda". */
const char *dsrt_context_device(dsrt_context *ctx);
/** "cuda" when the CUDA device was built and a GPU is usable here, else "cpu". */
const char *dsrt_default_device(void);
/** 1 when `device` is usable here, else 0 with the reason in `reason`. */
int32_t dsrt_device_probe(const char *device, char *reason, size_t cap);
/** What this runtime was built with and what is usable here, one line per device and channel
 *  (ds-report). Writes at most `cap` bytes (NUL-terminated) and returns the full length. */
size_t dsrt_report(char *buf, size_t cap);
/** Device bytes in use now and at most since creation (or the last reset). */
uint64_t dsrt_device_bytes(dsrt_context *ctx);
uint64_t dsrt_device_peak_bytes(dsrt_context *ctx);
void dsrt_reset_peak(dsrt_context *ctx);
/** Seconds the host has spent waiting in dsrt_event_wait for communication (CPU; a device's
 *  stream waits do not block the host and are not counted). */
double dsrt_wait_seconds(dsrt_context *ctx);

/** A new tensor with fresh arena memory (uninitialized). Exits with a message naming the
 *  need when the arena budget would be exceeded. `dims` has `rank` entries. */
dsrt_tensor *dsrt_tensor_alloc(dsrt_context *ctx, int32_t dtype, int32_t rank,
                               const int64_t *dims);
/** A tensor over constant memory that the runtime never frees or counts (compiled-in
 *  constants). */
dsrt_tensor *dsrt_tensor_borrow(dsrt_context *ctx, int32_t dtype, int32_t rank,
                                const int64_t *dims, const void *data);
/** A tensor over host memory that the caller keeps alive, uncounted: the driver's collectives on
 *  host data (agreements, gathers). Channels move it on the host; kernels of a device whose
 *  memory the host cannot address must not be given it. On the CPU, dsrt_tensor_borrow's. */
dsrt_tensor *dsrt_tensor_host(dsrt_context *ctx, int32_t dtype, int32_t rank, const int64_t *dims,
                              void *data);
/** A view of `t`'s storage with a new shape of the same element count (retains it). */
dsrt_tensor *dsrt_tensor_view(dsrt_context *ctx, dsrt_tensor *t, int32_t rank,
                              const int64_t *dims);
/** A view of `numel(dims)` elements of `t` from element `offset` (retains the storage). */
dsrt_tensor *dsrt_tensor_view_at(dsrt_context *ctx, dsrt_tensor *t, int64_t offset, int32_t rank,
                                 const int64_t *dims);
/** Copies `t`'s elements to host memory `dst` (numel x element size bytes) once the work
 *  enqueued before has finished; returns when `dst` holds them. The only way the driver reads
 *  tensor data, whatever the device. */
void dsrt_tensor_to_host(dsrt_context *ctx, void *dst, const dsrt_tensor *t);
/** Copies host memory `src` into `t`'s elements, in compute-stream order; `src` may be reused
 *  when it returns. */
void dsrt_tensor_from_host(dsrt_context *ctx, dsrt_tensor *t, const void *src);
/** Drops this handle; the storage is returned to the arena when its last view goes. */
void dsrt_tensor_free(dsrt_context *ctx, dsrt_tensor *t);

/** The random generator's state as text (dropout masks), for checkpoints: writes at most
 *  `cap` bytes (NUL-terminated when it fits) and returns the full length. */
size_t dsrt_rng_get(dsrt_context *ctx, char *buf, size_t cap);
/** Restores a state from dsrt_rng_get; returns 0, or -1 when the text is not a state. */
int32_t dsrt_rng_set(dsrt_context *ctx, const char *state);

/*===--------------------------------------------------------------------===*
 * Streams and events. Kernels and copies are enqueued on the context's compute stream in call
 * order; an event marks a point in it, so that another stream (communication, transfers) can
 * wait for it. Equivalent to: cudaEvent_t. The CPU backend runs each call before returning, so
 * its events are complete when recorded; the calls exist so that the compiled program and the
 * driver are written once for every backend.
 *===--------------------------------------------------------------------===*/

typedef struct dsrt_event dsrt_event;
/** An event after all work enqueued so far on the compute stream. Release it when done. */
dsrt_event *dsrt_event_record(dsrt_context *ctx);
/** 1 when the event's work has finished, else 0. */
int32_t dsrt_event_query(dsrt_event *event);
/** Blocks the host until the event's work has finished. */
void dsrt_event_synchronize(dsrt_event *event);
void dsrt_event_release(dsrt_event *event);
/** Blocks the host until all work enqueued on the compute stream has finished. */
void dsrt_stream_synchronize(dsrt_context *ctx);
/** Makes the compute stream wait for `event` (from any stream) before its next work. On the
 *  CPU the host waits; the event stays valid until released. */
void dsrt_event_wait(dsrt_context *ctx, dsrt_event *event);

/*===--------------------------------------------------------------------===*
 * Communication. A context joins a mesh of ranks (dsrt_comm_init_mesh): MPI when the process
 * was started by mpirun or srun, else a loopback channel of one rank. The mesh's axes are a
 * row-major grid of the world's ranks (the last axis varies fastest); a group is the set of
 * ranks whose coordinates differ only along some of the axes, named by the mask of those axes
 * (bit i: axis i), or DSRT_GROUP_WORLD. Each group has its own queue: collectives are enqueued
 * in call order on the group's communication thread and return an event; the compute stream
 * must wait for it (dsrt_event_wait) before reading the output or freeing the input. The
 * storages of both are held until the event is released. Every rank of a group must issue the
 * group's collectives in the same order with the same shapes (the compiler checks this).
 *===--------------------------------------------------------------------===*/

typedef enum dsrt_comm_op { DSRT_COMM_SUM = 0, DSRT_COMM_MAX = 1, DSRT_COMM_MIN = 2 } dsrt_comm_op;

/** Every rank of the job. */
#define DSRT_GROUP_WORLD (-1)

/** Joins the job as a mesh of `naxes` axes (1 to 8) of sizes `shape`; `names` ("dp", "tp",
 *  ...) only name them in messages. A job whose size is not the product exits with a message
 *  naming the mesh. Creates every group's channel (collectively). Idempotent. */
void dsrt_comm_init_mesh(dsrt_context *ctx, int32_t naxes, const int64_t *shape,
                         const char *const *names);
/** Joins a mesh of one data-parallel axis of `expected_size` ranks (the job's size when 0): a
 *  different job size exits with a message naming both. Idempotent. */
void dsrt_comm_init(dsrt_context *ctx, int32_t expected_size);
/** This rank in the world, and the world's size. */
int32_t dsrt_comm_rank(dsrt_context *ctx);
int32_t dsrt_comm_size(dsrt_context *ctx);
/** This rank's index along mesh axis `axis`. */
int32_t dsrt_comm_coordinate(dsrt_context *ctx, int32_t axis);
/** This rank's position in `group`, and the group's size. */
int32_t dsrt_group_rank(dsrt_context *ctx, int32_t group);
int32_t dsrt_group_size(dsrt_context *ctx, int32_t group);
/** "mpi", "loopback" or "nccl" (the cuda device's, over MPI or loopback for its start-up). */
const char *dsrt_comm_channel(dsrt_context *ctx);
/** Seconds a collective may wait for the other ranks (default 1800, torch.distributed's for
 *  gloo; 0 waits forever). Past it, every rank of the group that is alive reports where it
 *  waits and which ranks did not answer (stopped, hung or dead), and the job ends. */
void dsrt_comm_set_timeout(dsrt_context *ctx, double seconds);
/** Returns when every rank has called it (the start-up barrier after loading). */
void dsrt_comm_barrier(dsrt_context *ctx);
/** Agrees on a failure that some ranks saw: each rank passes its error message (NULL or "" if
 *  it has none). Returns -1 when no rank failed, else the lowest failing rank, whose message
 *  is copied into `msg` (`cap` bytes, NUL-terminated). Every rank must call it. */
int32_t dsrt_comm_agree(dsrt_context *ctx, const char *error, char *msg, size_t cap);
/** Ends every rank of the job with exit code `code` (MPI_Abort under MPI); the caller
 *  prints why first. With one rank (or no group yet) it exits. Never returns. */
void dsrt_comm_abort(dsrt_context *ctx, int32_t code);
/** Elementwise reduction of `in` over the group's ranks into `out` (same shape; may alias
 *  `in`). */
dsrt_event *dsrt_all_reduce(dsrt_context *ctx, int32_t group, dsrt_tensor *out,
                            const dsrt_tensor *in, int32_t reduction);
/** `out` (size x numel(in) elements) = every rank's `in`, in group rank order. */
dsrt_event *dsrt_all_gather(dsrt_context *ctx, int32_t group, dsrt_tensor *out,
                            const dsrt_tensor *in);
/** Reduces `in` (size x numel(out) elements) over the ranks; rank r gets chunk r in `out`. */
dsrt_event *dsrt_reduce_scatter(dsrt_context *ctx, int32_t group, dsrt_tensor *out,
                                const dsrt_tensor *in, int32_t reduction);
/** `in` and `out` are `size` equal chunks along their memory: chunk q of `in` goes to group
 *  rank q, and chunk q of `out` comes from group rank q (MPI_Alltoall). They must not share
 *  storage. */
dsrt_event *dsrt_all_to_all(dsrt_context *ctx, int32_t group, dsrt_tensor *out,
                            const dsrt_tensor *in);
/** Point to point over `group` (a pipeline's): sends `in` to group rank `dst` and receives
 *  `out` from group rank `src` as one exchange, so that two ranks sending to each other (a
 *  pipeline's activations one way, gradients the other) never wait on each other. Either
 *  side may be absent (null and -1). Each peer calls it with the matching receive (same byte
 *  count) and send, in the same order per pair of ranks. They must not share storage. */
dsrt_event *dsrt_send_recv(dsrt_context *ctx, int32_t group, dsrt_tensor *out, int32_t src,
                           const dsrt_tensor *in, int32_t dst);
/** This rank's chunk of `t` split into equal parts along dimension 0 over `group`
 *  (shard.all_slice): a view, no communication. `dims` is the chunk's shape. */
dsrt_tensor *dsrt_comm_chunk(dsrt_context *ctx, int32_t group, dsrt_tensor *t, int32_t rank,
                             const int64_t *dims);
/** Group rank `root` receives `bytes[q]` bytes from each group rank q (`in`), one after another
 *  in rank order, into `out` (ignored on the other ranks); at most INT_MAX bytes in all. The
 *  caller keeps both buffers alive until the event completes. */
dsrt_event *dsrt_gather(dsrt_context *ctx, int32_t group, void *out, const void *in,
                        const int64_t *bytes, int32_t root);
/** Every rank's `t` becomes group rank `root`'s. */
dsrt_event *dsrt_comm_broadcast(dsrt_context *ctx, int32_t group, dsrt_tensor *t, int32_t root);
/** Expert parallelism's token exchange over `group`, whose ranks hold `experts` experts in
 *  equal consecutive parts (rank q: experts [q*L, (q+1)*L), L = experts / size). Every rank
 *  routes the same number N of rows. dsrt_expert_route reads each row's expert `ids` ([N], i32
 *  or i64; an id outside [0, experts) is a row that no expert takes) and writes the `plan`
 *  (i64 [N + 2*size]: each row's place in the send order, -1 for a row not sent, then the
 *  rows sent to each rank, then the rows received from each rank; the counts are exchanged
 *  here) and `local_ids` (the ids' dtype, [C]: the received rows' experts numbered from this
 *  rank's first, in the order of the sending ranks and, from each, sorted by expert (a
 *  stable sort: each expert's rows in the sender's order), -1 past the rows received). C, the
 *  receive capacity, is at most N*size, the dropless worst case. dsrt_expert_dispatch moves the rows
 *  of `x` ([N, ...]) along the plan into `recv` ([C, ...], zeros past the rows received);
 *  dsrt_expert_combine moves the rows of `y` ([C, ...]) back to the rows they came from in
 *  `out` ([N, ...], zeros for a row not sent). Combine is dispatch's adjoint: each is the
 *  other's gradient. The plan must come from a route over the same group. */
dsrt_event *dsrt_expert_route(dsrt_context *ctx, int32_t group, dsrt_tensor *plan,
                              dsrt_tensor *local_ids, const dsrt_tensor *ids, int64_t experts);
dsrt_event *dsrt_expert_dispatch(dsrt_context *ctx, int32_t group, dsrt_tensor *recv,
                                 const dsrt_tensor *x, const dsrt_tensor *plan);
dsrt_event *dsrt_expert_combine(dsrt_context *ctx, int32_t group, dsrt_tensor *out,
                                const dsrt_tensor *y, const dsrt_tensor *plan);

/*===--------------------------------------------------------------------===*
 * Persistent slots: parameters, buffers, gradients, optimizer state
 *===--------------------------------------------------------------------===*/

/** What a persistent slot holds, as X(ENUMERATOR, name, kind, description): the program declares
 *  each slot's role (its metadata), the ds dialect's ds.state and ds.flat_buffer carry it
 *  (`role`), and checkpoints name optimizer state by it. The kind is the word messages use for
 *  such a slot. */
#define DSRT_SLOT_ROLES(X)                                                                     \
  X(DSRT_ROLE_PARAMETER, parameter, parameter,                                                 \
    "a trainable parameter (a ds.parameter marked trainable)")                                 \
  X(DSRT_ROLE_BUFFER, buffer, buffer,                                                          \
    "a tensor of the state_dict that is not trained (a buffer)")                               \
  X(DSRT_ROLE_GRAD, grad, gradient,                                                            \
    "a parameter's gradient, accumulated over the micro-batches")                              \
  X(DSRT_ROLE_EXP_AVG, exp_avg, state,                                                         \
    "Adam's first moment")                                                                     \
  X(DSRT_ROLE_EXP_AVG_SQ, exp_avg_sq, state,                                                   \
    "Adam's second moment")                                                                    \
  X(DSRT_ROLE_MOMENTUM_BUFFER, momentum_buffer, state,                                         \
    "SGD's or Muon's momentum")                                                                \
  X(DSRT_ROLE_MASTER, master, state,                                                           \
    "the fp32 master copy of a 16-bit parameter (bf16, fp16)")                                 \
  X(DSRT_ROLE_LOSS_SCALE, loss_scale, state,                                                   \
    "fp16's loss scale, set by the driver before each step")                                   \
  X(DSRT_ROLE_FOUND_INF, found_inf, state,                                                     \
    "1 when the step's gradients overflowed, set by the step")                                 \
  X(DSRT_ROLE_PARAM_SHARD, param_shard, state,                                                 \
    "this rank's shard of a flat parameter buffer (ZeRO 3)")                                   \
  X(DSRT_ROLE_GRAD_SHARD, grad_shard, state,                                                   \
    "this rank's shard of a flat buffer's gradients (ZeRO 2, 3)")                              \
  X(DSRT_ROLE_PARAMS, params, flat,                                                            \
    "a flat, padded buffer of parameters (ZeRO stages 1 and 2)")                               \
  X(DSRT_ROLE_GRADS, grads, flat,                                                              \
    "a flat, padded buffer of gradients (ZeRO stage 1)")                                       \
  X(DSRT_ROLE_PARAMS_SHARDED, params_sharded, flat,                                            \
    "a flat parameter buffer kept as its shards (ZeRO 3)")                                     \
  X(DSRT_ROLE_KV_CACHE, kv_cache, cache,                                                       \
    "an attention's keys or values in pages, kept between generation calls (dsrt_cache_write)")
typedef enum dsrt_slot_role { DSRT_SLOT_ROLES(DSRT_ENUMERATOR_) } dsrt_slot_role;
DSRT_ENUM_NAMES_(DSRT_SLOT_ROLES, dsrt_slot_role_name, dsrt_slot_role_from_name)
/** The kind of a slot of `role` ("parameter", "buffer", "gradient", "state", "flat", "cache"),
 *  or NULL for a code that is not a role. */
static inline const char *dsrt_slot_role_kind(int32_t role) {
  switch (role) {
#define DSRT_SLOT_ROLE_KIND_(e, name, kind, ...)                                               \
  case e:                                                                                      \
    return #kind;
    DSRT_SLOT_ROLES(DSRT_SLOT_ROLE_KIND_)
#undef DSRT_SLOT_ROLE_KIND_
  }
  return NULL;
}

/** DeepSpeed's categories of a rank's model state (the log's "ranks" entries, ds-opt
 *  --memory-report): what a slot of each role counts as. */
typedef enum dsrt_state_category {
  DSRT_CATEGORY_PARAMETERS = 0,
  DSRT_CATEGORY_GRADIENTS,
  /** Moments, momentum and the fp32 masters of mixed precision. */
  DSRT_CATEGORY_OPTIMIZER_STATE,
  /** Buffers: not model state (ZeRO's formulas count trainable parameters). */
  DSRT_CATEGORY_BUFFERS,
  /** The loss scaler's scalars: none of the above. */
  DSRT_CATEGORY_NONE,
  /** Generation's key/value cache (not model state: it holds the requests' tokens). */
  DSRT_CATEGORY_KV_CACHE,
} dsrt_state_category;
static inline dsrt_state_category dsrt_slot_role_category(dsrt_slot_role role) {
  switch (role) {
  case DSRT_ROLE_PARAMETER:
  case DSRT_ROLE_PARAM_SHARD:
  case DSRT_ROLE_PARAMS:
  case DSRT_ROLE_PARAMS_SHARDED:
    return DSRT_CATEGORY_PARAMETERS;
  case DSRT_ROLE_GRAD:
  case DSRT_ROLE_GRAD_SHARD:
  case DSRT_ROLE_GRADS:
    return DSRT_CATEGORY_GRADIENTS;
  case DSRT_ROLE_EXP_AVG:
  case DSRT_ROLE_EXP_AVG_SQ:
  case DSRT_ROLE_MOMENTUM_BUFFER:
  case DSRT_ROLE_MASTER:
    return DSRT_CATEGORY_OPTIMIZER_STATE;
  case DSRT_ROLE_BUFFER:
    return DSRT_CATEGORY_BUFFERS;
  case DSRT_ROLE_LOSS_SCALE:
  case DSRT_ROLE_FOUND_INF:
    return DSRT_CATEGORY_NONE;
  case DSRT_ROLE_KV_CACHE:
    return DSRT_CATEGORY_KV_CACHE;
  }
  return DSRT_CATEGORY_NONE;
}

/** Declares slot `index` (0-based, dense) with its shape; allocates and zero-fills it. */
void dsrt_slot_define(dsrt_context *ctx, int32_t index, int32_t dtype, int32_t rank,
                      const int64_t *dims);
/** Declares slot `index` as a view of slot `base` from element `offset` (a member of a flat
 *  ZeRO buffer). A view, and a buffer with views, are pinned: dsrt_slot_set copies the value
 *  into them instead of rebinding, so the views keep sharing the buffer. */
void dsrt_slot_define_view(dsrt_context *ctx, int32_t index, int32_t base, int64_t offset,
                           int32_t dtype, int32_t rank, const int64_t *dims);
/** Bytes of arena storage the slot owns (0 for a view of a flat buffer). */
uint64_t dsrt_slot_storage_bytes(dsrt_context *ctx, int32_t index);
/** A view of the slot's current value (retained; free it like any tensor). */
dsrt_tensor *dsrt_slot_get(dsrt_context *ctx, int32_t index);
/** Makes `t` the slot's value (the slot retains t's storage; the old one is released). The
 *  shapes must agree. */
void dsrt_slot_set(dsrt_context *ctx, int32_t index, dsrt_tensor *t);

/*===--------------------------------------------------------------------===*
 * Memory spaces (ZeRO-Offload, ZeRO-Infinity). A tensor lives in the device arena (counted
 * against the budget), in host memory (counted apart: staging buffers, offloaded state and the
 * host optimizer's work), or, for a slot only, in this rank's NVMe swap file. Moves between
 * them run in call order on the context's transfer stream (a thread on the CPU) and return an
 * event that the compute stream waits for before reading the result; the event holds both
 * storages until it is released. On the CPU backend device and host are both host memory: the
 * budgets, the copies and the stream are real, so the same program runs on a GPU.
 *===--------------------------------------------------------------------===*/
/** Memory spaces, as X(ENUMERATOR, name, description); ds.memory_space and ds.move name them. */
#define DSRT_SPACES(X)                                                                         \
  X(DSRT_SPACE_DEVICE, device, "the device arena, counted against the budget")                 \
  X(DSRT_SPACE_HOST, host, "host memory (ZeRO-Offload's cpu), counted apart")                  \
  X(DSRT_SPACE_NVME, nvme, "this rank's swap file (ZeRO-Infinity's nvme), for slots only")
typedef enum dsrt_space { DSRT_SPACES(DSRT_ENUMERATOR_) } dsrt_space;
DSRT_ENUM_NAMES_(DSRT_SPACES, dsrt_space_name, dsrt_space_from_name)

/** The role of a mesh axis (a program descriptor's "mesh.axes" name them), as X(ENUMERATOR,
 *  name, description); the ds dialect's MeshAxis is generated from this list. */
#define DSRT_MESH_AXES(X)                                                                      \
  X(DSRT_AXIS_DP, dp, "data parallel: the ranks read different samples")                       \
  X(DSRT_AXIS_PP, pp, "pipeline parallel: the ranks hold different stages")                    \
  X(DSRT_AXIS_TP, tp, "tensor parallel: the ranks hold parts of the layers")                   \
  X(DSRT_AXIS_SP, sp, "sequence parallel: the ranks hold blocks of the sequence")              \
  X(DSRT_AXIS_EP, ep, "expert parallel: the ranks read different samples, hold different experts")
typedef enum dsrt_mesh_axis { DSRT_MESH_AXES(DSRT_ENUMERATOR_) } dsrt_mesh_axis;
DSRT_ENUM_NAMES_(DSRT_MESH_AXES, dsrt_mesh_axis_name, dsrt_mesh_axis_from_name)
/** Kinds of move, for dsrt_moved_bytes. */
typedef enum dsrt_move_kind {
  DSRT_MOVE_DEVICE_TO_HOST = 0,
  DSRT_MOVE_HOST_TO_DEVICE = 1,
  DSRT_MOVE_HOST_TO_NVME = 2,
  DSRT_MOVE_NVME_TO_HOST = 3,
} dsrt_move_kind;
/** A new tensor in host memory (4096-byte aligned, for O_DIRECT), counted in the host space. */
dsrt_tensor *dsrt_tensor_alloc_host(dsrt_context *ctx, int32_t dtype, int32_t rank,
                                    const int64_t *dims);
/** The space of `t`'s storage (constants: DSRT_SPACE_DEVICE). */
int32_t dsrt_tensor_space(const dsrt_tensor *t);
/** Copies `in` into `out` (same byte count, any two spaces but NVMe) on the transfer stream,
 *  after the compute stream's work so far. */
dsrt_event *dsrt_move(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *in);
/** Opens this rank's swap file of `bytes` in directory `dir` (DeepSpeed's nvme_path) for the
 *  NVMe slots: private to the process (unlinked at once, so it goes with the process however
 *  it ends), reserved in full. io_uring with O_DIRECT, `block_size`-byte requests, at most
 *  `queue_depth` in flight; where the kernel or the file system refuses either, pread/pwrite
 *  with a warning. Returns 0, or -1 with the cause, the path and the bytes in `err`. */
int32_t dsrt_nvme_open(dsrt_context *ctx, const char *dir, uint64_t bytes, int64_t block_size,
                       int32_t queue_depth, int32_t single_submit, char *err, size_t cap);
/** "io_uring+O_DIRECT", "io_uring", "pread/pwrite", or "" before dsrt_nvme_open. */
const char *dsrt_nvme_engine(dsrt_context *ctx);
/** Declares slot `index` in `space`: the device arena (as dsrt_slot_define), host memory, or
 *  the swap file (zero-filled). dsrt_slot_get and dsrt_slot_set of an NVMe slot read and write
 *  the file synchronously (loading, checkpoints); the program uses fetch and store. */
void dsrt_slot_define_in(dsrt_context *ctx, int32_t index, int32_t space, int32_t dtype,
                         int32_t rank, const int64_t *dims);
int32_t dsrt_slot_space(dsrt_context *ctx, int32_t index);
/** Reads NVMe slot `index` into host tensor `out` (from dsrt_tensor_alloc_host, the slot's
 *  shape) on the transfer stream; the event completes when `out` holds the value. */
dsrt_event *dsrt_slot_fetch(dsrt_context *ctx, int32_t index, dsrt_tensor *out);
/** Writes host tensor `t` into NVMe slot `index` on the transfer stream. */
dsrt_event *dsrt_slot_store(dsrt_context *ctx, int32_t index, const dsrt_tensor *t);
/** Bytes in `space` now and at most since the last dsrt_reset_peak (NVMe: the swap file's
 *  slots). */
uint64_t dsrt_space_bytes(dsrt_context *ctx, int32_t space);
uint64_t dsrt_space_peak_bytes(dsrt_context *ctx, int32_t space);
/** Bytes moved of one dsrt_move_kind since the context was created. */
uint64_t dsrt_moved_bytes(dsrt_context *ctx, int32_t kind);
/** Seconds the compute stream has waited for the transfer stream (the stall). */
double dsrt_transfer_wait_seconds(dsrt_context *ctx);

/*===--------------------------------------------------------------------===*
 * Tracing (ds-run --trace). While enabled, every runtime call is recorded as a span on its
 * stream (compute, transfer, each group's collectives), together with the site the program
 * named last: ds-lower-to-runtime calls dsrt_trace_site before each ds op's calls, with the
 * op's index into the metadata's "sites" (its name and source location in the model).
 *===--------------------------------------------------------------------===*/
/** The ds op whose runtime calls follow (an index into the metadata's "sites"). */
void dsrt_trace_site(dsrt_context *ctx, int32_t site);
/** Starts (1) or stops (0) recording; the recorded spans are kept until taken. */
void dsrt_trace_enable(dsrt_context *ctx, int32_t on);
/** A span of the caller's own on the compute stream (the driver's phases), from and to the
 *  times of dsrt_trace_now. */
void dsrt_trace_span(dsrt_context *ctx, const char *name, int64_t start_ns, int64_t end_ns);
/** Nanoseconds of the monotonic clock the spans use. */
int64_t dsrt_trace_now(void);
/** The spans recorded so far, as a JSON array of [stream, category, name, site, start_ns,
 *  dur_ns, detail] (category: kernel, collective, transfer, wait, copy or driver; site -1:
 *  none), in the order they ended; they are then forgotten. Writes at most `cap`
 *  bytes (NUL-terminated) and returns the full length: call with cap 0 for the size first;
 *  the spans are forgotten only by a call whose buffer held them all. */
size_t dsrt_trace_take(dsrt_context *ctx, char *buf, size_t cap);

/*===--------------------------------------------------------------------===*
 * Kernels. Stream-ordered: each call is enqueued on the context's compute stream; the CPU
 * backend runs it before returning. `out` arguments are allocated by the caller with the
 * result shape; attribute arguments follow the ds dialect's op of the same name.
 *===--------------------------------------------------------------------===*/

enum dsrt_unary_op {
  DSRT_NEG = 0, DSRT_EXP, DSRT_LOG, DSRT_SQRT, DSRT_RSQRT, DSRT_TANH, DSRT_SIGMOID,
  DSRT_RELU, DSRT_GELU_ERF, DSRT_GELU_TANH, DSRT_COS, DSRT_SIN,
};
enum dsrt_binary_op {
  DSRT_ADD = 0, DSRT_SUB, DSRT_MUL, DSRT_DIV, DSRT_POW, DSRT_MAX, DSRT_MIN,
  /** Backward helpers: out = dy * f'(x) with `a` = x (forward input), `b` = dy. */
  DSRT_GELU_ERF_GRAD, DSRT_GELU_TANH_GRAD,
};
enum dsrt_cmp_pred { DSRT_EQ = 0, DSRT_NE, DSRT_LT, DSRT_LE, DSRT_GT, DSRT_GE };
enum dsrt_reduce_kind { DSRT_SUM = 0, DSRT_MEAN, DSRT_AMAX };
enum dsrt_reduction { DSRT_REDUCTION_NONE = 0, DSRT_REDUCTION_MEAN, DSRT_REDUCTION_SUM };

void dsrt_fill(dsrt_context *ctx, dsrt_tensor *out, double value);
/** out = in (same numel; copies bytes). */
void dsrt_copy(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *in);
/** Element type conversion (same shape). */
void dsrt_convert(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *in);
/** Elementwise. In dsrt_unary, dsrt_binary and dsrt_where `out` may share its data with an
 *  operand of its own shape and type (the compiler writes over an operand that dies there):
 *  every device reads an element before writing it. */
void dsrt_unary(dsrt_context *ctx, int32_t op, dsrt_tensor *out, const dsrt_tensor *in);
/** Elementwise with PyTorch broadcasting (shapes aligned from the right). */
void dsrt_binary(dsrt_context *ctx, int32_t op, dsrt_tensor *out, const dsrt_tensor *a,
                 const dsrt_tensor *b);
void dsrt_cmp(dsrt_context *ctx, int32_t pred, dsrt_tensor *out, const dsrt_tensor *a,
              const dsrt_tensor *b);
void dsrt_where(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *cond,
                const dsrt_tensor *a, const dsrt_tensor *b);
/** Reduces the input dimensions whose bit is set in `dim_mask` (bit i = dim i). */
void dsrt_reduce(dsrt_context *ctx, int32_t kind, dsrt_tensor *out, const dsrt_tensor *in,
                 uint64_t dim_mask);
/** Softmax (or log-softmax with `log`) along `dim`. */
void dsrt_softmax(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *in, int64_t dim,
                  int32_t log);
/** dx from the forward output y and dy. */
void dsrt_softmax_grad(dsrt_context *ctx, dsrt_tensor *dx, const dsrt_tensor *y,
                       const dsrt_tensor *dy, int64_t dim, int32_t log);
/** Running sums along `dim` (torch.cumsum), from its end with `reverse` (the gradient);
 *  floats accumulate in double, integers in their own type. */
void dsrt_cumsum(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *in, int64_t dim,
                 int32_t reverse);
/** The `causal` argument of the attention kernels: none; query i sees keys j <= i; strictly,
 *  keys j < i (a striped ring's later blocks); and, for the ring alone, causal over a striped
 *  sequence (rank r of the group holds positions r, r + size, r + 2 size, ...). */
enum dsrt_causal {
  DSRT_CAUSAL_NONE = 0,
  DSRT_CAUSAL = 1,
  DSRT_CAUSAL_STRICT = 2,
  DSRT_CAUSAL_STRIPED = 3
};
/** Scaled dot-product attention in tiles (flash attention; no [L, S] tensor): `out`
 *  [B, Hq, L, Ev] = softmax(q k^T * scale + mask) v and `lse` [B, Hq, L] (f32) the rows'
 *  log-sum-exp of the scaled, masked scores, from q [B, Hq, L, E], k [B, Hk, S, E] and
 *  v [B, Hk, S, Ev] (Hk divides Hq: grouped-query heads), all of one float dtype. `mask` is NULL
 *  or a rank-4 i1 (keep where 1) or q-typed (added) tensor whose dimensions are 1 or those of
 *  [B, Hq, L, S]; `causal` a dsrt_causal (NONE, CAUSAL or STRICT). A row with no key has
 *  zero output and lse -inf. Computed in f32. */
void dsrt_attention(dsrt_context *ctx, dsrt_tensor *out, dsrt_tensor *lse, const dsrt_tensor *q,
                    const dsrt_tensor *k, const dsrt_tensor *v, const dsrt_tensor *mask,
                    double scale, int32_t causal);
/** dq, dk, dv of dsrt_attention from its operands, `out`, `lse` and dout, recomputing the
 *  probabilities tile by tile (dk, dv summed over the query heads of each key/value head). */
void dsrt_attention_grad(dsrt_context *ctx, dsrt_tensor *dq, dsrt_tensor *dk, dsrt_tensor *dv,
                         const dsrt_tensor *q, const dsrt_tensor *k, const dsrt_tensor *v,
                         const dsrt_tensor *mask, const dsrt_tensor *out, const dsrt_tensor *lse,
                         const dsrt_tensor *dout, double scale, int32_t causal);
/** Ring attention over `group` (ds.ring_attention): each rank holds block r (its group
 *  rank) of the sequence's q, k, v (f32, no mask); the k, v blocks go round the group in
 *  size steps (dsrt_send_recv to rank r+1, from rank r-1, overlapped with the kernel) and the
 *  partial results merge by their log-sum-exp into `out` and `lse` (the whole rows'). With
 *  `causal` DSRT_CAUSAL (blocks in sequence order), the rank's own block is causal, earlier
 *  blocks whole, later ones skipped; with DSRT_CAUSAL_STRIPED (rank r holds positions r,
 *  r + size, ...), the blocks of ranks up to r are causal and the later ones strictly so,
 *  which gives every rank the same work at every step. `ws`
 *  f32 of 2 * (numel(k) + numel(v)) + numel(out) + 3 * numel(lse) elements. */
void dsrt_ring_attention(dsrt_context *ctx, int32_t group, dsrt_tensor *out, dsrt_tensor *lse,
                         dsrt_tensor *ws, const dsrt_tensor *q, const dsrt_tensor *k,
                         const dsrt_tensor *v, double scale, int32_t causal);
/** dq, dk, dv of dsrt_ring_attention: each block's backward with the whole rows' `out` and
 *  `lse`; the k, v blocks travel with their gradients and come home after size exchanges.
 *  `ws` f32 of 5 * (numel(k) + numel(v)) + numel(q) elements. */
void dsrt_ring_attention_grad(dsrt_context *ctx, int32_t group, dsrt_tensor *dq,
                              dsrt_tensor *dk, dsrt_tensor *dv, dsrt_tensor *ws,
                              const dsrt_tensor *q, const dsrt_tensor *k, const dsrt_tensor *v,
                              const dsrt_tensor *out, const dsrt_tensor *lse,
                              const dsrt_tensor *dout, double scale, int32_t causal);
/** Generation's key/value cache in pages (vLLM's layout): `k_cache` [N, Hk, P, E] and
 *  `v_cache` [N, Hk, P, Ev] hold N pages of P positions each. Writes the keys k [B, Hk, T, E]
 *  and values v [B, Hk, T, Ev] of T new tokens of B sequences to their slots: `slots` [B, T]
 *  (i64) holds page * P + offset for each token, or a negative number for a padding token,
 *  which is not written. A slot past the cache ends the job. One dtype for k, v and caches. */
void dsrt_cache_write(dsrt_context *ctx, dsrt_tensor *k_cache, dsrt_tensor *v_cache,
                      const dsrt_tensor *k, const dsrt_tensor *v, const dsrt_tensor *slots);
/** Attention of new tokens against the paged cache (decoding, and prefill in chunks on top of
 *  a cached prefix): q [B, Hq, T, E] holds up to T new tokens of each of B sequences, the
 *  first q_lens[b] of them real ([B] i64; the rest padding, whose rows of `out` are zeros).
 *  Sequence b's cache holds context_lens[b] positions ([B] i64, its new tokens included: write
 *  them with dsrt_cache_write first), position j in page pages[b, j / P] ([B, maxPages] i64)
 *  at offset j % P. New token t sits at position context_lens[b] - q_lens[b] + t and sees
 *  positions 0 to its own (causal). out [B, Hq, T, Ev] = softmax(q k^T * scale) v, computed
 *  in f32 (16-bit operands widened, the result rounded once); Hk divides Hq (grouped-query
 *  heads: query head h reads key/value head h / (Hq / Hk)). */
void dsrt_paged_attention(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *q,
                          const dsrt_tensor *k_cache, const dsrt_tensor *v_cache,
                          const dsrt_tensor *pages, const dsrt_tensor *context_lens,
                          const dsrt_tensor *q_lens, double scale);
/** The next token of each of B sequences from its logits [B, V] (f32, bf16 or f16), as HF's
 *  `generate` chooses it: greedy (the first largest logit, as torch.argmax) where
 *  temperature[b] is 0; otherwise a draw from the softmax of logits / temperature[b] over the
 *  tokens HF's warpers keep, applied in HF's order: top_k[b] (0: all) keeps the logits at
 *  least the k-th largest (TopKLogitsWarper), then top_p[b] (1: all) drops the smallest whose
 *  probabilities, summed from the smallest up, stay within 1 - top_p, keeping at least the
 *  largest (TopPLogitsWarper). The draw's uniform number comes from (seeds[b], steps[b])
 *  alone (SplitMix64 of the pair), so a request draws the same tokens whatever else shares
 *  its batch; the token is the first, in vocabulary order, whose running probability passes
 *  it. tokens [B] i64; temperature and top_p [B] f32; top_k, seeds and steps [B] i64. A
 *  negative temperature or top_k, or a top_p outside (0, 1], ends the job. */
void dsrt_sample(dsrt_context *ctx, dsrt_tensor *tokens, const dsrt_tensor *logits,
                 const dsrt_tensor *temperature, const dsrt_tensor *top_k,
                 const dsrt_tensor *top_p, const dsrt_tensor *seeds, const dsrt_tensor *steps);
/** Layer norm over the trailing `norm_numel` elements; weight/bias may be NULL. */
void dsrt_layer_norm(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *x,
                     const dsrt_tensor *weight, const dsrt_tensor *bias, int64_t norm_numel,
                     double eps);
/** Gradients of layer norm, recomputing the statistics from x; dweight/dbias may be NULL. */
void dsrt_layer_norm_grad(dsrt_context *ctx, dsrt_tensor *dx, dsrt_tensor *dweight,
                          dsrt_tensor *dbias, const dsrt_tensor *x, const dsrt_tensor *weight,
                          const dsrt_tensor *dy, int64_t norm_numel, double eps);
/** Training batch norm over dim 1: out, the batch mean and the biased variance. */
void dsrt_batch_norm(dsrt_context *ctx, dsrt_tensor *out, dsrt_tensor *mean, dsrt_tensor *var,
                     const dsrt_tensor *x, const dsrt_tensor *weight, const dsrt_tensor *bias,
                     double eps);
void dsrt_batch_norm_grad(dsrt_context *ctx, dsrt_tensor *dx, dsrt_tensor *dweight,
                          dsrt_tensor *dbias, const dsrt_tensor *x, const dsrt_tensor *weight,
                          const dsrt_tensor *mean, const dsrt_tensor *var,
                          const dsrt_tensor *dy, double eps);
void dsrt_batch_norm_inference(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *x,
                               const dsrt_tensor *weight, const dsrt_tensor *bias,
                               const dsrt_tensor *mean, const dsrt_tensor *var, double eps);
/** Batched matmul with broadcast batch dims; `trans_a`/`trans_b` use the operand's last two
 *  dims transposed (the operand tensor is given untransposed). */
void dsrt_matmul(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *a,
                 const dsrt_tensor *b, int32_t trans_a, int32_t trans_b);
/** f32 products on strided views of three tensors' elements (the compiler's slices, reshapes
 *  and transposes around a matmul, none copied): `views` holds b0, b1, M, N, K, then for a,
 *  b and out each {offset, stride of batch dim 0, of batch dim 1, of rows, of columns}, in
 *  elements; the products are out[i, j] (M x N) = sum_k a[i, k] (M x K) b[k, j] (K x N) for
 *  each of the b0 x b1 batches, times `alpha` (rounded to f32; the compiler passes a power of
 *  two, which scales each sum exactly: attention's 1/sqrt(head_dim) for 64 dims). Of each
 *  matrix the row or the column stride is 1; every element read or written lies inside its
 *  tensor. */
void dsrt_matmul_view(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *a,
                      const dsrt_tensor *b, const int64_t *views, double alpha);
/** out[..., o] = sum_i x[..., i] w[o, i] (+ bias[o]); bias may be NULL. */
void dsrt_linear(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *x,
                 const dsrt_tensor *w, const dsrt_tensor *bias);
/** dw[o, i] = sum over leading dims of dy[..., o] x[..., i]; db[o] = sum dy[..., o] (may be
 *  NULL). */
void dsrt_linear_grad_weight(dsrt_context *ctx, dsrt_tensor *dw, dsrt_tensor *db,
                             const dsrt_tensor *x, const dsrt_tensor *dy);
void dsrt_embedding(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *weight,
                    const dsrt_tensor *indices);
/** dweight (zeroed here) += scatter of dy rows; rows equal to padding_idx (if >= 0) skipped. */
void dsrt_embedding_grad(dsrt_context *ctx, dsrt_tensor *dweight, const dsrt_tensor *dy,
                         const dsrt_tensor *indices, int64_t padding_idx);
/** The k largest (with `smallest`, smallest) of each row of `in` [..., n] along its last
 *  dimension, in that order, ties by the lower index, NaN the largest: `values` [..., k] of
 *  in's type and their `indices` [..., k] (i64), as torch.topk(in, k, largest=!smallest) (a
 *  router's choice of experts; with k = n, a stable sort). f32 or i64. */
void dsrt_top_k(dsrt_context *ctx, dsrt_tensor *values, dsrt_tensor *indices,
                const dsrt_tensor *in, int32_t smallest);
/** Flags of the routed experts' kernels (dsrt_expert_linear, dsrt_swiglu, dsrt_swiglu_grad),
 *  or'ed. */
enum dsrt_expert_flag {
  /** dsrt_expert_linear: the weight is [E, in, out] (HF's transposed experts). */
  DSRT_EXPERT_TRANSPOSED = 1,
  /** The rows of negative id (no expert takes them) are left as they are in the result, not
   *  zeroed: the compiler sets it where every reader of the result skips them (ds's
   *  `unrouted_undefined`). Rows of an id past the experts stay zeros. */
  DSRT_EXPERT_UNROUTED_UNDEFINED = 2,
};
/** Each row through its expert's linear map: out[n] = w[ids[n]] x[n] for x [N, in], w
 *  [E, out, in] (with DSRT_EXPERT_TRANSPOSED in `flags`, [E, in, out] and out[n] = x[n]
 *  w[ids[n]]) and ids [N] (i64 or i32). A row whose id is outside [0, E) gets zeros (a token
 *  another rank's experts take; of negative id, left unwritten with
 *  DSRT_EXPERT_UNROUTED_UNDEFINED). The rows
 *  of each expert are gathered and multiplied as one product: no tensor of every row's weights
 *  exists. f32. */
void dsrt_expert_linear(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *x,
                        const dsrt_tensor *w, const dsrt_tensor *ids, int32_t flags);
/** The weight gradient of dsrt_expert_linear: dw[e] = sum over the rows n with ids[n] = e of
 *  dy[n] x[n]^T ([E, out, in]; with `transposed`, x[n] dy[n]^T in [E, in, out]); dw is
 *  overwritten, an expert with no rows gets zeros. f32. */
void dsrt_expert_linear_grad_weight(dsrt_context *ctx, dsrt_tensor *dw, const dsrt_tensor *x,
                                    const dsrt_tensor *dy, const dsrt_tensor *ids,
                                    int32_t transposed);
/** SwiGLU of a gate-and-up tensor x [..., 2F]: out[..., j] = silu(g) * u with g = x[..., j],
 *  u = x[..., F + j] (out [..., F]). With `rows` (i64 or i32, or NULL), x is [R, 2F] and a row
 *  whose id is negative is zeros in out (left unwritten with DSRT_EXPERT_UNROUTED_UNDEFINED in
 *  `flags`), its values not read (padding past an expert-parallel rank's received rows, a row
 *  routed to no expert). f32. */
void dsrt_swiglu(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *x,
                 const dsrt_tensor *rows, int32_t flags);
/** The input gradient of dsrt_swiglu: dx [..., 2F] from x and dy [..., F], with s = sigmoid(g):
 *  dx[..., j] = dy u s (1 + g (1 - s)) and dx[..., F + j] = dy g s; rows and flags as
 *  dsrt_swiglu's. f32. */
void dsrt_swiglu_grad(dsrt_context *ctx, dsrt_tensor *dx, const dsrt_tensor *x,
                      const dsrt_tensor *dy, const dsrt_tensor *rows, int32_t flags);
/** Capacity-based token dropping (DeepSpeed-MoE's top1gating without random token selection
 *  and top2gating): `ids` [T choices] (i64 or i32) are each token's `choices` experts,
 *  consecutive; taken choice by choice (every token's first in token order, then every second,
 *  ...), each of the `experts` keeps its first `capacity` rows and the later ones are written
 *  -1 in `out` (ids' shape and dtype). Ids outside [0, experts) are copied and take no place. */
void dsrt_expert_capacity(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *ids,
                          int64_t experts, int64_t choices, int64_t capacity);
void dsrt_cross_entropy(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *logits,
                        const dsrt_tensor *target, int64_t ignore_index, int32_t reduction,
                        double label_smoothing);
void dsrt_cross_entropy_grad(dsrt_context *ctx, dsrt_tensor *dlogits,
                             const dsrt_tensor *logits, const dsrt_tensor *target,
                             const dsrt_tensor *dy, int64_t ignore_index, int32_t reduction,
                             double label_smoothing);
/** The summed cross-entropy of x [N, D] @ w[V, D]^T (+ bias [V]) against target [N] (i64/i32),
 *  `tiles` tiles of rows at a time: one tile's logits live in `ws` (f32, ceil(N / tiles) * V + 1
 *  elements), never all N rows' (a tiled LM head and loss). f32 only; built from the
 *  linear and cross-entropy kernels, so every device runs it. */
void dsrt_linear_cross_entropy(dsrt_context *ctx, dsrt_tensor *loss, dsrt_tensor *ws,
                               const dsrt_tensor *x, const dsrt_tensor *w,
                               const dsrt_tensor *bias, const dsrt_tensor *target, int64_t tiles,
                               int64_t ignore_index, double label_smoothing);
/** Its gradients dx, dw, db (db: zeros without a bias) for the loss's gradient dy, each tile's
 *  logits recomputed in `ws` (f32, 2 * ceil(N / tiles) * V + V * D + V elements). */
void dsrt_linear_cross_entropy_grad(dsrt_context *ctx, dsrt_tensor *dx, dsrt_tensor *dw,
                                    dsrt_tensor *db, dsrt_tensor *ws, const dsrt_tensor *x,
                                    const dsrt_tensor *w, const dsrt_tensor *bias,
                                    const dsrt_tensor *target, const dsrt_tensor *dy,
                                    int64_t tiles, int64_t ignore_index,
                                    double label_smoothing);
/** out dim i = in dim perm[i]. */
void dsrt_transpose(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *in,
                    const int64_t *perm);
void dsrt_broadcast(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *in);
/** out = in[..., start : start + step * out.dims[dim] : step, ...] along `dim`. */
void dsrt_slice(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *in, int64_t dim,
                int64_t start, int64_t step);
/** out[..., start::step (in.dims[dim] entries), ...] = in along `dim`; the rest of out is
 *  left as it is (concat, slice gradients). */
void dsrt_insert_slice(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *in,
                       int64_t dim, int64_t start, int64_t step);
/** Scale tensor for dropout: each element is 0 with probability p, else 1 / (1 - p). */
void dsrt_dropout_mask(dsrt_context *ctx, dsrt_tensor *out, double p);

void dsrt_conv2d(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *x,
                 const dsrt_tensor *w, const dsrt_tensor *bias, int64_t stride_h,
                 int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dil_h, int64_t dil_w,
                 int64_t groups);
void dsrt_conv2d_grad_input(dsrt_context *ctx, dsrt_tensor *dx, const dsrt_tensor *dy,
                            const dsrt_tensor *w, int64_t stride_h, int64_t stride_w,
                            int64_t pad_h, int64_t pad_w, int64_t dil_h, int64_t dil_w,
                            int64_t groups);
/** dbias may be NULL. */
void dsrt_conv2d_grad_weight(dsrt_context *ctx, dsrt_tensor *dw, dsrt_tensor *dbias,
                             const dsrt_tensor *x, const dsrt_tensor *dy, int64_t stride_h,
                             int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dil_h,
                             int64_t dil_w, int64_t groups);
void dsrt_max_pool2d(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *x, int64_t kh,
                     int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh,
                     int64_t dw);
/** dx (zeroed here) gets dy at the first maximum of each window, recomputed from x. */
void dsrt_max_pool2d_grad(dsrt_context *ctx, dsrt_tensor *dx, const dsrt_tensor *x,
                          const dsrt_tensor *dy, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                          int64_t ph, int64_t pw, int64_t dh, int64_t dw);
void dsrt_avg_pool2d(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *x, int64_t kh,
                     int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                     int32_t count_include_pad);
void dsrt_avg_pool2d_grad(dsrt_context *ctx, dsrt_tensor *dx, const dsrt_tensor *dy,
                          int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                          int64_t pw, int32_t count_include_pad);
/** Over the last two dims of a rank-3 or rank-4 tensor, PyTorch's adaptive windows. */
void dsrt_adaptive_avg_pool2d(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *x);
void dsrt_adaptive_avg_pool2d_grad(dsrt_context *ctx, dsrt_tensor *dx, const dsrt_tensor *dy);

/** One AdamW step over every element (the ds.adamw_update op): outputs may alias the
 *  corresponding inputs (in-place update). step_size, bias_correction2_sqrt and decay are f32
 *  scalars; beta1 is an f64 scalar. */
void dsrt_adamw_update(dsrt_context *ctx, dsrt_tensor *param_out, dsrt_tensor *exp_avg_out,
                       dsrt_tensor *exp_avg_sq_out, const dsrt_tensor *param,
                       const dsrt_tensor *grad, const dsrt_tensor *exp_avg,
                       const dsrt_tensor *exp_avg_sq, const dsrt_tensor *step_size,
                       const dsrt_tensor *bias_correction2_sqrt, const dsrt_tensor *decay,
                       const dsrt_tensor *beta1, double beta2, double eps);

/*===--------------------------------------------------------------------===*
 * The training driver shared by ds-run (JIT) and compiled executables
 *===--------------------------------------------------------------------===*/

/** The precision a program trains in (its descriptor's "precision"), as X(ENUMERATOR, name,
 *  description). */
#define DSRT_PRECISIONS(X)                                                                     \
  X(DSRT_PRECISION_FP32, fp32, "fp32 parameters, gradients and optimizer state")              \
  X(DSRT_PRECISION_BF16, bf16, "bf16 parameters and activations with fp32 masters")           \
  X(DSRT_PRECISION_FP16, fp16, "fp16 with fp32 masters and a dynamic or static loss scale")
typedef enum dsrt_precision { DSRT_PRECISIONS(DSRT_ENUMERATOR_) } dsrt_precision;
DSRT_ENUM_NAMES_(DSRT_PRECISIONS, dsrt_precision_name, dsrt_precision_from_name)

/** The learning-rate schedule of a program (its descriptor's "lr.schedule"): DeepSpeed's
 *  schedules (deepspeed/runtime/lr_schedules.py), as X(ENUMERATOR, name, description). */
#define DSRT_LR_SCHEDULES(X)                                                                   \
  X(DSRT_LR_CONSTANT, constant, "no scheduler: the optimizer's lr at every step")             \
  X(DSRT_LR_WARMUP, warmup, "WarmupLR: warm-up from a minimum to a maximum, then flat")       \
  X(DSRT_LR_WARMUP_DECAY, warmup_decay, "WarmupDecayLR: warm-up, then linear decay to 0")     \
  X(DSRT_LR_WARMUP_COSINE, warmup_cosine, "WarmupCosineLR: warm-up, then a cosine decay")     \
  X(DSRT_LR_ONE_CYCLE, one_cycle, "OneCycle: lr up and down once (momentum the other way)")   \
  X(DSRT_LR_RANGE_TEST, range_test, "LRRangeTest: lr growing linearly or in stairs")
typedef enum dsrt_lr_schedule { DSRT_LR_SCHEDULES(DSRT_ENUMERATOR_) } dsrt_lr_schedule;
DSRT_ENUM_NAMES_(DSRT_LR_SCHEDULES, dsrt_lr_schedule_name, dsrt_lr_schedule_from_name)

/** The entry points and description of one compiled training step. */
typedef struct dsrt_program {
  /** JSON: {"inputs":[{name,dtype,dims}], "slots":[{name,kind,dtype,dims,aliases}],
   *  "config":{...DeepSpeed config...}, "plan":{...}}. */
  const char *metadata;
  /** Defines every slot (dsrt_slot_define), in the metadata's order. */
  void (*init_slots)(dsrt_context *ctx);
  /** Forward and backward of one micro-batch: accumulates gradients into their slots and
   *  returns the loss (a new scalar tensor the caller frees). `inputs` follow the metadata. */
  dsrt_tensor *(*micro_step)(dsrt_context *ctx, dsrt_tensor **inputs);
  /** The optimizer update from the accumulated gradients, which it then zeroes. `lr` (the
   *  main group's), `step` and `aux_lr` (Muon's AdamW group) are f32 scalars; `beta1` is the
   *  f64 Adam beta1 of this step (scheduled by OneCycle's cycle_momentum). */
  void (*optimizer_step)(dsrt_context *ctx, dsrt_tensor *lr, dsrt_tensor *step,
                         dsrt_tensor *beta1, dsrt_tensor *aux_lr);
} dsrt_program;

/** Makes idle OpenMP threads sleep instead of spin: when OMP_WAIT_POLICY is unset, sets it to
 *  PASSIVE and re-executes /proc/self/exe with `argv` (OpenMP reads it only at start-up). Call
 *  first thing in main. */
void dsrt_ensure_passive_wait(char **argv);

/** Runs training with ds-run's command-line flags; returns the process exit code. */
int dsrt_driver_main(int argc, char **argv, const dsrt_program *program);
/** A training session: `program` joined to its rank group, its slots defined and its weights
 *  loaded (or a checkpoint resumed), stepped by the caller (the Python package's engine).
 *  `argv[1..argc)` are ds-run's flags but --data, --tokens and --steps (--weights FILE or
 *  --resume DIR; --device, --device-memory, --threads, --log, --comm-timeout, --trace...);
 *  every rank opens its session together. On failure returns null with the cause (the same on
 *  every rank) in `err`. Nothing is printed but the progress lines (stderr, every
 *  steps_per_print steps). */
typedef struct dsrt_session dsrt_session;
dsrt_session *dsrt_session_open(const dsrt_program *program, int argc, char **argv, char *err,
                                size_t cap);
void dsrt_session_close(dsrt_session *s);
dsrt_context *dsrt_session_context(dsrt_session *s);
/** The step the next dsrt_session_begin_step starts (1 + the steps done), and its lr. */
int64_t dsrt_session_next_step(dsrt_session *s);
double dsrt_session_next_lr(dsrt_session *s);
/** The learning rate the next step applies, in place of the compiled schedule's (a caller's own
 *  scheduler: DeepSpeed's client lr_scheduler, HF's get_scheduler); Muon's AdamW group keeps
 *  its ratio to the main group's. Applies to that step only. */
void dsrt_session_set_lr(dsrt_session *s, double lr);
/** Starts a step: its micro-step calls follow, then dsrt_session_end_step. */
void dsrt_session_begin_step(dsrt_session *s);
/** One call of the micro-step (forward and backward of one micro-batch, or a pipeline's
 *  whole schedule of the step's micro-batches) on `inputs`: host memory, contiguous, of the
 *  metadata's dtypes and dims, one per input per micro-batch of the call (on the CPU read in
 *  place, never copied). Writes the call's losses (one per micro-batch) to `losses`. */
void dsrt_session_call(dsrt_session *s, const void *const *inputs, float *losses);
/** Ends the step: the optimizer update from the accumulated gradients, fp16's scaler, the log
 *  line. `loss` gets the mean over every data-parallel rank's micro-batches, `lr` the step's
 *  learning rate, `skipped` whether fp16 skipped the update. 0, or 1 with the cause in `err`
 *  (on every rank). */
int32_t dsrt_session_end_step(dsrt_session *s, float *loss, double *lr, int32_t *skipped,
                              char *err, size_t cap);
/** Saves a checkpoint after the last ended step into `dir` (every rank writes its own part),
 *  loads `dir`'s latest (or DIR/TAG) so that the next step continues it, or writes the fp32
 *  state_dict to `path` (rank 0 writes). 0, or 1 with the cause in `err` (on every rank). */
/** An agreement point of the caller's: `error` is this rank's failure (NULL or "" if none).
 *  0 when no rank failed, else 1 with the lowest failing rank's message in `err` (so that a
 *  check one rank's caller makes fails every rank, none left waiting in a collective). */
int32_t dsrt_session_agree(dsrt_session *s, const char *error, char *err, size_t cap);
/** Every rank's `bytes` bytes at `mine`, in rank order, into `out` (world size x bytes): the
 *  caller's small exchanges (HF's token counts across ranks). Every rank calls it. */
void dsrt_session_all_gather(dsrt_session *s, const void *mine, size_t bytes, void *out);
int32_t dsrt_session_save(dsrt_session *s, const char *dir, char *err, size_t cap);
int32_t dsrt_session_load(dsrt_session *s, const char *dir, char *err, size_t cap);
int32_t dsrt_session_export_weights(dsrt_session *s, const char *path, char *err, size_t cap);

/** What ds-run --probe-bandwidth measures: bytes/s and FLOP/s per rank (each the average over
 *  the job's ranks, measured all at once), seconds. */
typedef struct dsrt_probe_rates {
  int32_t rank, ranks;
  double d2h, h2d;                         /* the transfer stream's moves */
  double memory;                           /* an arena copy's reads plus writes */
  double flops_f32, flops_bf16, flops_f16; /* a 1024^3 product on the compute threads */
  double link_bandwidth, link_latency;     /* one ring step between ranks (0 with one rank) */
  double nvme_write, nvme_read;            /* the swap file, 256 MiB per transfer */
  char nvme_engine[32];
} dsrt_probe_rates;
/** Measures this machine (ds-run --probe-bandwidth DIR): the offload tiers (device<->host
 *  moves, NVMe writes and reads of a swap file in `dir`), the compute rates (memory copy, GEMMs)
 *  with `threads` compute threads (0: the default) and, under mpirun, the collectives' link
 *  between the ranks (every rank calls it). Returns 0, or 1 with the cause in `err`. */
int dsrt_probe_measure(const char *dir, int32_t threads, dsrt_probe_rates *out, char *err,
                       size_t cap);
/** Prints `r` (measured with NVMe in `dir`) as ds-opt's --rates flag on stdout, what was
 *  probed on stderr. */
void dsrt_probe_print(const dsrt_probe_rates *r, const char *dir);
/** dsrt_probe_measure, then dsrt_probe_print on rank 0; returns the exit code (the form
 *  ds-run --probe-bandwidth had before the cluster file). */
int dsrt_probe_bandwidth(const char *dir, int32_t threads);

#ifdef __cplusplus
}
#endif

#endif /* DSRT_DSRT_H */

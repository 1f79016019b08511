//===- RuntimeABI.h - the runtime's C ABI (dsrt.h) as the lowering calls it -===//
//
// The compiled program calls the runtime through dsrt.h, and this header is the only place
// the lowering learns that ABI: it includes dsrt.h itself. Every runtime function the
// lowering calls is named once in DS_RUNTIME_FUNCTIONS; its LLVM signature is derived from
// its declaration in dsrt.h, and each argument of a call is a typed value (Arg<T>, T the C
// type of the parameter), so a call that disagrees with dsrt.h in the number or the types of
// its arguments does not compile. Codes (dtypes, opcodes, spaces) are dsrt.h's enums.
//
#ifndef DS_CONVERSION_DSTORUNTIME_RUNTIMEABI_H
#define DS_CONVERSION_DSTORUNTIME_RUNTIMEABI_H

#include "dsrt/dsrt.h"

#include "ds/IR/DSDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Value.h"
#include "llvm/Support/ErrorHandling.h"

#include <type_traits>

namespace mlir::ds::runtime {

/// An argument of a runtime call before it is emitted: a value of the lowered program, or a
/// constant (an IntegerAttr or FloatAttr, an i64 array's DenseElementsAttr, or a UnitAttr for
/// a null pointer) that the call materializes in argument order, so that the emitted IR does
/// not depend on the order in which C++ evaluates a call's arguments.
struct Operand {
  Value value;
  Attribute constant;
};

/// An operand of the lowered program that has C type `T` in the runtime's ABI.
template <class T> class Arg {
public:
  Arg() = default;
  explicit Arg(Value v) : op{v, {}} {}
  explicit Arg(Attribute constant) : op{{}, constant} {}
  /// A `U *` passes where dsrt.h takes a `const U *`.
  template <class U, class P = T,
            std::enable_if_t<std::is_pointer_v<P> && std::is_pointer_v<U> &&
                                 !std::is_same_v<P, U> &&
                                 std::is_same_v<P, const std::remove_pointer_t<U> *>,
                             int> = 0>
  Arg(Arg<U> other) : op(other.operand()) {}
  const Operand &operand() const { return op; }
  /// The emitted value (a call's result, a lowered tensor). A constant has none until the
  /// call that takes it materializes it.
  operator Value() const {
    if (op.constant)
      llvm::report_fatal_error("ds-lower-to-runtime: a constant argument used as a value");
    return op.value;
  }
  explicit operator bool() const { return op.value || op.constant; }

private:
  Operand op;
};

/// A null pointer, which passes for any pointer parameter (an absent optional tensor).
struct NullArg {
  Attribute unit;
  template <class T, std::enable_if_t<std::is_pointer_v<T>, int> = 0> operator Arg<T>() const {
    return Arg<T>(unit);
  }
};

/// The LLVM type of C type `T` as the runtime's ABI passes it (x86-64 System V: every
/// pointer is one !llvm.ptr, enums and integers their width, double f64).
template <class T> Type llvmTypeOf(MLIRContext *ctx) {
  if constexpr (std::is_void_v<T>)
    return LLVM::LLVMVoidType::get(ctx);
  else if constexpr (std::is_pointer_v<T>)
    return LLVM::LLVMPointerType::get(ctx);
  else if constexpr (std::is_same_v<T, double>)
    return Float64Type::get(ctx);
  else {
    static_assert(std::is_integral_v<T> || std::is_enum_v<T>,
                  "a dsrt.h parameter type the lowering cannot pass");
    return IntegerType::get(ctx, 8 * sizeof(T));
  }
}

/// `given` as the Arg<T> of a parameter: an implicit conversion only (Arg<T>, a `U *` for a
/// `const U *`, NullArg for any pointer), so an argument of another type does not compile.
template <class T> Arg<T> parameter(Arg<T> given) { return given; }

/// One runtime function: its name and, from its dsrt.h declaration, its signature.
template <class F> struct Function;
template <class R, class... P> struct Function<R(P...)> {
  const char *name;
  using Result = R;
  static constexpr size_t arity = sizeof...(P);
  LLVM::LLVMFunctionType type(MLIRContext *ctx) const {
    return LLVM::LLVMFunctionType::get(llvmTypeOf<R>(ctx), {llvmTypeOf<P>(ctx)...});
  }
  /// The call's arguments, each converted to its parameter's Arg type (a compile error when
  /// one does not convert).
  template <class... G> static SmallVector<Operand> arguments(G &&...given) {
    static_assert(sizeof...(G) == sizeof...(P),
                  "wrong number of arguments for this dsrt.h function");
    return {parameter<P>(std::forward<G>(given)).operand()...};
  }
};

// Every runtime function the compiled program calls (see dsrt.h for what each does).
#define DS_RUNTIME_FUNCTIONS(X)                                                              \
  X(dsrt_tensor_alloc) X(dsrt_tensor_alloc_host) X(dsrt_tensor_borrow) X(dsrt_tensor_view)    \
  X(dsrt_tensor_view_at) X(dsrt_tensor_free) X(dsrt_event_wait) X(dsrt_event_release)         \
  X(dsrt_comm_coordinate) X(dsrt_comm_chunk) X(dsrt_all_reduce) X(dsrt_all_gather)            \
  X(dsrt_reduce_scatter) X(dsrt_all_to_all) X(dsrt_send_recv) X(dsrt_slot_define)             \
  X(dsrt_slot_define_view) X(dsrt_slot_define_in) X(dsrt_slot_get) X(dsrt_slot_set)           \
  X(dsrt_slot_fetch) X(dsrt_slot_store) X(dsrt_move) X(dsrt_trace_site) X(dsrt_fill)          \
  X(dsrt_copy) X(dsrt_convert) X(dsrt_unary) X(dsrt_binary) X(dsrt_cmp) X(dsrt_where)         \
  X(dsrt_reduce) X(dsrt_cumsum) X(dsrt_softmax) X(dsrt_softmax_grad) X(dsrt_layer_norm)       \
  X(dsrt_layer_norm_grad) X(dsrt_attention) X(dsrt_attention_grad) X(dsrt_batch_norm)       \
  X(dsrt_batch_norm_grad) X(dsrt_ring_attention) X(dsrt_ring_attention_grad)                  \
  X(dsrt_batch_norm_inference) X(dsrt_matmul) X(dsrt_matmul_view) X(dsrt_linear)              \
  X(dsrt_linear_grad_weight) X(dsrt_top_k) X(dsrt_expert_linear)                              \
  X(dsrt_expert_linear_grad_weight) X(dsrt_expert_capacity) X(dsrt_expert_route)              \
  X(dsrt_expert_dispatch) X(dsrt_expert_combine) X(dsrt_swiglu) X(dsrt_swiglu_grad)           \
  X(dsrt_embedding) X(dsrt_embedding_grad) X(dsrt_cross_entropy)                              \
  X(dsrt_cross_entropy_grad) X(dsrt_linear_cross_entropy) X(dsrt_linear_cross_entropy_grad)   \
  X(dsrt_transpose) X(dsrt_broadcast) X(dsrt_slice)                \
  X(dsrt_insert_slice) X(dsrt_dropout_mask) X(dsrt_conv2d) X(dsrt_conv2d_grad_input)          \
  X(dsrt_conv2d_grad_weight) X(dsrt_max_pool2d) X(dsrt_max_pool2d_grad) X(dsrt_avg_pool2d)    \
  X(dsrt_avg_pool2d_grad) X(dsrt_adaptive_avg_pool2d) X(dsrt_adaptive_avg_pool2d_grad)        \
  X(dsrt_adamw_update) X(dsrt_cache_write) X(dsrt_paged_attention) X(dsrt_sample)

/// `fn::dsrt_fill` and so on: the functions of DS_RUNTIME_FUNCTIONS.
namespace fn {
#define DS_RUNTIME_FUNCTION(name) inline constexpr Function<decltype(::name)> name{#name};
DS_RUNTIME_FUNCTIONS(DS_RUNTIME_FUNCTION)
#undef DS_RUNTIME_FUNCTION
} // namespace fn

/// The ds dialect's roles and spaces are generated from dsrt.h's lists (DSRuntimeEnums.td):
/// the same values.
inline dsrt_slot_role role(SlotRole r) { return static_cast<dsrt_slot_role>(r); }
inline dsrt_space space(MemorySpace s) { return static_cast<dsrt_space>(s); }

using Tensor = Arg<dsrt_tensor *>;
using Context = Arg<dsrt_context *>;
using Event = Arg<dsrt_event *>;

} // namespace mlir::ds::runtime

#endif // DS_CONVERSION_DSTORUNTIME_RUNTIMEABI_H

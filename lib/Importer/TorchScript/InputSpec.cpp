//===- InputSpec.cpp - parsing of --input NAME=TYPE ------------------------===//
#include "ds/Importer/TorchScript.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

using namespace mlir;

FailureOr<ds::InputSpec> mlir::ds::parseInputSpec(llvm::StringRef spec, MLIRContext *ctx) {
  Location loc = UnknownLoc::get(ctx);
  auto [name, typeText] = spec.split('=');
  name = name.trim();
  typeText = typeText.trim();
  auto fail = [&]() {
    return emitError(loc) << "malformed --input '" << spec << "': ";
  };
  if (name.empty() || !spec.contains('='))
    return fail() << "expected NAME=TYPE, e.g. --input idx=tensor<8x128xi64>", failure();
  Type type;
  {
    // Rephrase the parser's message: the user wrote a flag, not an MLIR file.
    ScopedDiagnosticHandler silence(ctx, [](Diagnostic &) { return success(); });
    size_t read = 0;
    type = parseType(typeText, ctx, &read);
    if (type && read != typeText.size())
      type = {};
  }
  auto tensor = dyn_cast_or_null<RankedTensorType>(type);
  if (!tensor)
    return fail() << "'" << typeText
                  << "' is not an MLIR tensor type (expected e.g. tensor<8x128xi64> or "
                     "tensor<8x3x32x32xf32>)",
           failure();
  if (!tensor.hasStaticShape())
    return fail() << "the shape must be static (every dimension a number)", failure();
  Type et = tensor.getElementType();
  if (!et.isIntOrFloat())
    return fail() << "element type " << et << " is not an integer or float type", failure();
  return InputSpec{name.str(), tensor};
}

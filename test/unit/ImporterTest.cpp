//===- ImporterTest.cpp - unit tests of the TorchScript importer library ---===//
#include "ds/Importer/TorchScript.h"
#include "ds/IR/DSOps.h"
#include "ds/InitAll.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>
#include <torch/script.h>

#include <cstdio>
#include <fstream>

using namespace mlir;

namespace {
class ImporterTest : public ::testing::Test {
protected:
  ImporterTest() {
    DialectRegistry registry;
    ds::registerAllDialects(registry);
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
    handler = std::make_unique<ScopedDiagnosticHandler>(&ctx, [this](Diagnostic &d) {
      errors += d.str() + "\n";
      return success();
    });
  }

  /// A module built in C++ alone: y = relu(x @ w^T + b), loss = mean(y * y) + scale.
  std::string saveTinyModule(bool training) {
    torch::jit::Module m("Tiny");
    m.register_parameter("w", torch::arange(12, torch::kFloat).reshape({3, 4}).requires_grad_(), false);
    m.register_parameter("b", torch::ones({3}).requires_grad_(), false);
    m.register_buffer("scale", torch::full({}, 0.5));
    m.define(R"(
      def forward(self, x):
          y = torch.relu(torch.linear(x, self.w, self.b))
          return (y, (y * y).mean() + self.scale)
    )");
    m.train(training);
    std::string path = ::testing::TempDir() + "/tiny.pt";
    m.save(path);
    return path;
  }

  MLIRContext ctx;
  std::string errors;
  std::unique_ptr<ScopedDiagnosticHandler> handler;
};
} // namespace

TEST_F(ImporterTest, ParsesInputSpecs) {
  auto spec = ds::parseInputSpec("idx=tensor<8x128xi64>", &ctx);
  ASSERT_TRUE(succeeded(spec));
  EXPECT_EQ(spec->name, "idx");
  EXPECT_EQ(spec->type.getShape(), (llvm::ArrayRef<int64_t>{8, 128}));
  EXPECT_TRUE(spec->type.getElementType().isInteger(64));
}

TEST_F(ImporterTest, RejectsMalformedInputSpecs) {
  for (const char *bad : {"idx", "=tensor<8xf32>", "x=tensor<8xfoo>", "x=tensor<?x8xf32>",
                          "x=f32", "x=tensor<8xf32> junk", "x=tensor<8xcomplex<f32>>"}) {
    errors.clear();
    EXPECT_TRUE(failed(ds::parseInputSpec(bad, &ctx))) << bad;
    EXPECT_NE(errors.find("malformed --input"), std::string::npos) << errors;
  }
}

TEST_F(ImporterTest, ListsSupportedOpsSorted) {
  std::vector<std::string> ops = ds::supportedTorchOps();
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
  for (const char *op : {"aten::linear", "aten::batch_norm", "aten::cross_entropy_loss",
                         "aten::relu_", "aten::_convolution"})
    EXPECT_NE(std::find(ops.begin(), ops.end(), op), ops.end()) << op;
}

TEST_F(ImporterTest, ImportsAModuleBuiltInCpp) {
  std::string path = saveTinyModule(/*training=*/true);
  ASSERT_TRUE(ds::looksLikeTorchScriptArchive(path));
  ds::TorchScriptImportOptions options;
  options.inputs.push_back(*ds::parseInputSpec("x=tensor<2x4xf32>", &ctx));
  options.weightsPath = ::testing::TempDir() + "/tiny.safetensors";
  OwningOpRef<ModuleOp> module = ds::importTorchScript(path, options, &ctx);
  ASSERT_TRUE(module) << errors;

  std::vector<std::string> names;
  for (auto p : module->getOps<ds::ParameterOp>())
    names.push_back(p.getSymName().str() + (p.getTrainable() ? "+" : "-"));
  EXPECT_EQ(names, (std::vector<std::string>{"w+", "b+", "scale-"}));

  auto func = module->lookupSymbol<func::FuncOp>("forward");
  ASSERT_TRUE(func);
  EXPECT_EQ(func.getFunctionType().getNumResults(), 1u);
  EXPECT_EQ(cast<RankedTensorType>(func.getFunctionType().getResult(0)).getRank(), 0);
  int linear = 0, relu = 0, mean = 0;
  func.walk([&](Operation *op) {
    linear += isa<ds::LinearOp>(op);
    relu += isa<ds::ReluOp>(op);
    mean += isa<ds::MeanOp>(op);
  });
  EXPECT_EQ(linear, 1);
  EXPECT_EQ(relu, 1);
  EXPECT_EQ(mean, 1);

  // safetensors: 8-byte header size, then a JSON header naming every key.
  std::ifstream in(options.weightsPath, std::ios::binary);
  ASSERT_TRUE(in.good());
  uint64_t headerSize = 0;
  in.read(reinterpret_cast<char *>(&headerSize), 8);
  std::string header(headerSize, ' ');
  in.read(header.data(), headerSize);
  for (const char *key : {"\"w\"", "\"b\"", "\"scale\""})
    EXPECT_NE(header.find(key), std::string::npos) << header;
  EXPECT_EQ(headerSize % 8, 0u);
}

TEST_F(ImporterTest, LossIndexSelectsTheLoss) {
  std::string path = saveTinyModule(true);
  ds::TorchScriptImportOptions options;
  options.inputs.push_back(*ds::parseInputSpec("x=tensor<2x4xf32>", &ctx));
  options.lossIndex = 0; // the activations, not a scalar
  EXPECT_FALSE(ds::importTorchScript(path, options, &ctx));
  EXPECT_NE(errors.find("forward must return the scalar training loss"), std::string::npos)
      << errors;
}

TEST_F(ImporterTest, ReportsShapeErrorsWithDims) {
  std::string path = saveTinyModule(true);
  ds::TorchScriptImportOptions options;
  options.inputs.push_back(*ds::parseInputSpec("x=tensor<2x5xf32>", &ctx));
  EXPECT_FALSE(ds::importTorchScript(path, options, &ctx));
  EXPECT_NE(errors.find("linear input [2, 5] has 5 features but the weight [3, 4] expects 4"),
            std::string::npos)
      << errors;
}

TEST_F(ImporterTest, RejectsFilesThatAreNotArchives) {
  std::string path = ::testing::TempDir() + "/not-a-model.pt";
  std::ofstream(path) << "definitely not a zip file";
  EXPECT_FALSE(ds::looksLikeTorchScriptArchive(path));
  ds::TorchScriptImportOptions options;
  EXPECT_FALSE(ds::importTorchScript(path, options, &ctx));
  EXPECT_NE(errors.find("is not a PyTorch model file"), std::string::npos) << errors;
}

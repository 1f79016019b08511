//===- ds-run.cpp - JIT-compile a training step and train with it ----------===//
//
// ds-run STEP.mlir --data NAME=FILE.npy ... --steps N [--log LOG.jsonl] [driver flags]
//
// Lowers STEP.mlir (the output of ds-opt --config) to the runtime's C API, JIT-compiles it with
// MLIR's ExecutionEngine and hands the entry points to the runtime's training driver, the same
// driver that compiled executables run.
//
//===----------------------------------------------------------------------===//
#include "dsrt/dsrt.h"

#include "ds/Analysis/Cluster.h"
#include "ds/Pipelines/StepJit.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <thread>
#include <string>
#include <vector>

using namespace mlir;

static int fail(const llvm::Twine &msg) {
  llvm::errs() << "ds-run: error: " << msg << "\n";
  return 1;
}

/// The CPU's name, from /proc/cpuinfo.
std::string cpuName() {
  auto buffer = llvm::MemoryBuffer::getFileAsStream("/proc/cpuinfo");
  if (buffer) {
    llvm::SmallVector<llvm::StringRef> lines;
    (*buffer)->getBuffer().split(lines, '\n');
    for (llvm::StringRef l : lines)
      if (l.starts_with("model name"))
        return l.split(':').second.trim().str();
  }
  return "this CPU";
}

/// This machine's memory in bytes (MemTotal).
double hostMemoryBytes() {
  auto buffer = llvm::MemoryBuffer::getFileAsStream("/proc/meminfo");
  if (!buffer)
    return 0;
  llvm::StringRef text = (*buffer)->getBuffer();
  size_t at = text.find("MemTotal:");
  if (at == llvm::StringRef::npos)
    return 0;
  unsigned long long kb = 0;
  text.drop_front(at + 9).ltrim().consumeInteger(10, kb);
  return static_cast<double>(kb) * 1024;
}

/// ds-run --probe-bandwidth DIR [--threads N] [--cluster-out FILE]: prints ds-opt's --rates
/// for the offload stall prediction and, with --cluster-out, writes this machine as a cluster
/// file for ds-opt --plan: one node of the job's ranks (mpirun -np N), each a device with its
/// share of the host memory.
int probe(int argc, char **argv, int at) {
  if (at + 1 >= argc || llvm::StringRef(argv[at + 1]).starts_with("-"))
    return fail("--probe-bandwidth needs a directory (the NVMe tier's, DeepSpeed's nvme_path)");
  int threads = 0;
  std::string clusterOut;
  for (int j = 1; j + 1 < argc; ++j) {
    if (llvm::StringRef(argv[j]) == "--threads")
      threads = std::atoi(argv[j + 1]);
    if (llvm::StringRef(argv[j]) == "--cluster-out")
      clusterOut = argv[j + 1];
  }
  // Opened first, so that a path it cannot write fails before the measurements.
  std::unique_ptr<llvm::raw_fd_ostream> out;
  if (!clusterOut.empty()) {
    std::error_code ec;
    out = std::make_unique<llvm::raw_fd_ostream>(clusterOut, ec);
    if (ec)
      return fail("cannot write --cluster-out '" + clusterOut + "': " + ec.message());
  }
  dsrt_probe_rates r;
  char err[1024] = {0};
  if (dsrt_probe_measure(argv[at + 1], threads, &r, err, sizeof err))
    return fail("--probe-bandwidth: " + llvm::Twine(err));
  if (r.rank != 0)
    return 0;
  dsrt_probe_print(&r, argv[at + 1]);
  if (!out)
    return 0;
  mlir::ds::ClusterSpec c;
  c.name = cpuName() + ", " + std::to_string(r.ranks) + " rank" + (r.ranks == 1 ? "" : "s") +
           " (ds-run --probe-bandwidth)";
  c.nodes = 1;
  c.devicesPerNode = r.ranks;
  c.hostMemoryBytes = hostMemoryBytes();
  c.deviceMemoryBytes = c.hostMemoryBytes / r.ranks;
  c.peakFlopsFp32 = r.flops_f32;
  c.peakFlopsBf16 = r.flops_bf16;
  c.peakFlopsFp16 = r.flops_f16;
  c.memoryBandwidth = r.memory;
  // One rank has no link: its "collectives" are copies.
  c.intraNodeBandwidth = c.interNodeBandwidth = r.ranks > 1 ? r.link_bandwidth : r.memory;
  c.intraNodeLatency = c.interNodeLatency = r.link_latency;
  c.nvmeBandwidth = std::min(r.nvme_read, r.nvme_write);
  c.coresPerNode = std::max(1u, std::thread::hardware_concurrency());
  *out << mlir::ds::clusterToJSON(c);
  llvm::errs() << "ds-run: wrote the cluster file '" << clusterOut << "' (ds-opt --plan "
               << "--cluster " << clusterOut << ")\n";
  return 0;
}

int main(int argc, char **argv) {
  dsrt_ensure_passive_wait(argv);

  for (int i = 1; i < argc; ++i)
    if (llvm::StringRef(argv[i]) == "--probe-bandwidth")
      return probe(argc, argv, i);

  // The step file is the one positional argument; every flag goes to the driver.
  std::string stepPath;
  bool hasWeights = false, wantsHelp = false;
  std::vector<char *> driverArgs = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef a = argv[i];
    if (a == "--help" || a == "-h")
      wantsHelp = true;
    if (a == "--weights" || a.starts_with("--weights="))
      hasWeights = true;
    if (!a.starts_with("-") && a.ends_with(".mlir") && stepPath.empty() &&
        !(i > 1 && llvm::StringRef(argv[i - 1]).starts_with("--") &&
          !llvm::StringRef(argv[i - 1]).contains('='))) {
      stepPath = a.str();
      continue;
    }
    driverArgs.push_back(argv[i]);
  }
  if (wantsHelp && stepPath.empty()) {
    llvm::outs() << "usage: ds-run STEP.mlir --data NAME=FILE.npy ... --steps N "
                    "[--log LOG.jsonl] [--weights FILE] [--config FILE] [--device-memory BYTES] "
                    "[--threads N] [--save-weights FILE] [--dump-grads FILE]\n"
                    "  STEP.mlir comes from: ds-opt MODEL.pt --input ... --config ds_config.json "
                    "-o STEP.mlir\n"
                    "       [mpirun -np N] ds-run --probe-bandwidth DIR [--threads N] "
                    "[--cluster-out FILE]: measures this machine, prints ds-opt's --rates and "
                    "writes a cluster file for ds-opt --plan\n";
    return 0;
  }
  if (stepPath.empty())
    return fail("no STEP.mlir given (make one with: ds-opt MODEL.pt --input NAME=TYPE ... "
                "--config ds_config.json -o STEP.mlir)");
  if (!llvm::sys::fs::exists(stepPath))
    return fail("'" + stepPath + "' does not exist");

  // Initial weights: STEP.safetensors beside STEP.mlir unless --weights is given.
  std::string weights;
  if (!hasWeights) {
    llvm::SmallString<256> w(stepPath);
    llvm::sys::path::replace_extension(w, ".safetensors");
    weights = std::string(w);
    driverArgs.push_back(const_cast<char *>("--weights"));
    driverArgs.push_back(weights.data());
  }

  DialectRegistry registry;
  mlir::ds::registerStepDialects(registry);
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  std::string error;
  OwningOpRef<ModuleOp> module = mlir::ds::loadLoweredStep(stepPath, context, sourceMgr, error);
  if (!module)
    return fail(error);
  if (std::string why = mlir::ds::weightFreeReason(*module, stepPath); !why.empty() && !hasWeights)
    return fail(why);
  // The same target as ds-compile's executables, so both compute the same numbers.
  dsrt_program program;
  auto engine = mlir::ds::jitStep(*module, "", program, error);
  if (!engine)
    return fail(error);
  driverArgs.push_back(nullptr);
  return dsrt_driver_main((int)driverArgs.size() - 1, driverArgs.data(), &program);
}

//===- options.cpp - the training driver's flags --------------------------------===//
#include "options.h"

#include "dsrt/io.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace dsrt::driver {

const char *const kUsage =
    "usage: %s --data NAME=FILE.npy ... --steps N [options]\n"
    "  --data NAME=FILE.npy     training data for forward input NAME (first dim = samples;\n"
    "                           repeat for every input)\n"
    "  --steps N                optimizer steps to run (required)\n"
    "  --log FILE               write one JSON line per step (rank 0)\n"
    "  --weights FILE           initial weights (.safetensors; default: beside STEP.mlir)\n"
    "  --config FILE            DeepSpeed config; must agree with the compiled one\n"
    "  --device cpu|cuda        where to train (default: cuda when this runtime was built\n"
    "                           with CUDA and a GPU is usable, else cpu)\n"
    "  --device-memory BYTES    device arena budget (e.g. 512MiB, 2G; default unlimited)\n"
    "  --threads N              compute threads per rank (default max(1, cores / ranks))\n"
    "  --save-weights FILE      write parameters and buffers after the last step\n"
    "  --dump-grads FILE        write step 1's gradients (before the optimizer)\n"
    "  --tokens FILE.bin        a flat token file (nanoGPT's .bin) feeding the first two\n"
    "                           inputs: tokens [jT, jT+T) and the same window shifted by one\n"
    "  --seq-len T              the window length T (the inputs' second dimension)\n"
    "  --token-dtype TYPE       uint16 (default) or uint32\n"
    "  --save DIR               write a checkpoint into DIR after the last step (each rank\n"
    "                           writes its own shard; DIR/latest names the newest)\n"
    "  --save-every K           also every K steps (atomically; this run's newest two are\n"
    "                           kept, other runs' checkpoints never touched)\n"
    "  --resume DIR             continue from DIR/latest, or from DIR/TAG (its step + 1 to\n"
    "                           --steps; the initial weights are not read); any rank count\n"
    "                           or ZeRO stage\n"
    "  --comm-timeout SECONDS   how long a collective may wait for the other ranks before\n"
    "                           every rank ends, naming the ranks that did not answer\n"
    "                           (default 1800; 0 waits forever)\n"
    "  --trace FILE             write a Chrome trace (Perfetto, chrome://tracing) of the\n"
    "                           traced steps: every runtime call on its stream, each rank a\n"
    "                           process, named by the ds op and its place in the model\n"
    "                           (on cuda each traced call waits for the GPU: spans are the\n"
    "                           kernels' own time, and the traced steps run slower)\n"
    "  --trace-steps LIST       the steps to trace: N, N-M or a comma list (default: the last)\n"
    "  --help                   show this help\n";

namespace {
const char *const kFlags = "--data, --steps, --log, --weights, --config, --device-memory, "
                           "--threads, --save-weights, --dump-grads, --tokens, --seq-len, "
                           "--token-dtype, --save, --save-every, --resume, --comm-timeout, "
                           "--device, --trace, --trace-steps, --help";

bool parseInt(const std::string &s, int64_t &out) {
  if (s.empty())
    return false;
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno || !end || *end)
    return false;
  out = v;
  return true;
}
} // namespace

bool parseFlags(int argc, char **argv, Options &opt, std::string &err) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      opt.help = true;
      continue;
    }
    if (a.rfind("--", 0) != 0) {
      err = "unexpected argument '" + a + "' (valid flags: " + kFlags + ")";
      return false;
    }
    std::string name = a, value;
    bool hasValue = false;
    size_t eq = a.find('=');
    if (eq != std::string::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      hasValue = true;
    }
    static const char *known[] = {"--data",       "--steps",        "--log",
                                  "--weights",    "--config",       "--device-memory",
                                  "--threads",    "--save-weights", "--dump-grads",
                                  "--tokens",     "--seq-len",      "--token-dtype",
                                  "--save",       "--save-every",   "--resume",
                                  "--comm-timeout", "--device",     "--trace",
                                  "--trace-steps"};
    if (std::find_if(std::begin(known), std::end(known),
                     [&](const char *k) { return name == k; }) == std::end(known)) {
      err = "unknown flag '" + name + "' (valid flags: " + kFlags + ")";
      return false;
    }
    if (!hasValue) {
      if (i + 1 >= argc) {
        err = name + " needs a value (see --help)";
        return false;
      }
      value = argv[++i];
    }
    if (name == "--data") {
      size_t e = value.find('=');
      if (e == std::string::npos || e == 0 || e + 1 == value.size()) {
        err = "--data takes NAME=FILE.npy, got '" + value + "'";
        return false;
      }
      opt.data.emplace_back(value.substr(0, e), value.substr(e + 1));
    } else if (name == "--steps") {
      if (!parseInt(value, opt.steps) || opt.steps <= 0) {
        err = "--steps takes a positive integer, got '" + value + "'";
        return false;
      }
    } else if (name == "--threads") {
      int64_t t;
      if (!parseInt(value, t) || t <= 0 || t > 4096) {
        err = "--threads takes a positive integer, got '" + value + "'";
        return false;
      }
      opt.threads = static_cast<int32_t>(t);
    } else if (name == "--device") {
      if (value != "cpu" && value != "cuda") {
        err = "--device takes cpu or cuda, got '" + value + "'";
        return false;
      }
      opt.device = value;
    } else if (name == "--device-memory") {
      if (!io::parseBytes(value, opt.deviceMemory)) {
        err = "--device-memory takes a byte count such as 1073741824, 512M, 2GiB; got '" +
              value + "'";
        return false;
      }
    } else if (name == "--comm-timeout") {
      char *end = nullptr;
      double v = std::strtod(value.c_str(), &end);
      if (value.empty() || !end || *end || !std::isfinite(v) || v < 0 || v > 1e9) {
        err = "--comm-timeout takes seconds (e.g. 600; 0 waits forever), got '" + value + "'";
        return false;
      }
      opt.commTimeout = v;
    } else if (name == "--trace") {
      opt.trace = value;
    } else if (name == "--trace-steps") {
      opt.traceSteps.clear();
      std::string bad;
      size_t at = 0;
      while (bad.empty() && at <= value.size()) {
        size_t comma = value.find(',', at);
        std::string item = value.substr(at, comma == std::string::npos ? std::string::npos
                                                                          : comma - at);
        at = comma == std::string::npos ? value.size() + 1 : comma + 1;
        size_t dash = item.find('-', 1);
        int64_t lo = 0, hi = 0;
        bool ok = dash == std::string::npos
                      ? parseInt(item, lo) && (hi = lo, true)
                      : parseInt(item.substr(0, dash), lo) && parseInt(item.substr(dash + 1), hi);
        if (!ok || lo <= 0 || hi < lo || hi - lo > 1000000)
          bad = item;
        else
          opt.traceSteps.emplace_back(lo, hi);
      }
      if (!bad.empty()) {
        err = "--trace-steps takes step numbers from 1, ranges N-M and commas (e.g. 3 or "
              "2,5-7); '" + bad + "' is none of them";
        return false;
      }
    } else if (name == "--log") {
      opt.log = value;
    } else if (name == "--weights") {
      opt.weights = value;
    } else if (name == "--config") {
      opt.config = value;
    } else if (name == "--save-weights") {
      opt.saveWeights = value;
    } else if (name == "--dump-grads") {
      opt.dumpGrads = value;
    } else if (name == "--tokens") {
      opt.tokens = value;
    } else if (name == "--save") {
      opt.save = value;
    } else if (name == "--resume") {
      opt.resume = value;
    } else if (name == "--save-every") {
      if (!parseInt(value, opt.saveEvery) || opt.saveEvery <= 0) {
        err = "--save-every takes a positive integer, got '" + value + "'";
        return false;
      }
    } else if (name == "--seq-len") {
      if (!parseInt(value, opt.seqLen) || opt.seqLen <= 0) {
        err = "--seq-len takes a positive integer, got '" + value + "'";
        return false;
      }
    } else if (name == "--token-dtype") {
      if (value != "uint16" && value != "uint32") {
        err = "--token-dtype takes uint16 or uint32, got '" + value + "'";
        return false;
      }
      opt.tokenBytes = value == "uint16" ? 2 : 4;
    }
  }
  if (!opt.traceSteps.empty() && opt.trace.empty()) {
    err = "--trace-steps needs --trace FILE (the trace to write)";
    return false;
  }
  for (auto [lo, hi] : opt.traceSteps)
    if (opt.steps > 0 && lo > opt.steps) {
      err = "--trace-steps " + std::to_string(lo) + " is after the last step (--steps " +
            std::to_string(opt.steps) + "); trace a step from 1 to " +
            std::to_string(opt.steps);
      return false;
    }
  return true;
}

bool Options::traced(int64_t step) const {
  if (trace.empty())
    return false;
  if (traceSteps.empty())
    return step == steps;
  for (auto [lo, hi] : traceSteps)
    if (step >= lo && step <= hi)
      return true;
  return false;
}

} // namespace dsrt::driver

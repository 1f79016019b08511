//===- driver.cpp - the training loop behind ds-run and compiled executables ===//
//
// ds-run's loop over a Session (session.h): `--steps` optimizer steps of gas micro-batches
// each, the micro-batches cut from the --data or --tokens files (data.h), then the trace and
// --save-weights. The session holds everything else: the group, the checks, the weights, the
// checkpoints and the log.
//
#include "data.h"
#include "session.h"

#include "dsrt/dsrt.h"

#include <string>
#include <vector>

namespace dsrt::driver {
namespace {

std::string toolName(int argc, char **argv) {
  std::string tool = argc > 0 && argv[0] ? argv[0] : "ds-run";
  size_t slash = tool.rfind('/');
  return slash == std::string::npos ? tool : tool.substr(slash + 1);
}

int train(Session &s, const DataFeed &data) {
  const ProgramSpec &p = s.program();
  dsrt_context *ctx = s.context();
  const int64_t perCall = p.microBatchesPerCall, n = static_cast<int64_t>(p.inputs.size());
  for (int64_t step = s.nextStep(); step <= s.options().steps; ++step) {
    s.beginStep();
    for (int64_t k0 = 0; k0 < p.gas; k0 += perCall) {
      std::vector<dsrt_tensor *> ts(perCall * n);
      for (int64_t k = 0; k < perCall; ++k) {
        for (int64_t i = 0; i < n; ++i)
          ts[k * n + i] = dsrt_tensor_alloc(ctx, p.inputs[i].dtype,
                                            static_cast<int32_t>(p.inputs[i].dims.size()),
                                            p.inputs[i].dims.data());
        std::vector<dsrt_tensor *> mine(ts.begin() + k * n, ts.begin() + (k + 1) * n);
        const int64_t fillStart = dsrt_trace_now();
        data.fill(ctx, step, s.group().dpIndex(), k0 + k, mine);
        dsrt_trace_span(ctx, "data", fillStart, dsrt_trace_now());
      }
      s.call(ts.data());
      for (dsrt_tensor *t : ts)
        dsrt_tensor_free(ctx, t);
    }
    StepOutcome out;
    if (!s.endStep(out))
      return 1;
  }
  return s.finish() ? 0 : 1;
}

} // namespace
} // namespace dsrt::driver

extern "C" int dsrt_driver_main(int argc, char **argv, const dsrt_program *program) {
  using namespace dsrt::driver;
  Session s(toolName(argc, argv), program, /*quiet=*/false);
  Options peek;
  std::string err;
  // --steps is ds-run's own (a session stepped by a library has none).
  if (parseFlags(argc, argv, peek, err) && !peek.help && peek.steps < 0) {
    std::fprintf(stderr, "%s: error: --steps N is required (the number of optimizer steps to "
                         "run)\n",
                 toolName(argc, argv).c_str());
    return 1;
  }
  DataFeed data;
  int rc = s.open(argc, argv, &data);
  if (rc != 0)
    return rc == 2 ? 0 : 1;
  return train(s, data);
}

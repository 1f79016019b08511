//===- module.cpp - ds._ds: the C API (ds-c/Step.h, dsrt_session_*) in Python ===//
//
// A thin binding: a compiled Step (the program), and a Session stepping it. Tensors cross as
// data pointers of contiguous host memory the caller keeps alive (torch tensors and numpy
// arrays, read in place on the CPU). Errors raise RuntimeError with ds's message; the GIL is
// released while compiling and stepping.
//
#include "ds-c/Step.h"
#include "dsrt/dsrt.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <dlfcn.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace nb = nanobind;

namespace {

constexpr size_t kErrorBytes = 64 * 1024;

/// The path of the loaded libdsrt.so, whose functions the JIT-compiled step calls.
std::string runtimeLibrary() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void *>(&dsrt_session_open), &info) && info.dli_fname)
    return info.dli_fname;
  return "";
}

class Step {
public:
  Step(const std::string &model, const std::vector<std::string> &inputs, int64_t lossIndex,
       const std::string &config, int64_t ranks, const std::string &weights) {
    std::vector<const char *> specs;
    for (const std::string &s : inputs)
      specs.push_back(s.c_str());
    std::string err(kErrorBytes, '\0');
    const std::string lib = runtimeLibrary();
    {
      nb::gil_scoped_release release;
      step_ = dsStepCompile(model.c_str(), static_cast<intptr_t>(specs.size()), specs.data(),
                            lossIndex, config.c_str(), ranks, weights.c_str(), lib.c_str(),
                            err.data(), err.size());
    }
    if (!step_)
      throw std::runtime_error(err.c_str());
  }
  ~Step() { dsStepDestroy(step_); }
  Step(const Step &) = delete;
  Step &operator=(const Step &) = delete;
  std::string metadata() const { return dsStepProgram(step_)->metadata; }
  std::string summary() const { return dsStepSummary(step_); }
  const dsrt_program *program() const { return dsStepProgram(step_); }

private:
  DsStep *step_ = nullptr;
};

class Session {
public:
  Session(Step &step, const std::vector<std::string> &flags) {
    std::vector<std::string> args = {"ds"};
    args.insert(args.end(), flags.begin(), flags.end());
    std::vector<char *> argv;
    for (std::string &a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    std::string err(kErrorBytes, '\0');
    {
      nb::gil_scoped_release release;
      s_ = dsrt_session_open(step.program(), static_cast<int>(args.size()), argv.data(),
                             err.data(), err.size());
    }
    if (!s_)
      throw std::runtime_error(err.c_str());
  }
  ~Session() { close(); }
  void close() {
    if (s_)
      dsrt_session_close(s_);
    s_ = nullptr;
  }
  dsrt_session *get() const {
    if (!s_)
      throw std::runtime_error("the engine is closed");
    return s_;
  }
  int64_t nextStep() const { return dsrt_session_next_step(get()); }
  double nextLr() const { return dsrt_session_next_lr(get()); }
  int32_t rank() const { return dsrt_comm_rank(dsrt_session_context(get())); }
  int32_t worldSize() const { return dsrt_comm_size(dsrt_session_context(get())); }
  void begin() { dsrt_session_begin_step(get()); }
  void setLr(double lr) { dsrt_session_set_lr(get(), lr); }
  /// Every rank's `value`, in rank order.
  std::vector<double> allGather(double value) {
    std::vector<double> all(static_cast<size_t>(worldSize()));
    dsrt_session *s = get();
    nb::gil_scoped_release release;
    dsrt_session_all_gather(s, &value, sizeof value, all.data());
    return all;
  }
  /// `pointers`: one call's inputs; returns its losses (`perCall` of them).
  std::vector<float> call(const std::vector<uintptr_t> &pointers, size_t perCall) {
    std::vector<const void *> in;
    for (uintptr_t p : pointers)
      in.push_back(reinterpret_cast<const void *>(p));
    std::vector<float> losses(perCall);
    dsrt_session *s = get();
    nb::gil_scoped_release release;
    dsrt_session_call(s, in.data(), losses.data());
    return losses;
  }
  std::tuple<float, double, bool> end() {
    float loss = 0;
    double lr = 0;
    int32_t skipped = 0;
    std::string err(kErrorBytes, '\0');
    int32_t rc;
    {
      dsrt_session *s = get();
      nb::gil_scoped_release release;
      rc = dsrt_session_end_step(s, &loss, &lr, &skipped, err.data(), err.size());
    }
    if (rc != 0)
      throw std::runtime_error(err.c_str());
    return {loss, lr, skipped != 0};
  }
  template <int32_t (*F)(dsrt_session *, const char *, char *, size_t)>
  void pathCall(const std::string &path) {
    std::string err(kErrorBytes, '\0');
    int32_t rc;
    {
      dsrt_session *s = get();
      nb::gil_scoped_release release;
      rc = F(s, path.c_str(), err.data(), err.size());
    }
    if (rc != 0)
      throw std::runtime_error(err.c_str());
  }

private:
  dsrt_session *s_ = nullptr;
};

} // namespace

NB_MODULE(_ds, m) {
  m.doc() = "ds's C API: a model compiled to a training step, and a session training it";
  nb::class_<Step>(m, "Step")
      .def(nb::init<const std::string &, const std::vector<std::string> &, int64_t,
                    const std::string &, int64_t, const std::string &>(),
           nb::arg("model"), nb::arg("inputs"), nb::arg("loss_index"), nb::arg("config"),
           nb::arg("ranks"), nb::arg("weights"))
      .def_prop_ro("metadata", &Step::metadata)
      .def_prop_ro("summary", &Step::summary);
  nb::class_<Session>(m, "Session")
      .def(nb::init<Step &, const std::vector<std::string> &>(), nb::arg("step"),
           nb::arg("flags"), nb::keep_alive<1, 2>())
      .def("close", &Session::close)
      .def_prop_ro("next_step", &Session::nextStep)
      .def_prop_ro("next_lr", &Session::nextLr)
      .def_prop_ro("rank", &Session::rank)
      .def_prop_ro("world_size", &Session::worldSize)
      .def("begin_step", &Session::begin)
      .def("set_lr", &Session::setLr, nb::arg("lr"))
      .def("all_gather", &Session::allGather, nb::arg("value"))
      .def("call", &Session::call, nb::arg("pointers"), nb::arg("per_call"))
      .def("end_step", &Session::end)
      .def("agree", &Session::pathCall<dsrt_session_agree>, nb::arg("error"))
      .def("save", &Session::pathCall<dsrt_session_save>, nb::arg("dir"))
      .def("load", &Session::pathCall<dsrt_session_load>, nb::arg("dir"))
      .def("export_weights", &Session::pathCall<dsrt_session_export_weights>, nb::arg("path"));
}

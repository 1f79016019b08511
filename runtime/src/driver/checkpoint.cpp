//===- checkpoint.cpp - atomic checkpoints and resume --------------------------===//
#include "checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace dsrt::driver {
namespace {

// 2: the logical tensors, whatever the ZeRO layout (1 held every slot, gradients included).
const char *const kFormat = "ds-checkpoint-2";
// The config keys whose values change the numbers of a run (the parallel layout may differ).
const char *const kNumericKeys[] = {"optimizer", "scheduler", "train_batch_size",
                                    "gradient_clipping", "seed", "precision"};

std::string stepDirName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", static_cast<long long>(step));
  return buf;
}

bool syncPath(const std::string &path, bool directory) {
  int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0)
    return false;
  bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

void removeTree(const std::string &path) {
  if (DIR *d = opendir(path.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..")
        std::remove((path + "/" + n).c_str());
    }
    closedir(d);
  }
  ::rmdir(path.c_str());
}

/// For tests of atomicity: DSRT_TEST_SAVE_DELAY_MS widens the window a kill can hit.
void testDelay() {
  if (const char *ms = std::getenv("DSRT_TEST_SAVE_DELAY_MS"))
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(ms)));
}

std::string numericConfig(const io::Json &config) {
  std::string out = "{";
  bool first = true;
  for (const char *key : kNumericKeys) {
    const io::Json *v = config.get(key);
    std::string text = v ? v->dump() : "null";
    if (std::string(key) == "precision") // the normalized config has a section when enabled;
      // fp16's settings (the loss scaler's) are part of it
      text = config.get("fp16")   ? "{\"fp16\":" + config.get("fp16")->dump() + "}"
             : config.get("bf16") ? "\"bf16\""
                                  : "\"fp32\"";
    out += (first ? "" : ",") + io::jsonQuote(key) + ":" + text;
    first = false;
  }
  return out + "}";
}

/// Complete step directories, newest first.
std::vector<std::pair<int64_t, std::string>> stepDirs(const std::string &dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string n = e->d_name;
      if (n.rfind("step-", 0) == 0 && n.size() > 5 &&
          n.find_first_not_of("0123456789", 5) == std::string::npos)
        out.push_back({std::atoll(n.c_str() + 5), dir + "/" + n});
    }
    closedir(d);
  }
  std::sort(out.rbegin(), out.rend());
  return out;
}

} // namespace

bool saveCheckpoint(dsrt_context *ctx, const std::string &dir, int64_t step,
                    const std::vector<CheckpointSlot> &slots, const io::Json &config,
                    std::string &err) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    err = "cannot create '" + dir + "': " + std::strerror(errno);
    return false;
  }
  // Partial directories are what a killed save leaves behind; none is ever read.
  if (DIR *d = opendir(dir.c_str())) {
    std::vector<std::string> stale;
    while (dirent *e = readdir(d))
      if (std::string(e->d_name).rfind(".partial-", 0) == 0)
        stale.push_back(dir + "/" + e->d_name);
    closedir(d);
    for (const std::string &p : stale)
      removeTree(p);
  }
  std::string partial = dir + "/.partial-" + stepDirName(step) + "-" + std::to_string(::getpid());
  if (::mkdir(partial.c_str(), 0755) != 0) {
    err = "cannot create '" + partial + "': " + std::strerror(errno);
    return false;
  }
  // 1. Every tensor under its name.
  std::vector<io::SafetensorsEntry> entries;
  for (const CheckpointSlot &s : slots) {
    int64_t n = 1;
    for (int64_t d : s.dims)
      n *= d;
    entries.push_back({s.name, s.dtype, s.dims, s.data,
                       static_cast<size_t>(n) * io::elementSize(s.dtype)});
  }
  std::string state = partial + "/state.safetensors";
  bool ok = io::writeSafetensors(state, entries, err);
  if (!ok || !syncPath(state, false)) {
    if (ok)
      err = "cannot sync '" + state + "'";
    removeTree(partial);
    return false;
  }
  testDelay();
  // 2. The index, written last: its presence marks the state as complete.
  std::string rng(dsrt_rng_get(ctx, nullptr, 0) + 1, '\0');
  dsrt_rng_get(ctx, rng.data(), rng.size());
  rng.pop_back();
  std::string model = "[";
  for (size_t i = 0; i < slots.size(); ++i)
    model += std::string(i ? "," : "") + "{\"name\":" + io::jsonQuote(slots[i].name) +
             ",\"dtype\":" + io::jsonQuote(io::dtypeName(slots[i].dtype)) +
             ",\"dims\":" + io::formatDims(slots[i].dims) + "}";
  model += "]";
  // The data position: samples [0, step x train_batch_size) have been consumed; the next step
  // reads from there (the data order is a function of the step).
  const io::Json *tbs = config.get("train_batch_size");
  int64_t consumed = step * (tbs && tbs->isNumber() ? static_cast<int64_t>(tbs->number) : 0);
  std::string index = "{\"format\":" + io::jsonQuote(kFormat) +
                      ",\"step\":" + std::to_string(step) +
                      ",\"samples_consumed\":" + std::to_string(consumed) +
                      ",\"rng\":" + io::jsonQuote(rng) +
                      ",\"config\":" + numericConfig(config) + ",\"model\":" + model + "}\n";
  std::string indexPath = partial + "/checkpoint.json";
  std::FILE *f = std::fopen(indexPath.c_str(), "w");
  ok = f && std::fwrite(index.data(), 1, index.size(), f) == index.size();
  ok = (f && std::fclose(f) == 0) && ok;
  if (!ok || !syncPath(indexPath, false) || !syncPath(partial, true)) {
    err = "cannot write '" + indexPath + "'";
    removeTree(partial);
    return false;
  }
  testDelay();
  // 3. Publish with one rename (atomic), then make it durable.
  std::string final = dir + "/" + stepDirName(step);
  removeTree(final); // a re-save of the same step
  if (std::rename(partial.c_str(), final.c_str()) != 0) {
    err = "cannot rename '" + partial + "' to '" + final + "': " + std::strerror(errno);
    removeTree(partial);
    return false;
  }
  syncPath(dir, true);
  // Keep the newest two complete checkpoints.
  auto dirs = stepDirs(dir);
  for (size_t i = 2; i < dirs.size(); ++i)
    removeTree(dirs[i].second);
  return true;
}

bool loadCheckpoint(dsrt_context *ctx, const std::string &dir,
                    const std::vector<CheckpointSlot> &slots, const io::Json &config,
                    int64_t &step, std::vector<std::vector<char>> &data, std::string &err) {
  auto dirs = stepDirs(dir);
  if (dirs.empty()) {
    err = "--resume '" + dir + "' has no checkpoint (step-* directories written by --save)";
    return false;
  }
  std::string problems;
  for (const auto &[candidateStep, path] : dirs) {
    std::string text, e;
    io::Json index;
    if (io::readFile(path + "/checkpoint.json", text, e) && io::parseJson(text, index, e) &&
        index.get("format") && index.get("format")->text == "ds-checkpoint-1") {
      err = "checkpoint '" + path + "' was written by an older ds (format ds-checkpoint-1, one "
            "tensor per slot); this ds reads ds-checkpoint-2 (parameters and optimizer state "
            "by name, any ZeRO layout): start the run again without --resume";
      return false;
    }
    if (text.empty() || !index.get("format") || index.get("format")->text != kFormat ||
        !index.get("step")) {
      problems += "; " + path + ": incomplete or damaged index";
      std::fprintf(stderr, "ds-run: warning: skipping checkpoint '%s': incomplete or damaged\n",
                   path.c_str());
      continue;
    }
    // The config keys that change the numbers.
    io::Json saved, mine;
    std::string perr;
    io::parseJson(numericConfig(config), mine, perr);
    const io::Json *cfg = index.get("config");
    for (const char *key : kNumericKeys) {
      const io::Json *a = cfg ? cfg->get(key) : nullptr, *b = mine.get(key);
      std::string as = a ? a->dump() : "null", bs = b ? b->dump() : "null";
      if (as != bs) {
        err = "checkpoint '" + path + "' was trained with " + key + " = " + as +
              " but this run has " + bs + "; resume with the same " + key +
              " (or start a new run without --resume)";
        return false;
      }
    }
    // The model: the same slots, names, shapes and types.
    const io::Json *model = index.get("model");
    if (!model || !model->isArray() || model->items.size() != slots.size()) {
      err = "checkpoint '" + path + "' is of another model: it has " +
            std::to_string(model && model->isArray() ? model->items.size() : 0) +
            " tensors, this program " + std::to_string(slots.size());
      return false;
    }
    for (size_t i = 0; i < slots.size(); ++i) {
      const io::Json &m = model->items[i];
      const io::Json *n = m.get("name"), *d = m.get("dims"), *t = m.get("dtype");
      std::string want = slots[i].name + " " + io::formatDims(slots[i].dims) + " " +
                         io::dtypeName(slots[i].dtype);
      std::string got = (n ? n->text : "?") + " " + (d ? d->dump() : "?") + " " +
                        (t ? t->text : "?");
      std::string gotNorm = got;
      gotNorm.erase(std::remove(gotNorm.begin(), gotNorm.end(), ' '), gotNorm.end());
      std::string wantNorm = want;
      wantNorm.erase(std::remove(wantNorm.begin(), wantNorm.end(), ' '), wantNorm.end());
      if (gotNorm != wantNorm) {
        err = "checkpoint '" + path + "' is of another model: tensor " + std::to_string(i) +
              " is " + got + " there but " + want + " here";
        return false;
      }
    }
    std::vector<io::NamedArray> state;
    if (!io::readSafetensors(path + "/state.safetensors", state, e) ||
        state.size() != slots.size()) {
      problems += "; " + path + ": " + (e.empty() ? "state has the wrong tensors" : e);
      std::fprintf(stderr, "ds-run: warning: skipping checkpoint '%s': %s\n", path.c_str(),
                   e.empty() ? "state has the wrong tensors" : e.c_str());
      continue;
    }
    std::vector<const io::Array *> bySlot(slots.size(), nullptr);
    for (const io::NamedArray &n : state)
      for (size_t i = 0; i < slots.size(); ++i)
        if (n.first == slots[i].name)
          bySlot[i] = &n.second;
    for (size_t i = 0; i < slots.size(); ++i) {
      const io::Array *a = bySlot[i];
      if (!a || a->dims != slots[i].dims || a->dtype != slots[i].dtype) {
        err = "checkpoint '" + path + "': tensor '" + slots[i].name +
              "' is missing or does not match its index (damaged checkpoint)";
        return false;
      }
    }
    data.assign(slots.size(), {});
    for (size_t i = 0; i < slots.size(); ++i)
      data[i].assign(bySlot[i]->data.begin(), bySlot[i]->data.end());
    const io::Json *rng = index.get("rng");
    if (!rng || dsrt_rng_set(ctx, rng->text.c_str()) != 0) {
      err = "checkpoint '" + path + "': its random state is damaged";
      return false;
    }
    step = static_cast<int64_t>(index.get("step")->number);
    return true;
  }
  err = "--resume '" + dir + "' has no complete checkpoint" + problems;
  return false;
}

} // namespace dsrt::driver

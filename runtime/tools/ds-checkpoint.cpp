//===- ds-checkpoint.cpp - inspect and export sharded checkpoints offline ------===//
//
// ds-checkpoint info DIR [--tag TAG]
// ds-checkpoint export DIR -o MODEL.safetensors [--tag TAG]
//
// DIR is a --save directory (its `latest` checkpoint unless --tag names another) or one
// checkpoint's own directory. Needs neither LLVM nor the program that wrote the checkpoint.
//
#include "../src/checkpoint/directory.h"
#include "../src/checkpoint/export.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <sys/stat.h>

using namespace dsrt;

namespace {

const char *const kUsage =
    "usage: ds-checkpoint info DIR [--tag TAG]\n"
    "       ds-checkpoint export DIR -o MODEL.safetensors [--tag TAG]\n"
    "  DIR    a --save directory (its 'latest' checkpoint, or --tag TAG), or one checkpoint's\n"
    "         directory (DIR/step-NNNNNNNN)\n"
    "  info   the steps in DIR, and the checkpoint's step, run, layout, precision, model and\n"
    "         sizes\n"
    "  export the fp32 state_dict (parameters from their fp32 masters, buffers as saved, tied\n"
    "         names included) that the TorchScript module loads; streamed tensor by tensor\n";

int fail(const std::string &msg) {
  std::fprintf(stderr, "ds-checkpoint: error: %s\n", msg.c_str());
  return 1;
}

bool isFile(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// The checkpoint directory and its index: DIR/TAG, DIR/latest's, or DIR itself.
bool locate(const std::string &dir, const std::string &tag, std::string &where,
            std::string &parent, ckpt::Index &x, std::string &err) {
  if (tag.empty() && isFile(dir + "/checkpoint.json")) {
    where = dir;
    size_t slash = dir.find_last_of('/');
    parent = slash == std::string::npos ? "." : dir.substr(0, slash);
    std::string text;
    return io::readFile(dir + "/checkpoint.json", text, err) &&
           ckpt::parseIndex(text, dir + "/checkpoint.json", x, err);
  }
  std::string t = tag;
  parent = dir;
  if (t.empty()) {
    if (!ckpt::readLatest(dir, t, err))
      return false;
    if (t.empty()) {
      err = "'" + dir + "' has no 'latest' file and is not a checkpoint's directory (pass "
            "--tag TAG, or DIR/TAG)";
      return false;
    }
  }
  where = dir + "/" + t;
  if (!isFile(where + "/checkpoint.json")) {
    std::string tags;
    for (const ckpt::Listed &l : ckpt::listCheckpoints(dir))
      tags += (tags.empty() ? "" : ", ") + l.tag;
    err = "'" + dir + "' has no checkpoint '" + t + "' (it has: " +
          (tags.empty() ? "none" : tags) + ")";
    return false;
  }
  return ckpt::readIndexOf(dir, t, x, err);
}

std::string bytesText(uint64_t b) { return std::to_string(b) + " B (" + io::formatBytes(b) + ")"; }

int info(const std::string &dir, const std::string &tag) {
  std::string where, parent, err;
  ckpt::Index x;
  if (!locate(dir, tag, where, parent, x, err))
    return fail(err);
  std::string latest, e;
  ckpt::readLatest(parent, latest, e);
  std::printf("checkpoint %s%s\n", where.c_str(), latest == x.tag ? " (latest)" : "");
  std::printf("  step %lld, %lld samples consumed, run %s, previous %s\n",
              (long long)x.step, (long long)x.samplesConsumed, x.run.c_str(),
              x.previous.empty() ? "none" : x.previous.c_str());
  std::printf("  layout: %lld rank%s%s, ZeRO stage %lld; precision %s\n", (long long)x.worldSize,
              x.worldSize == 1 ? "" : "s", x.mesh.empty() || x.worldSize == 1 ? "" : (" (mesh " + x.mesh + ")").c_str(),
              (long long)x.zeroStage, x.precision.c_str());
  std::printf("  config: %s\n", x.numericConfig.c_str());
  std::map<std::string, std::pair<int64_t, uint64_t>> kinds; // count, bytes
  std::map<std::string, int64_t> roles;
  int64_t paramElements = 0, split = 0, parts = 1;
  for (const ckpt::TensorEntry &t : x.tensors) {
    if (!t.split.whole()) {
      split += 1;
      parts = t.split.parts;
    }
    uint64_t b = static_cast<uint64_t>(t.numel) * io::elementSize(t.dtype);
    kinds[t.kind].first += 1;
    kinds[t.kind].second += b;
    if (t.kind == ckpt::parameterKind())
      paramElements += t.numel;
    if (!t.role.empty())
      roles[t.role] += 1;
  }
  std::printf("  model: %lld parameters (%lld elements), %lld buffers\n",
              (long long)kinds[ckpt::parameterKind()].first, (long long)paramElements,
              (long long)kinds[ckpt::bufferKind()].first);
  if (split)
    std::printf("  tensor parallel: %lld tensors held in %lld parts (any layout resumes them)\n",
                (long long)split, (long long)parts);
  std::string r;
  for (auto &[role, n] : roles)
    r += (r.empty() ? "" : ", ") + role + " " + std::to_string(n);
  std::printf("  optimizer state: %lld tensors (%s)\n", (long long)kinds[ckpt::kOptimizerStateKind].first,
              r.empty() ? "none" : r.c_str());
  uint64_t total = 0;
  for (auto &[k, v] : kinds)
    total += v.second;
  std::printf("  sizes: parameters %s, buffers %s, optimizer state %s, total %s\n",
              bytesText(kinds[ckpt::parameterKind()].second).c_str(),
              bytesText(kinds[ckpt::bufferKind()].second).c_str(),
              bytesText(kinds[ckpt::kOptimizerStateKind].second).c_str(), bytesText(total).c_str());
  std::printf("  files:");
  for (const std::string &f : x.files) {
    struct stat st;
    bool ok = ::stat((where + "/" + f).c_str(), &st) == 0;
    std::printf(" %s %s", f.c_str(), ok ? io::formatBytes(st.st_size).c_str() : "MISSING");
  }
  std::printf("\n");
  std::vector<ckpt::Listed> all = ckpt::listCheckpoints(parent);
  std::printf("checkpoints in %s:", parent.c_str());
  for (const ckpt::Listed &l : all) {
    if (!l.ok) {
      std::printf(" %s (unusable)", l.tag.c_str());
      continue;
    }
    std::printf(" %s (step %lld%s%s)", l.tag.c_str(), (long long)l.index.step,
                l.index.run == x.run ? "" : ", another run",
                l.tag == latest ? ", latest" : "");
  }
  std::printf("\n");
  return 0;
}

int exportTo(const std::string &dir, const std::string &tag, const std::string &out) {
  std::string where, parent, err;
  ckpt::Index x;
  if (!locate(dir, tag, where, parent, x, err))
    return fail(err);
  int64_t tensors = 0;
  uint64_t bytes = 0;
  if (!ckpt::exportStateDict(where, x, out, tensors, bytes, err))
    return fail(err);
  std::printf("wrote %s: %lld tensors, %s, from %s (step %lld)\n", out.c_str(),
              (long long)tensors, io::formatBytes(bytes).c_str(), where.c_str(),
              (long long)x.step);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::printf("%s", kUsage);
    return argc < 2 ? 1 : 0;
  }
  std::string cmd = argv[1], dir, tag, out;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--tag" || a == "-o") && i + 1 < argc) {
      (a == "--tag" ? tag : out) = argv[++i];
    } else if (!a.empty() && a[0] != '-' && dir.empty()) {
      dir = a;
    } else {
      return fail("unexpected argument '" + a + "'\n" + kUsage);
    }
  }
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  if (dir.empty())
    return fail("no checkpoint directory given\n" + std::string(kUsage));
  if (cmd == "info")
    return info(dir, tag);
  if (cmd == "export") {
    if (out.empty())
      return fail("export needs -o MODEL.safetensors");
    return exportTo(dir, tag, out);
  }
  return fail("unknown command '" + cmd + "' (info or export)\n" + kUsage);
}

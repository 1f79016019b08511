//===- directory.cpp - tags, latest, partial saves and pruning ------------------===//
#include "directory.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <random>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dsrt::ckpt {

std::string stepTag(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", static_cast<long long>(step));
  return buf;
}

std::string newRunId() {
  uint64_t v = 0;
  if (std::FILE *f = std::fopen("/dev/urandom", "rb")) {
    if (std::fread(&v, sizeof v, 1, f) != 1)
      v = 0;
    std::fclose(f);
  }
  if (!v)
    v = std::random_device{}() ^
        (static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) *
         0x9E3779B97F4A7C15ull) ^
        static_cast<uint64_t>(::getpid());
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

namespace {
bool syncPath(const std::string &path, bool directory) {
  int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0)
    return false;
  bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}
bool exists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}
bool plausibleTag(const std::string &t) {
  return !t.empty() && t.size() < 200 && t.find('/') == std::string::npos && t != "." &&
         t != ".." && t[0] != '.';
}
} // namespace

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

bool readLatest(const std::string &dir, std::string &tag, std::string &err) {
  tag.clear();
  std::string text, e;
  std::string path = dir + "/latest";
  if (!exists(path))
    return true;
  if (!io::readFile(path, text, e)) {
    err = e;
    return false;
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r'))
    text.pop_back();
  if (!plausibleTag(text)) {
    err = "'" + path + "' does not name a checkpoint (damaged)";
    return false;
  }
  tag = text;
  return true;
}

bool writeLatest(const std::string &dir, const std::string &tag, std::string &err) {
  std::string tmp = dir + "/.latest-" + std::to_string(::getpid());
  std::string text = tag + "\n";
  std::FILE *f = std::fopen(tmp.c_str(), "w");
  bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = (f && std::fflush(f) == 0 && ::fsync(fileno(f)) == 0) && ok;
  ok = (f && std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), (dir + "/latest").c_str()) != 0) {
    err = "cannot write '" + dir + "/latest': " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  syncPath(dir, true);
  return true;
}

bool readIndexOf(const std::string &dir, const std::string &tag, Index &out, std::string &err) {
  std::string path = dir + "/" + tag + "/checkpoint.json", text;
  if (!io::readFile(path, text, err))
    return false;
  return parseIndex(text, path, out, err);
}

std::string tagFor(const std::string &dir, int64_t step, const std::string &run) {
  std::string tag = stepTag(step);
  if (!exists(dir + "/" + tag))
    return tag;
  Index other;
  std::string e;
  if (readIndexOf(dir, tag, other, e) && other.run == run)
    return tag; // this run's own (an earlier attempt at the same step): replaced
  return tag + "-" + run.substr(0, 8);
}

std::string partialPath(const std::string &dir, const std::string &tag, const std::string &run) {
  return dir + "/.partial-" + tag + "-" + run;
}

int removeStalePartials(const std::string &dir) {
  std::vector<std::string> partials;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d))
      if (std::string(e->d_name).rfind(".partial-", 0) == 0)
        partials.push_back(dir + "/" + e->d_name);
    closedir(d);
  }
  int removed = 0;
  for (const std::string &p : partials) {
    int fd = ::open((p + "/.lock").c_str(), O_RDWR);
    if (fd < 0) {
      // No lock yet: either its writer is between mkdir and creating the lock, or it died
      // there. Only an old one is stale.
      struct stat st;
      if (::stat(p.c_str(), &st) == 0 && std::time(nullptr) - st.st_mtime > 600) {
        removeTree(p);
        ++removed;
      }
      continue;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) { // its writer is gone
      removeTree(p);
      ++removed;
    }
    ::close(fd);
  }
  return removed;
}

PartialSave::~PartialSave() {
  if (lockFd_ >= 0)
    ::close(lockFd_);
}

bool PartialSave::create(const std::string &dir, const std::string &tag, const std::string &run,
                         std::string &err) {
  dir_ = dir;
  tag_ = tag;
  run_ = run;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    err = "cannot create '" + dir + "': " + std::strerror(errno);
    return false;
  }
  removeStalePartials(dir); // this run's own leftover of a killed save is among them
  path_ = partialPath(dir, tag, run);
  if (::mkdir(path_.c_str(), 0755) != 0) {
    err = "cannot create '" + path_ + "': " + std::strerror(errno);
    return false;
  }
  lockFd_ = ::open((path_ + "/.lock").c_str(), O_RDWR | O_CREAT, 0644);
  if (lockFd_ < 0 || ::flock(lockFd_, LOCK_EX | LOCK_NB) != 0) {
    err = "cannot lock '" + path_ + "/.lock': " + std::strerror(errno);
    return false;
  }
  return true;
}

bool PartialSave::publish(std::string &err) {
  if (!syncPath(path_, true)) {
    err = "cannot sync '" + path_ + "'";
    return false;
  }
  std::string final = dir_ + "/" + tag_;
  std::string aside;
  if (exists(final)) { // this run's earlier save of the same step (tagFor checked the run)
    aside = dir_ + "/.replaced-" + tag_ + "-" + run_;
    removeTree(aside);
    if (std::rename(final.c_str(), aside.c_str()) != 0) {
      err = "cannot move '" + final + "' aside: " + std::strerror(errno);
      return false;
    }
  }
  if (std::rename(path_.c_str(), final.c_str()) != 0) {
    err = "cannot rename '" + path_ + "' to '" + final + "': " + std::strerror(errno);
    return false;
  }
  std::remove((final + "/.lock").c_str());
  syncPath(dir_, true);
  if (!aside.empty())
    removeTree(aside);
  path_ = final;
  return true;
}

void prune(const std::string &dir, const std::string &tag, const std::string &run, int keep) {
  std::string at = tag;
  for (int n = 0; !at.empty() && n < 100000; ++n) {
    Index x;
    std::string e;
    if (!readIndexOf(dir, at, x, e) || x.run != run)
      return; // the chain ends (or leaves this run's checkpoints)
    std::string before = x.previous;
    if (n >= keep)
      removeTree(dir + "/" + at);
    at = before;
  }
}

std::vector<Listed> listCheckpoints(const std::string &dir) {
  std::vector<Listed> out;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string n = e->d_name;
      if (n.rfind("step-", 0) == 0) {
        Listed l;
        l.tag = n;
        l.ok = readIndexOf(dir, n, l.index, l.problem);
        out.push_back(std::move(l));
      }
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end(), [](const Listed &a, const Listed &b) {
    int64_t sa = a.ok ? a.index.step : -1, sb = b.ok ? b.index.step : -1;
    return sa != sb ? sa > sb : a.tag > b.tag;
  });
  return out;
}

} // namespace dsrt::ckpt

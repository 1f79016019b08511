// The directory of a run's checkpoints, as DeepSpeed lays it out: one directory per tag
// (step-NNNNNNNN), and a `latest` file naming the newest complete one. A save is written into a
// partial directory that its writer keeps locked, published by one rename, and then `latest`
// is replaced by another; pruning follows the chain of checkpoints this run wrote and never
// touches another run's checkpoints or another live process's partial save.
#ifndef DSRT_CHECKPOINT_DIRECTORY_H
#define DSRT_CHECKPOINT_DIRECTORY_H

#include "index.h"

#include <string>
#include <vector>

namespace dsrt::ckpt {

/// "step-00000012".
std::string stepTag(int64_t step);
/// A new run's identity: 16 hex digits.
std::string newRunId();

/// The tag `DIR/latest` names; empty when there is no such file. False (with `err`) when it
/// exists but cannot be read or names nothing plausible.
bool readLatest(const std::string &dir, std::string &tag, std::string &err);
/// Replaces `DIR/latest` atomically.
bool writeLatest(const std::string &dir, const std::string &tag, std::string &err);
/// Reads and checks DIR/TAG/checkpoint.json.
bool readIndexOf(const std::string &dir, const std::string &tag, Index &out, std::string &err);

/// The tag of `run`'s checkpoint at `step` in DIR: stepTag(step), or, when another run's
/// checkpoint already has that name, stepTag(step) + "-" + the run's first 8 digits.
std::string tagFor(const std::string &dir, int64_t step, const std::string &run);

/// DIR/.partial-TAG-RUN: where the ranks write a save before rank 0 publishes it.
std::string partialPath(const std::string &dir, const std::string &tag, const std::string &run);

/// Rank 0's side of a save in progress: creates the partial directory (and DIR), holding a
/// lock on it until published or destroyed, after removing stale partial directories (whose
/// writer no longer holds their lock).
class PartialSave {
public:
  PartialSave() = default;
  PartialSave(const PartialSave &) = delete;
  PartialSave &operator=(const PartialSave &) = delete;
  ~PartialSave();
  bool create(const std::string &dir, const std::string &tag, const std::string &run,
              std::string &err);
  const std::string &path() const { return path_; }
  /// Renames the partial directory to DIR/TAG (an older save of the same run and tag is
  /// replaced) and makes the rename durable.
  bool publish(std::string &err);

private:
  std::string dir_, tag_, run_, path_;
  int lockFd_ = -1;
};

/// Removes every .partial-* directory in DIR whose writer is gone; returns how many.
int removeStalePartials(const std::string &dir);

/// Keeps the newest `keep` checkpoints of the chain that ends at `tag` (each index names the
/// one before it), deleting the older ones that `run` wrote; nothing else is touched.
void prune(const std::string &dir, const std::string &tag, const std::string &run, int keep);

/// Every step-* directory of DIR, with its index or why it is unusable (newest step first).
struct Listed {
  std::string tag;
  bool ok = false;
  Index index;
  std::string problem;
};
std::vector<Listed> listCheckpoints(const std::string &dir);

/// Removes a directory of files.
void removeTree(const std::string &path);

} // namespace dsrt::ckpt

#endif

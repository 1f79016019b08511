//===- Scheduler.cpp - continuous batching of the server's requests ------------===//
#include "Scheduler.h"

#include <algorithm>

namespace dsserve {

Scheduler::Submitted Scheduler::submit(std::vector<SequenceRequest> sequences) {
  std::lock_guard<std::mutex> g(lock_);
  if (stopping_)
    return Submitted::ShuttingDown;
  if (queue_.size() + sequences.size() > maxQueue_)
    return Submitted::QueueFull;
  for (SequenceRequest &s : sequences)
    queue_.push_back(std::move(s));
  work_.notify_one();
  return Submitted::Queued;
}

void Scheduler::stop() {
  std::lock_guard<std::mutex> g(lock_);
  stopping_ = true;
  work_.notify_one();
}

size_t Scheduler::waiting() {
  std::lock_guard<std::mutex> g(lock_);
  return queue_.size();
}

size_t Scheduler::running() {
  std::lock_guard<std::mutex> g(lock_);
  return active_.size();
}

namespace {
void deliver(const SequenceRequest &r, int64_t token, const std::string &finish) {
  std::lock_guard<std::mutex> g(r.job->lock);
  r.job->events.push_back({r.choice, token, finish});
  r.job->ready.notify_all();
}
} // namespace

void Scheduler::run() {
  const int64_t rows = dsrt_generator_rows(gen_), vocab = dsrt_generator_vocab(gen_);
  std::vector<int64_t> ids(rows), tokens(rows);
  std::vector<int32_t> last(rows);
  (void)vocab;
  for (;;) {
    {
      std::unique_lock<std::mutex> g(lock_);
      // Sequences whose client has gone, or whose handler ended them, leave.
      queue_.erase(std::remove_if(queue_.begin(), queue_.end(),
                                  [](SequenceRequest &r) { return !r.job->wanted(r.choice); }),
                   queue_.end());
      for (auto it = active_.begin(); it != active_.end();) {
        if (it->second.job->wanted(it->second.choice)) {
          ++it;
          continue;
        }
        dsrt_generator_cancel(gen_, it->first);
        it = active_.erase(it);
      }
      // First come, first served: the head waits for a row and its pages.
      while (!queue_.empty()) {
        SequenceRequest &r = queue_.front();
        int32_t retry = 0;
        char err[512];
        int64_t id = dsrt_generator_add(gen_, r.prompt.data(),
                                        static_cast<int64_t>(r.prompt.size()), r.maxNewTokens,
                                        &r.sampling, &retry, err, sizeof err);
        if (id < 0 && retry)
          break;
        if (id < 0) // validated before it was queued: cannot happen
          deliver(r, -1, std::string("error: ") + err);
        else
          active_.emplace(id, std::move(r));
        queue_.pop_front();
      }
      if (active_.empty()) {
        if (stopping_ && queue_.empty())
          return;
        work_.wait(g);
        continue;
      }
    }
    int64_t n = dsrt_generator_step(gen_, ids.data(), tokens.data(), last.data(), nullptr);
    std::lock_guard<std::mutex> g(lock_);
    for (int64_t k = 0; k < n; ++k) {
      auto it = active_.find(ids[k]);
      if (it == active_.end())
        continue;
      const SequenceRequest &r = it->second;
      bool end = std::find(r.endTokens.begin(), r.endTokens.end(), tokens[k]) !=
                 r.endTokens.end();
      deliver(r, tokens[k], end ? "stop" : last[k] ? "length" : "");
      if (end && !last[k])
        dsrt_generator_cancel(gen_, ids[k]);
      if (end || last[k])
        active_.erase(it);
    }
  }
}

} // namespace dsserve

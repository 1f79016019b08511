//===- Scheduler.h - continuous batching of the server's requests ---------------===//
//
// One thread owns the generator: each step it admits waiting sequences (first come, first
// served) while a row and pages are free, runs one call, and hands each new token to its
// request. Requests wait in a bounded queue; a full queue refuses them at once.
//
#ifndef DS_SERVE_SCHEDULER_H
#define DS_SERVE_SCHEDULER_H

#include "dsrt/generate.h"

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace dsserve {

/// One HTTP request's sequences (its choices) and the tokens they produce.
struct Job {
  struct Event {
    size_t choice = 0;
    int64_t token = 0;
    /// Set on a choice's last event: "length" (max_tokens reached) or "stop" (an end token).
    std::string finish;
  };
  std::mutex lock;
  std::condition_variable ready;
  std::deque<Event> events;
  bool gone = false;               ///< the client went away: drop every choice
  std::set<size_t> stopped;        ///< choices the handler ended (a stop string)
  bool wanted(size_t choice) {
    std::lock_guard<std::mutex> g(lock);
    return !gone && !stopped.count(choice);
  }
};

struct SequenceRequest {
  std::shared_ptr<Job> job;
  size_t choice = 0;
  std::vector<int64_t> prompt;
  int64_t maxNewTokens = 16;
  dsrt_sampling sampling{0.f, 0, 1.f, 0};
  std::vector<int64_t> endTokens;
};

class Scheduler {
public:
  Scheduler(dsrt_generator *g, size_t maxQueue) : gen_(g), maxQueue_(maxQueue) {}
  enum class Submitted { Queued, QueueFull, ShuttingDown };
  /// Queues every sequence of a request, or none.
  Submitted submit(std::vector<SequenceRequest> sequences);
  /// Steps until stop() and every queued and running sequence has finished.
  void run();
  /// Refuses new requests; run() returns when the admitted ones are done.
  void stop();
  /// Sequences waiting and running (for /health).
  size_t waiting();
  size_t running();

private:
  dsrt_generator *gen_;
  size_t maxQueue_;
  std::mutex lock_;
  std::condition_variable work_;
  std::deque<SequenceRequest> queue_;
  std::map<int64_t, SequenceRequest> active_; ///< by generator sequence id
  bool stopping_ = false;
};

} // namespace dsserve

#endif

// Commits stride checkpoints off the training thread: the trainer hands over a copy of the state,
// a background thread hashes it (state_hash) and writes the safetensors file, so commitments cost
// the training loop one memcpy of the state instead of hashing + fsync. A copy that has been written
// is kept as the next checkpoint's buffer: memory the process has written before takes a copy at
// memcpy speed, where fresh memory cost 2.3-2.6 s per GB-sized state on a VM whose host backs each
// new page on its first write (docs/performance.md "Commitment overhead").
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/state.h"
#include "ops/thread_pool.h"

namespace tribunal {

class CheckpointWriter {
 public:
  /// `out_dir` empty: hash only, write no files. At most `max_pending` snapshots wait at once
  /// (submit blocks beyond that), bounding memory to (max_pending + 1) copies of the state.
  CheckpointWriter(const JobSpec& job, const Digest& job_id, std::filesystem::path out_dir,
                   size_t max_pending = 2);
  ~CheckpointWriter();  ///< waits for pending work; errors are only reported by finish()

  /// Queues a copy of the state for hashing and writing as the checkpoint of its step, copying into
  /// the buffers of a checkpoint already written where there is one, each tensor of ≥ 1 MiB split over
  /// `pool`'s threads (null: the calling thread). Rethrows an earlier background failure (e.g. a full
  /// disk) instead of queuing. Called from one thread.
  void submit(const State& state, ThreadPool* pool = nullptr);

  /// Waits for everything queued and returns the state hash of every step committed so far.
  /// Throws the first background failure (EngineError naming the file).
  std::map<int64_t, Digest> finish();

 private:
  void run();

  const JobSpec& job_;
  Digest job_id_;
  std::filesystem::path out_dir_;
  size_t max_pending_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<State> queue_;
  std::optional<State> spare_;  ///< the last checkpoint written, whose storage the next copy reuses
  bool busy_ = false, stop_ = false;
  std::exception_ptr error_;
  std::map<int64_t, Digest> hashes_;
  std::thread worker_;
};

}  // namespace tribunal

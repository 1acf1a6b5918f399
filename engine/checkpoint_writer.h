// Commits stride checkpoints off the training thread: the trainer hands over a copy of the state,
// a background thread hashes it (state_hash) and writes the safetensors file, so commitments cost
// the training loop one memcpy of the state instead of hashing + fsync.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "engine/state.h"

namespace tribunal {

class CheckpointWriter {
 public:
  /// `out_dir` empty: hash only, write no files. At most `max_pending` snapshots wait at once
  /// (submit blocks beyond that), bounding memory to (max_pending + 1) copies of the state.
  CheckpointWriter(const JobSpec& job, const Digest& job_id, std::filesystem::path out_dir,
                   size_t max_pending = 2);
  ~CheckpointWriter();  ///< waits for pending work; errors are only reported by finish()

  /// Queues the state for hashing and writing as the checkpoint of its step. Rethrows an earlier
  /// background failure (e.g. a full disk) instead of queuing.
  void submit(const State& state);

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
  bool busy_ = false, stop_ = false;
  std::exception_ptr error_;
  std::map<int64_t, Digest> hashes_;
  std::thread worker_;
};

}  // namespace tribunal

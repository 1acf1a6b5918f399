// Runs a StepGraph node by node with the RepOps kernels. Node outputs live in slots that are reused
// across steps (same graph shape → no allocation after the first step).
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "engine/device.h"
#include "engine/graph.h"
#include "ops/thread_pool.h"

namespace tribunal {

class Executor {
 public:
  /// `reference` selects the scalar reference kernels instead of the fast ones (tests); otherwise the
  /// nodes run on `device` (engine/device.h: the CPU's fast kernels, CUDA, or its emulation).
  explicit Executor(ThreadPool& pool, bool reference = false, Device device = Device::Cpu)
      : pool_(pool), reference_(reference), device_(device) {}

  /// Called after node `index` ran, with its output tensors (may modify them: fault injection).
  using NodeHook = std::function<void(size_t index, std::span<Tensor* const> outputs)>;

  /// Runs every node of `g`. `state[i]` binds g.state_inputs[i], `data[i]` binds g.data_inputs[i];
  /// both must outlive the next call. Throws OpError from a kernel (e.g. a bad label).
  void run(const StepGraph& g, std::span<const Tensor* const> state, std::span<const Tensor* const> data,
           const NodeHook& after_node = {});

  /// The value's tensor after run() (state/data/constant values resolve to what they are bound to).
  const Tensor& value(ValueId v) const { return *bound_[v]; }

  /// Moves the tensors of g.state_outputs into `state` (swapping storage, no copy for node outputs).
  void take_next_state(const StepGraph& g, std::span<Tensor* const> state);

 private:
  ThreadPool& pool_;
  bool reference_;
  Device device_;
  std::vector<Tensor> slots_;          // storage of node outputs, by value id
  std::vector<const Tensor*> bound_;   // every value's tensor, by value id
};

}  // namespace tribunal

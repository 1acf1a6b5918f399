// The host SIMT emulation (ops/cuda/simt_emulator.h): one Boost.Context fiber per thread of a block,
// a round-robin scheduler per OS thread, block and warp barriers that release only complete groups.
#include "ops/cuda/simt_emulator.h"

#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "ops/cuda/backend.h"

namespace tribunal::simt {
namespace {

namespace ctx = boost::context;

// Kernels keep a few registers' worth of locals; 256 KiB leaves room for an exception's unwinding and
// the guard page of protected_fixedsize_stack turns an overflow into a crash, not a silent corruption.
constexpr size_t kStackBytes = 256 * 1024;
constexpr unsigned kMaxThreadsPerBlock = 1024;

enum class State { Ready, AtBlockBarrier, AtWarpBarrier, Finished };

/// One emulated thread. Fibers are reused across blocks and launches: the body loops, running the
/// current launch's kernel once per resume after a Finished.
struct Fiber {
  ctx::fiber self;  ///< the suspended fiber (resumed by the scheduler)
  ctx::fiber sink;  ///< the scheduler, while this fiber runs (resumed to yield)
  ThreadCoords coords;
  State state = State::Finished;
};

/// The emulation state of one OS thread.
struct Scheduler {
  std::vector<std::unique_ptr<Fiber>> fibers;
  const std::function<void()>* body = nullptr;  ///< the running launch's kernel
  std::exception_ptr error;                     ///< first exception escaping a thread of the block
  std::vector<uint64_t> slots;                  ///< warp_exchange: one per thread of the block
  Fiber* running = nullptr;
};

thread_local Scheduler t_scheduler;

[[noreturn]] void refuse(const char* kernel, const std::string& why) {
  throw CudaError(std::string("cuda-emulated: ") + kernel + ": " + why);
}

void start(Scheduler& s, Fiber& f) {
  f.self = ctx::fiber(std::allocator_arg, ctx::protected_fixedsize_stack(kStackBytes),
                      [&s, &f](ctx::fiber&& sink) {
                        f.sink = std::move(sink);
                        for (;;) {
                          try {
                            (*s.body)();
                          } catch (const ctx::detail::forced_unwind&) {
                            throw;  // the fiber is being destroyed: let Boost.Context unwind it
                          } catch (...) {
                            if (!s.error) s.error = std::current_exception();
                          }
                          f.state = State::Finished;
                          f.sink = std::move(f.sink).resume();  // wait for the next block
                        }
                        return std::move(f.sink);
                      });
}

/// Suspends the calling fiber in `state` until the scheduler makes it Ready again.
void wait_at(State state) {
  Fiber* f = t_scheduler.running;
  if (f == nullptr) throw CudaError("cuda-emulated: a barrier or shuffle outside a kernel");
  f->state = state;
  f->sink = std::move(f->sink).resume();
}

/// Runs the n threads of the current block to completion, releasing barriers as groups complete.
void run_block(Scheduler& s, unsigned n, const char* kernel) {
  for (;;) {
    for (unsigned t = 0; t < n; ++t) {
      Fiber& f = *s.fibers[t];
      if (f.state != State::Ready) continue;
      s.running = &f;
      f.self = std::move(f.self).resume();
      s.running = nullptr;
    }
    if (s.error) std::rethrow_exception(s.error);
    bool released = false;
    unsigned finished = 0, at_block = 0;
    for (unsigned w = 0; w < n; w += kWarpSize) {
      unsigned at_warp = 0;
      for (unsigned t = w; t < w + kWarpSize; ++t) at_warp += s.fibers[t]->state == State::AtWarpBarrier;
      if (at_warp == kWarpSize) {
        for (unsigned t = w; t < w + kWarpSize; ++t) s.fibers[t]->state = State::Ready;
        released = true;
      }
    }
    if (released) continue;
    for (unsigned t = 0; t < n; ++t) {
      finished += s.fibers[t]->state == State::Finished;
      at_block += s.fibers[t]->state == State::AtBlockBarrier;
    }
    if (finished == n) return;
    if (at_block == n) {
      for (unsigned t = 0; t < n; ++t) s.fibers[t]->state = State::Ready;
      continue;
    }
    refuse(kernel, std::to_string(at_block) + " threads wait at __syncthreads, " + std::to_string(finished) +
                       " have returned and " + std::to_string(n - at_block - finished) +
                       " wait at a warp shuffle whose warp is incomplete: divergent barrier");
  }
}

}  // namespace

const ThreadCoords& current() {
  static const ThreadCoords kOutside{};
  const Fiber* f = t_scheduler.running;
  return f ? f->coords : kOutside;
}

void sync_threads() {
  wait_at(State::AtBlockBarrier);
}

uint64_t warp_exchange(uint64_t mine, unsigned src) {
  Scheduler& s = t_scheduler;
  if (s.running == nullptr) throw CudaError("cuda-emulated: a warp shuffle outside a kernel");
  const unsigned me = s.running->coords.linear, warp0 = me - me % kWarpSize;
  s.slots[me] = mine;
  wait_at(State::AtWarpBarrier);  // every lane has offered
  const uint64_t got = s.slots[warp0 + src];
  wait_at(State::AtWarpBarrier);  // every lane has read: the slots may be reused
  return got;
}

void launch(const char* kernel, Dim3 grid, Dim3 block, const std::function<void()>& body) {
  Scheduler& s = t_scheduler;
  if (s.body != nullptr) refuse(kernel, "launched from inside a kernel");
  const uint64_t n = uint64_t{block.x} * block.y * block.z;
  if (n == 0 || n > kMaxThreadsPerBlock || block.z > 64)
    refuse(kernel, "a block of " + std::to_string(n) + " threads (1 to 1024, z ≤ 64)");
  if (n % kWarpSize != 0)
    refuse(kernel, "a block of " + std::to_string(n) + " threads is not whole warps of 32");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7FFFFFFFu || grid.y > 65535 || grid.z > 65535)
    refuse(kernel, "grid " + std::to_string(grid.x) + "×" + std::to_string(grid.y) + "×" +
                       std::to_string(grid.z) + " is outside CUDA's limits");
  const unsigned threads = static_cast<unsigned>(n);
  while (s.fibers.size() < threads) {
    s.fibers.push_back(std::make_unique<Fiber>());
    start(s, *s.fibers.back());
  }
  s.body = &body;
  s.error = nullptr;
  s.slots.assign(threads, 0);
  try {
    for (unsigned bz = 0; bz < grid.z; ++bz)
      for (unsigned by = 0; by < grid.y; ++by)
        for (unsigned bx = 0; bx < grid.x; ++bx) {
          unsigned t = 0;
          for (unsigned z = 0; z < block.z; ++z)
            for (unsigned y = 0; y < block.y; ++y)
              for (unsigned x = 0; x < block.x; ++x, ++t) {
                Fiber& f = *s.fibers[t];
                f.coords = ThreadCoords{Dim3(x, y, z), Dim3(bx, by, bz), block, grid, t};
                f.state = State::Ready;
              }
          run_block(s, threads, kernel);
        }
  } catch (...) {
    // Threads may still be suspended inside the kernel: destroying their fibers unwinds them.
    s.fibers.clear();
    s.body = nullptr;
    s.running = nullptr;
    throw;
  }
  s.body = nullptr;
}

}  // namespace tribunal::simt

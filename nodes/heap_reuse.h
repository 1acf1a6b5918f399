// A referee's large buffers (opened tensors, their re-execution's inputs and outputs: tens of MB per
// dispute at GPT-2-small dimensions) kept in the process's heap once freed, for the next dispute.
//
// Why: glibc's malloc serves a large request with a fresh mmap and unmaps it on free, so every dispute
// touched its buffers' pages for the first time again. On a VM a first touch costs the guest a page
// fault and often the host an allocation: about 12–15 µs per 4 KiB page on the machines of
// docs/performance.md, which made page faults half of the referee's CPU for a 37.7 MB opening.
#pragma once

#include <cstddef>

namespace tribunal::nodes {

/// What keep_freed_buffers sets.
struct HeapReuse {
  /// Requests below this size come from the heap, not from a fresh mapping (glibc allows at most
  /// 32 MiB on 64-bit: HEAP_MAX_SIZE / 2). A larger request still gets its own mapping.
  size_t mmap_threshold = size_t{32} << 20;
  /// Free memory at the top of a heap is given back to the system only beyond this much. Bounds what
  /// the process keeps beyond its live data (per malloc arena).
  size_t trim_threshold = size_t{512} << 20;
};

/// Sets glibc's M_MMAP_THRESHOLD and M_TRIM_THRESHOLD (mallopt(3)) for the whole process, before its
/// threads start. Returns false where they cannot be set (not glibc; a sanitizer's allocator, which
/// ignores them): the process then runs as before, only slower on fresh memory.
bool keep_freed_buffers(const HeapReuse& reuse = {});

}  // namespace tribunal::nodes

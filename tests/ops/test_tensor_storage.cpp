// ops/tensor.h's aligned storage (allocate_aligned64, AlignedAllocator): 64-byte aligned at every
// size, every byte writable, freed through the same block. tests/nodes/test_heap_reuse.cpp checks
// that freed tensors' pages are reused.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>

#include "ops/tensor.h"

using namespace tribunal;

TEST_CASE("aligned tensor storage: 64-byte aligned at every size, its bytes writable") {
  for (size_t bytes :
       {size_t{1}, size_t{4}, size_t{63}, size_t{64}, size_t{65}, size_t{4096}, size_t{1} << 20}) {
    CAPTURE(bytes);
    for (int i = 0; i < 8; ++i) {
      void* p = allocate_aligned64(bytes);
      CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
      std::memset(p, 0xab, bytes);
      free_aligned64(p);
    }
  }
  free_aligned64(nullptr);
  const Tensor t(Shape{1000});
  CHECK(reinterpret_cast<uintptr_t>(t.data()) % 64 == 0);
}

#include "nodes/heap_reuse.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tribunal::nodes {

bool keep_freed_buffers(const HeapReuse& reuse) {
#if defined(__GLIBC__)
  // mallopt returns 1 on success, 0 on an out-of-range value.
  return mallopt(M_MMAP_THRESHOLD, static_cast<int>(reuse.mmap_threshold)) == 1 &&
         mallopt(M_TRIM_THRESHOLD, static_cast<int>(reuse.trim_threshold)) == 1;
#else
  (void)reuse;
  return false;
#endif
}

}  // namespace tribunal::nodes

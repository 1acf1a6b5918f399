#include "nodes/heap_reuse.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

// A sanitizer replaces malloc with its own allocator, which glibc's tunables do not reach (ASan's
// mallopt does nothing; ThreadSanitizer's would set glibc's, unused).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TRIBUNAL_SANITIZER_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define TRIBUNAL_SANITIZER_ALLOCATOR 1
#endif
#endif

namespace tribunal::nodes {

bool keep_freed_buffers(const HeapReuse& reuse) {
#if defined(__GLIBC__) && !defined(TRIBUNAL_SANITIZER_ALLOCATOR)
  // mallopt returns 1 on success, 0 on an out-of-range value.
  return mallopt(M_MMAP_THRESHOLD, static_cast<int>(reuse.mmap_threshold)) == 1 &&
         mallopt(M_TRIM_THRESHOLD, static_cast<int>(reuse.trim_threshold)) == 1;
#else
  (void)reuse;
  return false;
#endif
}

}  // namespace tribunal::nodes

// A tensor as TensorChunk frames. See tensor_frames.h.
#include "protocol/tensor_frames.h"

#include <algorithm>

#include "protocol/chunk_check.h"
#include "protocol/codec.h"
#include "protocol/merkle.h"

namespace tribunal {

void for_each_tensor_frame(uint32_t round, uint32_t value, DType dtype, std::span<const int64_t> shape,
                           std::span<const std::byte> bytes,
                           const std::function<bool(uint64_t chunk)>& wanted,
                           const std::function<bool(TensorChunk&&)>& send) {
  const MerkleTree tree(tensor_chunk_hashes(dtype, bytes));
  const uint64_t chunks = tree.size();
  const auto want = [&](uint64_t c) { return !wanted || wanted(c); };
  for (uint64_t c = 0; c < chunks;) {
    if (!want(c)) {
      ++c;
      continue;
    }
    uint64_t count = 1;
    while (count < kMaxFrameChunks && c + count < chunks && want(c + count)) ++count;
    const ChunkRun run = chunk_run(bytes.size(), c, count);
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.data()) + run.offset;
    TensorChunk frame{round,
                      value,
                      std::vector<int64_t>(shape.begin(), shape.end()),
                      static_cast<uint32_t>(c),
                      static_cast<uint32_t>(count),
                      static_cast<uint32_t>(chunks),
                      tree.root(),
                      std::vector<uint8_t>(p, p + run.length),
                      tree.prove_range(c, count)};
    if (!send(std::move(frame))) return;
    c += count;
  }
}

}  // namespace tribunal

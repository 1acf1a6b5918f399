// libFuzzer target: the pure inclusion- and range-proof verifiers on arbitrary proofs never crash and
// never accept a value that is not the tree's leaf at the proof's index.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "protocol/merkle.h"

using namespace tribunal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 16 + 32) return 0;
  InclusionProof p;
  std::memcpy(&p.index, data, 8);
  std::memcpy(&p.size, data + 8, 8);
  Digest value;
  std::memcpy(value.data(), data + 16, 32);
  for (size_t off = 48; off + 32 <= size && p.path.size() < 70; off += 32) {
    Digest d;
    std::memcpy(d.data(), data + off, 32);
    p.path.push_back(d);
  }
  // A real tree of a small size: the fuzzed proof must not verify a value that is not its leaf.
  std::vector<Digest> leaves(static_cast<size_t>(data[0] % 33 + 1));
  for (size_t i = 0; i < leaves.size(); ++i) leaves[i][0] = static_cast<uint8_t>(i);
  const MerkleTree tree(leaves);
  // RFC 9162 verification does not bind the size, but an accepted value must still be a real leaf
  // at that index: anything else would be a BLAKE3 second preimage.
  if (verify_inclusion(value, p, tree.root()) && (p.index >= leaves.size() || value != leaves[p.index]))
    std::abort();
  // The same bytes as a range proof (merkle.h verify_range): the first 1 to 4 path digests are the
  // claimed values of leaves [index, index + count) of a tree of `size` leaves, the rest the proof. An
  // accepted range must be real leaves at their places (the leaf and node tags keep a node from
  // passing for a leaf), whatever size it claims.
  const size_t count = std::min<size_t>(p.path.size(), data[1] % 4 + 1);
  const std::span<const Digest> claimed(p.path.data(), count);
  if (count > 0 && verify_range(claimed, p.index, p.size, std::span(p.path).subspan(count), tree.root()) &&
      (p.index >= leaves.size() || count > leaves.size() - p.index ||
       !std::equal(claimed.begin(), claimed.end(), leaves.begin() + static_cast<ptrdiff_t>(p.index))))
    std::abort();
  return 0;
}

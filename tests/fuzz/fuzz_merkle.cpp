// libFuzzer target: the pure inclusion-proof verifier on arbitrary proofs never crashes and never
// accepts a value that is not the tree's leaf at the proof's index.
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
  return 0;
}

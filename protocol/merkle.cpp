// RFC 6962 Merkle trees and RFC 9162 §2.1.3 inclusion proofs. See merkle.h; docs/commitments.md.
#include "protocol/merkle.h"

#include <string>
#include <utility>

namespace tribunal {

Digest merkle_leaf_hash(const Digest& value) {
  return Hasher(HashTag::MerkleLeaf).update(value).final();
}

Digest merkle_node_hash(const Digest& left, const Digest& right) {
  return Hasher(HashTag::MerkleNode).update(left).update(right).final();
}

Digest merkle_root(std::span<const Digest> values) {
  if (values.empty()) return blake3_256({});
  // Streaming: stack[k] is the root of a perfect subtree of 2^heights[k] leaves, heights strictly
  // decreasing, i.e. the binary decomposition of the leaves seen so far. At most 64 entries.
  Digest stack[64];
  int heights[64];
  size_t top = 0;
  for (const Digest& v : values) {
    Digest h = merkle_leaf_hash(v);
    int height = 0;
    while (top > 0 && heights[top - 1] == height) {
      h = merkle_node_hash(stack[--top], h);
      ++height;
    }
    stack[top] = h;
    heights[top++] = height;
  }
  // MTH splits at the largest power of two < n, so the subtrees fold from the right.
  Digest r = stack[--top];
  while (top > 0) r = merkle_node_hash(stack[--top], r);
  return r;
}

MerkleTree::MerkleTree(std::vector<Digest> values) {
  if (values.empty()) {
    root_ = blake3_256({});
    return;
  }
  for (Digest& v : values) v = merkle_leaf_hash(v);
  levels_.push_back(std::move(values));
  // Pair bottom-up; an odd last node is promoted unchanged. This equals RFC 6962's split at the
  // largest power of two.
  while (levels_.back().size() > 1) {
    const std::vector<Digest>& below = levels_.back();
    std::vector<Digest> level;
    level.reserve((below.size() + 1) / 2);
    for (size_t i = 0; i + 1 < below.size(); i += 2)
      level.push_back(merkle_node_hash(below[i], below[i + 1]));
    if (below.size() % 2 == 1) level.push_back(below.back());
    levels_.push_back(std::move(level));
  }
  root_ = levels_.back()[0];
}

InclusionProof MerkleTree::prove(uint64_t index) const {
  if (index >= size()) {
    throw ProtocolError("MerkleTree::prove: index " + std::to_string(index) +
                        " is out of range for a tree of " + std::to_string(size()) + " leaves");
  }
  InclusionProof proof{index, size(), {}};
  uint64_t i = index;
  for (size_t l = 0; l + 1 < levels_.size(); ++l, i >>= 1) {
    const uint64_t sibling = i ^ 1;
    if (sibling < levels_[l].size()) proof.path.push_back(levels_[l][sibling]);  // else i was promoted
  }
  return proof;
}

namespace {

bool verify_inclusion_impl(const Digest& value, const InclusionProof& proof, const Digest& root) {
  // RFC 9162 §2.1.3.2, step by step.
  // 1. leaf_index >= tree_size fails (this also rejects tree_size 0).
  if (proof.index >= proof.size) return false;
  // 2. fn = leaf_index, sn = tree_size - 1.  3. r = leaf hash of the value.
  uint64_t fn = proof.index;
  uint64_t sn = proof.size - 1;
  Digest r = merkle_leaf_hash(value);
  // 4. For each p in the path:
  for (const Digest& p : proof.path) {
    // a. sn == 0 means the path is longer than the tree is deep.
    if (sn == 0) return false;
    if ((fn & 1) == 1 || fn == sn) {
      // b. r is a right child (or the last node of its level): r = H(0x01 ‖ p ‖ r); if r is the
      //    promoted last node, skip the levels it was promoted through.
      r = merkle_node_hash(p, r);
      while ((fn & 1) == 0 && fn != 0) {
        fn >>= 1;
        sn >>= 1;
      }
    } else {
      // Otherwise r is a left child: r = H(0x01 ‖ r ‖ p).
      r = merkle_node_hash(r, p);
    }
    // c. Up one level.
    fn >>= 1;
    sn >>= 1;
  }
  // 5. Success iff the path reached the top (a short path leaves sn > 0) and r is the root.
  return sn == 0 && r == root;
}

}  // namespace

bool verify_inclusion(const Digest& value, const InclusionProof& proof, const Digest& root) {
  try {
    return verify_inclusion_impl(value, proof, root);
  } catch (...) {  // only a libsodium initialization failure could get here
    return false;
  }
}

}  // namespace tribunal

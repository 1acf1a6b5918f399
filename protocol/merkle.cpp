// RFC 6962 Merkle trees and RFC 9162 §2.1.3 inclusion proofs. See merkle.h; docs/commitments.md.
#include "protocol/merkle.h"

#include <bit>
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

std::vector<Digest> MerkleTree::prove_range(uint64_t first, uint64_t count) const {
  if (count == 0 || first >= size() || count > size() - first) {
    throw ProtocolError("MerkleTree::prove_range: leaves [" + std::to_string(first) + ", +" +
                        std::to_string(count) + ") are not a range of a tree of " + std::to_string(size()) +
                        " leaves");
  }
  const uint64_t end = first + count;
  std::vector<Digest> path;
  // The node of levels_ over leaves [lo, hi): RFC 6962's subtrees are exactly the nodes of the
  // bottom-up pairing, level ⌈log2(hi − lo)⌉, index lo >> level.
  const auto node = [&](uint64_t lo, uint64_t hi) -> const Digest& {
    const int level = std::bit_width(hi - lo - 1);
    return levels_[static_cast<size_t>(level)][lo >> level];
  };
  const auto walk = [&](const auto& self, uint64_t lo, uint64_t hi) -> void {
    if (lo >= first && hi <= end) return;  // inside: the verifier hashes it from the values
    if (hi <= first || lo >= end) {
      path.push_back(node(lo, hi));
      return;
    }
    const uint64_t k = std::bit_floor(hi - lo - 1);  // the largest power of two < hi − lo (≥ 2 here)
    self(self, lo, lo + k);
    self(self, lo + k, hi);
  };
  walk(walk, 0, size());
  return path;
}

namespace {

// MTH(D[lo..hi)) of verify_range: see merkle.h. `used` counts the path digests taken; false on a path
// too short.
bool range_root(std::span<const Digest> values, uint64_t first, std::span<const Digest> path, size_t& used,
                uint64_t lo, uint64_t hi, Digest& out) {
  const uint64_t end = first + values.size();
  if (lo >= first && hi <= end) {
    out = merkle_root(values.subspan(lo - first, hi - lo));
    return true;
  }
  if (hi <= first || lo >= end) {
    if (used == path.size()) return false;
    out = path[used++];
    return true;
  }
  const uint64_t k = std::bit_floor(hi - lo - 1);
  Digest left, right;
  if (!range_root(values, first, path, used, lo, lo + k, left) ||
      !range_root(values, first, path, used, lo + k, hi, right))
    return false;
  out = merkle_node_hash(left, right);
  return true;
}

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

bool verify_range(std::span<const Digest> values, uint64_t first, uint64_t size, std::span<const Digest> path,
                  const Digest& root) {
  if (values.empty() || first >= size || values.size() > size - first) return false;
  try {
    size_t used = 0;
    Digest r;
    return range_root(values, first, path, used, 0, size, r) && used == path.size() && r == root;
  } catch (...) {  // only a libsodium initialization failure could get here
    return false;
  }
}

}  // namespace tribunal

// Validation of the integers that ops receive stored as floats: class labels (softmax_cross_entropy*)
// and token ids (embedding*). One definition for the CPU kernels and the CUDA backend's host side
// (ops/cuda/backend.cpp), so both refuse the same values with the same OpError message.
#pragma once

#include <cstdint>
#include <string>

#include "ops/tensor.h"

namespace tribunal {

/// The class id of row b: labels[b] must be an integral float in [0, classes). Throws OpError naming `op`.
inline int64_t class_id(const Tensor& labels, int64_t b, int64_t classes, const char* op) {
  const float l = labels[b];
  const bool ok =
      l >= 0.0f && l < static_cast<float>(classes) && static_cast<float>(static_cast<int64_t>(l)) == l;
  if (!ok)
    throw OpError(std::string(op) + ": label " + std::to_string(l) + " of row " + std::to_string(b) +
                  " is not a class id in [0, " + std::to_string(classes) + ")");
  return static_cast<int64_t>(l);
}

/// The token id at flat position p: an integral float in [0, vocab), −0 counting as 0. Throws OpError
/// naming `op` for NaN, ±inf, negative, fractional or ≥ vocab.
inline int64_t token_id(const float* ids, int64_t p, int64_t vocab, const char* op) {
  const float v = ids[p];
  // The range test comes first: it rejects NaN and keeps the int conversion defined.
  const bool in_range = v >= 0.0f && v < 2147483648.0f;
  const int64_t id = in_range ? static_cast<int64_t>(v) : -1;
  if (!(in_range && static_cast<float>(id) == v && id < vocab))
    throw OpError(std::string(op) + ": id " + std::to_string(v) + " at position " + std::to_string(p) +
                  " is not a token id in [0, " + std::to_string(vocab) + ")");
  return id;
}

}  // namespace tribunal

// Text data for byte-level language models: a corpus (a file, or a directory's files concatenated)
// cut into windows of T bytes whose labels are the next bytes (the nanoGPT character-level setup,
// Karpathy's shakespeare_char, with fixed non-overlapping windows instead of random offsets so that
// every sample is a committed row of the data set, docs/architecture.md "State and commitments").
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "engine/dataset.h"
#include "ops/thread_pool.h"

namespace tribunal {

/// The corpus bytes: the file at `path`, or, for a directory, its regular files (not recursing;
/// skipping symbolic links and `*.dat` files — the strfile indexes of Debian's fortunes) concatenated
/// in increasing byte order of their names. Throws EngineError naming the path when it is missing,
/// unreadable, or holds no bytes at all.
std::vector<uint8_t> read_text_corpus(const std::filesystem::path& path);

/// The total byte count read_text_corpus(path) would return, from the file sizes alone (same file
/// selection and errors, except that the files are not read).
int64_t text_corpus_size(const std::filesystem::path& path);

/// How N corpus bytes are cut for context T: S = (N − 1)/T windows (window i: inputs bytes
/// [iT, iT+T), labels bytes [iT+1, iT+T+1)); the last held_out = ceil(validation·S) windows (in
/// binary64) are the held-out split, the first train = S − held_out the training split.
struct TextWindows {
  int64_t windows = 0;
  int64_t train = 0;
  int64_t held_out = 0;
};

/// The split above; throws EngineError naming `path` when not even one training window fits
/// (N < T + 1, or a validation fraction that holds out every window).
TextWindows text_windows(int64_t bytes, int64_t context, double validation,
                         const std::filesystem::path& path);

/// Loads one split of a text corpus as a Dataset: inputs [S', T] and labels [S', T], both float32
/// holding byte values 0..255, classes = 256, rows = 1, cols = T; `root` = dataset_root over the
/// split's windows (hashed on `pool`) and `unigram_entropy` = −Σ p_b ln p_b over the byte frequencies
/// p_b of the *training* windows' labels (for either split: the baseline a model must beat).
/// Throws EngineError naming the path for a missing, empty or too short corpus.
Dataset load_text(const std::filesystem::path& path, int64_t context, double validation, Split split,
                  ThreadPool& pool);

}  // namespace tribunal

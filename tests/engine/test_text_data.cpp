// Text data: windows and labels, the held-out split, directory concatenation, unigram entropy, the
// dataset_root of label sequences, and every error naming the path.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "engine/dataset.h"
#include "engine/error.h"
#include "engine/text_data.h"
#include "protocol/merkle.h"
#include "protocol/tensor_hash.h"
#include "tests/temp_dir.h"

namespace fs = std::filesystem;
using namespace tribunal;
using testing::TempDir;

namespace {

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  REQUIRE(f.good());
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const EngineError& e) {
    return e.what();
  }
  return "";
}

// 100 bytes: 'A' + (i mod 26) for i = 0..99.
std::string alphabet_text() {
  std::string s;
  for (int i = 0; i < 100; ++i) s.push_back(static_cast<char>('A' + i % 26));
  return s;
}

}  // namespace

TEST_CASE("text windows: inputs, next-byte labels, the held-out split at the end") {
  TempDir dir("text");
  const std::string text = alphabet_text();
  write_file(dir.path / "corpus.txt", text);
  ThreadPool pool(2);
  // N = 100, T = 8: S = 99/8 = 12 windows; ceil(0.25·12) = 3 held out, 9 train.
  const TextWindows w = text_windows(100, 8, 0.25, dir.path);
  CHECK(w.windows == 12);
  CHECK(w.held_out == 3);
  CHECK(w.train == 9);
  CHECK(text_windows(100, 8, 0.2, dir.path).held_out == 3);  // ceil(2.4)
  CHECK(text_windows(100, 8, 0.0, dir.path).held_out == 0);
  CHECK(text_windows(9, 8, 0.0, dir.path).windows == 1);

  const Dataset train = load_text(dir.path / "corpus.txt", 8, 0.25, Split::Train, pool);
  const Dataset test = load_text(dir.path / "corpus.txt", 8, 0.25, Split::Test, pool);
  CHECK(train.inputs.shape() == Shape{9, 8});
  CHECK(train.labels.shape() == Shape{9, 8});
  CHECK(test.inputs.shape() == Shape{3, 8});
  CHECK(train.classes == 256);
  CHECK(train.label_width() == 8);
  CHECK(train.samples() == 9);
  for (int64_t i = 0; i < 9; ++i)
    for (int64_t t = 0; t < 8; ++t) {
      CHECK(train.inputs[i * 8 + t] ==
            static_cast<float>(static_cast<unsigned char>(text[static_cast<size_t>(i * 8 + t)])));
      CHECK(train.labels[i * 8 + t] ==
            static_cast<float>(static_cast<unsigned char>(text[static_cast<size_t>(i * 8 + t + 1)])));
    }
  // The held-out windows are windows 9, 10, 11 (bytes 72..96, labels up to byte 96).
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t t = 0; t < 8; ++t) {
      const size_t at = static_cast<size_t>((9 + i) * 8 + t);
      CHECK(test.inputs[i * 8 + t] == static_cast<float>(text[at]));
      CHECK(test.labels[i * 8 + t] == static_cast<float>(text[at + 1]));
    }

  const DataShape shape = data_shape_of(train);
  CHECK(shape.samples == 9);
  CHECK(shape.features == 8);
  CHECK(shape.classes == 256);
  CHECK(shape.label_width == 8);
}

TEST_CASE("text dataset_root: label sequences hashed as [T] rows, stable across threads") {
  TempDir dir("text");
  write_file(dir.path / "corpus.txt", alphabet_text());
  ThreadPool one(1), three(3);
  const Dataset d = load_text(dir.path / "corpus.txt", 8, 0.25, Split::Train, three);
  CHECK(dataset_root(d, one) == d.root);
  CHECK(load_text(dir.path / "corpus.txt", 8, 0.25, Split::Train, one).root == d.root);
  std::vector<Digest> leaves;
  for (int64_t i = 0; i < d.samples(); ++i) {
    const Digest expected = sample_leaf(std::span<const float>(d.inputs.data() + i * 8, 8),
                                        std::span<const float>(d.labels.data() + i * 8, 8), 8);
    CHECK(sample_hash(d, i) == expected);
    leaves.push_back(expected);
  }
  CHECK(merkle_root(leaves) == d.root);
  CHECK_THROWS_AS(sample_hash(d, 9), EngineError);
  // Another context or validation fraction is another data set.
  CHECK(load_text(dir.path / "corpus.txt", 8, 0.5, Split::Train, one).root != d.root);
  CHECK(load_text(dir.path / "corpus.txt", 7, 0.25, Split::Train, one).root != d.root);
}

TEST_CASE("a corpus directory: regular files in name order, symlinks and *.dat skipped") {
  TempDir dir("textdir");
  write_file(dir.path / "b", "bbbb\n");
  write_file(dir.path / "a", "aaaa\n");
  write_file(dir.path / "a.dat", "INDEX");
  write_file(dir.path / "c", "cc\n");
  fs::create_symlink(dir.path / "a", dir.path / "a.u8");
  fs::create_directory(dir.path / "sub");
  write_file(dir.path / "sub" / "z", "zzzz");
  CHECK(read_text_corpus(dir.path) ==
        std::vector<uint8_t>{'a', 'a', 'a', 'a', '\n', 'b', 'b', 'b', 'b', '\n', 'c', 'c', '\n'});
  CHECK(text_corpus_size(dir.path) == 13);

  // The same bytes in one file make the same data set.
  TempDir flat("textflat");
  write_file(flat.path / "all.txt", "aaaa\nbbbb\ncc\n");
  ThreadPool pool(1);
  const Dataset from_dir = load_text(dir.path, 4, 0.0, Split::Train, pool);
  const Dataset from_file = load_text(flat.path / "all.txt", 4, 0.0, Split::Train, pool);
  CHECK(from_dir.samples() == 3);  // (13 − 1)/4
  CHECK(from_dir.root == from_file.root);
}

TEST_CASE("unigram entropy of the training targets") {
  TempDir dir("textent");
  std::string text;
  for (int i = 0; i < 65; ++i) text.push_back(i % 2 ? 'b' : 'a');  // 65 bytes, T = 8: 8 windows
  write_file(dir.path / "ab.txt", text);
  ThreadPool pool(1);
  const Dataset d = load_text(dir.path / "ab.txt", 8, 0.0, Split::Train, pool);
  CHECK(d.unigram_entropy == doctest::Approx(std::log(2.0)).epsilon(1e-12));
  write_file(dir.path / "one.txt", std::string(17, 'x'));
  CHECK(load_text(dir.path / "one.txt", 8, 0.0, Split::Train, pool).unigram_entropy == 0.0);
  // Fashion-MNIST reports none.
  CHECK(Dataset{}.unigram_entropy == -1);
}

TEST_CASE("text corpus errors name the path") {
  TempDir dir("texterr");
  ThreadPool pool(1);
  const fs::path missing = dir.path / "missing.txt";
  const std::string e1 = error_of([&] { load_text(missing, 8, 0.1, Split::Train, pool); });
  CHECK(e1.find(missing.string() + ": cannot open text corpus") == 0);
  write_file(dir.path / "empty.txt", "");
  CHECK(error_of([&] { load_text(dir.path / "empty.txt", 8, 0.1, Split::Train, pool); }) ==
        (dir.path / "empty.txt").string() + ": text corpus is empty");
  write_file(dir.path / "short.txt", "12345678");
  CHECK(error_of([&] { load_text(dir.path / "short.txt", 8, 0.0, Split::Train, pool); }) ==
        (dir.path / "short.txt").string() +
            ": text corpus too short: 8 bytes make no window of 8 inputs and 8 labels (needs 9 bytes)");
  write_file(dir.path / "two.txt", std::string(17, 'x'));  // 2 windows of 8, validation 0.9 holds out both
  CHECK(error_of([&] {
          load_text(dir.path / "two.txt", 8, 0.9, Split::Train, pool);
        }).find("all 2 windows") != std::string::npos);
  TempDir empty_dir("textempty");
  fs::create_symlink("/etc/hostname", empty_dir.path / "link");
  CHECK(error_of([&] { read_text_corpus(empty_dir.path); }).find("has no regular files") !=
        std::string::npos);
  CHECK(error_of([&] { text_corpus_size(missing); }).find(missing.string()) == 0);
}

TEST_CASE("load_dataset and expected_data_shape dispatch on the job's data set") {
  TempDir dir("textjob");
  write_file(dir.path / "corpus.txt", alphabet_text());
  JobSpec job;
  job.model.kind = ModelKind::Gpt;
  job.model.context = 8;
  job.dataset = "text";
  job.data_path = dir.path / "corpus.txt";
  job.validation = 0.25;
  job.batch_size = 2;
  job.model.vocab = 256;
  ThreadPool pool(1);
  const Dataset train = load_dataset(job, Split::Train, pool);
  CHECK(train.samples() == 9);
  CHECK(load_dataset(job, Split::Test, pool).samples() == 3);
  const DataShape expected = expected_data_shape(job);
  const DataShape actual = data_shape_of(train);
  CHECK(expected.samples == actual.samples);
  CHECK(expected.features == actual.features);
  CHECK(expected.classes == actual.classes);
  CHECK(expected.label_width == actual.label_width);
  CHECK_NOTHROW(check_job_against_dataset(job, train));
  job.model.context = 9;  // the windows hold 8
  CHECK_THROWS_AS(check_job_against_dataset(job, train), EngineError);

  JobSpec fashion;  // the default job: Fashion-MNIST, located in its Debian directory
  CHECK_THROWS_WITH_AS(expected_data_shape(fashion),
                       "job: data set 'fashion-mnist' has not been located in this node's registry",
                       EngineError);
  locate_data(fashion, DataRegistry::debian());
  const DataShape f = expected_data_shape(fashion);
  CHECK(f.samples == 60000);
  CHECK(f.features == 784);
  CHECK(f.classes == 10);
  CHECK(f.label_width == 0);
}

// The record a durable referee keeps of a re-executed opening (referee/opened_record.h): its summary of
// the opened tensors against a direct computation, and its one strict encoding.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "protocol/codec.h"
#include "referee/opened_record.h"

using namespace tribunal;

namespace {

// The statistics as the report once computed them, element by element in double.
OpenedSummary::Whole direct(uint32_t input, const std::vector<int64_t>& shape, const std::vector<float>& x) {
  OpenedSummary::Whole w{input, shape, x.size(), INFINITY, -INFINITY, 0, 0};
  double sum = 0;
  for (const float f : x) {
    if (!std::isfinite(f)) {
      ++w.non_finite;
      continue;
    }
    w.min = std::min(w.min, static_cast<double>(f));
    w.max = std::max(w.max, static_cast<double>(f));
    sum += f;
  }
  const uint64_t finite = w.elements - w.non_finite;
  w.mean = finite ? sum / static_cast<double>(finite) : NAN;
  return w;
}

}  // namespace

TEST_CASE("opened record: whole-tensor statistics equal a direct computation, non-finite values apart") {
  constexpr float kInf = std::numeric_limits<float>::infinity(),
                  kNaN = std::numeric_limits<float>::quiet_NaN();
  // Sizes around the 16 lanes and the 4096-element blocks; the extremes and non-finite values in the
  // tail, in a block's last row and in the middle.
  for (const size_t n : {size_t{1}, size_t{15}, size_t{17}, size_t{4096}, size_t{4111}, size_t{10007}}) {
    Reexecute rx;
    rx.shapes = {{static_cast<int64_t>(n)}, {}, {static_cast<int64_t>(n)}};
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 97) * 0.25f - 7.0f;
    x[n - 1] = 1e6f;
    if (n > 2) x[n / 2] = -3e5f;
    rx.inputs = {x, {}, x};
    for (const size_t at : {n - 1, n / 3, size_t{0}})
      if (at < n && at != n / 2) rx.inputs[2][at] = at == 0 ? kNaN : at == n / 3 ? -kInf : kInf;
    const std::vector<OpenedSummary::Whole> got = whole_inputs(rx);
    REQUIRE(got.size() == 2);  // the empty input (a data set's or a constant) has none
    for (size_t k = 0; k < 2; ++k) {
      const uint32_t input = k == 0 ? 0 : 2;
      const OpenedSummary::Whole want = direct(input, rx.shapes[input], rx.inputs[input]);
      CAPTURE(n);
      CAPTURE(input);
      CHECK(got[k].input == want.input);
      CHECK(got[k].shape == want.shape);
      CHECK(got[k].elements == n);
      CHECK(got[k].non_finite == want.non_finite);
      CHECK(got[k].min == want.min);
      CHECK(got[k].max == want.max);
      if (std::isnan(want.mean))
        CHECK(std::isnan(got[k].mean));
      else
        CHECK(got[k].mean == doctest::Approx(want.mean).epsilon(1e-6));
    }
    if (n >= 15) CHECK(got[1].non_finite == 3);
  }
  const std::vector<float> all_nan(40, kNaN);
  Reexecute rx;
  rx.shapes = {{40}};
  rx.inputs = {all_nan};
  const OpenedSummary::Whole w = whole_inputs(rx).at(0);
  CHECK(w.non_finite == 40);
  CHECK(std::isnan(w.mean));
  CHECK(first_elements(std::vector<uint8_t>(9, 0)) == std::vector<float>{0.0f, 0.0f});
  CHECK(first_elements(std::vector<uint8_t>(64, 0)).size() == OpenedSummary::kFirstElements);
}

TEST_CASE("opened record: one encoding; a truncated, extended or out-of-range record is refused by field") {
  OpenedRecord r;
  r.summary.node = 97;
  r.summary.first = {{1, 0, {4, 8}, {1.5f, -2.0f, 0.0f}}, {0, 1, {8}, {}}};
  r.summary.whole = {{0, {4, 8}, 32, -2.0, 7.5, 0.125, 1}};
  r.outcome.kind = ReexecutionOutcome::Kind::Outputs;
  Digest d{};
  d[0] = 7;
  r.outcome.outputs = {PartyReexecution{{d}, {}}, PartyReexecution{{d, d}, "log refused"}};
  r.outcome.events = {"re-executed node 97: output leaves 07…"};
  const std::vector<uint8_t> bytes = encode_opened_record(r);
  const OpenedRecord back = decode_opened_record(bytes);
  CHECK(back.summary == r.summary);
  CHECK(back.outcome.kind == r.outcome.kind);
  CHECK(back.outcome.outputs[1].outputs == r.outcome.outputs[1].outputs);
  CHECK(back.outcome.outputs[1].bad_log == "log refused");
  CHECK(back.outcome.events == r.outcome.events);
  CHECK(encode_opened_record(back) == bytes);

  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  CHECK_THROWS_WITH_AS(decode_opened_record(longer), doctest::Contains("trailing"), WireError);
  const std::vector<uint8_t> shorter(bytes.begin(), bytes.end() - 1);
  CHECK_THROWS_AS(decode_opened_record(shorter), WireError);
  OpenedRecord bad = r;
  bad.summary.first[0].party = 2;
  CHECK_THROWS_WITH_AS(decode_opened_record(encode_opened_record(bad)),
                       doctest::Contains("OpenedRecord.first: party is not 0 or 1"), WireError);
  bad = r;
  bad.outcome.kind = static_cast<ReexecutionOutcome::Kind>(4);
  CHECK_THROWS_WITH_AS(decode_opened_record(encode_opened_record(bad)),
                       doctest::Contains("OpenedRecord.outcome.kind: value 4 is not a declared value"),
                       WireError);
}

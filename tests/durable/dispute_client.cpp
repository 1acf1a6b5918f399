// A test client for tests/referee_crash.sh: opens a dispute from a saved DisputeOpen envelope with the
// same reconnecting wait as `tribunal delegate` (await_verdict in nodes/delegate.h), so the crash test can
// open the same dispute many times without the providers retraining the job each time.
//
//   dispute_client open REFEREE_URL REFEREE_KEY OPEN_FILE VERDICT_FILE
//       sends OPEN_FILE, waits for the verdict signed by REFEREE_KEY (hex; reconnecting while the
//       referee restarts), writes it.
//   dispute_client swap OPEN_FILE OUT_FILE
//       writes the opening of the other dispute between the same two claims (claims in the other
//       order, another dispute id), signed by a fresh client key.
#include <cstdio>
#include <fstream>
#include <iterator>

#include "nodes/delegate.h"

using namespace tribunal;

namespace {

std::vector<uint8_t> read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(std::string(path) + ": cannot open");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    NetContext ctx(1, false);
    ctx.start();
    if (mode == "open" && argc == 6) {
      const Envelope verdict = nodes::await_verdict(
          ctx, argv[2], digest_from_hex(argv[3]), read_file(argv[4]), nodes::stderr_logger("dispute_client"));
      std::ofstream(argv[5], std::ios::binary)
          .write(reinterpret_cast<const char*>(verdict.bytes.data()),
                 static_cast<std::streamsize>(verdict.bytes.size()));
      ctx.stop();
      ctx.join();
      return 0;
    }
    if (mode == "swap" && argc == 4) {
      const Envelope env = open_envelope(read_file(argv[2]));
      DisputeOpen d = std::get<DisputeOpen>(env.body);
      std::swap(d.claims[0], d.claims[1]);
      const std::vector<uint8_t> out = seal(generate_keypair(), dispute_id(d), 1, d);
      std::ofstream(argv[3], std::ios::binary)
          .write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
      return 0;
    }
    std::fprintf(stderr,
                 "usage: dispute_client open REFEREE_URL REFEREE_KEY OPEN_FILE VERDICT_FILE | swap OPEN_FILE "
                 "OUT_FILE\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dispute_client: error: %s\n", e.what());
    return 1;
  }
}

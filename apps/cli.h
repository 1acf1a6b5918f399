// The `tribunal` command line on CLI11: the usage error, each subcommand's registration, and the option
// helpers that give every flag its range, default and unit in `--help` and its one-line error.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "engine/data_registry.h"
#include "engine/device.h"
#include "engine/world.h"
#include "net/tls.h"
#include "protocol/codec.h"
#include "protocol/envelope.h"

namespace tribunal::cli {

/// A usage error: a bad flag or value, or a missing argument. main() prints it as one line
/// `tribunal: COMMAND: MESSAGE` on stderr and exits with 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A subcommand as registered on the `tribunal` app: its CLI11 app (parsed() says whether the command
/// line chose it) and what runs it once parsing is done, returning the process exit code.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

/// The subcommands. Each registers itself and its options on `root` (the options' targets live as
/// long as the returned Command); `run` throws UsageError for a usage error the parser cannot see
/// (e.g. a missing key with its reason) and any other exception for a runtime error.
Command add_train(CLI::App& root);
Command add_demo(CLI::App& root);
Command add_referee(CLI::App& root);
Command add_provider(CLI::App& root);
Command add_delegate(CLI::App& root);
Command add_keygen(CLI::App& root);
Command add_verify(CLI::App& root);
Command add_report(CLI::App& root);  ///< `report VERDICT`: the dispute as an HTML page
Command add_campaign(CLI::App& root);
Command add_scenario(CLI::App& root);  ///< `scenario run` and `scenario graph`
Command add_audit(CLI::App& root);     ///< `audit`: the verifiers of verifiers/ (docs/verifiers.md)
Command add_export(CLI::App& root);    ///< `export CHECKPOINT`: the PyTorch form (engine/pytorch_export.h)

/// What `tribunal --version` prints: the release and git describe of the build (as of configure
/// time), the RepOps numerics contract version (docs/numerics.md), the wire protocol version
/// (docs/protocol.md) and the compiler; several lines, each ending in a newline.
std::string version_text();

/// The bytes of the file at `path`; ProtocolError("PATH: cannot open") when it cannot be read.
std::vector<uint8_t> read_file_bytes(const std::filesystem::path& path);

/// Runs `check` on the verdict file `path` (its bytes already read) and rethrows what it throws with
/// the file named: a file that does not decode as a signed envelope as "PATH: not a valid signed verdict
/// (…)", any other refusal as "PATH: …" (docs/running.md, "Errors").
template <class F>
auto about_verdict_file(const std::filesystem::path& path, F&& check) {
  try {
    return check();
  } catch (const WireError& e) {
    throw ProtocolError(path.string() + ": not a valid signed verdict (" + e.what() + ")");
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    throw ProtocolError(path.string() + ": " + e.what());
  }
}

/// Parses `text` as a decimal integer in [lo, hi]; UsageError "FLAG expects an integer in [lo, hi],
/// got 'TEXT'" otherwise.
int64_t parse_integer(std::string_view flag, const std::string& text, int64_t lo, int64_t hi);

/// `FLAG N` (N named `value_name` in --help): an integer in [lo, hi] stored in `target`, whose value now
/// is the default --help shows with the range; given twice, the last one counts. Out of range or not an
/// integer: parse_integer's UsageError, when the command line is parsed.
template <class T>
CLI::Option* add_integer(CLI::App& app, const std::string& flag, T& target, int64_t lo, int64_t hi,
                         const std::string& help, const std::string& value_name = "N") {
  return app
      .add_option_function<std::string>(
          flag,
          [&target, flag, lo, hi](const std::string& v) {
            target = static_cast<T>(parse_integer(flag, v, lo, hi));
          },
          help + " [" + std::to_string(lo) + ", " + std::to_string(hi) + "]")
      ->type_name(value_name)
      ->default_str(std::to_string(target));
}

/// `FLAG N`: a duration of N whole `Duration` units (e.g. std::chrono::milliseconds for a `-ms` flag),
/// N in [lo, hi], stored in `target` (any duration type that holds it exactly); `unit` names the unit
/// in --help, which shows `target`'s value now, in that unit, as the default.
template <class Duration, class Target>
CLI::Option* add_duration(CLI::App& app, const std::string& flag, Target& target, int64_t lo, int64_t hi,
                          const std::string& help, const std::string& unit) {
  return app
      .add_option_function<std::string>(
          flag,
          [&target, flag, lo, hi](const std::string& v) {
            target = Duration(parse_integer(flag, v, lo, hi));
          },
          help + " [" + std::to_string(lo) + ", " + std::to_string(hi) + "]")
      ->type_name(unit)
      ->default_str(std::to_string(std::chrono::duration_cast<Duration>(target).count()));
}

/// `FLAG VALUE`, repeatable: each VALUE is handed to `add` in command-line order, and an exception
/// `add` throws becomes a UsageError with its message (prefixed by `context` when not empty).
CLI::Option* add_repeatable(CLI::App& app, const std::string& flag, const std::string& value_name,
                            std::function<void(const std::string&)> add, const std::string& help,
                            const std::string& context = {});

/// `--dataset NAME=PATH`, repeatable: registers in `registry` where this node keeps data set NAME's
/// `--simd PATH`: forces the fast kernels' SIMD path (scalar, avx2, avx512, neon) for the whole run
/// (ops/simd.h; docs/running.md). A name this build or CPU lacks is a UsageError, before any work.
CLI::Option* add_simd(CLI::App& app);

/// files (a job names its data set, never a path); a malformed spec is a UsageError.
CLI::Option* add_datasets(CLI::App& app, DataRegistry& registry);

/// `--weights NAME=PATH`, repeatable: registers in `registry` where this node keeps the initial
/// weights NAME (a job's model.init; engine/init_weights.h); a malformed spec is a UsageError.
/// add_datasets adds it too.
CLI::Option* add_weights(CLI::App& app, DataRegistry& registry);

/// `--device NAME`: where training runs (cpu, cuda, cuda-emulated; engine/device.h, docs/cuda.md), stored
/// in `device`. A name this build or machine lacks is a UsageError, before any work.
CLI::Option* add_device(CLI::App& app, Device& device);

/// TLS flags (docs/running.md, "TLS"): with `server`, `--tls-cert FILE` and `--tls-key FILE` (given
/// together: the node serves wss://); always `--tls-ca FILE`, the CAs wss:// peers' certificates must
/// chain to (default: the system's). Stored in `files`; check_tls_usage checks them when the command runs.
void add_tls(CLI::App& app, TlsFiles& files, bool server);
/// UsageError when only one of --tls-cert and --tls-key was given.
void check_tls_usage(const TlsFiles& files);

/// Parses a public key given in hex for `flag` (--referee-key, --client-key); UsageError otherwise.
PublicKey public_key_arg(std::string_view flag, const std::string& hex);

/// The ranks this process trains with: MPI_COMM_WORLD under an MPI launcher in a build with MPI
/// (mpi/mpi_world.h; MPI_Init happens here), else this process alone.
std::unique_ptr<World> launched_world_or_solo();

}  // namespace tribunal::cli

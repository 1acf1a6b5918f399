#include "apps/cli.h"

#include <charconv>
#include <fstream>
#include <iterator>

#include "engine/error.h"
#include "ops/simd.h"
#include "ops/tensor.h"
#include "protocol/hash.h"
#ifdef TRIBUNAL_HAVE_MPI
#include "mpi/mpi_world.h"
#endif

namespace tribunal::cli {

std::vector<uint8_t> read_file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ProtocolError(path.string() + ": cannot open");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int64_t parse_integer(std::string_view flag, const std::string& text, int64_t lo, int64_t hi) {
  int64_t out = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc() || end != text.data() + text.size() || out < lo || out > hi)
    throw UsageError(std::string(flag) + " expects an integer in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "], got '" + text + "'");
  return out;
}

CLI::Option* add_repeatable(CLI::App& app, const std::string& flag, const std::string& value_name,
                            std::function<void(const std::string&)> add, const std::string& help,
                            const std::string& context) {
  return app
      .add_option_function<std::vector<std::string>>(
          flag,
          [add = std::move(add), context](const std::vector<std::string>& values) {
            for (const std::string& v : values) {
              try {
                add(v);
              } catch (const UsageError&) {
                throw;
              } catch (const std::exception& e) {
                throw UsageError(context + e.what());
              }
            }
          },
          help + " (repeatable)")
      ->type_name(value_name)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);  // one VALUE per occurrence: what follows is the next argument
}

CLI::Option* add_weights(CLI::App& app, DataRegistry& registry) {
  add_repeatable(
      app, "--model", "NAME=PATH",
      [&registry](const std::string& spec) { registry.add_model(std::string_view(spec)); },
      "where this node keeps the model file NAME (an onnx job's model.file: an ONNX file, docs/onnx.md)");
  return add_repeatable(
      app, "--weights", "NAME=PATH",
      [&registry](const std::string& spec) { registry.add_weights(std::string_view(spec)); },
      "where this node keeps the initial weights NAME (a job's model.init: a safetensors file)");
}

CLI::Option* add_datasets(CLI::App& app, DataRegistry& registry) {
  add_weights(app, registry);  // a job names its initial weights as it names its data set
  return add_repeatable(
      app, "--dataset", "NAME=PATH",
      [&registry](const std::string& spec) { registry.add(std::string_view(spec)); },
      "where this node keeps data set NAME's files (fashion-mnist and fortunes are registered at "
      "their Debian paths)");
}

CLI::Option* add_simd(CLI::App& app) {
  return app
      .add_option_function<std::string>(
          "--simd",
          [](const std::string& name) {
            try {
              const SimdPath path = parse_simd_path(name);
              require_simd_path(path, "--simd");
              set_simd_path(path);
            } catch (const OpError& e) {
              const std::string what = e.what();  // a missing path names --simd and what this machine has
              throw UsageError(what.rfind("--simd", 0) == 0 ? what : "--simd: " + what);
            }
          },
          "force this SIMD path of the kernels for the whole run (default: the fastest this CPU has; the "
          "results are bitwise the same on every path)")
      ->type_name("PATH");
}

void add_tls(CLI::App& app, TlsFiles& files, bool server) {
  if (server) {
    app.add_option("--tls-cert", files.cert, "serve wss:// with this PEM certificate chain (needs --tls-key)")
        ->type_name("FILE")
        ->envname("TRIBUNAL_TLS_CERT");
    app.add_option("--tls-key", files.key, "the PEM private key of --tls-cert")
        ->type_name("FILE")
        ->envname("TRIBUNAL_TLS_KEY");
  }
  app.add_option("--tls-ca", files.ca, "PEM CA certificates that wss:// peers' certificates must chain to")
      ->type_name("FILE")
      ->envname("TRIBUNAL_TLS_CA")
      ->default_str("the system's CAs");
}

void check_tls_usage(const TlsFiles& files) {
  if (files.cert.empty() != files.key.empty()) throw UsageError("--tls-cert and --tls-key go together");
}

CLI::Option* add_device(CLI::App& app, Device& device) {
  return app
      .add_option_function<std::string>(
          "--device",
          [&device](const std::string& name) {
            try {
              device = parse_device(name);
              require_device(device);
            } catch (const EngineError& e) {
              const std::string what = e.what();
              throw UsageError(what.rfind("--device", 0) == 0 ? what : "--device: " + what);
            }
          },
          "where the training steps run: cpu, cuda (a GPU; a -DTRIBUNAL_CUDA=ON build) or cuda-emulated (the "
          "same CUDA kernels in a host SIMT emulation, slow); the results are bitwise the same on every "
          "device")
      ->type_name("DEVICE")
      ->default_str("cpu");
}

PublicKey public_key_arg(std::string_view flag, const std::string& hex) {
  try {
    return digest_from_hex(hex);
  } catch (const std::exception&) {
    throw UsageError(std::string(flag) +
                     " expects a public key as 64 hex digits (tribunal keygen prints it), got '" + hex + "'");
  }
}

std::unique_ptr<World> launched_world_or_solo() {
#ifdef TRIBUNAL_HAVE_MPI
  return launched_world();
#else
  return std::make_unique<SoloWorld>();
#endif
}

}  // namespace tribunal::cli

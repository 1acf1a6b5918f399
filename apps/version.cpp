// `tribunal --version`: the release, the build (git describe at configure time, compiler) and the
// contracts a node's results depend on (docs/numerics.md, docs/protocol.md).
#include <fmt/format.h>

#include "apps/build_info.h"
#include "apps/cli.h"
#include "engine/job.h"
#include "protocol/messages.h"

namespace tribunal::cli {

std::string version_text() {
  return fmt::format(
      "tribunal {} ({})\n"
      "numerics contract {} (RepOps; part of every job id)\n"
      "wire protocol {}\n"
      "built with {}, {}\n",
      TRIBUNAL_VERSION, TRIBUNAL_GIT_DESCRIBE, kRepOpsContractVersion, static_cast<int>(kWireVersion),
      TRIBUNAL_COMPILER, TRIBUNAL_BUILD_TYPE);
}

}  // namespace tribunal::cli

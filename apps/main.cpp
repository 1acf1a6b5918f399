// The `tribunal` executable: one binary, one subcommand per role.
#include <cstdio>
#include <exception>
#include <string_view>

#include "apps/cli.h"
#include "net/context.h"

namespace {

constexpr const char* kUsage =
    "usage: tribunal <command> [options]\n"
    "commands:\n"
    "  demo [--job JOB.toml] [--seed S] [--json]\n"
    "      a referee, an honest and a cheating provider on loopback; watch the dispute narrow\n"
    "  train JOB.toml [--steps N] [--threads K] [--out DIR] [--resume] [--json] [--dataset NAME=PATH]...\n"
    "      train a job with RepOps, write stride checkpoints to DIR, evaluate on the test set\n"
    "      (a job names its data set; --dataset registers where a name's files are)\n"
    "  referee --listen HOST:PORT --key KEYFILE [--data DIR] [--allow-network CIDR]...\n"
    "          [--client-key HEX]... [--reserved-disputes N] [--max-live-disputes N]\n"
    "          [--max-disputes-per-client N] [--max-parameters N] [--max-reexecution-work N]\n"
    "          [--max-opened-bytes N] [--retention-days D]\n"
    "      serve disputes: drive the bisection game, re-execute one op, sign verdicts; every\n"
    "      dispute is kept in DIR/referee.sqlite (default ./referee-data) and resumed on restart,\n"
    "      a decided one's record pruned after D days (default 30; its verdict is kept);\n"
    "      providers on loopback, link-local or private addresses only where --allow-network says;\n"
    "      openings of trusted --client-key clients may use N reserved slots (default 1024)\n"
    "  provider --listen HOST:PORT --key KEYFILE --store DIR --referee-key HEX... [--advertise URL]\n"
    "           [--client-key HEX]... [--dataset NAME=PATH]... [--max-steps N] [--max-parameters N]\n"
    "           [--max-checkpoint-bytes N] [--threads K] [--corrupt STEP:NODE]\n"
    "      train submitted jobs, return claims signed with the URL referees reach it at, answer\n"
    "      the referees it trusts (--corrupt makes it cheat at one node, to test a referee)\n"
    "  delegate JOB.toml --provider URL --provider URL... --referee URL --referee-key HEX\n"
    "           [--out DIR] [--key KEYFILE] [--dataset NAME=PATH]...\n"
    "      give a job to several providers, dispute differing claims, print the outcome\n"
    "  campaign [--games N] [--seed S]\n"
    "      random cheaters and bisection lies against the game; JSON with honest_losses (must be 0)\n"
    "  scenario run FILE... [--json] [--verbose]\n"
    "      play cheater scenario scripts over loopback WebSockets; exit 1 if an outcome differs\n"
    "  scenario graph JOB.toml    the node table of a job's step graph (for scenario scripts)\n"
    "  keygen KEYFILE             make an Ed25519 key file (prints the public key)\n"
    "  verify VERDICT --referee-key HEX   check a verdict file offline\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace tribunal::cli;
  if (argc < 2 || std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string_view command = argv[1];
  // A referee holds about three sockets per live dispute; the default soft limit (1024) is too low.
  tribunal::raise_fd_limit();
  try {
    Args args(argc, argv, 2);
    if (command == "train") return train_main(args);
    if (command == "demo") return demo_main(args);
    if (command == "referee") return referee_main(args);
    if (command == "provider") return provider_main(args);
    if (command == "delegate") return delegate_main(args);
    if (command == "keygen") return keygen_main(args);
    if (command == "campaign") return campaign_main(args);
    if (command == "verify") return verify_main(args);
    if (command == "scenario") return scenario_main(args);
    throw UsageError("unknown command '" + std::string(command) + "'");
  } catch (const UsageError& e) {
    std::fprintf(stderr, "tribunal: %s\n%s", e.what(), kUsage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tribunal: error: %s\n", e.what());
    return 1;
  }
}

// The `tribunal` executable: one binary, one subcommand per role, parsed with CLI11 (apps/cli.h).
// `tribunal --help` lists the commands, `tribunal COMMAND --help` a command's options with their
// defaults, ranges and units. Exit codes: 0 done, 1 a runtime error (`tribunal: error: …`), 2 a usage
// error (one line `tribunal: COMMAND: …`); `delegate` also 3, 4 and 5.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "apps/cli.h"
#include "net/context.h"

namespace {

using tribunal::cli::UsageError;

// "train", "scenario run": the subcommands the command line chose (so far, when parsing failed).
std::string command_path(const CLI::App& app) {
  std::string path;
  for (const CLI::App* a = &app; !a->get_subcommands().empty();) {
    a = a->get_subcommands().front();
    path += (path.empty() ? "" : " ") + a->get_name();
  }
  return path;
}

// Arguments the parser left over, on the command line's path from the root to the chosen subcommand
// (every app allows extras, so that this names them in our words).
void check_leftovers(const CLI::App& app) {
  for (const CLI::App* a = &app; a;) {
    const std::vector<std::string> rest = a->remaining();
    const CLI::App* next = a->get_subcommands().empty() ? nullptr : a->get_subcommands().front();
    if (!rest.empty()) {
      const std::string& arg = rest.front();
      if (!arg.empty() && arg[0] == '-') throw UsageError("unknown option '" + arg + "'");
      if (!next && !a->get_subcommands([](const CLI::App*) { return true; }).empty())
        throw UsageError("unknown command '" + arg + "'");
      throw UsageError("unexpected argument '" + arg + "'");
    }
    a = next;
  }
}

// Prints a usage error as one line, `tribunal: COMMAND: MESSAGE` (with a pointer to --help when the
// parser found it: its messages do not say what the flag means), and returns exit code 2.
int usage_error(const CLI::App& app, const std::string& message, bool point_to_help) {
  const std::string path = command_path(app);
  std::string line = "tribunal: " + (path.empty() ? "" : path + ": ") + message;
  if (point_to_help) line += " (see 'tribunal " + (path.empty() ? "" : path + " ") + "--help')";
  std::fprintf(stderr, "%s\n", line.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tribunal::cli;
  CLI::App app(
      "tribunal: refereed delegation of ML training — train with RepOps, commit to the trajectory, "
      "settle disagreements with a referee.",
      "tribunal");
  app.allow_extras();            // inherited by the subcommands; check_leftovers reports them
  app.require_subcommand(0, 1);  // one command; a positional argument never starts a second
  // A flag given twice: the last counts (repeatable flags take every value: add_repeatable).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.get_formatter()->column_width(44);
  const std::vector<Command> commands = {add_demo(app),     add_train(app),    add_referee(app),
                                         add_provider(app), add_delegate(app), add_campaign(app),
                                         add_scenario(app), add_keygen(app),   add_verify(app),
                                         add_audit(app),    add_report(app),   add_export(app)};
  app.footer(
      "Run 'tribunal COMMAND --help' for a command's options, defaults and units.\n"
      "Exit codes: 0 done, 1 runtime error, 2 usage error; delegate: 3 no claim stands, 4 a dispute "
      "undecided.");
  if (argc < 2) {  // no command: the list of commands, as a usage error
    std::fputs(app.help().c_str(), stderr);
    return 2;
  }
  try {
    app.parse(argc, argv);
    check_leftovers(app);
    const Command* chosen = nullptr;
    for (const Command& c : commands)
      if (c.app->parsed()) chosen = &c;
    if (!chosen) throw UsageError("give a command ('tribunal --help' lists them)");
    // A referee holds about three sockets per live dispute; the default soft limit (1024) is too low.
    tribunal::raise_fd_limit();
    return chosen->run();
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    return usage_error(app, e.what(), true);
  } catch (const UsageError& e) {
    return usage_error(app, e.what(), false);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tribunal: error: %s\n", e.what());
    return 1;
  }
}

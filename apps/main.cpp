// The `tribunal` executable: one binary, one subcommand per role, parsed with CLI11 (apps/cli.h).
// `tribunal --help` lists the commands, `tribunal COMMAND --help` a command's options with their
// defaults, ranges and units. Exit codes: 0 done, 1 a runtime error (`tribunal: error: …`), 2 a usage
// error (one line `tribunal: COMMAND: …`); `delegate` also 3 and 4.
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

// The deepest subcommand chosen (the root when none was).
const CLI::App& leaf(const CLI::App& app) {
  const CLI::App* a = &app;
  while (!a->get_subcommands().empty()) a = a->get_subcommands().front();
  return *a;
}

// Arguments the parser left over (every app allows extras, so that this names them in our words).
void check_leftovers(const CLI::App& app) {
  const CLI::App& last = leaf(app);
  const std::vector<std::string> rest = last.remaining();
  if (rest.empty()) return;
  const std::string& a = rest.front();
  if (!a.empty() && a[0] == '-') throw UsageError("unknown option '" + a + "'");
  if (!last.get_subcommands([](const CLI::App*) { return true; }).empty()) throw UsageError("unknown command '" + a + "'");
  throw UsageError("unexpected argument '" + a + "'");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tribunal::cli;
  CLI::App app("tribunal: refereed delegation of ML training — train with RepOps, commit to the trajectory, "
               "settle disagreements with a referee.",
               "tribunal");
  app.allow_extras();               // inherited by the subcommands; check_leftovers reports them
  app.require_subcommand(0, 1);     // one command; a positional argument never starts a second
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // a flag given twice: the last counts
  app.get_formatter()->column_width(44);
  const std::vector<Command> commands = {add_demo(app),     add_train(app),  add_referee(app),
                                         add_provider(app), add_delegate(app), add_campaign(app),
                                         add_scenario(app), add_keygen(app), add_verify(app)};
  app.footer("Run 'tribunal COMMAND --help' for a command's options, defaults and units.\n"
             "Exit codes: 0 done, 1 runtime error, 2 usage error; delegate: 3 no claim stands, 4 a dispute undecided.");
  if (argc < 2) {  // no command: the list of commands, as a usage error
    std::fputs(app.help().c_str(), stderr);
    return 2;
  }
  const Command* chosen = nullptr;
  try {
    app.parse(argc, argv);
    check_leftovers(app);
    for (const Command& c : commands)
      if (c.app->parsed()) chosen = &c;
    if (!chosen) throw UsageError("give a command ('tribunal --help' lists them)");
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const std::exception& e) {  // UsageError, CLI::ParseError
    const std::string path = command_path(app);
    std::fprintf(stderr, "tribunal: %s%s%s\n", path.empty() ? "" : (path + ": ").c_str(), e.what(),
                 dynamic_cast<const CLI::ParseError*>(&e)
                     ? (" (see 'tribunal " + (path.empty() ? "" : path + " ") + "--help')").c_str()
                     : "");
    return 2;
  }
  // A referee holds about three sockets per live dispute; the default soft limit (1024) is too low.
  tribunal::raise_fd_limit();
  try {
    return chosen->run();
  } catch (const UsageError& e) {
    std::fprintf(stderr, "tribunal: %s: %s\n", command_path(app).c_str(), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tribunal: error: %s\n", e.what());
    return 1;
  }
}

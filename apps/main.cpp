// The `tribunal` executable: one binary, one subcommand per role, parsed with CLI11 (apps/cli.h).
// `tribunal --help` lists the commands, `tribunal COMMAND --help` a command's options with their
// defaults, ranges and units. Exit codes: 0 done, 1 a runtime error (`tribunal: error: …`), 2 a usage
// error (one line `tribunal: COMMAND: …`); `delegate` also 3, 4 and 5.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "apps/cli.h"
#include "engine/suggest.h"
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

// The names of `app`'s subcommands, in registration order.
std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* c : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(c->get_name());
  return names;
}

// " (did you mean 'X'?)" for a mistyped command or option among `names` (engine/suggest.h).
std::string suggestion(const std::string& word, const std::vector<std::string>& names) {
  return tribunal::did_you_mean(word, std::vector<std::string_view>(names.begin(), names.end()));
}

// The long options of `app` ("--steps", …) and, for an option given as --name=value, the name alone.
std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names = {"--help"};
  for (const CLI::Option* o : app.get_options())
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
  return names;
}

// Arguments the parser left over, on the command line's path from the root to the chosen subcommand
// (every app allows extras, so that this names them in our words, with the nearest name when the
// argument looks like a typo of one).
void check_leftovers(const CLI::App& app) {
  for (const CLI::App* a = &app; a;) {
    const std::vector<std::string> rest = a->remaining();
    const CLI::App* next = a->get_subcommands().empty() ? nullptr : a->get_subcommands().front();
    if (!rest.empty()) {
      const std::string& arg = rest.front();
      if (!arg.empty() && arg[0] == '-') {
        const std::string name = arg.substr(0, arg.find('='));
        throw UsageError("unknown option '" + arg + "'" + suggestion(name, option_names(*a)));
      }
      if (!next && !a->get_subcommands([](const CLI::App*) { return true; }).empty())
        throw UsageError("unknown command '" + arg + "'" + suggestion(arg, command_names(*a)));
      throw UsageError("unexpected argument '" + arg + "'");
    }
    a = next;
  }
}

// `tribunal help [COMMAND…]` as `tribunal [COMMAND…] --help`: the arguments CLI11 is given. A name
// that is not a command is a UsageError (CLI11 would print the help of the command before it).
std::vector<std::string> arguments(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args.front() != "help") return args;
  args.erase(args.begin());
  const CLI::App* at = &app;
  for (const std::string& name : args) {
    const auto found = at->get_subcommands([&](const CLI::App* c) { return c->get_name() == name; });
    if (found.empty())
      throw UsageError("help: unknown command '" + name + "'" + suggestion(name, command_names(*at)));
    at = found.front();
  }
  args.push_back("--help");
  return args;
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
  app.set_version_flag("--version", version_text(), "print the version, the build and the numerics contract");
  app.footer(
      "Run 'tribunal help COMMAND' or 'tribunal COMMAND --help' for a command's options, defaults and "
      "units.\n"
      "Exit codes: 0 done, 1 runtime error, 2 usage error; delegate: 3 no claim stands, 4 a dispute "
      "undecided.");
  if (argc < 2) {  // no command: the list of commands, as a usage error
    std::fputs(app.help().c_str(), stderr);
    return 2;
  }
  try {
    std::vector<std::string> args = arguments(app, argc, argv);
    std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
    app.parse(args);
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
  } catch (const CLI::CallForVersion&) {
    std::fputs(version_text().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    // A mistyped option often hides behind the error it causes (--lsten: "--listen is required").
    try {
      check_leftovers(app);
    } catch (const UsageError& leftover) {
      return usage_error(app, leftover.what(), false);
    }
    return usage_error(app, e.what(), true);
  } catch (const UsageError& e) {
    return usage_error(app, e.what(), false);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tribunal: error: %s\n", e.what());
    return 1;
  }
}

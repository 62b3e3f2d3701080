#pragma once
// The option words of `klab gdn` and `klab export`, read by Boost.Program_options like every klab
// command: --name VALUE or --name=VALUE (no abbreviations), and --help / -h; switches (e.g. --json)
// take no value. A later value of an option replaces an earlier one (the words are kept in
// command-line order). Refusals name the word and the command's --help: an unknown option, a
// positional word, a missing or empty value.
#include <string>
#include <utility>
#include <vector>

#include <boost/program_options.hpp>

namespace klab::experiments {

struct CommandOptions {
  bool help = false;
  std::vector<std::string> switches;                        // switches given, with their --
  std::vector<std::pair<std::string, std::string>> values;  // (name with its --, value) in command-line order
  bool has(const std::string& sw) const;
};

// `desc` declares the command's options (those with a value as po::value<std::string>(), switches
// with po::bool_switch() or no value); --help/-h is added here.
CommandOptions parse_command_options(const std::vector<std::string>& args, const boost::program_options::options_description& desc,
                                     const std::string& command);

}  // namespace klab::experiments

#include "command_options.hpp"

#include <algorithm>

#include "klab/error.hpp"

namespace klab::experiments {

namespace po = boost::program_options;

bool CommandOptions::has(const std::string& sw) const { return std::find(switches.begin(), switches.end(), sw) != switches.end(); }

CommandOptions parse_command_options(const std::vector<std::string>& args, const po::options_description& desc, const std::string& command) {
  po::options_description all;
  all.add(desc).add_options()("help,h", "this help")("args", po::value<std::vector<std::string>>(), "");
  po::positional_options_description pos;
  pos.add("args", -1);
  const std::string see = " (see `klab " + command + " --help`)";
  po::parsed_options parsed(&all);
  try {
    // No abbreviations: --weigh is not --weights.
    const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    parsed = po::command_line_parser(args).options(all).positional(pos).style(style).run();
  } catch (const po::unknown_option& e) {
    throw Error("unknown option '" + e.get_option_name() + "'" + see);
  } catch (const po::invalid_command_line_syntax& e) {
    if (e.kind() == po::invalid_syntax::missing_parameter) throw Error(e.get_option_name() + " needs a value");
    throw Error(std::string(e.what()) + see);
  } catch (const po::error& e) {
    throw Error(std::string(e.what()) + see);
  }
  CommandOptions o;
  for (const auto& opt : parsed.options) {
    const std::string name = "--" + opt.string_key;
    if (opt.string_key == "args") {
      if (opt.position_key < 0) throw Error("unknown option '--args'" + see);
      throw Error("unexpected argument '" + opt.value.front() + "' (options only; see `klab " + command + " --help`)");
    }
    if (opt.string_key == "help") {
      o.help = true;
      continue;
    }
    const auto* d = all.find_nothrow(opt.string_key, false);
    if (d && d->semantic()->max_tokens() == 0) {
      o.switches.push_back(name);
      continue;
    }
    require(!opt.value.empty() && !opt.value.front().empty(), name + " needs a non-empty value");
    o.values.emplace_back(name, opt.value.front());
  }
  return o;
}

}  // namespace klab::experiments

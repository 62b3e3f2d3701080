// fuzz_cli: the command line's text parsers. The input is split at '\n' into words (argv without
// the program and the command), and
//   - each word goes through klab::parse_shape, klab::parse_dist (harness/src/problem.cpp) and the
//     strict number parsers klab::ref::parse_whole_int / parse_whole_number (ref/parse.hpp), each
//     compared with an oracle written from its documented contract;
//   - the words go through Boost.Program_options' command_line_parser, as apps/klab/main.cpp's
//     parse() calls it, with a description of the same value kinds as klab's run options (an int and
//     a uint64 with defaults, a string, a bool_switch, a flag, help with a short name, the
//     positional "args"). It is not klab's option table, which lives inside main.cpp's anonymous
//     namespace: fuzz/README.md names the refactor that would let this target use the real one.
// A refusal must be the documented exception (klab::Error, an empty optional, po::error);
// anything else that escapes, a sanitizer report, a leak, or a broken invariant is a crash.
#include <boost/program_options.hpp>

#include <cctype>
#include <cfloat>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common.hpp"
#include "klab/error.hpp"
#include "klab/problem.hpp"
#include "klab/ref/parse.hpp"

namespace po = boost::program_options;
using klab::fuzz::same_value;

namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// The value of a run of decimal digits, nullopt past `max`.
std::optional<unsigned long long> digits_value(std::string_view s, unsigned long long max) {
  if (!all_digits(s)) return std::nullopt;
  unsigned long long v = 0;
  for (char c : s) {
    const unsigned d = unsigned(c - '0');
    if (v > (max - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

// ---- parse_shape: "MxK", both decimal digits only, each in [1, 2^31 - 1]; str() prints it back.
std::optional<klab::Shape> shape_oracle(const std::string& s) {
  const auto x = s.find('x');
  if (x == std::string::npos) return std::nullopt;
  const auto m = digits_value(std::string_view(s).substr(0, x), INT_MAX);
  const auto k = digits_value(std::string_view(s).substr(x + 1), INT_MAX);
  if (!m || !k || *m == 0 || *k == 0) return std::nullopt;
  return klab::Shape{std::int64_t(*m), std::int64_t(*k)};
}

void check_shape(const std::string& s) {
  const auto want = shape_oracle(s);
  try {
    const klab::Shape got = klab::parse_shape(s);
    KLAB_FUZZ_CHECK(want && got == *want, "parse_shape accepted '" + s + "' as " + got.str());
    KLAB_FUZZ_CHECK(got.str() == std::to_string(got.m) + "x" + std::to_string(got.k) && klab::parse_shape(got.str()) == got,
                    "parse_shape(str()) of " + got.str());
  } catch (const klab::Error& e) {
    KLAB_FUZZ_CHECK(!want, "parse_shape refused the valid shape '" + s + "': " + e.what());
    KLAB_FUZZ_CHECK(std::string(e.what()).rfind("malformed shape '" + s + "'", 0) == 0, std::string("a refusal not naming the input: ") + e.what());
  }
}

// ---- parse_dist: the four names and the alias, nothing else; to_string() prints a name it parses.
void check_dist(const std::string& s) {
  static const std::map<std::string, klab::Dist> names{{"uniform", klab::Dist::uniform},
                                                       {"normal", klab::Dist::normal},
                                                       {"student-t", klab::Dist::student_t},
                                                       {"heavy-tailed", klab::Dist::student_t},
                                                       {"outlier", klab::Dist::outlier}};
  const auto it = names.find(s);
  try {
    const klab::Dist d = klab::parse_dist(s);
    KLAB_FUZZ_CHECK(it != names.end() && it->second == d, "parse_dist accepted '" + s + "'");
    KLAB_FUZZ_CHECK(klab::parse_dist(klab::to_string(d)) == d, "parse_dist(to_string()) of '" + s + "'");
  } catch (const klab::Error& e) {
    KLAB_FUZZ_CHECK(it == names.end(), "parse_dist refused '" + s + "'");
    KLAB_FUZZ_CHECK(std::string(e.what()).find("(known: uniform, normal, student-t (alias heavy-tailed), outlier)") != std::string::npos,
                    std::string("a refusal not naming the valid names: ") + e.what());
  }
}

// ---- parse_whole_int: "the whole string must be the number": an optional sign, then decimal
// digits, nothing before or after, within long long.
std::optional<long long> int_oracle(const std::string& s) {
  std::string_view v = s;
  if (v.size() >= 2 && v[0] == '+' && v[1] != '-') v.remove_prefix(1);  // from_chars takes '-' only
  long long x = 0;
  const auto r = std::from_chars(v.data(), v.data() + v.size(), x);
  if (r.ec != std::errc() || r.ptr != v.data() + v.size()) return std::nullopt;
  return x;
}

void check_int(const std::string& s) {
  const auto got = klab::ref::parse_whole_int(s);
  const auto want = int_oracle(s);
  KLAB_FUZZ_CHECK(got == want, "parse_whole_int('" + s + "') = " + (got ? std::to_string(*got) : "none") + ", the contract says " +
                                   (want ? std::to_string(*want) : "none"));
  if (got) KLAB_FUZZ_CHECK(klab::ref::parse_whole_int(std::to_string(*got)) == got, "parse_whole_int(to_string()) of " + s);
  // Metadata values can hold a NUL (JSON "\u0000"): what follows it is still text after the number.
  if (got) KLAB_FUZZ_CHECK(!klab::ref::parse_whole_int(s + '\0' + s), "parse_whole_int read past a NUL: " + s);
}

// ---- parse_whole_number: the whole string is one strtod number (decimal, hex, inf, nan), nothing
// before or after. Decimal text is compared with std::from_chars (correctly rounded, like strtod).
// Pinned, not a contract: std::stod reports ERANGE for a subnormal result, so those are refused.
std::string g17(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

void check_number(const std::string& s) {
  const auto got = klab::ref::parse_whole_number(s);
  if (got) {
    KLAB_FUZZ_CHECK(!klab::ref::parse_whole_number(s + '\0' + s), "parse_whole_number read past a NUL: " + s);
    for (char c : s) KLAB_FUZZ_CHECK(!std::isspace(static_cast<unsigned char>(c)), "parse_whole_number accepted '" + s + "', which holds a space");
    KLAB_FUZZ_CHECK(std::isnan(*got) || *got == 0 || std::isinf(*got) || std::fabs(*got) >= DBL_MIN, "subnormal accepted: " + s);
    const auto again = klab::ref::parse_whole_number(g17(*got));
    KLAB_FUZZ_CHECK(again && same_value(*again, *got), "parse_whole_number(%.17g) of '" + s + "' = " + g17(*got));
  }
  if (s.find_first_of("xX") != std::string::npos) return;  // hex floats (and nan(x...)): strtod only
  if (!s.empty() && std::isspace(static_cast<unsigned char>(s[0]))) {
    KLAB_FUZZ_CHECK(!got, "parse_whole_number accepted '" + s + "', which begins with a space");
    return;
  }
  std::string_view v = s;
  if (v.size() >= 2 && v[0] == '+' && v[1] != '-' && v[1] != '+') v.remove_prefix(1);
  double x = 0;
  const auto r = std::from_chars(v.data(), v.data() + v.size(), x);
  const bool whole = r.ec == std::errc() && r.ptr == v.data() + v.size();
  const bool subnormal = whole && x != 0 && std::fabs(x) < DBL_MIN;
  if (whole && !subnormal)
    KLAB_FUZZ_CHECK(got && same_value(*got, x), "parse_whole_number('" + s + "') = " + (got ? g17(*got) : "none") + ", from_chars reads " + g17(x));
  else
    KLAB_FUZZ_CHECK(!got, "parse_whole_number accepted '" + s + "' = " + g17(*got) + ", which from_chars does not read as a normal number");
}

// ---- Boost.Program_options, as main.cpp's parse() drives it.
struct Values {
  int i = 7;
  std::uint64_t u = 1;
  std::string str;
  bool sw = false;
  bool flag = false, help = false;
  std::vector<std::string> positional;
  bool operator==(const Values&) const = default;
};

// What the words gave, and how many positional values came by position: "args" is a registered
// option like any other, so `--args X` (or a prefix Boost guesses, `--a X`) adds one by name, past
// the max_positional limit. main.cpp's parse() has the same hole (fuzz/README.md, "findings").
struct Parsed {
  Values v;
  std::size_t by_position = 0;
};

// boost::lexical_cast's reading of an integer option: an optional sign and decimal digits, the
// magnitude within the type. Negative text for an unsigned type wraps modulo 2^64 (lexical_cast's
// documented behaviour, so `klab run --seed -1` reads as seed 2^64 - 1; see fuzz/README.md).
std::optional<long long> lexical_int(std::string_view s) {
  const bool neg = !s.empty() && s[0] == '-';
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  const auto mag = digits_value(s, neg ? 2147483648ull : 2147483647ull);
  if (!mag) return std::nullopt;
  return neg ? -(long long)*mag : (long long)*mag;
}
std::optional<std::uint64_t> lexical_u64(std::string_view s) {
  const bool neg = !s.empty() && s[0] == '-';
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  const auto mag = digits_value(s, ~0ull);
  if (!mag) return std::nullopt;
  return neg ? std::uint64_t(0) - *mag : *mag;
}

bool is_suffix_of_a_word(const std::string& v, const std::vector<std::string>& words) {
  for (const auto& w : words)
    if (w.size() >= v.size() && w.compare(w.size() - v.size(), v.size(), v) == 0) return true;
  return false;
}

// Parses `words`; nullopt when Boost refuses them (po::error, as main() catches it).
std::optional<Parsed> parse_words(const std::vector<std::string>& words, int max_positional) {
  Parsed out;
  Values& v = out.v;
  po::options_description d("fuzz");
  d.add_options()("int", po::value<int>(&v.i)->default_value(7), "")("u64", po::value<std::uint64_t>(&v.u)->default_value(1), "")(
      "str", po::value<std::string>(&v.str), "")("switch", po::bool_switch(&v.sw), "")("flag", "")("help,h", "")(
      "args", po::value<std::vector<std::string>>(), "");
  po::positional_options_description pos;
  pos.add("args", max_positional);
  po::variables_map vm;
  std::map<std::string, std::vector<std::string>> given;  // option -> the text of its values
  try {
    const po::parsed_options parsed = po::command_line_parser(words).options(d).positional(pos).run();
    for (const auto& o : parsed.options) {
      KLAB_FUZZ_CHECK(!o.unregistered, "an unregistered option '" + o.string_key + "' passed");
      for (const auto& val : o.value) KLAB_FUZZ_CHECK(is_suffix_of_a_word(val, words), "value '" + val + "' of " + o.string_key + " is no word's text");
      auto& g = given[o.string_key];
      g.insert(g.end(), o.value.begin(), o.value.end());
      if (o.value.empty()) g.emplace_back();
      if (o.string_key == "args" && o.position_key >= 0) ++out.by_position;
    }
    po::store(parsed, vm);
    po::notify(vm);
  } catch (const po::error&) {
    return std::nullopt;
  }
  v.flag = vm.count("flag") > 0;
  v.help = vm.count("help") > 0;
  if (vm.count("args")) v.positional = vm["args"].as<std::vector<std::string>>();

  KLAB_FUZZ_CHECK(given.count("flag") == std::size_t(v.flag) && given.count("help") == std::size_t(v.help), "flag/help vs the words");
  KLAB_FUZZ_CHECK(given.count("args") ? v.positional == given["args"] : v.positional.empty(), "positional words changed");
  KLAB_FUZZ_CHECK(max_positional < 0 || out.by_position <= std::size_t(max_positional), "more positional words than allowed");
  for (const auto& p : v.positional) KLAB_FUZZ_CHECK(is_suffix_of_a_word(p, words), "positional '" + p + "' is no word");
  if (given.count("int")) {
    KLAB_FUZZ_CHECK(given["int"].size() == 1 && lexical_int(given["int"][0]) == v.i, "--int " + std::to_string(v.i) + " from '" + given["int"][0] + "'");
  } else {
    KLAB_FUZZ_CHECK(v.i == 7 && vm["int"].defaulted(), "--int absent, not its default");
  }
  if (given.count("u64")) {
    KLAB_FUZZ_CHECK(given["u64"].size() == 1 && lexical_u64(given["u64"][0]) == v.u, "--u64 " + std::to_string(v.u) + " from '" + given["u64"][0] + "'");
  } else {
    KLAB_FUZZ_CHECK(v.u == 1 && vm["u64"].defaulted(), "--u64 absent, not its default");
  }
  if (given.count("str")) KLAB_FUZZ_CHECK(given["str"].size() == 1 && given["str"][0] == v.str, "--str '" + v.str + "'");
  if (!given.count("switch")) KLAB_FUZZ_CHECK(!v.sw, "--switch set without the word");
  return out;
}

// The canonical words of `v`: parsed again, they give `v`.
std::vector<std::string> canonical_words(const Values& v) {
  std::vector<std::string> w{"--int=" + std::to_string(v.i), "--u64=" + std::to_string(v.u)};
  if (!v.str.empty()) w.push_back("--str=" + v.str);  // Boost refuses "--str=": absent reads as "" too
  if (v.sw) w.push_back("--switch");
  if (v.flag) w.push_back("--flag");
  if (v.help) w.push_back("-h");
  w.push_back("--");
  w.insert(w.end(), v.positional.begin(), v.positional.end());
  return w;
}

void check_options(const std::vector<std::string>& words) {
  // Limiting the positional words only refuses more: a refusal of `words` is not parsed again.
  const auto any = parse_words(words, -1);
  if (any) {
    const auto two = parse_words(words, 2);
    KLAB_FUZZ_CHECK(two.has_value() == (any->by_position <= 2), "max_positional 2 vs unlimited");
    if (two) KLAB_FUZZ_CHECK(two->v == any->v, "max_positional changed the values");
    const auto again = parse_words(canonical_words(any->v), -1);
    KLAB_FUZZ_CHECK(again && again->v == any->v, "the canonical words parse to other values");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> words;
  std::string cur;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == '\n' || data[i] == '\0') {  // argv words hold no NUL
      words.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += char(data[i]);
    }
  }
  if (size) words.push_back(std::move(cur));
  if (words.size() > 24) return -1;  // a command line, not a file: keep the input small
  for (const auto& w : words) {
    check_shape(w);
    check_dist(w);
    check_int(w);
    check_number(w);
  }
  check_options(words);
  return 0;
}

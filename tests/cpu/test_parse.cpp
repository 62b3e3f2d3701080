// The strict number parsers (reference/include/klab/ref/parse.hpp) behind the GDN metadata and
// `klab gdn`'s options: the whole string is the number, or nothing.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "klab/ref/parse.hpp"

using klab::ref::parse_whole_int;
using klab::ref::parse_whole_number;

TEST_CASE("parse_whole_int: the whole string, sign allowed, nothing before or after") {
  CHECK(parse_whole_int("42") == 42);
  CHECK(parse_whole_int("-7") == -7);
  CHECK(parse_whole_int("+7") == 7);
  CHECK(parse_whole_int("-9223372036854775808") == -9223372036854775807LL - 1);
  // A leading space was accepted (std::stoll skips it; found by fuzz/fuzz_cli).
  for (const std::string& s : std::vector<std::string>{"", " 5", "\t5", "\n5", "5 ", "5x", "0x10", "1e3", "+-5", "9223372036854775808", std::string("5\0", 2)})
    CHECK_MESSAGE(!parse_whole_int(s), "'" << s << "'");
}

TEST_CASE("parse_whole_number: one strtod number, nothing before or after") {
  CHECK(parse_whole_number("1e-4") == 1e-4);
  CHECK(parse_whole_number("+.5") == 0.5);
  CHECK(parse_whole_number("0x1p-3") == 0.125);
  CHECK(std::isinf(*parse_whole_number("inf")));
  // A leading space was accepted (std::stod skips it; found by fuzz/fuzz_cli).
  for (const std::string& s : std::vector<std::string>{"", " 1.5", "\t1", "\n1", "1.5 ", "1.5x", "1e999", "1e", std::string("1\0", 2)})
    CHECK_MESSAGE(!parse_whole_number(s), "'" << s << "'");
}

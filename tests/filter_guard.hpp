#pragma once
// One rule for both suites' entry points (tests/cpu/main.cpp, tests/gpu/main.cpp): a run asked for test
// cases by name (--test-case=..., -tc=...) that matches none FAILS, instead of doctest's "0 test cases,
// success". CTest's doctest_discover_tests asks for each case by name; on 2026-12-04, 25 cases whose names
// held ';' were asked for by pieces that matched nothing, and CTest counted 25 passes for cases that never
// ran (tests/scripts/test_case_names.py). The same holds for a mistyped -tc in a device script.
// Include after <doctest/doctest.h> with DOCTEST_CONFIG_IMPLEMENT, in one translation unit.
#include <cstring>
#include <iostream>

namespace klab::test {

// Counts the cases that passed the filters (doctest reports it at the end of a run, not to the caller).
struct FilterCount : doctest::IReporter {
  static inline unsigned passing = 0;
  static inline bool ended = false;
  explicit FilterCount(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& s) override {
    passing = s.numTestCasesPassingFilters;
    ended = true;
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

inline bool names_cases(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    for (const char* p : {"--test-case=", "-tc="})
      if (std::strncmp(argv[i], p, std::strlen(p)) == 0) return true;
  return false;
}

// doctest's result, or 1 where the run named cases and none matched.
inline int run_guarded(doctest::Context& ctx, int argc, char** argv, const char* suite) {
  const int rc = ctx.run();
  if (ctx.shouldExit() || rc != 0 || !FilterCount::ended || !names_cases(argc, argv)) return rc;
  if (FilterCount::passing == 0) {
    std::cerr << suite << ": no test case matches the --test-case filter: nothing ran, which is not a pass" << std::endl;
    return 1;
  }
  return rc;
}

}  // namespace klab::test

DOCTEST_REGISTER_LISTENER("klab-filter-count", 1, klab::test::FilterCount);

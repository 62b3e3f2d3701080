// The kernel trace's reading of spans (klab/trace.hpp): names, periods, gaps, the record form. The
// spans are written by hand here; the gpu suite traces real kernels (tests/gpu/test_harness.cu).
#include <doctest/doctest.h>

#include "klab/trace.hpp"

#include <string>
#include <vector>

using namespace klab;

namespace {
KernelSpan span(const std::string& name, std::uint64_t start, std::uint64_t end) {
  KernelSpan s;
  s.name = name;
  s.start_ns = start;
  s.end_ns = end;
  return s;
}
}  // namespace

TEST_CASE("short_kernel_name keeps the function name of a mangled kernel") {
  CHECK(short_kernel_name("_Z12empty_kernelv") == "empty_kernel");
  // a template in an anonymous namespace inside a namespace
  CHECK(short_kernel_name("_ZN4klab12_GLOBAL__N_111read_kernelILi4ELb1EEEvPK5uint4mPj") == "read_kernel");
  // a template at namespace scope
  CHECK(short_kernel_name("_Z12xprep_kernelIL4Form1ELb0ELb0EEvPKfiPKhx") == "xprep_kernel");
  // internal linkage inside a namespace
  CHECK(short_kernel_name("_ZN3gdnL9norm_stepEPf") == "norm_step");
  // not mangled, or not parseable: unchanged
  CHECK(short_kernel_name("gemvx_kernel") == "gemvx_kernel");
  CHECK(short_kernel_name("_Z99short") == "_Z99short");
}

TEST_CASE("summarize_trace: the period of a recurring kernel and the gap between neighbours, overlaps negative") {
  // A chain of prep (1 us) -> main (4 us), period 5 us; each main starts 0.5 us before its prep ends
  // (a PDL overlap), each prep 0.2 us after the main before it ends. Given out of order.
  std::vector<KernelSpan> s;
  for (int i = 3; i >= 0; --i) {
    const std::uint64_t t = 10000 + std::uint64_t(i) * 5000;
    s.push_back(span("_Z4prepv", t, t + 1000));
    s.push_back(span("_Z4mainv", t + 500, t + 4800));
  }
  const TraceSummary r = summarize_trace(s);
  CHECK(r.kernels == 8);
  CHECK(r.span_us == doctest::Approx(15 + 4.8));  // first start 10000 ns, last end 29800 ns
  REQUIRE(r.names.size() == 2);
  CHECK(r.names.at("prep").count == 4);
  CHECK(r.names.at("prep").median_us == doctest::Approx(1.0));
  CHECK(r.names.at("prep").period_us == doctest::Approx(5.0));
  CHECK(r.names.at("main").median_us == doctest::Approx(4.3));
  REQUIRE(r.pairs.size() == 2);
  const auto pm = r.pairs.at({"prep", "main"});
  CHECK(pm.count == 4);
  CHECK(pm.median_gap_us == doctest::Approx(-0.5));
  const auto mp = r.pairs.at({"main", "prep"});
  CHECK(mp.count == 3);
  CHECK(mp.median_gap_us == doctest::Approx(0.2));
}

TEST_CASE("summarize_trace: nothing, and a single kernel (no period, no pair)") {
  CHECK(summarize_trace({}).kernels == 0);
  CHECK(summarize_trace({}).span_us == 0);
  const TraceSummary one = summarize_trace({span("k", 100, 2100)});
  CHECK(one.kernels == 1);
  CHECK(one.span_us == doctest::Approx(2.0));
  CHECK(one.names.at("k").period_us == 0);
  CHECK(one.pairs.empty());
}

TEST_CASE("the trace's record: spans in start order, relative to the first start, names indexed") {
  const auto j = to_json(std::vector<KernelSpan>{span("_Z1bv", 3000, 4000), span("_Z1av", 1000, 2500), span("_Z1bv", 2000, 3500)});
  CHECK(j.at("kernels") == 3);
  CHECK(j.at("span_names") == nlohmann::json::array({"a", "b"}));
  const auto& rows = j.at("spans");
  REQUIRE(rows.size() == 3);
  CHECK(rows[0][0] == 0);
  CHECK(rows[0][1].get<double>() == doctest::Approx(0.0));
  CHECK(rows[0][2].get<double>() == doctest::Approx(1.5));
  CHECK(rows[1][0] == 1);
  CHECK(rows[1][1].get<double>() == doctest::Approx(1.0));
  CHECK(rows[2][1].get<double>() == doctest::Approx(2.0));
  CHECK(j.at("names").at("b").at("period_us").get<double>() == doctest::Approx(1.0));
  CHECK(j.at("pairs").size() == 2);  // a->b, b->b
}

TEST_CASE("trace_line names each kernel with its count, duration and period, and each gap") {
  const std::string line = trace_line({span("_Z1av", 0, 1000), span("_Z1av", 3000, 4000), span("_Z1bv", 3500, 5000)});
  CHECK(line.find("3 kernels over 5 us") == 0);
  CHECK(line.find("a 2 x 1 us every 3 us") != std::string::npos);
  CHECK(line.find("b 1 x 1.5 us") != std::string::npos);
  CHECK(line.find("a->b -0.5 us") != std::string::npos);
  CHECK(line.find("a->a 2 us") != std::string::npos);
}

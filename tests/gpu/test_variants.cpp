// Every registered variant of every generated op against the op's reference, on several seeds,
// distributions and awkward sizes (1 row, odd rows, k not a multiple of 4 / 32 where the variant
// accepts it; a variant that refuses a shape says why through can_implement). Problem by problem:
// each problem is generated once and every variant runs on it.
#include <doctest/doctest.h>

#include "gpu_util.hpp"
#include "klab/catalog.hpp"
#include "klab/metrics.hpp"
#include "klab/registry.hpp"

using namespace klab;

TEST_CASE("every mat-vec variant matches its op's f64 reference") {
  const std::vector<Shape> shapes{{1, 32}, {1, 160}, {33, 160}, {5, 96}, {129, 1024}, {1024, 5120}, {3, 6144}, {5, 7}, {3, 6145}};
  int checked = 0;
  for (const auto& [opname, op] : registry().ops()) {
    if (!op.generate || !op.reference) continue;
    const auto variants = registry().variants_of(opname);
    for (const Shape& s : shapes) {
      for (std::uint64_t seed : {1u, 2u, 3u}) {
        for (Dist d : {Dist::uniform, Dist::student_t}) {
          Problem p{s, d, seed};
          if (!op.validate(p).empty()) continue;
          auto w = op.generate(p);
          auto ref = op.reference(*w);
          for (const Variant* v : variants) {
            if (!v->can_implement(p).empty()) continue;
            auto y = test::run_once(*v, *w);
            auto a = accuracy(y, ref);
            CAPTURE(v->name);
            CAPTURE(p.str());
            CHECK(a.unwritten == 0);
            CHECK(a.nan == 0);
            CHECK(a.inf == 0);
            // f32 sums of up to ~6000 terms against f64: ~sqrt(k)*2^-24 of max|y| (< 1e-5); a variant
            // that rounds on purpose (bf16 peers) states its own tolerance.
            CHECK(a.max_rel < (v->tolerance > 0 ? v->tolerance : 1e-5));
            ++checked;
          }
        }
      }
    }
  }
  CHECK(checked > 0);
}

// Every registered mat-vec variant against its op's reference, on several seeds, distributions
// and awkward sizes (1 row, odd rows, k not a multiple of 4 / 32 where the variant accepts it).
#include <doctest/doctest.h>

#include "gpu_util.hpp"
#include "klab/metrics.hpp"
#include "klab/registry.hpp"

using namespace klab;

TEST_CASE("every f32_gemv variant matches the f64 reference") {
  const std::vector<Shape> shapes{{1, 4}, {1, 160}, {33, 160}, {5, 7}, {129, 1000}, {1024, 5120}, {3, 6145}};
  for (const Variant* v : registry().variants_of("f32_gemv")) {
    for (const Shape& s : shapes) {
      for (std::uint64_t seed : {1u, 2u, 3u}) {
        for (Dist d : {Dist::uniform, Dist::student_t}) {
          Problem p{s, d, seed};
          if (!v->can_implement(p).empty()) continue;
          auto w = registry().op("f32_gemv").generate(p);
          auto ref = registry().op("f32_gemv").reference(*w);
          auto y = test::run_once(*v, *w);
          auto a = accuracy(y, ref);
          CAPTURE(v->name);
          CAPTURE(p.str());
          CHECK(a.unwritten == 0);
          CHECK(a.nan == 0);
          // f32 sums of up to 6145 terms against f64: ~sqrt(k)*2^-24 of max|y|.
          CHECK(a.max_rel < 1e-5);
        }
      }
    }
  }
}

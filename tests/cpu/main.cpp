// The cpu suite's entry point: doctest's, with filter_guard.hpp's rule (a named run that matches no case fails).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "../filter_guard.hpp"

int main(int argc, char** argv) {
  doctest::Context ctx(argc, argv);
  return klab::test::run_guarded(ctx, argc, argv, "klab_cpu_tests");
}

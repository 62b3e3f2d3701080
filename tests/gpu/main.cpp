// The gpu suite's entry point. Without a CUDA device nothing here can run: it says so and exits
// with 77, which ctest reports as SKIPPED (SKIP_RETURN_CODE), never as passed. A run naming test cases
// (-tc=...) that match none fails (filter_guard.hpp).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <iostream>

#include "../filter_guard.hpp"
#include "klab/device.hpp"

int main(int argc, char** argv) {
  if (!klab::has_device()) {
    std::cout << "SKIP: gpu suite not run: " << klab::no_device_reason() << std::endl;
    return 77;
  }
  klab::select_device(0);
  doctest::Context ctx(argc, argv);
  return klab::test::run_guarded(ctx, argc, argv, "klab_gpu_tests");
}

// `klab run|ab ... --devices D1,D2,.. --replicate` (issue 12, part 7): the option's refusals, which
// come before any device is looked for (the same with and without a GPU), and, with the devices
// named missing, the existing "no device" / "no device N" refusal: a non-zero exit, nothing written,
// never a pretended run. The run on two real GPUs is tests/gpu/test_replicate.cpp's.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "cli_util.hpp"
#include "klab/device.hpp"

namespace fs = std::filesystem;
using klab::test::has;
using klab::test::klab_cli;

namespace {
const char* const kAb = "ab f32_gemv/impl=warp-row,unroll=1 f32_gemv/impl=cublas-sgemv --shape 4x4";

fs::path out_dir(const std::string& name) { return klab::test::temp_out_dir("replicate-" + name); }
}  // namespace

TEST_CASE("--replicate: wrong combinations are refused, naming the problem, with exit 2 and nothing written") {
  struct Case {
    std::string args, says;
  };
  for (const auto& c : std::vector<Case>{
           {"run f32-gemv-vs-cublas --quick --replicate", "--replicate runs the whole run on each of --devices"},
           {"run f32-gemv-vs-cublas --quick --devices 0 --replicate", "--replicate needs two devices or more (got --devices 0)"},
           {"run f32-gemv-vs-cublas --quick --devices 3 --replicate", "gpu_noise.py --same-gpu"},
           {"run f32-gemv-vs-cublas --quick --devices 0,1 --replicate --shard 0/2", "give --replicate or --shard, not both"},
           {"run f32-gemv-vs-cublas --quick --replicate --shard 1/2", "give --devices too"},
           {std::string(kAb) + " --devices 0 --replicate", "two devices or more"},
           {"run f32-gemv-vs-cublas --quick --devices 0,1 --replicate=yes", "replicate"},  // a switch: takes no value
       }) {
    CAPTURE(c.args);
    const auto dir = out_dir("refuse");
    const auto r = klab_cli(c.args + " --out " + dir.string());
    CHECK(r.code == 2);
    CHECK(has(r.out, c.says));
    CHECK(has(r.out, "no report written"));
    CHECK_FALSE(fs::exists(dir));
  }
}

TEST_CASE("--replicate without the devices named: the \"no device\" refusal, exit 2, nothing written") {
  // No GPU: "no CUDA device ...; nothing to run on". One GPU or a few (device 99 is on no machine):
  // "there is no device 99". Either way no replica was started and no directory made.
  for (const std::string& args : {std::string("run f32-gemv-vs-cublas --quick --devices 0,99 --replicate"),
                                  std::string(kAb) + " --devices 99,0 --replicate"}) {
    CAPTURE(args);
    const auto dir = out_dir("nodev");
    const auto r = klab_cli(args + " --out " + dir.string());
    CHECK(r.code == 2);
    CHECK(has(r.out, klab::has_device() ? "there is no device 99" : "no CUDA device"));
    CHECK(has(r.out, "no report written"));
    CHECK_FALSE(has(r.out, "replica on device"));
    CHECK_FALSE(fs::exists(dir));
  }
  if (!klab::has_device()) {
    // Without a GPU the sharded --devices refuses the same way (the check is shared, not copied).
    const auto dir = out_dir("nodev-shards");
    const auto r = klab_cli("run f32-gemv-vs-cublas --quick --devices 0,1 --out " + dir.string());
    CHECK(r.code == 2);
    CHECK(has(r.out, "--devices: no CUDA device"));
    CHECK_FALSE(fs::exists(dir));
  }
}

TEST_CASE("--replicate is in the run and ab help") {
  for (const std::string& cmd : {"run --help", "ab --help"}) {
    CAPTURE(cmd);
    const auto r = klab_cli(cmd);
    CHECK(r.code == 0);
    CHECK(has(r.out, "--replicate"));
    CHECK(has(r.out, "OUT/device-Di"));
  }
}

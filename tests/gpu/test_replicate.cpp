// `klab run ... --devices 0,1 --replicate` on two real GPUs (issue 12, part 7): each device runs the
// whole run into OUT/device-D (its log beside it), nothing is merged, and the two reports hold the
// same measurements (experiment, variant, problem) on their own device. Skipped, saying so, on a
// machine with fewer than two CUDA devices; the option's refusals are tests/cpu/test_replicate.cpp's.
#include <doctest/doctest.h>
#include <cuda_runtime.h>

#include <filesystem>
#include <set>
#include <string>
#include <tuple>

#include "../cpu/cli_util.hpp"
#include "klab/report.hpp"

namespace fs = std::filesystem;

namespace {
int device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

// (experiment, variant, problem) of every measurement, and the device index of the header's env.
std::pair<std::set<std::tuple<std::string, std::string, std::string>>, int> read_replica(const fs::path& dir) {
  std::set<std::tuple<std::string, std::string, std::string>> ms;
  int device = -1;
  for (const auto& j : klab::read_jsonl(dir / "report.jsonl")) {
    if (j.at("kind") == "header") device = j.at("env").at("device").at("index").get<int>();
    if (j.at("kind") == "measurement")
      ms.emplace(j.at("experiment").get<std::string>(), j.at("variant").get<std::string>(), j.value("problem", std::string()));
  }
  return {ms, device};
}
}  // namespace

TEST_CASE("--replicate: every device runs the whole run, side by side, not merged" * doctest::skip(device_count() < 2)) {
  const fs::path out = klab::test::temp_out_dir("gpu-replicate");
  const auto r = klab::test::klab_cli("run f32-gemv-vs-cublas --quick --reps 5 --devices 1,0 --replicate --out " + out.string());
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_FALSE(fs::exists(out / "report.jsonl"));  // not merged
  CHECK_FALSE(fs::exists(out / "shard-0"));
  CHECK(r.out.find("scripts/gpu_noise.py " + (out / "device-1").string() + " " + (out / "device-0").string()) != std::string::npos);
  const auto [m1, d1] = read_replica(out / "device-1");
  const auto [m0, d0] = read_replica(out / "device-0");
  CHECK(d1 == 1);
  CHECK(d0 == 0);
  CHECK(fs::exists(out / "device-1.log"));
  CHECK(fs::exists(out / "device-0.log"));
  CHECK_FALSE(m0.empty());
  CHECK(m0 == m1);  // the whole run on each: the same measurements
  fs::remove_all(out);
}

// The CLI's refusals: unknown names, malformed shapes, bad options give a clear message, a non-zero
// exit and no report; without a device, device experiments are reported as skipped, not passed.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_util.hpp"
#include "profile_cli.hpp"
#include "klab/cluster_probe.hpp"
#include "klab/load_probe.hpp"
#include "klab/device.hpp"
#include "klab/error.hpp"
#include "klab/report.hpp"

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace {
using klab::test::klab_cli;

fs::path out_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("klab-cli-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}
}  // namespace

TEST_CASE("refusals exit non-zero, name the problem and write no report") {
  struct Case {
    std::string args, says;
  };
  for (const auto& c : std::vector<Case>{
           {"run no-such-experiment", "unknown experiment 'no-such-experiment'"},
           {"run", "name at least one experiment"},
           {"run f32-gemv-vs-cublas --reps 0", "--reps must be"},
           {"run f32-gemv-vs-cublas --reps abc", "reps"},
           {"run f32-gemv-vs-cublas --bogus", "bogus"},
           {"ab f32_gemv/impl=warp-row,unroll=1 f32_gemv/impl=cublas-sgemv --shape 12x", "malformed shape '12x'"},
           {"ab f32_gemv/impl=warp-row,unroll=1 f32_gemv/impl=cublas-sgemv --shape 0x5", "zero dimension"},
           {"ab f32_gemv/impl=warp-row,unroll=1 f32_gemv/impl=cublas-sgemv --shape 1000000x1000000", "over 32 GB"},
           {"ab f32_gemv/impl=warp-row,unroll=1 f32_gemv/impl=cublas-sgemv --shape 4x4 --input weird", "unknown input distribution"},
           {"ab f32_gemv/impl=warp-row,unroll=1 --shape 4x4", "exactly two variants"},
           {"ab f32_gemv/impl=warp-row,unroll=1 f32_gemv/impl=nope --shape 4x4", "unknown variant"},
           {"list gadgets", "unknown category"},
           {"frobnicate", "unknown command"},
           // "args" is the positional words' option: named, it would slip past the limit on them.
           {"env --args x", "unknown option '--args'"},
           {"run --a f32-gemv-vs-cublas", "unknown option"},
           // Boost would wrap -1 to 2^64 - 1 for an unsigned option and run with that seed.
           {"run f32-gemv-vs-cublas --seed -1", "--seed must be a non-negative integer (got '-1')"},
           {"run f32-gemv-vs-cublas --seed 18446744073709551616", "--seed must be below 2^64"},
           {"run f32-gemv-vs-cublas --set q=1", "--set: unknown parameter 'q'"},
           {"run f32-gemv-vs-cublas --set m=17408 --set m=1024", "given twice"},
           {"ab f32_gemv/impl=warp-row,unroll=1 f32_gemv/impl=cublas-sgemv --set m=64", "--shape MxK (or --set m=...,k=...) is required"},
           {"ab f32_gemv/impl=warp-row,unroll=1 f32_gemv/impl=cublas-sgemv --shape 4x4 --set m=8,k=8", "give the shape once"},
           // --shard I/N (0 <= I < N) and --devices D1,D2,.. (one shard per device).
           {"run f32-gemv-vs-cublas --shard 2/2", "--shard: I must be below N (got '2/2'"},
           {"run f32-gemv-vs-cublas --shard 0/0", "--shard: N must be at least 1"},
           {"run f32-gemv-vs-cublas --shard 1", "--shard must be I/N"},
           {"run f32-gemv-vs-cublas --shard -1/2", "--shard must be I/N"},
           {"run f32-gemv-vs-cublas --shard 0/2x", "--shard must be I/N"},
           {"ab f32_gemv/impl=warp-row,unroll=1 f32_gemv/impl=cublas-sgemv --shape 4x4 --shard a/b", "--shard must be I/N"},
           {"run f32-gemv-vs-cublas --devices 0,x", "--devices must be a comma-separated list"},
           {"run f32-gemv-vs-cublas --devices 0,0", "each once"},
           {"run f32-gemv-vs-cublas --devices ''", "--devices must be"},
           {"run f32-gemv-vs-cublas --devices 0,1 --shard 0/2", "give --devices or --shard, not both"},
           {"run f32-gemv-vs-cublas --devices 0,1 --device 1", "give --devices or --device, not both"},
       }) {
    CAPTURE(c.args);
    auto dir = out_dir("refuse");
    const bool writes = c.args.rfind("run", 0) == 0 || c.args.rfind("ab", 0) == 0;
    auto r = klab_cli(c.args + (writes ? " --out " + dir.string() : ""));
    CHECK(r.code != 0);
    CHECK(r.out.find(c.says) != std::string::npos);
    // One prefix per message ("klab list: unknown category", not "klab list: klab list: ..."), and
    // "no report written" only from the commands that write one.
    const std::string cmd = c.args.substr(0, c.args.find(' '));
    CHECK(r.out.find("klab " + cmd + ": klab " + cmd + ":") == std::string::npos);
    CHECK((r.out.find("no report written") != std::string::npos) == writes);
    CHECK_FALSE(fs::exists(dir));  // no report file, not even its directory
    fs::remove_all(dir);
  }
}

TEST_CASE("list shows the registry and filters by glob") {
  auto r = klab_cli("list variants --filter 'f32_gemv/*'");
  CHECK(r.code == 0);
  CHECK(r.out.find("f32_gemv/impl=warp-row,unroll=1") != std::string::npos);
  CHECK(r.out.find("experiments:") == std::string::npos);
  auto e = klab_cli("list experiments");
  CHECK(e.out.find("f32-gemv-vs-cublas") != std::string::npos);
  // No wildcard: a fragment of the name, not the whole name.
  auto f = klab_cli("list variants --filter block-per-thread");
  CHECK(f.code == 0);
  CHECK(f.out.find("q4_gemv/map=block-per-thread,rows=8") != std::string::npos);
  CHECK(f.out.find("f32_gemv/") == std::string::npos);
}

TEST_CASE("--help works for every command") {
  for (const char* c : {"run --help", "ab --help", "list --help", "env --help", "--help"}) {
    CAPTURE(c);
    auto r = klab_cli(c);
    CHECK(r.code == 0);
    CHECK(r.out.find("klab") != std::string::npos);
  }
}

TEST_CASE("without a device, a device experiment is a skip with its reason, never a pass") {
  if (klab::has_device()) return;  // this case is about the no-device path; the gpu suite covers the rest
  auto dir = out_dir("skip");
  auto r = klab_cli("run f32-gemv-vs-cublas --out " + dir.string());
  CHECK(r.code == 4);  // done, device work skipped: distinct from 0 so that scripts can tell
  CHECK(r.out.find("not_evaluated") != std::string::npos);
  CHECK(r.out.find("0 held") != std::string::npos);
  auto recs = klab::read_jsonl(dir / "report.jsonl");
  bool skip = false;
  for (const auto& j : recs) {
    if (j["kind"] == "skip") skip = true;
    if (j["kind"] == "claim") CHECK(j["state"] == "not_evaluated");
    CHECK(j["kind"] != "measurement");
  }
  CHECK(skip);
  fs::remove_all(dir);
}

TEST_CASE("without a device: --require-device fails with no report, env keeps stdout pure JSON") {
  if (klab::has_device()) return;  // the no-device path only
  auto dir = out_dir("require");
  auto r = klab_cli("run f32-gemv-vs-cublas --require-device --out " + dir.string());
  CHECK(r.code == 1);
  CHECK(r.out.find("--require-device") != std::string::npos);
  CHECK_FALSE(fs::exists(dir));
  // stdout alone (stderr to /dev/null) must parse as JSON; the SKIP goes to stderr.
  auto e = klab_cli("env", /*stdout_only=*/true);
  CHECK(e.code == 4);
  CHECK(e.out.find("SKIP") == std::string::npos);
  nlohmann::json j;
  CHECK_NOTHROW(j = nlohmann::json::parse(e.out));
  CHECK(j.is_object());
  auto both = klab_cli("env");
  CHECK(both.out.find("SKIP") != std::string::npos);
}

TEST_CASE("klab_bench: a filter that matches nothing (or is no regex) exits 2, without a device every case is a skip, exit 4") {
  auto bench = [](const std::string& args) {
    const std::string cmd = std::string(KLAB_BENCH) + " " + args + " >/dev/null 2>&1";
    const int status = std::system(cmd.c_str());
    return WEXITSTATUS(status);
  };
  CHECK(bench("--benchmark_filter=no-such-benchmark") == 2);
  CHECK(bench("'--benchmark_filter=('") == 2);
  if (!klab::has_device()) CHECK(bench("--benchmark_filter=unroll=1/5120x6144") == 4);
  // --variants: the filter of klab run and list (a fragment, or a glob), before Google Benchmark's regex.
  CHECK(bench("--variants no-such-variant") == 2);
  CHECK(bench("--variants") == 2);
  auto listed = [](const std::string& args) {
    const std::string cmd = std::string(KLAB_BENCH) + " " + args + " --benchmark_list_tests 2>/dev/null";
    std::string out;
    if (FILE* f = popen(cmd.c_str(), "r")) {
      char buf[512];
      while (std::fgets(buf, sizeof buf, f)) out += buf;
      pclose(f);
    }
    return out;
  };
  const auto some = listed("--variants 'f32_gemv/*unroll=4'");
  CHECK(some.find("f32_gemv/impl=warp-row,unroll=4/17408x5120") != std::string::npos);
  CHECK(some.find("unroll=1") == std::string::npos);
  // An op with declared parameters is benchmarked at its defaults, named by its problem.
  CHECK(listed("--variants gdn_step/tier=f32,api=run").find("gdn_step/tier=f32,api=run/ck=4,dk=128,dv=128,hidden=5120") != std::string::npos);
}

TEST_CASE("klab ab --set sweeps every m x k x dist, one race each, named by its problem") {
  if (klab::has_device()) return;  // the names show in the skips written without a device
  auto dir = out_dir("sweep");
  auto r = klab_cli("ab f32_gemv/impl=warp-row,unroll=1 f32_gemv/impl=cublas-sgemv --set m=64,128,k=96,dist=uniform,normal --out " +
                    dir.string());
  CHECK(r.code == 4);
  std::set<std::string> names;
  for (const auto& j : klab::read_jsonl(dir / "report.jsonl"))
    if (j["kind"] == "skip") names.insert(j["experiment"].get<std::string>());
  CHECK(names == std::set<std::string>{"ab:64x96/uniform", "ab:64x96/normal", "ab:128x96/uniform", "ab:128x96/normal"});
  fs::remove_all(dir);
}

TEST_CASE("--devices without enough devices says so, exits 2 and writes nothing") {
  // No GPU: none to run on. One or a few: device 99 is not there.
  auto dir = out_dir("devices");
  auto r = klab_cli("run f32-gemv-vs-cublas --quick --devices 0,99 --out " + dir.string());
  CHECK(r.code == 2);
  CHECK(r.out.find(klab::has_device() ? "there is no device 99" : "no CUDA device") != std::string::npos);
  CHECK(r.out.find("no report written") != std::string::npos);
  CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("--shard: the report's header says which shard it is") {
  auto dir = out_dir("shard");
  auto r = klab_cli("run f32-gemv-vs-cublas --quick --shard 1/3 --out " + dir.string());
  CHECK((r.code == 0 || r.code == 4));
  const auto recs = klab::read_jsonl(dir / "report.jsonl");
  REQUIRE(!recs.empty());
  CHECK(recs.front().at("kind") == "header");
  CHECK(recs.front().at("env").at("options").at("shard") == nlohmann::json{{"index", 1}, {"count", 3}});
  // Without --shard, no shard.
  auto u = klab_cli("run f32-gemv-vs-cublas --quick --out " + dir.string());
  CHECK_FALSE(klab::read_jsonl(dir / "report.jsonl").front().at("env").at("options").contains("shard"));
  fs::remove_all(dir);
}

namespace {
// A probe command's refusals: each case exits 2 naming the problem (`says`) and prints no `measure`; `cmd --help`
// exits 0 and klab's help lists `usage`; without a device, `runnable` exits 2 saying so, and prints no `measure`.
struct ProbeCase {
  std::string args, says;
};
void check_probe_refusals(const std::string& cmd, const std::vector<ProbeCase>& cases, const std::string& measure, const std::string& usage,
                          const std::string& runnable) {
  for (const auto& c : cases) {
    CAPTURE(c.args);
    const auto r = klab_cli(c.args);
    CAPTURE(r.out);
    CHECK(r.code == 2);
    CHECK(r.out.find(c.says) != std::string::npos);
    CHECK(r.out.find(measure) == std::string::npos);
  }
  CHECK(klab_cli(cmd + " --help").code == 0);
  CHECK(klab_cli("--help").out.find(usage) != std::string::npos);
  if (klab::has_device()) return;  // the no-device path only; the device runs it for real (docs/DEVICE-RUNBOOK.md)
  const auto r = klab_cli(runnable);
  CHECK(r.code == 2);
  CHECK(r.out.find("no CUDA device") != std::string::npos);
  CHECK(r.out.find(measure) == std::string::npos);
}
}  // namespace

TEST_CASE("klab probe-ring refuses bad options and a missing device by name, exit 2, and prints no measurement") {
  check_probe_refusals("probe-ring",
                       {
                           {"probe-ring", "--shape MxK is required"},
                           {"probe-ring --shape 64x100", "not a multiple of 32"},
                           {"probe-ring --shape 64x40000", "32768"},
                           {"probe-ring --shape 0x64", "0x64"},
                           {"probe-ring --shape 64x64 --reps 0", "--reps must be at least 1"},
                           {"probe-ring --shape 64x64 --bogus", "--bogus"},
                       },
                       "ring_read_us", "klab probe-ring --shape MxK", "probe-ring --shape 64x64");
}

TEST_CASE("klab probe-rec refuses bad options and a missing device by name, exit 2, and prints no measurement") {
  check_probe_refusals("probe-rec",
                       {
                           {"probe-rec --cols 64 --rows 8", "no pdl=ahead kernel of that shape"},
                           {"probe-rec --rows 2", "no pdl=ahead kernel of that shape"},
                           {"probe-rec --cols 8 --rows 4 --pdl next", "no pdl=next kernel of that shape"},
                           {"probe-rec --cols 8 --rows 4 --pdl one-ahead", "no pdl=one-ahead kernel of that shape"},
                           {"probe-rec --pdl early", "--pdl early: ahead, next or one-ahead"},
                           {"probe-rec --o fused", "--o fused: direct (or leave it out)"},
                           {"probe-rec --o direct --pdl next", "--o direct: pdl=ahead only, not pdl=next"},
                           {"probe-rec --o direct --cols 8 --rows 4", "no pdl=ahead,o=direct kernel of that shape"},
                           {"probe-rec --batch 0", "--batch must be in [1, 256]"},
                           {"probe-rec --launches 4", "--launches must be in [8, 4096]"},
                           {"probe-rec --copies -1", "--copies must not be negative"},
                           {"probe-rec --bogus", "--bogus"},
                       },
                       "period_ns", "klab probe-rec", "probe-rec");
}

TEST_CASE("klab probe-hop refuses bad options and a missing device by name, exit 2, and prints no measurement") {
  check_probe_refusals("probe-hop",
                       {
                           {"probe-hop --form 3,2", "--form 3,2: loads in flight 3: 1, 2, 4 or 8"},
                           {"probe-hop --form 4,5", "--form 4,5: blocks per SM 5: 1 to 4"},
                           {"probe-hop --form 0,2", "a form without loads has no blocks"},
                           {"probe-hop --form 4", "--form 4: none, or L,B"},
                           {"probe-hop --form 4,2x", "--form 4,2x: none, or L,B"},
                           {"probe-hop --form none --launches 4", "--launches must be in [8, 4096]"},
                           {"probe-hop --reps 0", "--reps must be in [1, 100]"},
                           {"probe-hop --bogus", "--bogus"},
                       },
                       "hop_one_us", "klab probe-hop", "probe-hop --form none");
}

TEST_CASE("klab probe-cluster refuses bad options and a missing device by name, exit 2, and prints no measurement") {
  check_probe_refusals("probe-cluster",
                       {
                           {"probe-cluster --form 9,on,80,1", "--form 9,on,80,1: blocks a cluster 9: 0 (none) to 8"},
                           {"probe-cluster --form 5,maybe,80,1", "--form 5,maybe,80,1: C,on|off,KB,N"},
                           {"probe-cluster --form 5,on,80,0", "blocks an SM 0: 1 to 4"},
                           {"probe-cluster --launches 4", "--launches must be in [8, 100000]"},
                           {"probe-cluster --pre -1", "--pre and --post must be in [0, 1000] us"},
                           {"probe-cluster --bogus", "--bogus"},
                       },
                       "entry_gap_us", "klab probe-cluster", "probe-cluster --form 0,on,0,1");
}

TEST_CASE("klab probe-q4 refuses bad options and a missing device by name, exit 2, and prints no measurement") {
  check_probe_refusals("probe-q4",
                       {
                           {"probe-q4", "--shape MxK is required"},
                           {"probe-q4 --shape 64x100", "not a multiple of 32"},
                           {"probe-q4 --shape 64x40000", "32768"},
                           {"probe-q4 --shape 64x5120 --depth 4", "--depth 4: one of 0, 1, 2, 3"},
                           {"probe-q4 --shape 64x5120 --grid half", "--grid half: fill, groups, paced, split-k, split-k1, split-k4 or split-k-last"},
                           {"probe-q4 --shape 64x5120 --grid groups --depth 2", "grid=groups, the paced ring and grid=split-k have none"},
                           {"probe-q4 --shape 64x5120 --grid paced --depth 1", "grid=groups, the paced ring and grid=split-k have none"},
                           {"probe-q4 --shape 64x5120 --grid split-k --depth 1", "grid=groups, the paced ring and grid=split-k have none"},
                           {"probe-q4 --shape 64x5120 --launches 4", "--launches must be in [8, 1024]"},
                           {"probe-q4 --shape 64x5120 --bogus", "--bogus"},
                       },
                       "period_ns", "klab probe-q4 --shape MxK", "probe-q4 --shape 64x5120 --grid groups --prepared");
}

TEST_CASE("probe-hop's forms: the depth in flight a form names, and the default sweep from none to 128 KB an SM") {
  CHECK(klab::parse_load_form("none").inflight_bytes_per_sm() == 0);
  CHECK(klab::parse_load_form("8,4").inflight_bytes_per_sm() == 128u * 1024u);
  CHECK(klab::parse_load_form("1,2").inflight_bytes_per_sm() == 8u * 1024u);
  CHECK(klab::parse_load_form("2,1").str() == "2 loads x 1 blocks");
  std::vector<std::size_t> kb;
  for (const auto& f : klab::default_load_forms()) {
    CHECK(klab::load_form_error(f).empty());
    kb.push_back(f.inflight_bytes_per_sm() / 1024);
  }
  CHECK(kb == std::vector<std::size_t>{0, 8, 16, 32, 64, 128});
}

TEST_CASE("probe-cluster's forms: parsed as C,on|off,KB,N, refused with the values allowed, and the default sweep") {
  const auto f = klab::parse_cluster_form("5,on,80,1");
  CHECK(f.cluster == 5);
  CHECK(f.pdl);
  CHECK(f.smem_kb == 80);
  CHECK(f.per_sm == 1);
  CHECK(f.str() == "5,on,80,1");
  CHECK_FALSE(klab::parse_cluster_form("0,off,0,2").pdl);
  for (const std::string bad : {"5,on,80", "5,yes,80,1", "x,on,80,1", "5,on,80,1,2", "5,on,80k,1", ""})
    CHECK_THROWS_WITH_AS(klab::parse_cluster_form(bad), doctest::Contains("C,on|off,KB,N"), klab::Error);
  CHECK_THROWS_WITH_AS(klab::parse_cluster_form("9,on,80,1"), doctest::Contains("0 (none) to 8"), klab::Error);
  CHECK_THROWS_WITH_AS(klab::parse_cluster_form("5,on,201,1"), doctest::Contains("0 to 200"), klab::Error);
  CHECK_THROWS_WITH_AS(klab::parse_cluster_form("5,on,80,5"), doctest::Contains("1 to 4"), klab::Error);
  const auto forms = klab::default_cluster_forms();
  CHECK(forms.size() == 36);
  int no_cluster_pdl = 0;
  for (const auto& g : forms) {
    CHECK(klab::cluster_form_error(g).empty());
    no_cluster_pdl += g.cluster == 0 && g.pdl;
  }
  CHECK(no_cluster_pdl == 3);  // the reference (no cluster, PDL on) at each of the three sizes
}

TEST_CASE("probe-rec's reading of the stamps: period, hop, span after the release and each phase, from launches built to known gaps") {
  // Launch n's first block is released 300 ns after launch n-1's last exit, the second 50 ns later; each block's
  // phases take 10 (request S), 390 (wait), 100, 50, 100, 10 and 40 ns: the last exit is 350 ns after the first
  // release, so a launch ends every 650 ns.
  constexpr int L = 7, B = 2, P = 8;
  std::vector<unsigned long long> st(std::size_t(L) * B * P);
  const unsigned long long steps[] = {10, 390, 100, 50, 100, 10, 40};
  unsigned long long prev_exit = 100000;
  for (int n = 0; n < L; ++n) {
    unsigned long long last = 0;
    for (int b = 0; b < B; ++b) {
      const unsigned long long release = prev_exit + 300 + 50ull * b;
      unsigned long long t = release - 400;  // entry: request_s + wait before the release
      for (int i = 0; i < P; ++i) {
        st[(std::size_t(n) * B + b) * P + i] = t;
        if (i < P - 1) t += steps[i];
      }
      last = std::max(last, st[(std::size_t(n) * B + b) * P + P - 1]);
    }
    prev_exit = last;
  }
  const auto j = klab::experiments::stamp_reading(st, L, B, P, 2);
  CHECK(j.at("launches_read") == 5);
  CHECK(j.at("period_ns").get<double>() == doctest::Approx(650));
  CHECK(j.at("hop_ns").get<double>() == doctest::Approx(300));
  CHECK(j.at("after_release_ns").get<double>() == doctest::Approx(350));
  CHECK(j.at("release_spread_ns").get<double>() == doctest::Approx(50));
  CHECK(j.at("entry_ahead_ns").get<double>() == doctest::Approx(100));  // entry 400 before a release 300 after the exit
  CHECK(j.at("block_phase_ns").at("wait").get<double>() == doctest::Approx(390));
  CHECK(j.at("block_phase_ns").at("kv_pass2_stores").get<double>() == doctest::Approx(100));
  CHECK(j.at("block_phase_ns").at("o_exit").get<double>() == doctest::Approx(40));
  CHECK(j.at("timer_step_ns") == 10);
  // A block some launch never stamped is refused, naming it; so are shapes that do not add up.
  auto holed = st;
  holed[(std::size_t(3) * B + 1) * P + 5] = 0;
  CHECK_THROWS_WITH_AS(klab::experiments::stamp_reading(holed, L, B, P, 2), doctest::Contains("without every stamp"), klab::Error);
  CHECK_THROWS_WITH_AS(klab::experiments::stamp_reading(st, L, B + 1, P, 2), doctest::Contains("launches x blocks x points"), klab::Error);
  CHECK_THROWS_WITH_AS(klab::experiments::stamp_reading(st, L, B, P, 0), doctest::Contains("skip"), klab::Error);
  // The q4 ring probe's names for the same points (point 2 the release in both): the same figures under its names.
  const std::vector<std::string> q4 = {"request", "wait", "x", "first_bytes", "first_group", "rest", "last_group_exit"};
  const auto named = klab::experiments::stamp_reading(st, L, B, P, 2, q4);
  CHECK(named.at("hop_ns") == j.at("hop_ns"));
  CHECK(named.at("block_phase_ns").at("x").get<double>() == doctest::Approx(100));
  CHECK(named.at("block_phase_ns").at("last_group_exit").get<double>() == doctest::Approx(40));
  CHECK(named.at("block_phase_ns").size() == 7);
  CHECK_THROWS_WITH_AS(klab::experiments::stamp_reading(st, L, B, P, 2, {"a", "b"}), doctest::Contains("a name for each"), klab::Error);
}

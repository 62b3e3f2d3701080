// klab: the command line. Every command validates all of its input before it touches the device
// or writes a file; an error prints one clear line and exits non-zero with no report written.
#include <boost/program_options.hpp>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <tuple>

#include "cli.hpp"
#include "common.hpp"
#include "klab/catalog.hpp"
#include "klab/cuda.hpp"
#include "klab/device.hpp"
#include "klab/error.hpp"
#include "klab/experiment.hpp"
#include "klab/report.hpp"

namespace po = boost::program_options;
using namespace klab;

namespace {

// Exit statuses (documented in `klab --help` and README.md): 0 done; 1 a failure (CUDA error, a
// device required by --require-device and missing); 2 bad input; 3 a claim did not hold (--strict);
// 4 done, but device work was skipped for want of a device (the report says what and why);
// 130 / 143 interrupted by SIGINT / SIGTERM (the report closed as "interrupted" at a record boundary).
constexpr int kExitUsage = 2;
constexpr int kExitSkipped = 4;
const char* const kExitHelp =
    "\nExit status: 0 done; 1 a failure (CUDA error; --require-device without a device); 2 bad input;\n"
    "3 a claim did not hold (--strict); 4 done, but device work was skipped for want of a device;\n"
    "130 / 143 interrupted (SIGINT / SIGTERM): the report keeps the records so far, closed as interrupted.\n";
// The big read: 1 GiB, far over any L2, so this is DRAM bandwidth.
constexpr std::int64_t kCeilingBytes = std::int64_t(1) << 30;

void print_ceiling(std::ostream& os, const Ceiling& c) {
  os << std::fixed << std::setprecision(0) << "ceiling: read " << c.read_gbps << " GB/s (launch " << c.read_gbps_launch
     << ", stream " << c.read_gbps_stream << "; " << c.loads << " loads in flight per thread), copy " << c.copy_gbps
     << " GB/s (stream " << c.copy_gbps_stream << "); empty kernel " << std::setprecision(2) << c.empty_launch_us << " us (launch), " << c.empty_stream_us
     << " us (stream); a dependent hop " << c.hop_grid_pdl_us << " us (PDL, full grid; one block " << c.hop_one_pdl_us << ", plain "
     << c.hop_grid_plain_us << ")" << std::endl;
}

std::string timestamp() {
  auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::gmtime(&now));
  return buf;
}

struct Parsed {
  po::variables_map vm;
  std::vector<std::string> positional;
  std::vector<po::option> options;  // as given, in order (original_tokens: the words of each)
};

// Parses `args` against `desc`; positional words go to "args".
Parsed parse(const std::vector<std::string>& args, po::options_description& desc, int max_positional = -1) {
  po::options_description all;
  all.add(desc).add_options()("args", po::value<std::vector<std::string>>(), "");
  po::positional_options_description pos;
  pos.add("args", max_positional);
  Parsed p;
  const auto parsed = po::command_line_parser(args).options(all).positional(pos).run();
  // "args" holds the positional words; named (--args, or a prefix Boost completes to it) it would
  // slip past the limit on positional words.
  for (const auto& o : parsed.options)
    if (o.string_key == "args" && o.position_key < 0)
      throw Error("unknown option '" + (o.original_tokens.empty() ? o.string_key : o.original_tokens.front()) + "'");
  po::store(parsed, p.vm);
  po::notify(p.vm);
  p.options = parsed.options;
  if (p.vm.count("args")) p.positional = p.vm["args"].as<std::vector<std::string>>();
  return p;
}

void add_run_options(po::options_description& d, RunOptions& o, std::string& out, std::string& timing, std::string& seed,
                     std::vector<std::string>& sets, std::string& shard, std::string& devices) {
  d.add_options()
    ("variants", po::value<std::string>(&o.variants),
     "race only the variants whose names match (a glob; without * or ? a fragment of the name; several "
     "patterns separated by '|', any one matching)")
    ("set", po::value<std::vector<std::string>>(&sets)->composing(),
     "NAME=V1,V2,... (m, k, dist, or a parameter an op declares, see `klab list ops`; repeatable, or NAME=..,NAME=.. in one): run: the experiment's problems with "
     "these values; ab: the problems to race (every m x k x dist)")
    ("timing", po::value<std::string>(&timing)->default_value("both"),
     "timing modes: launch (one launch between events), stream (back to back in a CUDA graph over cold copies: "
     "the headline), or both")
    ("out", po::value<std::string>(&out), "report directory (default out/run-DATE)")
    ("reps", po::value<int>(&o.reps)->default_value(50), "timed repetitions per measurement")
    ("warmup", po::value<int>(&o.warmup)->default_value(5), "untimed repetitions first")
    ("seed", po::value<std::string>(&seed)->default_value("1"), "problem seed (a non-negative integer)")
    ("hot", po::bool_switch(&o.hot), "leave L2 warm between repetitions, and in stream mode launch back to back over ONE copy of the inputs, which stay in L2 where they fit (default: L2-cold, rotating copies)")
    ("device", po::value<int>(&o.device)->default_value(0), "CUDA device index")
    ("shard", po::value<std::string>(&shard),
     "I/N: race only this run's races number I, I+N, I+2N, ... (every race() call numbered in order; 0 <= I < N); "
     "the others are skipped without records. Merge the N reports with scripts/merge_reports.py")
    ("devices", po::value<std::string>(&devices),
     "D1,D2,...: one klab per device (--device Di --shard i/N --out OUT/shard-i, its output in OUT/shard-i.log), "
     "then scripts/merge_reports.py OUT OUT/shard-*")
    ("replicate",
     "with --devices (two or more): every device runs the whole run (--device Di --out OUT/device-Di, its output in "
     "OUT/device-Di.log), no shards and no merge: the reports stay side by side for scripts/gpu_noise.py")
    ("quick", po::bool_switch(&o.quick), "small problems: a smoke run, not a measurement")
    ("trace", po::bool_switch(&o.trace),
     "after each subject's timed repetitions, run it once more under CUPTI's kernel activity trace and keep every "
     "kernel's start and end in its record (timing.trace; scripts/kernel_trace.py prints them). Needs libcupti.so.13 beside "
     "klab, on the library path or under /usr/local/cuda; without it the run says so and traces nothing")
    ("strict", "exit 3 when a claim did not hold")
    ("require-device", "fail (exit 1, no report) when there is no CUDA device, instead of skipping device work (exit 4)")
    ("help,h", "this help");
}

// --seed: digits only (Boost would wrap "-1" to 2^64 - 1 for an unsigned option).
std::uint64_t parse_seed(const std::string& s) {
  const bool digits = !s.empty() && s.size() <= 20 && s.find_first_not_of("0123456789") == std::string::npos;
  require(digits, "--seed must be a non-negative integer (got '" + s + "')");
  try {
    return std::stoull(s);
  } catch (const std::out_of_range&) {
    throw Error("--seed must be below 2^64 (got '" + s + "')");
  }
}

// Every --set given, merged (a parameter may appear in one of them only).
std::map<std::string, std::vector<std::string>> parse_sets(const std::vector<std::string>& sets) {
  std::map<std::string, std::vector<std::string>> all;
  for (const auto& text : sets)
    for (auto& [name, values] : parse_set(text)) {
      require(all.count(name) == 0, "--set: parameter '" + name + "' given twice");
      all[name] = std::move(values);
    }
  return all;
}

// "launch", "stream" or "both" -> the modes, in the order they are reported.
std::vector<TimingMode> parse_modes(const std::string& timing) {
  if (timing == "both") return {TimingMode::launch, TimingMode::stream};
  if (timing == "launch" || timing == "stream") return {parse_timing_mode(timing)};
  throw Error("--timing must be launch, stream or both (got '" + timing + "')");
}

void check_run_options(const RunOptions& o) {
  require(o.reps >= 1 && o.reps <= 100000, "--reps must be between 1 and 100000 (got " + std::to_string(o.reps) + ")");
  require(o.warmup >= 0 && o.warmup <= 10000, "--warmup must be between 0 and 10000 (got " + std::to_string(o.warmup) + ")");
  require(o.device >= 0, "--device must be >= 0");
}

// The report a run has open (empty before it is opened and after it is closed as complete or
// interrupted): main() names it when an error ends the run.
std::string g_open_report;

// Runs experiments and writes one report; the shared back end of `run` and `ab`.
int run_experiments(const std::vector<const Experiment*>& exps, const RunOptions& opt, std::string out, bool strict,
                    bool require_device, bool sharded, int argc, char** argv) {
  check_run_options(opt);
  if (require_device && !has_device()) {
    std::cerr << "klab: " << no_device_reason() << " and --require-device was given; no report written" << std::endl;
    return 1;
  }
  if (out.empty()) out = "out/run-" + timestamp();
  auto env = base_environment(argc, argv);
  nlohmann::json modes = nlohmann::json::array();
  for (auto m : opt.modes) modes.push_back(to_string(m));
  const bool has_stream = std::find(opt.modes.begin(), opt.modes.end(), TimingMode::stream) != opt.modes.end();
  env["options"] = {{"reps", opt.reps}, {"warmup", opt.warmup}, {"seed", opt.seed}, {"l2_cold", !opt.hot},
                    {"flush", opt.hot ? "none" : "read"}, {"quick", opt.quick}, {"modes", modes},
                    {"headline", has_stream ? "stream" : "launch"}};
  if (opt.trace) env["options"]["trace"] = true;
  if (!opt.variants.empty()) env["options"]["variants"] = opt.variants;
  if (!opt.set.empty()) env["options"]["set"] = opt.set;
  if (sharded) env["options"]["shard"] = {{"index", opt.shard_index}, {"count", opt.shard_count}};
  std::optional<DeviceInfo> dev;
  std::optional<Ceiling> ceiling;
  std::unique_ptr<Timer> timer;
  cudaStream_t stream = nullptr;
  const bool any_device = std::any_of(exps.begin(), exps.end(), [](auto* e) { return e->needs_device || e->uses_device; });
  if (has_device()) {
    dev = select_device(opt.device);
    env["device"] = to_json(*dev);
    if (any_device) {
      KLAB_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      timer = std::make_unique<Timer>(*dev, stream);
      std::cerr << "measuring the read-bandwidth ceiling on " << dev->name << " ..." << std::endl;
      if (opt.trace) {
        KernelTracer& tracer = KernelTracer::instance();
        if (tracer.available()) env["trace"] = {{"available", true}, {"library", tracer.library()}};
        else env["trace"] = {{"available", false}, {"why", tracer.why()}};
        std::cerr << "kernel trace: " << (tracer.available() ? "CUPTI from " + tracer.library() : "off, " + tracer.why()) << std::endl;
      }
      TimingOptions copt = opt.timing();
      copt.trace = false;  // the ceiling's reads are not what a trace asks about
      ceiling = measure_ceiling(*timer, kCeilingBytes, copt);
      env["ceiling"] = to_json(*ceiling);
      print_ceiling(std::cerr, *ceiling);
    }
  } else {
    env["device"] = nullptr;
    env["no_device_reason"] = no_device_reason();
    std::cerr << "no CUDA device (" << no_device_reason() << "): experiments that need one are skipped" << std::endl;
  }
  // Everything is validated and the environment known: the report opens here (replacing one in
  // `out`), and from now on each record reaches the file as it is added.
  // The stop handlers first: a signal from here on closes the report as interrupted.
  install_stop_handlers();
  Report report(env);
  report.open(out, "report", std::vector<std::string>(argv, argv + argc));
  g_open_report = report.file().string();
  int not_held = 0, held = 0, unevaluated = 0, skipped_exps = 0;
  std::size_t races = 0;  // race() calls so far, run-wide: the race numbers of --shard
  try {
    for (const Experiment* e : exps) {
      if (int sig = stop_signal()) throw Interrupted(sig);
      Context ctx(registry(), *e, opt, report, dev ? &*dev : nullptr, ceiling ? &*ceiling : nullptr, timer.get(), &races);
      if (e->needs_device && !dev) {
        ctx.skip(e->name, no_device_reason());
        ++skipped_exps;
      } else {
        ctx.log(e->description);
        e->run(ctx);
      }
      not_held += ctx.finish();
      for (const auto& c : ctx.claims()) {
        held += c.state == ClaimState::held;
        unevaluated += c.state == ClaimState::not_evaluated;
        std::cout << "  [" << std::setw(13) << std::left << to_string(c.state) << "] " << e->name << ": " << c.text
                  << (c.evidence.empty() ? "" : "  (" + c.evidence + ")") << "\n";
      }
    }
  } catch (const Interrupted& i) {
    report.close(EndStatus::interrupted, signal_name(i.signal));
    g_open_report.clear();
    std::cout << std::flush;
    std::cerr << "klab: interrupted (" << signal_name(i.signal) << "): report " << report.file().string() << " closed as "
              << "interrupted after " << report.records().size() << " records" << std::endl;
    return 128 + i.signal;
  } catch (const std::exception& e) {
    // The error itself is printed by main(); the report keeps what finished before it.
    report.close(EndStatus::failed, e.what());
    throw;
  }
  timer.reset();
  if (stream) cudaStreamDestroy(stream);
  report.close(EndStatus::complete);
  g_open_report.clear();
  std::cout << "claims: " << held << " held, " << not_held << " not held, " << unevaluated << " not evaluated";
  if (sharded)
    std::cout << "; shard " << opt.shard_index << "/" << opt.shard_count << " (" << races << " races in the run, this shard raced "
              << (races + opt.shard_count - 1 - opt.shard_index) / opt.shard_count << ")";
  if (skipped_exps) std::cout << "; " << skipped_exps << " experiment(s) skipped (no device)";
  std::cout << "\nreport: " << report.file().string() << " (+ report-KIND.csv per record kind)" << std::endl;
  if (strict && not_held > 0) return 3;
  return skipped_exps > 0 ? kExitSkipped : 0;
}

int cmd_list(const std::vector<std::string>& args) {
  std::string filter = "*";
  po::options_description d("klab list [variants|experiments|ops] [--filter GLOB]");
  d.add_options()("filter", po::value<std::string>(&filter),
                  "shell glob on names (* and ?); without either, the names that contain it")("help,h", "this help");
  auto p = parse(args, d, 1);
  if (p.vm.count("help")) { std::cout << d; return 0; }
  // A filter with no wildcard is a fragment: "block-per-thread" finds every name that contains it.
  if (filter.find_first_of("*?") == std::string::npos) filter = "*" + filter + "*";
  std::string what = p.positional.empty() ? "all" : p.positional[0];
  require(what == "all" || what == "variants" || what == "experiments" || what == "ops",
          "unknown category '" + what + "' (variants, experiments or ops)");
  auto& r = registry();
  auto show = [&](const char* title, const auto& map, auto line) {
    std::cout << title << ":\n";
    for (const auto& [name, item] : map)
      if (Registry::glob_match(filter, name)) std::cout << "  " << std::setw(56) << std::left << name << " " << line(item) << "\n";
  };
  if (what == "all" || what == "ops") show("ops", r.ops(), [](const Op& o) {
    // The op's parameters (--set NAME=...) with their defaults; a mat-vec's are m and k.
    std::string ps;
    for (const auto& d : o.params) ps += (ps.empty() ? "" : ", ") + d.name + "=" + std::to_string(d.def);
    return o.description + " [params: " + (ps.empty() ? "m, k" : ps) + "]";
  });
  if (what == "all" || what == "variants")
    show("variants", r.variants(), [](const Variant& v) { return (v.peer ? "[peer] " : "") + v.description; });
  if (what == "all" || what == "experiments")
    show("experiments", r.experiments(), [](const Experiment& e) { return (e.needs_device ? "" : "[cpu] ") + e.description; });
  return 0;
}

// "0,1" -> {0, 1}: device indices, each once.
std::vector<int> parse_devices(const std::string& text) {
  const std::string what = "--devices must be a comma-separated list of device indices, each once (e.g. 0,1; got '" + text + "')";
  std::vector<int> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string word = text.substr(start, end - start);
    require(!word.empty() && word.size() <= 4 && word.find_first_not_of("0123456789") == std::string::npos, what);
    const int d = std::stoi(word);
    require(std::find(out.begin(), out.end(), d) == out.end(), what);
    out.push_back(d);
    start = end + 1;
  }
  return out;
}

// Starts `argv` (argv[0] a path, or a name looked up in PATH) with stdout and stderr to `log` (empty:
// inherited); returns its pid.
pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> cargs;
  for (const auto& a : args) cargs.push_back(const_cast<char*>(a.c_str()));
  cargs.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (!log.empty()) {
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  }
  // Its own process group: a Ctrl-C at the terminal reaches this process alone, which passes it on
  // once (wait_child); a second signal would stop the child at once, without its end record.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, cargs[0], &fa, &attr, cargs.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  require(rc == 0, "cannot start " + args[0] + ": " + std::strerror(rc));
  return pid;
}

// Waits for `pid`; its exit status (128 + the signal when one killed it). A SIGINT or SIGTERM to
// this process meanwhile is passed on to every pid in `all` (once).
int wait_child(pid_t pid, const std::vector<pid_t>& all) {
  static bool forwarded = false;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    require(errno == EINTR, std::string("waitpid: ") + std::strerror(errno));
    if (int sig = stop_signal(); sig && !forwarded) {
      forwarded = true;
      for (pid_t p : all) ::kill(p, sig);
    }
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The exit status of several klabs of one run: a failure or an interrupt first, then a claim not
// held (--strict), then skips; 0 when every one is 0.
int worst_exit(const std::vector<int>& codes) {
  for (int c : codes)
    if (c != 0 && c != 3 && c != kExitSkipped) return c;
  for (int c : {3, kExitSkipped})
    if (std::find(codes.begin(), codes.end(), c) != codes.end()) return c;
  return 0;
}

// One klab per device, started together: `cmd` with every option of `p` as given but --devices,
// --out and --replicate (the parent's), then child i's own `words[i]` (its --device, --out, and
// --shard for a shard), its output in `logs[i]`. Waits for all (a SIGINT / SIGTERM meanwhile reaches
// every child, once) and returns their exit statuses in order. `what[i]` names child i in messages.
std::vector<int> run_children(const std::string& cmd, const Parsed& p, const std::vector<std::vector<std::string>>& words,
                              const std::vector<std::string>& logs, const std::vector<std::string>& what) {
  std::vector<std::string> passed;
  for (const auto& o : p.options)
    if (o.string_key != "devices" && o.string_key != "out" && o.string_key != "replicate")
      passed.insert(passed.end(), o.original_tokens.begin(), o.original_tokens.end());
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  install_stop_handlers();  // a signal now reaches the children (wait_child) and the parent still finishes
  std::vector<pid_t> pids;
  for (std::size_t i = 0; i < words.size(); ++i) {
    std::vector<std::string> a{self, cmd};
    a.insert(a.end(), passed.begin(), passed.end());
    a.insert(a.end(), words[i].begin(), words[i].end());
    pids.push_back(spawn(a, logs[i]));
    std::cerr << "klab: " << what[i] << ": pid " << pids.back() << ", output in " << logs[i] << std::endl;
  }
  std::vector<int> codes;
  for (std::size_t i = 0; i < words.size(); ++i) {
    codes.push_back(wait_child(pids[i], pids));
    std::cerr << "klab: " << what[i] << " exited " << codes.back() << std::endl;
  }
  return codes;
}

// --devices: the run as one klab per device, started by run_children. Sharded (the default): each a
// shard (--device D --shard i/N --out OUT/shard-i), then the shards merged into OUT by
// scripts/merge_reports.py (the one implementation of the merge). --replicate: each device runs the
// whole run (--device D --out OUT/device-D, output in OUT/device-D.log) and the reports stay side
// by side, not merged: the same experiments and seed on different GPUs, whose differences
// scripts/gpu_noise.py measures (GPU-to-GPU spread, an input to compare.py's band). Design: klab
// prints the gpu_noise.py command rather than running it, so that a run whose reports gpu_noise.py
// refuses (no timed measurement: a CPU-only experiment) is still a run that succeeded.
int run_on_devices(const std::string& cmd, const Parsed& p, const std::vector<int>& devices, std::string out, bool replicate) {
  require(!p.vm.count("shard"), "--devices makes the shards itself: give --devices or --shard, not both");
  require(p.vm["device"].defaulted(), "--devices names the devices: give --devices or --device, not both");
  if (!has_device()) throw Error("--devices: " + no_device_reason() + "; nothing to run on");
  int n = 0;
  KLAB_CUDA(cudaGetDeviceCount(&n));
  for (int d : devices)
    require(d < n, "--devices: there is no device " + std::to_string(d) + " (this machine has " + std::to_string(n) + " CUDA device(s))");
  if (out.empty()) out = "out/run-" + timestamp();
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  require(!ec, "cannot create report directory " + out + ": " + ec.message());
  const int count = static_cast<int>(devices.size());
  std::vector<std::vector<std::string>> words;
  std::vector<std::string> dirs, logs, what;
  for (int i = 0; i < count; ++i) {
    const std::string d = std::to_string(devices[i]), part = std::to_string(i) + "/" + std::to_string(count);
    dirs.push_back(out + (replicate ? "/device-" + d : "/shard-" + std::to_string(i)));
    logs.push_back(dirs.back() + ".log");
    words.push_back({"--device", d, "--out", dirs.back()});
    if (!replicate) words.back().insert(words.back().end(), {"--shard", part});
    what.push_back(replicate ? "replica on device " + d : "shard " + part + " on device " + d);
  }
  const std::vector<int> codes = run_children(cmd, p, words, logs, what);
  if (replicate) {
    std::string list;
    for (const auto& d : dirs) list += " " + d;
    std::cerr << "klab: " << count << " reports of the same run, side by side:" << list
              << "\nklab: their GPU-to-GPU spread: scripts/gpu_noise.py" << list << " --out " << out << "/gpu-noise.json" << std::endl;
    return worst_exit(codes);
  }
  std::vector<std::string> merge{"python3", std::string(KLAB_SOURCE_DIR) + "/scripts/merge_reports.py", out};
  merge.insert(merge.end(), dirs.begin(), dirs.end());
  const int merged = wait_child(spawn(merge, ""), {});
  if (merged != 0) {
    std::cerr << "klab: merging the shards failed (scripts/merge_reports.py exited " << merged << "); the shards' reports are in "
              << out << "/shard-*" << std::endl;
    return 1;
  }
  return worst_exit(codes);
}

// The options run and ab share: declared on a description, then turned into RunOptions.
struct RunCli {
  RunOptions opt;
  std::string out, timing, seed, shard, devices;
  std::vector<std::string> sets;
  // Declares the shared options on `d` (beside the command's own), parses `args`, and fills opt;
  // nothing (after printing the help) when --help was asked for.
  std::optional<Parsed> parse_args(const std::vector<std::string>& args, po::options_description& d) {
    add_run_options(d, opt, out, timing, seed, sets, shard, devices);
    auto p = parse(args, d);
    if (p.vm.count("help")) {
      std::cout << d << kExitHelp;
      return std::nullopt;
    }
    opt.modes = parse_modes(timing);
    opt.seed = parse_seed(seed);
    opt.set = parse_sets(sets);
    for (const auto& [name, values] : opt.set) registry().check_param_name(name);
    variant_patterns(opt.variants);  // refuses an empty pattern before any work
    if (p.vm.count("shard")) std::tie(opt.shard_index, opt.shard_count) = parse_shard(shard);
    if (p.vm.count("devices")) device_list = parse_devices(devices);
    // --replicate: checked here, before any device is looked for, so that a wrong combination is
    // refused the same way with and without a GPU.
    if (p.vm.count("replicate")) {
      require(p.vm.count("devices"), "--replicate runs the whole run on each of --devices D1,D2,..: give --devices too");
      require(!p.vm.count("shard"), "--replicate runs the whole run on every device: give --replicate or --shard, not both");
      require(device_list.size() >= 2, "--replicate needs two devices or more (got --devices " + devices +
                                            "): one GPU gives no GPU-to-GPU spread (for the run-to-run spread on one GPU, "
                                            "run twice and use scripts/gpu_noise.py --same-gpu)");
    }
    return p;
  }
  std::vector<int> device_list;
  int run(const std::string& cmd, const std::vector<const Experiment*>& exps, const Parsed& p, int argc, char** argv) const {
    if (p.vm.count("devices")) {
      check_run_options(opt);
      return run_on_devices(cmd, p, device_list, out, p.vm.count("replicate") > 0);
    }
    return run_experiments(exps, opt, out, p.vm.count("strict") > 0, p.vm.count("require-device") > 0, p.vm.count("shard") > 0,
                           argc, argv);
  }
};

int cmd_run(const std::vector<std::string>& args, int argc, char** argv) {
  RunCli rc;
  po::options_description d("klab run EXPERIMENT... [options]");
  const auto p = rc.parse_args(args, d);
  if (!p) return 0;
  require(!p->positional.empty(), "name at least one experiment (`klab list experiments`)");
  std::vector<const Experiment*> exps;
  for (const auto& n : p->positional) exps.push_back(&registry().experiment(n));
  return rc.run("run", exps, *p, argc, argv);
}

int cmd_ab(const std::vector<std::string>& args, int argc, char** argv) {
  RunCli rc;
  std::string shape, input;
  po::options_description d("klab ab A B (--shape MxK [--input DIST] | --set m=..,k=..[,dist=..]) [options]");
  d.add_options()("shape", po::value<std::string>(&shape), "problem shape MxK (or --set m=...,k=...)")
    ("input", po::value<std::string>(&input), "input distribution: uniform, normal, student-t, outlier (default uniform)");
  const auto p = rc.parse_args(args, d);
  if (!p) return 0;
  const RunOptions& opt = rc.opt;
  require(p->positional.size() == 2, "name exactly two variants, A and B (`klab list variants`)");
  // The problems: --shape and --input, or every m x k x dist of --set (one of the two ways).
  std::vector<Shape> shapes;
  std::vector<Dist> dists;
  if (!shape.empty()) {
    require(!opt.set.count("m") && !opt.set.count("k"), "give the shape once: --shape MxK or --set m=...,k=..., not both");
    shapes.push_back(parse_shape(shape));
  } else {
    require(opt.set.count("m") && opt.set.count("k"), "--shape MxK (or --set m=...,k=...) is required");
    for (const auto& m : opt.set.at("m"))
      for (const auto& k : opt.set.at("k")) shapes.push_back(parse_shape(m + "x" + k));
  }
  require(input.empty() || !opt.set.count("dist"), "give the input distribution once: --input or --set dist=..., not both");
  if (opt.set.count("dist"))
    for (const auto& dn : opt.set.at("dist")) dists.push_back(parse_dist(dn));
  else
    dists.push_back(parse_dist(input.empty() ? "uniform" : input));
  static std::vector<Experiment> es;  // lives for the run
  es.clear();
  for (const Shape& s : shapes)
    for (Dist dist : dists) {
      es.push_back(experiments::make_ab(registry(), p->positional[0], p->positional[1], s, dist));
      // One problem keeps the plain name; a sweep names each race by its problem.
      if (shapes.size() * dists.size() > 1) es.back().name = "ab:" + s.str() + "/" + to_string(dist);
    }
  std::vector<const Experiment*> ptrs;
  for (const auto& e : es) ptrs.push_back(&e);
  return rc.run("ab", ptrs, *p, argc, argv);
}

int cmd_env(const std::vector<std::string>& args) {
  int device = 0;
  bool no_ceiling = false;
  po::options_description d("klab env [--device N] [--no-ceiling]");
  d.add_options()("device", po::value<int>(&device)->default_value(0), "CUDA device index")
    ("no-ceiling", po::bool_switch(&no_ceiling), "skip the bandwidth measurement")("help,h", "this help");
  auto p = parse(args, d, 0);
  if (p.vm.count("help")) { std::cout << d; return 0; }
  nlohmann::json j = base_environment(0, nullptr);
  j.erase("command");
  if (!has_device()) {
    j["device"] = nullptr;
    j["no_device_reason"] = no_device_reason();
    std::cout << j.dump(2) << std::endl;
    std::cerr << "klab env: SKIP: " << no_device_reason() << "; no ceiling measured" << std::endl;
    return kExitSkipped;
  }
  auto dev = select_device(device);
  j["device"] = to_json(dev);
  if (!no_ceiling) {
    cudaStream_t s = nullptr;
    KLAB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    {
      Timer timer(dev, s);
      j["ceiling"] = to_json(measure_ceiling(timer, kCeilingBytes, TimingOptions{.reps = 20}));
    }
    cudaStreamDestroy(s);
  }
  std::cout << j.dump(2) << std::endl;
  return 0;
}

void usage(std::ostream& os) {
  os << "klab: an A/B lab for LLM decode kernels\n\n"
        "  klab list [variants|experiments|ops] [--filter GLOB]\n"
        "  klab run EXPERIMENT... [--variants FILTER] [--set NAME=V1,V2,..] [--out DIR] [--reps N] [--seed S]\n"
        "           [--timing launch|stream|both] [--hot] [--device N] [--quick] [--strict] [--require-device] [--trace]\n"
        "           [--shard I/N | --devices D1,D2,.. [--replicate]]\n"
        "  klab ab A B (--shape MxK [--input DIST] | --set m=..,k=..[,dist=..]) [run options]\n"
        "  klab env [--device N]\n";
  for (const auto& c : extra_commands()) os << "  " << c.usage << "\n";
  os << "\n`klab COMMAND --help` for a command's options.\n" << kExitHelp;
}

// Only the commands that write a report say what became of it: none written (the error came before
// it was opened), or the records written before the error, closed as failed.
std::string no_report(const std::string& cmd) {
  if (cmd != "run" && cmd != "ab") return "";
  if (!g_open_report.empty()) return "; report " + g_open_report + " holds the records before the error (closed as failed)";
  return "; no report written";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> all(argv + 1, argv + argc);
  if (all.empty() || all[0] == "--help" || all[0] == "-h" || all[0] == "help") {
    usage(std::cout);
    return all.empty() ? kExitUsage : 0;
  }
  const std::string cmd = all[0];
  std::vector<std::string> args(all.begin() + 1, all.end());
  try {
    if (cmd == "list") return cmd_list(args);
    if (cmd == "run") return cmd_run(args, argc, argv);
    if (cmd == "ab") return cmd_ab(args, argc, argv);
    if (cmd == "env") return cmd_env(args);
    for (const auto& c : extra_commands())
      if (c.name == cmd) return c.run(args, argc, argv);
    std::cerr << "klab: unknown command '" << cmd << "'\n";
    usage(std::cerr);
    return kExitUsage;
  } catch (const po::error& e) {
    std::cerr << "klab " << cmd << ": " << e.what() << " (see `klab " << cmd << " --help`)" << no_report(cmd) << std::endl;
    return kExitUsage;
  } catch (const CudaError& e) {
    std::cerr << "klab " << cmd << ": CUDA error: " << e.what() << no_report(cmd) << std::endl;
    return 1;
  } catch (const Error& e) {
    std::cerr << "klab " << cmd << ": " << e.what() << no_report(cmd) << std::endl;
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "klab " << cmd << ": error: " << e.what() << no_report(cmd) << std::endl;
    return 1;
  }
}

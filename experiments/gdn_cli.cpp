#include "gdn_cli.hpp"
#include "command_options.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "gdn/gdn_device.hpp"
#include "klab/device.hpp"
#include "klab/error.hpp"
#include "klab/metrics.hpp"
#include "klab/ref/gdn.hpp"
#include "klab/ref/parse.hpp"
#include "klab/ref/safetensors.hpp"

namespace klab::experiments {

const char* const kGdnUsage =
    "klab gdn --weights FILE [--inputs FILE] [--expect FILE] [--backend reference|gpu] [--layer-prefix P] [--dk N] [--tokens N] "
    "[--tolerance X] [--json]";

namespace {

namespace gdn = klab::ref::gdn;
namespace st = klab::ref::safetensors;

// The seed's criterion for the f32 tier against the transformers oracle (seed-digest.md section 3).
constexpr double kDefaultTolerance = 1e-4;
constexpr int kExitMismatch = 3;

const char* kHelp =
    "klab gdn: step one Gated DeltaNet layer over an input sequence, print a per-operator table,\n"
    "and compare with an oracle.\n\n"
    "  --weights FILE       .safetensors with one GDN layer under transformers' names (in_proj_qkv.weight, ...),\n"
    "                       with or without a model prefix (required)\n"
    "  --inputs FILE        .safetensors holding inputs.h (tokens, hidden) (default: the weights file)\n"
    "  --expect FILE        .safetensors holding expect.y (tokens, hidden) and optionally expect.S (nv, dk, dv)\n"
    "                       and expect.hist (ck-1, conv_dim): every token's output and the final states are\n"
    "                       compared; exit 3 when any max_rel is past the tolerance\n"
    "  --backend B          reference (CPU, f64; default) or gpu\n"
    "  --layer-prefix P     which layer when the file holds several (e.g. model.layers.3.linear_attn.)\n"
    "  --dk N               key head dim (default: the file's metadata dk, else the value head dim)\n"
    "  --tokens N           step only the first N tokens (final states are then not compared)\n"
    "  --tolerance X        max_rel allowed against --expect (default 1e-4, the seed's criterion)\n"
    "  --json               one JSON object on stdout instead of the table: the run, every operator's\n"
    "                       statistics and comparison, and the verdict (the exit status is the same)\n"
    "  --help               this help\n\n"
    "Exit: 0 ran (and matched), 2 bad options or files, 3 outside the tolerance.\n"
    "Fixtures from scripts/gen_gdn_fixture.py hold weights, inputs and expectations in one file:\n"
    "  klab gdn --weights F --expect F\n";

struct Options {
  std::string weights, inputs, expect, backend = "reference", layer_prefix;
  int dk = 0, tokens = 0;
  double tolerance = kDefaultTolerance;
  bool help = false, json = false;
};

long long parse_int(const std::string& opt, const std::string& v) {
  const auto x = ref::parse_whole_int(v);
  require(x.has_value(), opt + " needs an integer (got '" + v + "')");
  return *x;
}

double parse_double(const std::string& opt, const std::string& v) {
  const auto x = ref::parse_whole_number(v);
  require(x.has_value(), opt + " needs a number (got '" + v + "')");
  return *x;
}

Options parse(const std::vector<std::string>& args) {
  Options o;
  namespace po = boost::program_options;
  po::options_description d;
  for (const char* name : {"weights", "inputs", "expect", "backend", "layer-prefix", "dk", "tokens", "tolerance"})
    d.add_options()(name, po::value<std::string>(), "");
  d.add_options()("json", "");
  const auto lo = parse_command_options(args, d, "gdn");
  o.help = lo.help;
  o.json = lo.has("--json");
  for (const auto& [a, value] : lo.values) {
    if (a == "--weights") o.weights = value;
    else if (a == "--inputs") o.inputs = value;
    else if (a == "--expect") o.expect = value;
    else if (a == "--backend") o.backend = value;
    else if (a == "--layer-prefix") o.layer_prefix = value;
    else if (a == "--dk") {
      const auto x = parse_int(a, value);
      require(x >= 1 && x <= 65536, "--dk must be between 1 and 65536 (got " + value + ")");
      o.dk = int(x);
    } else if (a == "--tokens") {
      const auto x = parse_int(a, value);
      require(x >= 1 && x <= (1 << 24), "--tokens must be at least 1 (got " + value + ")");
      o.tokens = int(x);
    } else {
      o.tolerance = parse_double(a, value);
      require(o.tolerance > 0 && std::isfinite(o.tolerance), "--tolerance must be positive and finite (got " + value + ")");
    }
  }
  return o;
}

// max|x|, rms|x| and non-finite count over everything one operator produced.
struct Stat {
  std::int64_t n = 0, nonfinite = 0;
  double max_abs = 0, sum_sq = 0;
  void add(const std::vector<double>& v) {
    for (double x : v) {
      ++n;
      if (!std::isfinite(x)) {
        ++nonfinite;
        continue;
      }
      max_abs = std::max(max_abs, std::abs(x));
      sum_sq += x * x;
    }
  }
  double rms() const { return n ? std::sqrt(sum_sq / double(n)) : 0; }
};

std::string sci(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3e", x);
  return b;
}

bool all_finite(std::span<const float> v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
}

std::vector<float> to_f32(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

// Runs `fn`, turning file and shape errors (std::invalid_argument, safetensors::FormatError) into
// klab::Error: bad input, a clear message, exit 2.
template <class F>
auto checked(F&& fn) {
  try {
    return fn();
  } catch (const std::invalid_argument& e) {
    throw Error(e.what());
  }
}

}  // namespace

int gdn_command(const std::vector<std::string>& args, int, char**) {
  const Options o = parse(args);
  if (o.help) {
    std::cout << kHelp;
    return 0;
  }
  require(!o.weights.empty(), "--weights FILE is required (see `klab gdn --help`)");
  require(o.backend == "reference" || o.backend == "gpu", "unknown backend '" + o.backend + "' (reference or gpu)");
  if (o.backend == "gpu" && !has_device()) {
    // Device work skipped, not bad options: klab's exit status 4 (see `klab --help`).
    std::cerr << "klab gdn --backend gpu: SKIP: " << no_device_reason() << " (--backend reference runs on the CPU)" << std::endl;
    return 4;
  }

  const std::string inputs_file = o.inputs.empty() ? o.weights : o.inputs;
  const auto wf = checked([&] { return st::File::open(o.weights); });
  const std::string prefix = checked([&] { return gdn::find_layer_prefix(wf, o.layer_prefix); });
  const gdn::LayerWeights w = checked([&] { return gdn::load_weights(wf, gdn::LoadOptions{prefix, o.dk, 0}); });
  const gdn::Geometry& g = w.g;
  const gdn::Sequence in = checked([&] { return gdn::load_inputs(inputs_file, g); });
  require(o.tokens <= in.tokens, "--tokens " + std::to_string(o.tokens) + " but " + inputs_file + " has " + std::to_string(in.tokens) + " tokens");
  const int T = o.tokens ? o.tokens : in.tokens;
  std::optional<gdn::Expected> ex;
  std::optional<st::File> ef;
  if (!o.expect.empty()) {
    ef = checked([&] { return st::File::open(o.expect); });
    ex = checked([&] { return gdn::load_expected(o.expect, g); });
    require(ex->tokens >= T, o.expect + " expects " + std::to_string(ex->tokens) + " tokens, fewer than the " + std::to_string(T) + " to run");
  }

  // With --json the table and the header go nowhere; one JSON object is printed at the end.
  std::ostringstream sink;
  std::ostream& text = o.json ? static_cast<std::ostream&>(sink) : std::cout;
  text << "klab gdn: backend " << o.backend << (o.backend == "gpu" ? " (GPU f32 tier)" : " (CPU, f64 accumulation)") << ", " << T << " of " << in.tokens << " tokens\n"
            << "  weights  " << o.weights << "  layer '" << prefix << "'  " << g.str() << "\n"
            << "  inputs   " << inputs_file << "\n";
  if (ef) {
    text << "  expect   " << o.expect;
    if (!ef->meta("class").empty()) text << "  (" << ef->meta("class") << ", transformers " << ef->meta("transformers_version", "?") << ")";
    text << "\n";
  }

  // Step the layer; gather per-operator statistics and every token's output.
  const auto& whats = gdn::all_whats();
  std::vector<Stat> stats(whats.size());
  std::vector<std::vector<double>> outs;
  auto state = gdn::State::zeros(g);
  std::optional<klab::gdn::GdnDevice> dev;
  if (o.backend == "gpu") {
    dev.emplace(g, 1);
    dev->load_f32(0, w);
  }
  auto doubles = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
  for (int t = 0; t < T; ++t) {
    const std::span<const float> h(in.h.data() + std::size_t(t) * g.hidden, g.hidden);
    if (dev) {
      // The device tier: step, then read every intermediate back (get() copies on demand).
      outs.push_back(doubles(dev->step(0, h)));
      for (std::size_t i = 0; i < whats.size(); ++i)
        if (whats[i] != gdn::What::S && whats[i] != gdn::What::HIST) stats[i].add(doubles(dev->get(0, whats[i])));
      continue;
    }
    gdn::Intermediates im;
    outs.push_back(gdn::step(w, state, h, &im));
    for (std::size_t i = 0; i < whats.size(); ++i)
      if (whats[i] != gdn::What::S && whats[i] != gdn::What::HIST) stats[i].add(im.get(whats[i], state));
  }
  if (dev) {  // the final state is the device's
    state.S = doubles(dev->get(0, gdn::What::S));
    state.hist = doubles(dev->get(0, gdn::What::HIST));
  }
  for (std::size_t i = 0; i < whats.size(); ++i)
    if (whats[i] == gdn::What::S) stats[i].add(state.S);
    else if (whats[i] == gdn::What::HIST) stats[i].add(state.hist);

  // Comparisons with the oracle: every token's output; the final states when the whole sequence ran.
  bool all_ok = true;
  std::vector<std::string> vs(whats.size());
  if (ex) {
    double worst = -1, worst_rms = 0;
    int worst_t = -1;
    bool finite = true;
    for (int t = 0; t < T; ++t) {
      const auto out = to_f32(outs[t]);
      const std::span<const float> want(ex->y.data() + std::size_t(t) * g.hidden, g.hidden);
      const auto acc = accuracy(out, want);
      // accuracy() counts non-finite outputs; a non-finite oracle value must not match either.
      finite = finite && acc.finite() && all_finite(want);
      if (acc.max_rel > worst || std::isnan(acc.max_rel)) worst = acc.max_rel, worst_rms = acc.rms_rel, worst_t = t;
    }
    const bool ok = finite && worst <= o.tolerance;
    all_ok = all_ok && ok;
    for (std::size_t i = 0; i < whats.size(); ++i)
      if (whats[i] == gdn::What::OUT)
        vs[i] = "worst max_rel " + sci(worst) + " (token " + std::to_string(worst_t) + ", rms_rel " + sci(worst_rms) + ")" +
                (finite ? "" : " NON-FINITE") + (ok ? "  ok" : "  OVER " + sci(o.tolerance));
    auto final_state = [&](gdn::What what, const std::vector<double>& mine, const std::vector<float>& want) {
      const std::size_t i = std::find(whats.begin(), whats.end(), what) - whats.begin();
      if (want.empty()) {
        vs[i] = "(not in the expect file)";
        return;
      }
      if (T != ex->tokens) {
        vs[i] = "(not compared: --tokens " + std::to_string(T) + " of " + std::to_string(ex->tokens) + ")";
        return;
      }
      const auto acc = accuracy(to_f32(mine), want);
      const bool good = acc.finite() && all_finite(want) && acc.max_rel <= o.tolerance;
      all_ok = all_ok && good;
      vs[i] = "max_rel " + sci(acc.max_rel) + " (rms_rel " + sci(acc.rms_rel) + ")" + (acc.finite() && all_finite(want) ? "" : " NON-FINITE") +
              (good ? "  ok" : "  OVER " + sci(o.tolerance));
    };
    final_state(gdn::What::S, state.S, ex->S);
    final_state(gdn::What::HIST, state.hist, ex->hist);
  }

  const bool finite_run = std::all_of(stats.begin(), stats.end(), [](const Stat& s) { return s.nonfinite == 0; });
  const int status = ex ? (all_ok ? 0 : kExitMismatch) : (finite_run ? 0 : kExitMismatch);
  if (o.json) {
    nlohmann::json j{{"command", "gdn"}, {"backend", o.backend}, {"tokens", T}, {"tokens_in_file", in.tokens}, {"weights", o.weights},
                     {"layer_prefix", prefix}, {"inputs", inputs_file},
                     {"geometry", {{"hidden", g.hidden}, {"nk", g.nk}, {"nv", g.nv}, {"dk", g.dk}, {"dv", g.dv}, {"ck", g.ck}, {"eps", g.eps}}}};
    nlohmann::json ops = nlohmann::json::array();
    for (std::size_t i = 0; i < whats.size(); ++i) {
      const bool final_only = whats[i] == gdn::What::S || whats[i] == gdn::What::HIST;
      nlohmann::json r{{"op", gdn::to_string(whats[i])}, {"over", final_only ? "final" : "tokens"}, {"n", stats[i].n},
                       {"max_abs", stats[i].max_abs}, {"rms", stats[i].rms()}, {"nonfinite", stats[i].nonfinite}};
      if (!vs[i].empty()) r["vs_expect"] = vs[i];
      ops.push_back(r);
    }
    j["ops"] = ops;
    if (ex) j["expect"] = {{"file", o.expect}, {"tolerance", o.tolerance}, {"within", all_ok}};
    j["finite"] = finite_run;
    j["exit"] = status;
    std::cout << j.dump(2) << std::endl;
    return status;
  }
  std::printf("\n%-5s %-10s %12s %11s %11s  %s\n", "op", "over", "n", "max|x|", "rms|x|", ex ? "vs expect" : "");
  for (std::size_t i = 0; i < whats.size(); ++i) {
    const bool final_only = whats[i] == gdn::What::S || whats[i] == gdn::What::HIST;
    const std::string over = final_only ? "final" : std::to_string(T) + " tok";
    std::string note = vs[i];
    if (stats[i].nonfinite) note = std::to_string(stats[i].nonfinite) + " NON-FINITE  " + note;
    std::printf("%-5s %-10s %12lld %11s %11s  %s\n", gdn::to_string(whats[i]).c_str(), over.c_str(), static_cast<long long>(stats[i].n),
                sci(stats[i].max_abs).c_str(), sci(stats[i].rms()).c_str(), note.c_str());
  }
  std::cout << "\n";
  if (!ex) {
    std::cout << "no --expect: nothing compared" << (finite_run ? "" : " (NON-FINITE values above)") << std::endl;
    return status;
  }
  std::cout << "expect: " << (all_ok ? "every comparison within" : "OUTSIDE") << " max_rel " << sci(o.tolerance) << std::endl;
  return status;
}

}  // namespace klab::experiments

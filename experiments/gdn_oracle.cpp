// gdn-f32-oracle: the GDN decode step on the device (variants/gdn/gdn_device.hpp), f32 tier: every
// intermediate against the f64 Eigen reference (Qwen3.5-27B geometry, seeded weights; and the
// transformers fixtures' weights), the output against the fixtures. --quick: small_geometry().
#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "common.hpp"
#include "gdn/inputs.hpp"
#include "gdn_common.hpp"
#include "klab/error.hpp"
#include "klab/metrics.hpp"

namespace klab::experiments {

namespace {

using gdn::GdnDevice;
using rg::Geometry;
using rg::What;

// Compares every intermediate of the device's last step of `layer` with the reference's; adds the
// worst to `worst` and returns the per-intermediate accuracies.
nlohmann::json compare_whats(const GdnDevice& dev, int layer, const rg::Intermediates& im, const rg::State& st, Worst& worst, const std::string& at) {
  nlohmann::json per;
  for (What w : rg::all_whats()) {
    const auto got = dev.get(layer, w);
    const auto want = im.get(w, st);
    const Accuracy a = accuracy(got, want);
    per[rg::to_string(w)] = klab::to_json(a);
    worst.see(a.max_rel, a.finite(), at + " " + rg::to_string(w));
  }
  return per;
}

// ---- gdn-f32-oracle --------------------------------------------------------------------------------

const Claim kOracleFixtures{"vs-fixtures",
                            "the layer output is within 1e-4 (max_rel) of the transformers fixtures at every token (and the final S and hist, where the fixture has them)"};
const Claim kOracleSeeded{"seeded-intermediates",
                          "every intermediate (XC..HIST) is within 1e-4 (max_rel) of the f64 reference at every token: Qwen3.5-27B geometry, seeded weights, heavy-tailed inputs"};
const Claim kOracleFixtureIntermediates{"fixture-intermediates",
                                        "every intermediate is within 1e-4 (max_rel) of the f64 reference at every token on the fixtures' weights and inputs"};

void run_oracle(Context& ctx) {
  const std::uint64_t seed = ctx.options().seed;
  // Part 1: seeded weights at the Qwen3.5-27B geometry, every intermediate at every token.
  {
    const Geometry g = geometry_for(ctx);
    const int T = ctx.options().quick ? 4 : 8;
    ctx.log("seeded weights at " + g.str() + ", " + std::to_string(T) + " tokens");
    const auto w = rg::random_weights(g, seed);
    GdnDevice dev(g, 1);
    dev.set_stream(ctx.timer().stream());
    dev.load_f32(0, w);
    auto st = rg::State::zeros(g);
    const auto h = make_inputs(g, T, seed);
    Worst worst;
    for (int t = 0; t < T; ++t) {
      dev.step(0, gdn::token(h, g.hidden, t));
      rg::Intermediates im;
      rg::step(w, st, gdn::token(h, g.hidden, t), &im);
      auto rec = ctx.record("gdn_oracle_step");
      rec["source"] = "seeded";
      rec["geometry"] = to_json(g);
      rec["token"] = t;
      rec["per_what"] = compare_whats(dev, 0, im, st, worst, "token " + std::to_string(t));
      ctx.add(std::move(rec));
    }
    ctx.claim(kOracleSeeded).set(worst.within(kTol), fmt("worst max_rel %.3g", worst.max_rel) + " at " + worst.where + ", " + std::to_string(T) + " tokens, " + g.str());
  }
  // Part 2: the transformers fixtures.
  std::string looked;
  const auto files = gdn_fixture_files(looked);
  if (files.empty()) {
    ctx.skip("fixtures", "no *.safetensors in " + looked + " (generate them with scripts/gen_gdn_fixture.py on a machine with transformers)");
    return;
  }
  for (const auto& file : files) {
    const std::string name = file.filename().string();
    const auto w = rg::load_weights(file);
    const Geometry& g = w.g;
    const auto in = rg::load_inputs(file, g);
    const auto ex = rg::load_expected(file, g);
    require(in.tokens == ex.tokens, name + ": " + std::to_string(in.tokens) + " input tokens but " + std::to_string(ex.tokens) + " expected outputs");
    ctx.log("fixture " + name + ": " + g.str() + ", " + std::to_string(in.tokens) + " tokens");
    GdnDevice dev(g, 1);
    dev.set_stream(ctx.timer().stream());
    dev.load_f32(0, w);
    auto st = rg::State::zeros(g);
    Worst vs_fixture, vs_ref;
    double ref_vs_fixture = 0;
    for (int t = 0; t < in.tokens; ++t) {
      const auto ht = gdn::token(in.h, g.hidden, t);
      const auto y = dev.step(0, ht);
      rg::Intermediates im;
      const auto yr = rg::step(w, st, ht, &im);
      const std::span<const float> want(ex.y.data() + std::size_t(t) * g.hidden, std::size_t(g.hidden));
      const Accuracy a = accuracy(y, want);
      vs_fixture.see(a.max_rel, a.finite(), name + " token " + std::to_string(t));
      std::vector<float> yr_f(yr.begin(), yr.end());
      ref_vs_fixture = std::max(ref_vs_fixture, accuracy(yr_f, want).max_rel);
      auto rec = ctx.record("gdn_oracle_step");
      rec["source"] = "fixture";
      rec["fixture"] = name;
      rec["geometry"] = to_json(g);
      rec["token"] = t;
      rec["vs_fixture"] = klab::to_json(a);
      rec["per_what"] = compare_whats(dev, 0, im, st, vs_ref, name + " token " + std::to_string(t));
      ctx.add(std::move(rec));
    }
    auto fin = ctx.record("gdn_oracle_fixture");
    fin["fixture"] = name;
    fin["geometry"] = to_json(g);
    fin["tokens"] = in.tokens;
    fin["worst_max_rel_vs_fixture"] = vs_fixture.max_rel;
    fin["reference_max_rel_vs_fixture"] = ref_vs_fixture;  // the f64 reference's own gap (context, not a claim)
    if (!ex.S.empty()) {
      const Accuracy a = accuracy(dev.get(0, What::S), ex.S);
      fin["S_vs_fixture"] = klab::to_json(a);
      vs_fixture.see(a.max_rel, a.finite(), name + " final S");
    }
    if (!ex.hist.empty()) {
      const Accuracy a = accuracy(dev.get(0, What::HIST), ex.hist);
      fin["hist_vs_fixture"] = klab::to_json(a);
      vs_fixture.see(a.max_rel, a.finite(), name + " final hist");
    }
    ctx.add(std::move(fin));
    ctx.claim(kOracleFixtures).settle(vs_fixture.within(kTol), name + fmt(": worst max_rel %.3g", vs_fixture.max_rel) + " at " + vs_fixture.where);
    ctx.claim(kOracleFixtureIntermediates).settle(vs_ref.within(kTol), name + fmt(": worst max_rel %.3g", vs_ref.max_rel) + " at " + vs_ref.where);
  }
}

}  // namespace

void register_gdn_oracle(Registry& r) {
  r.add(Experiment{
      .name = "gdn-f32-oracle",
      .description = "GDN step, GPU f32 tier: every intermediate vs the f64 reference (Qwen3.5-27B, seeded) and the output vs the transformers fixtures",
      .claims = {kOracleFixtures, kOracleSeeded, kOracleFixtureIntermediates},
      .run = run_oracle,
  });
}

}  // namespace klab::experiments

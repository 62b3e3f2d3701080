// Guards of the GDN step's state (variants/gdn/gdn_device.hpp), f32 tier:
//   gdn-reset-replay  after T tokens, reset, replay token 0: bitwise equal
//   gdn-cross-layer   same weights in layer 0 and layer nl-1: bitwise equal; unloaded layer refused
// At the Qwen3.5-27B geometry (nl 48 in gdn-cross-layer); --quick: small_geometry(), nl 4.
#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common.hpp"
#include "gdn/inputs.hpp"
#include "gdn_common.hpp"
#include "klab/cuda.hpp"
#include "klab/error.hpp"
#include "klab/metrics.hpp"

namespace klab::experiments {

namespace {

using gdn::GdnDevice;
using rg::Geometry;
using rg::What;

// Elements that differ bitwise, per intermediate, and in all.
std::int64_t diff_all(const std::map<What, std::vector<float>>& a, const std::map<What, std::vector<float>>& b, nlohmann::json& per) {
  std::int64_t total = 0;
  for (const auto& [w, va] : a) {
    const std::int64_t d = bitwise_diff(va, b.at(w));
    per[rg::to_string(w)] = {{"differ", d}, {"n", va.size()}};
    total += d;
  }
  return total;
}

bool refused(const std::function<void()>& f, const std::string& must_name, std::string& msg) {
  try {
    f();
  } catch (const CudaError& e) {
    msg = std::string("a CUDA error instead of a refusal: ") + e.what();
    return false;
  } catch (const Error& e) {
    msg = e.what();
    return msg.find(must_name) != std::string::npos;
  }
  msg = "not refused";
  return false;
}

// ---- gdn-reset-replay ------------------------------------------------------------------------------

const Claim kReplayReset{"reset", "after T tokens and reset(), token 0 replays bitwise: output, every intermediate, S and hist"};
const Claim kReplayResetLayer{"reset-layer", "the same after reset(layer, slot) of the one layer"};

void run_reset_replay(Context& ctx) {
  const Geometry g = geometry_for(ctx);
  const int T = ctx.options().quick ? 5 : 16;
  const auto w = rg::random_weights(g, ctx.options().seed);
  GdnDevice dev(g, 1);
  dev.set_stream(ctx.timer().stream());
  dev.load_f32(0, w);
  const auto h = make_inputs(g, T, ctx.options().seed);
  auto replay = [&](const std::string& how, const Claim& claim, const std::function<void()>& do_reset) {
    const auto y0 = dev.step(0, gdn::token(h, g.hidden, 0));
    const auto first = snapshot(dev, 0);
    for (int t = 1; t < T; ++t) dev.step(0, gdn::token(h, g.hidden, t));
    do_reset();
    const auto y0b = dev.step(0, gdn::token(h, g.hidden, 0));
    const auto again = snapshot(dev, 0);
    nlohmann::json per;
    const std::int64_t d_all = diff_all(first, again, per);
    const std::int64_t d_y = bitwise_diff(y0, y0b);
    auto rec = ctx.record("gdn_reset_replay");
    rec["reset"] = how;
    rec["geometry"] = to_json(g);
    rec["tokens_before_reset"] = T;
    rec["output_differ"] = d_y;
    rec["per_what"] = per;
    ctx.add(std::move(rec));
    ctx.claim(claim).set(d_y == 0 && d_all == 0,
              std::to_string(d_y) + "/" + std::to_string(y0.size()) + " output elements and " + std::to_string(d_all) +
                  " intermediate/state elements differ after " + std::to_string(T) + " tokens and " + how);
    dev.reset();
  };
  replay("reset()", kReplayReset, [&] { dev.reset(); });
  replay("reset(layer 0, slot 0)", kReplayResetLayer, [&] { dev.reset(0, 0); });
}

// ---- gdn-cross-layer -------------------------------------------------------------------------------

const Claim kCrossBitwise{"bitwise", "same weights and inputs in layer 0 and layer nl-1: outputs, every intermediate and the final S and hist are bitwise equal"};
const Claim kCrossIsolated{"isolated", "stepping layer nl-1 leaves layer 0's S and hist bitwise unchanged"};
const Claim kCrossRefused{"unloaded-refused",
                          "every operation on a never-loaded layer (step, run, get, save_state, load_state) is refused with an error naming the layer"};

void run_cross_layer(Context& ctx) {
  const Geometry g = geometry_for(ctx);
  const int nl = ctx.options().quick ? 4 : 48, last = nl - 1;
  const int T = ctx.options().quick ? 5 : 16;
  const auto w = rg::random_weights(g, ctx.options().seed);
  GdnDevice dev(g, nl);
  dev.set_stream(ctx.timer().stream());
  ctx.log("nl " + std::to_string(nl) + ", same weights in layers 0 and " + std::to_string(last));
  dev.load_f32(0, w);
  dev.load_f32(last, w);
  const auto h = make_inputs(g, T, ctx.options().seed);
  const auto y_first = dev.run(0, T, h);
  const auto snap_first = snapshot(dev, 0);
  const auto st0_before = dev.save_state(0);
  const auto y_last = dev.run(last, T, h);
  const auto snap_last = snapshot(dev, last);
  const auto st0_after = dev.save_state(0);
  nlohmann::json per;
  const std::int64_t d_all = diff_all(snap_first, snap_last, per);
  const std::int64_t d_y = bitwise_diff(y_first, y_last);
  const std::int64_t d_state = bitwise_diff(st0_before.S, st0_after.S) + bitwise_diff(st0_before.hist, st0_after.hist);
  auto rec = ctx.record("gdn_cross_layer");
  rec["geometry"] = to_json(g);
  rec["nl"] = nl;
  rec["layers"] = {0, last};
  rec["tokens"] = T;
  rec["output_differ"] = d_y;
  rec["output_elements"] = y_first.size();
  rec["per_what"] = per;
  rec["layer0_state_changed_by_last_layer"] = d_state;
  ctx.claim(kCrossBitwise).set(d_y == 0 && d_all == 0,
            std::to_string(d_y) + "/" + std::to_string(y_first.size()) + " output elements, " + std::to_string(d_all) +
                " intermediate/state elements differ (layers 0 and " + std::to_string(last) + ", " + std::to_string(T) + " tokens)");
  ctx.claim(kCrossIsolated).set(d_state == 0, std::to_string(d_state) + " elements of layer 0's S and hist changed while layer " + std::to_string(last) + " ran");
  // Hit-only: layer 1 was never loaded.
  std::vector<float> buf(std::size_t(std::max<std::int64_t>(dev.get(1, What::S, nullptr, 0), g.hidden)));
  std::vector<float> y1(std::size_t(g.hidden));
  const std::vector<std::pair<std::string, std::function<void()>>> ops{
      {"step", [&] { dev.step(1, gdn::token(h, g.hidden, 0), y1); }},
      {"run", [&] { dev.run(1, T, h); }},
      {"get", [&] { dev.get(1, What::OUT, buf.data(), std::int64_t(buf.size())); }},
      {"save_state", [&] { dev.save_state(1); }},
      {"load_state", [&] { dev.load_state(1, st0_before); }},
  };
  int ok = 0;
  std::string evidence;
  nlohmann::json refusals;
  for (const auto& [name, f] : ops) {
    std::string msg;
    const bool r = refused(f, "layer 1", msg);
    ok += r;
    refusals[name] = {{"refused", r}, {"message", msg}};
    if (!r) evidence += name + ": " + msg + "; ";
  }
  rec["unloaded_layer_refusals"] = refusals;
  ctx.add(std::move(rec));
  ctx.claim(kCrossRefused).set(ok == int(ops.size()) && !dev.loaded(1),
            std::to_string(ok) + "/" + std::to_string(ops.size()) + " operations on never-loaded layer 1 refused, naming it" + (evidence.empty() ? "" : ": " + evidence));
}

}  // namespace

void register_gdn_guards(Registry& r) {
  r.add(Experiment{
      .name = "gdn-reset-replay",
      .description = "GDN step: after T tokens, reset and replay token 0 (a necessary condition for a correct state, not a proof)",
      .claims = {kReplayReset, kReplayResetLayer},
      .run = run_reset_replay,
  });
  r.add(Experiment{
      .name = "gdn-cross-layer",
      .description = "GDN step, nl 48: same weights in layer 0 and layer 47 give the same bits (per-layer state offsets); unloaded layers refused",
      .claims = {kCrossBitwise, kCrossIsolated, kCrossRefused},
      .run = run_cross_layer,
  });
}

}  // namespace klab::experiments

// `klab gdn`: steps a layer from files, prints the per-operator table, compares with an oracle and
// exits non-zero past the tolerance; bad files and options give a clear message and a non-zero exit.
// The oracle is a committed transformers fixture (tests/fixtures/gdn/gdn-tiny-t64-s1.safetensors,
// written by scripts/gen_gdn_fixture.py from transformers' own Qwen3_5GatedDeltaNet), used as it
// is for the passing cases and re-written with one expectation spoilt for the failing ones.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "cli_util.hpp"
#include "klab/device.hpp"
#include "klab/ref/gdn.hpp"
#include "klab/ref/safetensors.hpp"

namespace gdn = klab::ref::gdn;
namespace st = klab::ref::safetensors;
namespace fs = std::filesystem;

namespace {

using klab::test::klab_cli;

fs::path temp_file(const std::string& name) { return klab::test::temp_safetensors("gdncli", name); }

// The committed transformers oracle: 64 tokens through the tiny geometry (hidden 64, 2x16 key
// heads, 4x16 value heads), token 0 by the module's prefill path and 1..63 by its decode path.
const fs::path kOracle = fs::path(KLAB_SOURCE_DIR) / "tests" / "fixtures" / "gdn" / "gdn-tiny-t64-s1.safetensors";
constexpr const char* kOracleClass = "transformers.models.qwen3_5.modeling_qwen3_5.Qwen3_5GatedDeltaNet";

// The oracle's contents, to write back (in the generator's layout: weights under a model prefix,
// inputs.h, expect.y/S/hist) after a test has spoilt an expectation.
struct Fixture {
  gdn::LayerWeights w = gdn::load_weights(kOracle);
  gdn::Geometry g = w.g;
  int T = 0;
  std::vector<float> h, y, S, hist;
  std::string cls;
  Fixture() {
    const auto f = st::File::open(kOracle);
    cls = f.meta("class", "");
    REQUIRE(cls == kOracleClass);  // transformers' layer wrote it, not our reference
    const auto in = gdn::load_inputs(kOracle, g);
    const auto ex = gdn::load_expected(kOracle, g);
    REQUIRE(in.tokens == ex.tokens);
    REQUIRE(!ex.S.empty());
    REQUIRE(!ex.hist.empty());
    T = in.tokens;
    h = in.h;
    y = ex.y;
    S = ex.S;
    hist = ex.hist;
  }
  fs::path write(const std::string& name) const {
    st::Writer out;
    gdn::add_weights(out, w, "model.layers.0.linear_attn.");
    out.add_f32(gdn::kInputsH, {T, g.hidden}, h);
    out.add_f32(gdn::kExpectY, {T, g.hidden}, y);
    out.add_f32(gdn::kExpectS, {g.nv, g.dk, g.dv}, S);
    out.add_f32(gdn::kExpectHist, {g.ck - 1, g.conv_dim()}, hist);
    out.metadata("class", cls);
    const auto p = temp_file(name);
    out.write(p);
    return p;
  }
};

using klab::test::has;

}  // namespace

TEST_CASE("klab gdn steps a layer, prints every operator and matches the transformers oracle") {
  const std::string p = kOracle.string();
  auto r = klab_cli("gdn --weights " + p + " --expect " + p);
  CAPTURE(r.out);
  CHECK(r.code == 0);
  for (const char* op : {"XC ", "XCV ", "Z ", "Q ", "K ", "A ", "B ", "BETA ", "G ", "ON ", "ONN ", "OUT ", "S ", "HIST "})
    CHECK(has(r.out, std::string("\n") + op));
  CHECK(has(r.out, "layer 'model.layers.0.linear_attn.'"));
  CHECK(has(r.out, "64 of 64 tokens"));
  CHECK(has(r.out, "every comparison within"));
  CHECK(has(r.out, kOracleClass));

  // Without an oracle: the table, and a plain statement that nothing was compared.
  r = klab_cli("gdn --weights " + p + " --inputs " + p);
  CHECK(r.code == 0);
  CHECK(has(r.out, "nothing compared"));

  // Fewer tokens: outputs compared, final states not (they belong to the whole sequence).
  r = klab_cli("gdn --weights " + p + " --expect " + p + " --tokens 4");
  CHECK(r.code == 0);
  CHECK(has(r.out, "4 of 64 tokens"));
  CHECK(has(r.out, "not compared: --tokens 4 of 64"));

  // Written back unchanged, the oracle still matches: the failing cases below differ from it only
  // in the expectation they spoil.
  Fixture fx;
  const auto q = fx.write("unchanged");
  CHECK(klab_cli("gdn --weights " + q.string() + " --expect " + q.string()).code == 0);
  fs::remove(q);
}

TEST_CASE("klab gdn --backend gpu: the device tier against the transformers oracle, or a refusal naming the missing device") {
  const std::string p = kOracle.string();
  auto r = klab_cli("gdn --weights " + p + " --expect " + p + " --backend gpu");
  CAPTURE(r.out);
  if (klab::has_device()) {
    CHECK(r.code == 0);
    CHECK(has(r.out, "GPU f32 tier"));
    CHECK(has(r.out, "every comparison within"));
  } else {
    CHECK(r.code == 4);  // device work skipped (not bad options: those exit 2)
    CHECK(has(r.out, "SKIP"));
    CHECK(has(r.out, "no CUDA device"));
  }
}

TEST_CASE("klab gdn exits 3 past the tolerance and names the token or state") {
  SUBCASE("one token's output off by 1e-3 of the vector's scale") {
    Fixture fx;
    double scale = 0;
    for (int i = 0; i < fx.g.hidden; ++i) scale = std::max(scale, double(std::abs(fx.y[4 * fx.g.hidden + i])));
    fx.y[4 * fx.g.hidden + 3] += float(1e-3 * scale);
    const auto p = fx.write("off-y");
    auto r = klab_cli("gdn --weights " + p.string() + " --expect " + p.string());
    CAPTURE(r.out);
    CHECK(r.code == 3);
    CHECK(has(r.out, "(token 4,"));
    CHECK(has(r.out, "OUTSIDE"));
    // The same file passes under a looser tolerance.
    CHECK(klab_cli("gdn --weights " + p.string() + " --expect " + p.string() + " --tolerance 1e-2").code == 0);
    // --json: one JSON object on stdout with the same verdict and exit status, and nothing else there.
    auto js = klab_cli("gdn --weights " + p.string() + " --expect " + p.string() + " --json", true);
    CHECK(js.code == 3);
    nlohmann::json j;
    REQUIRE_NOTHROW(j = nlohmann::json::parse(js.out));
    CHECK(j["expect"]["within"] == false);
    CHECK(j["exit"] == 3);
    CHECK(j["geometry"]["hidden"] == fx.g.hidden);
    REQUIRE(j["ops"].size() == 14);
    bool named = false;
    for (const auto& op : j["ops"])
      if (op["op"] == "OUT") named = op["vs_expect"].get<std::string>().find("(token 4,") != std::string::npos;
    CHECK(named);
    fs::remove(p);
  }
  SUBCASE("the final state off") {
    Fixture fx;
    for (auto& s : fx.S) s *= 1.01f;
    const auto p = fx.write("off-s");
    auto r = klab_cli("gdn --weights " + p.string() + " --expect " + p.string());
    CAPTURE(r.out);
    CHECK(r.code == 3);
    CHECK(has(r.out, "OVER"));
    fs::remove(p);
  }
  SUBCASE("a non-finite expectation never matches") {
    Fixture fx;
    fx.y[0] = std::numeric_limits<float>::quiet_NaN();
    const auto p = fx.write("nan");
    CHECK(klab_cli("gdn --weights " + p.string() + " --expect " + p.string()).code == 3);
    fs::remove(p);
  }
}

TEST_CASE("klab gdn refuses bad options and bad files with a clear message") {
  Fixture fx;
  const auto p = fx.write("refuse");
  const auto bytes = [&] {
    st::Writer out;
    gdn::add_weights(out, fx.w);
    out.add_f32(gdn::kInputsH, {fx.T, fx.g.hidden}, fx.h);
    return out.bytes();
  }();
  const auto truncated = temp_file("truncated");
  st::write_bytes(truncated, std::span(bytes).first(bytes.size() - 10));
  const auto wrong_hidden = temp_file("wrong-hidden");
  {
    st::Writer out;
    std::vector<float> h(5 * 7);
    out.add_f32(gdn::kInputsH, {5, 7}, h);
    out.write(wrong_hidden);
  }
  struct Case {
    std::string args, says;
  };
  for (const auto& c : std::vector<Case>{
           {"gdn", "--weights FILE is required"},
           {"gdn --weights /nonexistent/w.safetensors", "no such file"},
           {"gdn --weights " + truncated.string(), "truncated"},
           {"gdn --weights " + p.string() + " --inputs " + wrong_hidden.string(), "'inputs.h' has shape [5, 7]"},
           {"gdn --weights " + p.string() + " --expect " + wrong_hidden.string(), "no tensor 'expect.y'"},
           {"gdn --weights " + p.string() + " --backend cuda", "unknown backend 'cuda'"},
           {"gdn --weights " + p.string() + " --tolerance 0", "--tolerance must be positive"},
           {"gdn --weights " + p.string() + " --tolerance abc", "needs a number"},
           {"gdn --weights " + p.string() + " --tokens 65", "has 64 tokens"},
           {"gdn --weights " + p.string() + " --tokens 0", "--tokens must be at least 1"},
           {"gdn --weights " + p.string() + " --layer-prefix model.layers.5.", "model.layers.5.in_proj_qkv.weight"},
           {"gdn --weights " + p.string() + " --dk 5", "not a multiple of dk 5"},
           {"gdn --weights " + p.string() + " --bogus 1", "unknown option '--bogus'"},
           {"gdn --weights " + p.string() + " stray", "unexpected argument 'stray'"},
           {"gdn --weights", "--weights needs a value"},
       }) {
    CAPTURE(c.args);
    const auto r = klab_cli(c.args);
    CAPTURE(r.out);
    CHECK(r.code == 2);
    CHECK(has(r.out, c.says));
    CHECK_FALSE(has(r.out, "every comparison within"));
  }
  const auto help = klab_cli("gdn --help");
  CHECK(help.code == 0);
  CHECK(has(help.out, "--expect FILE"));
  CHECK(has(klab_cli("--help").out, "klab gdn --weights FILE"));
  // --key=value works like --key value.
  CHECK(klab_cli("gdn --weights=" + p.string() + " --expect=" + p.string()).code == 0);
  fs::remove(p);
  fs::remove(truncated);
  fs::remove(wrong_hidden);
}

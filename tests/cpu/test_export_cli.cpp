// `klab export`: the file holds exactly the problem klab races (the op's own generate() and
// reference, read back through the safetensors reader bit for bit), with its metadata; bad options
// are refused with a clear message, exit 2, and no file.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include "cli_util.hpp"
#include "klab/catalog.hpp"
#include "klab/problem.hpp"
#include "klab/ref/gdn.hpp"
#include "klab/ref/q4.hpp"
#include "klab/ref/safetensors.hpp"
#include "klab/registry.hpp"
#include "q4_gemv/op.hpp"

namespace st = klab::ref::safetensors;
namespace gdn = klab::ref::gdn;
namespace fs = std::filesystem;

namespace {

using klab::test::klab_cli;

fs::path temp_file(const std::string& name) { return klab::test::temp_safetensors("export", name); }

using klab::test::has;

template <class T>
std::vector<T> raw_as(const st::File& f, const std::string& name) {
  const auto raw = f.read_raw(name);
  REQUIRE(raw.size() % sizeof(T) == 0);
  std::vector<T> out(raw.size() / sizeof(T));
  std::memcpy(out.data(), raw.data(), raw.size());
  return out;
}

std::vector<double> to_double(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

}  // namespace

TEST_CASE("klab export --op q4_gemv writes the raced problem and its f64 reference, bit for bit") {
  const auto p = temp_file("q4");
  // 37x160: a row count that is not a multiple of anything, five blocks per row; normal inputs, seed 3.
  const auto r = klab_cli("export --op q4_gemv --shape 37x160 --input normal --seed 3 --out " + p.string());
  CAPTURE(r.out);
  REQUIRE(r.code == 0);
  CHECK(has(r.out, "wrote " + p.string()));

  const klab::Problem prob{{37, 160}, klab::Dist::normal, 3};
  const klab::Op& op = klab::registry().op("q4_gemv");
  const auto work = op.generate(prob);
  const auto& wl = klab::q4_gemv::workload_of(*work);
  const auto y = op.reference(*work);

  const auto f = st::File::open(p);
  REQUIRE(f.tensors().size() == 4);
  CHECK(f.at("codes").dtype == st::Dtype::U8);
  CHECK(f.at("codes").shape == std::vector<std::int64_t>{37, 80});
  CHECK(f.at("scales").dtype == st::Dtype::F16);
  CHECK(f.at("scales").shape == std::vector<std::int64_t>{37, 5});
  CHECK(f.at("x").dtype == st::Dtype::F32);
  CHECK(f.at("x").shape == std::vector<std::int64_t>{160});
  CHECK(f.at("y").dtype == st::Dtype::F64);
  CHECK(f.at("y").shape == std::vector<std::int64_t>{37});
  CHECK(raw_as<std::uint8_t>(f, "codes") == wl.w.codes);
  CHECK(raw_as<std::uint16_t>(f, "scales") == wl.w.scales);
  CHECK(f.read_f32("x") == wl.x);
  CHECK(f.read_f64("y") == y);  // the reference, not a rounding of it
  // The file's own tensors give the same reference (codes and scales are the format klab documents).
  klab::ref::Q4Matrix q;
  q.m = 37;
  q.k = 160;
  q.codes = raw_as<std::uint8_t>(f, "codes");
  q.scales = raw_as<std::uint16_t>(f, "scales");
  CHECK(klab::ref::q4_gemv_f64(q, f.read_f32("x")) == y);

  const auto t = op.traffic(prob);
  CHECK(f.meta("op") == "q4_gemv");
  CHECK(f.meta("shape") == "37x160");
  CHECK(f.meta("m") == "37");
  CHECK(f.meta("k") == "160");
  CHECK(f.meta("dist") == "normal");
  CHECK(f.meta("seed") == "3");
  CHECK(std::stod(f.meta("bytes")) == t.bytes);
  CHECK(std::stod(f.meta("macs")) == t.macs);
  CHECK_FALSE(f.meta("git_commit").empty());
  CHECK(has(f.meta("format"), "LOW nibble"));
  fs::remove(p);
}

TEST_CASE("klab export --op gdn_recurrence writes raw q, k and the f64 recurrence's o and S for each sequence") {
  const auto p = temp_file("gdn");
  const auto r = klab_cli("export --op gdn_recurrence --batch 2 --seed 5 --out=" + p.string());
  CAPTURE(r.out);
  REQUIRE(r.code == 0);
  const auto f = st::File::open(p);
  const gdn::Geometry g = gdn::qwen35_27b();
  const std::int64_t B = 2, nk = g.nk, nv = g.nv, dk = g.dk, dv = g.dv;
  struct Want {
    const char* name;
    st::Dtype dtype;
    std::vector<std::int64_t> shape;
  };
  for (const auto& w : std::vector<Want>{{"q", st::Dtype::F32, {B, nk, dk}},      {"k", st::Dtype::F32, {B, nk, dk}},
                                         {"v", st::Dtype::F32, {B, nv, dv}},      {"g", st::Dtype::F32, {B, nv}},
                                         {"beta", st::Dtype::F32, {B, nv}},       {"S0", st::Dtype::F32, {B, nv, dk, dv}},
                                         {"o", st::Dtype::F64, {B, nv, dv}},      {"S", st::Dtype::F64, {B, nv, dk, dv}},
                                         {"qn", st::Dtype::F64, {B, nk, dk}},     {"kn", st::Dtype::F64, {B, nk, dk}}}) {
    CAPTURE(w.name);
    REQUIRE(f.find(w.name) != nullptr);
    CHECK(f.at(w.name).dtype == w.dtype);
    CHECK(f.at(w.name).shape == w.shape);
  }
  CHECK(f.tensors().size() == 10);
  CHECK(f.meta("op") == "gdn_recurrence");
  CHECK(f.meta("shape") == "2x48x128x128");
  CHECK(f.meta("batch") == "2");
  CHECK(std::stod(f.meta("scale")) == doctest::Approx(1.0 / std::sqrt(128.0)));
  CHECK(has(f.meta("q_k"), "RAW"));
  // bytes: per sequence 4*(2*2048 + 6144) + 8*48 + 8*786432 + 4*6144.
  CHECK(std::stod(f.meta("bytes")) == 2.0 * (4.0 * (4096 + 6144) + 8.0 * 48 + 8.0 * 786432 + 4.0 * 6144));

  // The reference, recomputed from the file's own f32 inputs, sequence by sequence.
  const auto q = f.read_f32("q"), k = f.read_f32("k"), v = f.read_f32("v"), gate = f.read_f32("g"), beta = f.read_f32("beta"),
             S0 = f.read_f32("S0");
  const auto o = f.read_f64("o"), S = f.read_f64("S"), qn = f.read_f64("qn"), kn = f.read_f64("kn");
  const std::size_t KD = std::size_t(nk * dk), V = std::size_t(nv * dv), SN = std::size_t(nv * dk * dv);
  for (std::size_t b = 0; b < std::size_t(B); ++b) {
    CAPTURE(b);
    auto slice = [](const std::vector<float>& x, std::size_t at, std::size_t n) {
      return to_double(std::vector<float>(x.begin() + std::ptrdiff_t(at), x.begin() + std::ptrdiff_t(at + n)));
    };
    std::vector<double> state = slice(S0, b * SN, SN), ob(V), qb(KD), kb(KD);
    gdn::recurrence(g, slice(q, b * KD, KD), slice(k, b * KD, KD), slice(v, b * V, V), slice(gate, b * std::size_t(nv), std::size_t(nv)),
                    slice(beta, b * std::size_t(nv), std::size_t(nv)), state, ob, qb, kb);
    CHECK(std::equal(ob.begin(), ob.end(), o.begin() + std::ptrdiff_t(b * V)));
    CHECK(std::equal(state.begin(), state.end(), S.begin() + std::ptrdiff_t(b * SN)));
    CHECK(std::equal(qb.begin(), qb.end(), qn.begin() + std::ptrdiff_t(b * KD)));
    CHECK(std::equal(kb.begin(), kb.end(), kn.begin() + std::ptrdiff_t(b * KD)));
  }
  // The gates in their stated ranges; q and k are raw (not unit vectors).
  for (float x : gate) CHECK((x < 0 && x > -1.6f));
  for (float x : beta) CHECK((x > 0.01f && x < 0.99f));
  double qq = 0;
  for (std::int64_t i = 0; i < dk; ++i) qq += double(q[std::size_t(i)]) * q[std::size_t(i)];
  CHECK(std::abs(qq - 1.0) > 0.1);
  fs::remove(p);
}

TEST_CASE("klab export refuses bad options with a clear message and writes no file") {
  const auto p = temp_file("refused");
  fs::remove(p);
  const auto dir = fs::temp_directory_path();
  struct Case {
    std::string args, says;
  };
  for (const auto& c : std::vector<Case>{
           {"export", "--op is required"},
           {"export --op q4_gemv --shape 64x64", "--out FILE is required"},
           {"export --op f32_gemv --shape 64x64 --out " + p.string(), "unknown op 'f32_gemv'"},
           {"export --op q4_gemv --out " + p.string(), "--shape MxK is required"},
           {"export --op q4_gemv --shape 64x100 --out " + p.string(), "32"},  // k not a multiple of the block
           {"export --op q4_gemv --shape 0x64 --out " + p.string(), "0x64"},
           {"export --op q4_gemv --shape 64 --out " + p.string(), "'64'"},
           {"export --op q4_gemv --shape abcxdef --out " + p.string(), "abcxdef"},
           {"export --op q4_gemv --shape 64x64 --batch 2 --out " + p.string(), "--batch belongs to gdn_recurrence"},
           {"export --op q4_gemv --shape 64x64 --input cauchy --out " + p.string(), "cauchy"},
           {"export --op q4_gemv --shape 64x64 --seed -1 --out " + p.string(), "--seed needs a non-negative integer"},
           {"export --op q4_gemv --shape 64x64 --seed 1.5 --out " + p.string(), "--seed needs a non-negative integer"},
           {"export --op q4_gemv --shape 64x64 --out /nonexistent-dir/x.safetensors", "'/nonexistent-dir', does not exist"},
           {"export --op q4_gemv --shape 64x64 --out " + dir.string(), "is a directory"},
           {"export --op gdn_recurrence --out " + p.string(), "--batch B is required"},
           {"export --op gdn_recurrence --batch 0 --out " + p.string(), "--batch must be between 1 and 256"},
           {"export --op gdn_recurrence --batch 257 --out " + p.string(), "--batch must be between 1 and 256"},
           {"export --op gdn_recurrence --batch x --out " + p.string(), "--batch needs an integer"},
           {"export --op gdn_recurrence --batch 1 --shape 64x64 --out " + p.string(), "--shape belongs to q4_gemv"},
           {"export --op q4_gemv --shape 64x64 --bogus 1 --out " + p.string(), "unknown option '--bogus'"},
           {"export --op q4_gemv --shape 64x64 stray --out " + p.string(), "unexpected argument 'stray'"},
           {"export --op q4_gemv --shape", "--shape needs a value"},
       }) {
    CAPTURE(c.args);
    const auto r = klab_cli(c.args);
    CAPTURE(r.out);
    CHECK(r.code == 2);
    CHECK(has(r.out, c.says));
    CHECK_FALSE(has(r.out, "wrote"));
    CHECK_FALSE(fs::exists(p));
  }
  const auto help = klab_cli("export --help");
  CHECK(help.code == 0);
  CHECK(has(help.out, "--op OP"));
  CHECK(has(klab_cli("--help").out, "klab export --op q4_gemv"));
}

// The .safetensors reader and writer, and GDN layer loading: round trips, dtype conversions, and the
// refusal of truncated, lying or self-contradicting files (written here, byte by byte).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <unistd.h>
#include <vector>

#include "klab/ref/gdn.hpp"
#include "klab/ref/safetensors.hpp"

namespace st = klab::ref::safetensors;
namespace gdn = klab::ref::gdn;
namespace fs = std::filesystem;

namespace {

fs::path temp_file(const std::string& name) {
  return fs::temp_directory_path() / ("klab-st-" + std::to_string(::getpid()) + "-" + name + ".safetensors");
}

// A file from a header text and a data buffer, with the length prefix `n` (the true length unless a
// test wants it to lie).
std::vector<std::byte> raw_file(const std::string& header, std::size_t data_bytes, std::uint64_t n = ~0ull) {
  if (n == ~0ull) n = header.size();
  std::vector<std::byte> b;
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<std::byte>((n >> (8 * i)) & 0xFF));
  for (char c : header) b.push_back(static_cast<std::byte>(c));
  b.resize(b.size() + data_bytes, std::byte{0});
  return b;
}

// Writes `bytes`, opens the file, and returns the error message ("" when it opened).
std::string open_error(const std::vector<std::byte>& bytes, const std::string& name) {
  const auto p = temp_file(name);
  st::write_bytes(p, bytes);
  std::string msg;
  try {
    st::File::open(p);
  } catch (const st::FormatError& e) {
    msg = e.what();
  }
  fs::remove(p);
  return msg;
}

}  // namespace

TEST_CASE("safetensors round trip: shapes, dtypes, metadata, values") {
  st::Writer w;
  const std::vector<float> a{1.f, -2.5f, 3.25f, 1e-30f, -0.f, 65504.f};
  const std::vector<double> d{0.1, -1e300};
  // F16: 1, -2, 65504 (max), 2^-24 (smallest subnormal), 2^-15 (subnormal), -0, +inf; BF16: 1, -3
  const std::vector<std::uint16_t> half{0x3C00, 0xC000, 0x7BFF, 0x0001, 0x0200, 0x8000, 0x7C00};
  const std::vector<std::uint16_t> bf{0x3F80, 0xC040};
  w.add_f32("a", {2, 3}, a);
  w.add_f64("d", {2}, d);
  w.add("h", st::Dtype::F16, {7}, std::as_bytes(std::span(half)));
  w.add("b", st::Dtype::BF16, {1, 2}, std::as_bytes(std::span(bf)));
  w.add("empty", st::Dtype::F32, {0, 4}, {});
  const std::vector<std::int32_t> ints{7};
  w.add("i", st::Dtype::I32, {1}, std::as_bytes(std::span(ints)));
  w.metadata("who", "test");
  const auto p = temp_file("roundtrip");
  w.write(p);
  const auto bytes = w.bytes();
  CHECK(fs::file_size(p) == bytes.size());
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(n % 8 == 0);  // the header is padded to 8 bytes, like the reference writer

  const auto f = st::File::open(p);
  CHECK(f.meta("who") == "test");
  CHECK(f.meta("nope", "x") == "x");
  CHECK(f.tensors().size() == 6);
  CHECK(f.at("a").shape == std::vector<std::int64_t>{2, 3});
  CHECK(f.at("a").shape_str() == "[2, 3]");
  CHECK(f.read_f32("a") == a);
  CHECK(f.read_f64("d") == d);
  CHECK(f.read_f32("d")[0] == 0.1f);
  const auto hv = f.read_f32("h");
  CHECK(hv[0] == 1.f);
  CHECK(hv[1] == -2.f);
  CHECK(hv[2] == 65504.f);
  CHECK(hv[3] == std::ldexp(1.f, -24));
  CHECK(hv[4] == std::ldexp(1.f, -15));
  CHECK((hv[5] == 0.f && std::signbit(hv[5])));
  CHECK(std::isinf(hv[6]));
  CHECK(std::isnan(st::half_to_float(0x7E00)));
  CHECK(f.read_f32("b") == std::vector<float>{1.f, -3.f});
  CHECK(f.read_f32("empty").empty());
  CHECK_THROWS_WITH_AS(f.read_f32("i"), doctest::Contains("'i' has dtype I32"), st::FormatError);
  CHECK_THROWS_WITH_AS(f.at("zz"), doctest::Contains("no tensor 'zz'"), st::FormatError);
  CHECK(f.find("zz") == nullptr);

  // Every F16 bit pattern that is a number converts exactly (float holds them all): check by
  // converting back through the float's bits for the normal range.
  for (std::uint32_t b = 0x0400; b < 0x7C00; ++b) {
    const float x = st::half_to_float(std::uint16_t(b));
    const int e = std::ilogb(x);
    CHECK_MESSAGE(std::uint32_t((e + 15) << 10 | ((std::uint32_t(std::ldexp(x, -e) * 1024) - 1024) & 0x3FF)) == b, b);
  }
  fs::remove(p);
}

TEST_CASE("safetensors refuses truncated and lying files, naming the file and the tensor") {
  st::Writer w;
  std::vector<float> x(16, 1.f);
  w.add_f32("first", {4, 4}, x);
  w.add_f32("second", {2, 2}, std::span(x).first(4));
  const auto good = w.bytes();
  CHECK(open_error(good, "good").empty());

  SUBCASE("truncated data") {
    auto b = good;
    b.resize(b.size() - 3);
    const auto m = open_error(b, "trunc");
    CHECK(m.find("klab-st-") != std::string::npos);  // the file's name
    CHECK(m.find("second") != std::string::npos);
    CHECK(m.find("truncated") != std::string::npos);
  }
  SUBCASE("truncated inside the header, and shorter than the length prefix") {
    auto b = good;
    b.resize(20);
    CHECK(open_error(b, "trunc-header").find("header length") != std::string::npos);
    b.resize(5);
    CHECK(open_error(b, "tiny").find("too short") != std::string::npos);
  }
  SUBCASE("extra bytes after the last tensor") {
    auto b = good;
    b.push_back(std::byte{0});
    CHECK(open_error(b, "extra").find("after the last tensor") != std::string::npos);
  }
  SUBCASE("shape and byte count disagree") {
    const std::string h = R"({"t":{"dtype":"F32","shape":[3,3],"data_offsets":[0,32]}})";
    const auto m = open_error(raw_file(h, 32), "shape");
    CHECK(m.find("'t'") != std::string::npos);
    CHECK(m.find("need 36") != std::string::npos);
  }
  SUBCASE("overlapping tensors") {
    const std::string h = R"({"u":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"v":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
    CHECK(open_error(raw_file(h, 12), "overlap").find("overlaps") != std::string::npos);
  }
  SUBCASE("a hole between tensors") {
    const std::string h = R"({"u":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"v":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
    CHECK(open_error(raw_file(h, 12), "hole").find("hole of 4 bytes before tensor 'v'") != std::string::npos);
  }
  SUBCASE("offsets past the end of the file") {
    const std::string h = R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
    const auto m = open_error(raw_file(h, 8), "past");
    CHECK(m.find("'t'") != std::string::npos);
    CHECK(m.find("run past the end") != std::string::npos);
  }
  SUBCASE("end before begin") {
    const std::string h = R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})";
    CHECK(open_error(raw_file(h, 4), "backwards").find("end before they begin") != std::string::npos);
  }
  SUBCASE("a shape so large its byte count overflows") {
    const std::string h = R"({"t":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}})";
    CHECK(open_error(raw_file(h, 0), "overflow").find("too large") != std::string::npos);
  }
  SUBCASE("a zero-size shape whose element count overflows int64 (found by reading, confirmed by fuzz/fuzz_safetensors)") {
    // 0 bytes, but numel() multiplies 3 * 2^62 first: signed overflow. Refused before numel() can run.
    const std::string h = R"({"t":{"dtype":"U8","shape":[3,4611686018427387904,0],"data_offsets":[0,0]}})";
    CHECK(open_error(raw_file(h, 0), "numel").find("too large") != std::string::npos);
  }
  SUBCASE("a JSON number past a double is a refusal, not a json exception (found by fuzz/fuzz_safetensors)") {
    // nlohmann throws out_of_range, not parse_error, for 1e999: it escaped File::open as a non-FormatError.
    const std::string h = R"({"t":{"dtype":"F32","shape":[1e999],"data_offsets":[0,4]}})";
    CHECK(open_error(raw_file(h, 4), "bignum").find("not valid JSON") != std::string::npos);
  }
  SUBCASE("malformed headers") {
    CHECK(open_error(raw_file("{not json", 0), "json").find("not valid JSON") != std::string::npos);
    CHECK(open_error(raw_file("[1,2]", 0), "array").find("not a JSON object") != std::string::npos);
    CHECK(open_error(raw_file(R"({"t":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", 4), "dtype").find("unknown dtype 'F33'") !=
          std::string::npos);
    CHECK(open_error(raw_file(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4), "neg").find("non-negative") !=
          std::string::npos);
    CHECK(open_error(raw_file(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4), "offs").find("data_offsets") !=
          std::string::npos);
    CHECK(open_error(raw_file(R"({"t":{"shape":[1],"data_offsets":[0,4]}})", 4), "nodtype").find("no dtype") != std::string::npos);
    CHECK(open_error(raw_file(R"({"__metadata__":{"k":1}})", 0), "meta").find("not a string") != std::string::npos);
  }
  SUBCASE("a header length that points past the file") {
    CHECK(open_error(raw_file("{}", 0, 1000), "lie").find("header length says 1000") != std::string::npos);
  }
  SUBCASE("missing file, and a directory") {
    CHECK_THROWS_WITH_AS(st::File::open("/nonexistent/x.safetensors"), doctest::Contains("no such file"), st::FormatError);
    CHECK_THROWS_WITH_AS(st::File::open(fs::temp_directory_path()), doctest::Contains("not a regular file"), st::FormatError);
  }
  SUBCASE("a file truncated after it was opened") {
    const auto p = temp_file("shrinks");
    st::write_bytes(p, good);
    const auto f = st::File::open(p);
    fs::resize_file(p, good.size() - 8);
    CHECK_THROWS_WITH_AS(f.read_f32("second"), doctest::Contains("could not read"), st::FormatError);
    fs::remove(p);
  }
}

TEST_CASE("safetensors writer refuses a wrong byte count or a duplicate name") {
  st::Writer w;
  std::vector<float> x(4);
  CHECK_THROWS_AS(w.add_f32("t", {5}, x), std::invalid_argument);
  w.add_f32("t", {2, 2}, x);
  CHECK_THROWS_AS(w.add_f32("t", {4}, x), std::invalid_argument);
  CHECK_THROWS_AS(w.add_f32("__metadata__", {4}, x), std::invalid_argument);
}

// ---- GDN layers from files ------------------------------------------------------------------------

TEST_CASE("GDN weights load with transformers names, with or without a model prefix") {
  const gdn::Geometry g{24, 2, 4, 8, 6, 4, 1e-5};
  const auto w = gdn::random_weights(g, 3);
  for (const std::string prefix : {"", "model.layers.7.linear_attn.", "model.language_model.layers.0.linear_attn."}) {
    CAPTURE(prefix);
    st::Writer out;
    gdn::add_weights(out, w, prefix);
    const auto p = temp_file("layer");
    out.write(p);
    const auto f = st::File::open(p);
    CHECK(f.at(prefix + "conv1d.weight").shape == std::vector<std::int64_t>{g.conv_dim(), 1, g.ck});
    CHECK(gdn::find_layer_prefix(f) == prefix);
    CHECK(f.meta("rms_norm_eps") == "1e-05");
    CHECK(f.meta("dk") == "8");
    const auto back = gdn::load_weights(p);
    CHECK(back.g == g);
    CHECK(back.w_qkv == w.w_qkv);
    CHECK(back.w_z == w.w_z);
    CHECK(back.w_b == w.w_b);
    CHECK(back.w_a == w.w_a);
    CHECK(back.w_out == w.w_out);
    CHECK(back.a_log == w.a_log);
    CHECK(back.dt_bias == w.dt_bias);
    CHECK(back.conv_w == w.conv_w);
    CHECK(back.norm_w == w.norm_w);
    if (!prefix.empty()) {
      // An explicit prefix, with or without its trailing dot.
      CHECK(gdn::load_weights(p, {prefix.substr(0, prefix.size() - 1)}).g == g);
      CHECK_THROWS_WITH_AS(gdn::load_weights(p, {"model.layers.9.linear_attn"}), doctest::Contains("model.layers.9.linear_attn.in_proj_qkv"),
                           st::FormatError);
    }
    fs::remove(p);
  }
}

TEST_CASE("GDN geometry from shapes: dk from options, metadata, or dv, and contradictions refused") {
  const gdn::Geometry g{16, 2, 4, 12, 6, 3, 1e-6};  // dk != dv: the shapes alone cannot tell nk from dk
  const auto w = gdn::random_weights(g, 5);
  auto write = [&](const std::map<std::string, std::string>& meta, bool keep_geometry_meta) {
    st::Writer out;
    gdn::add_weights(out, w, "layers.0.");
    st::Writer bare;
    // add_weights sets metadata; rebuild without it where the test wants bare shapes.
    const auto p = temp_file("geo");
    if (keep_geometry_meta) {
      for (const auto& [k, v] : meta) out.metadata(k, v);
      out.write(p);
    } else {
      const auto f0 = temp_file("geo0");
      out.write(f0);
      const auto f = st::File::open(f0);
      for (const auto& t : f.tensors()) bare.add(t.name, t.dtype, t.shape, f.read_raw(t.name));
      for (const auto& [k, v] : meta) bare.metadata(k, v);
      bare.write(p);
      fs::remove(f0);
    }
    return p;
  };
  {
    const auto p = write({}, true);  // metadata dk = 12
    CHECK(gdn::load_weights(p).g == g);
    fs::remove(p);
  }
  {
    const auto p = write({}, false);  // no metadata: dk = dv = 6, so nk = 24/6 = 4 and nv % nk == 0
    const auto got = gdn::load_weights(p);
    CHECK(got.g.dk == 6);
    CHECK(got.g.nk == 4);
    CHECK(gdn::load_weights(p, {"", 12}).g == g);  // --dk
    CHECK(gdn::load_weights(p, {"", 12, 1e-3}).g.eps == 1e-3);
    CHECK_THROWS_WITH_AS(gdn::load_weights(p, {"", 5}), doctest::Contains("not a multiple of dk 5"), st::FormatError);
    fs::remove(p);
  }
  {
    const auto p = write({{"linear_key_head_dim", "12"}}, false);
    CHECK(gdn::load_weights(p).g == g);
    fs::remove(p);
  }
  {
    const auto p = write({{"nk", "3"}}, true);  // metadata lies about nk
    CHECK_THROWS_WITH_AS(gdn::load_weights(p), doctest::Contains("metadata nk=3 contradicts"), st::FormatError);
    fs::remove(p);
  }
  {
    const auto p = write({{"dk", "twelve"}}, true);
    CHECK_THROWS_WITH_AS(gdn::load_weights(p), doctest::Contains("not a positive integer"), st::FormatError);
    fs::remove(p);
  }
}

TEST_CASE("GDN loading refuses missing, mis-shaped and ambiguous layers") {
  const gdn::Geometry g{16, 1, 2, 8, 4, 4, 1e-6};  // out_proj (16, 8): a transposed copy has another shape
  const auto w = gdn::random_weights(g, 6);
  const auto p = temp_file("bad-layer");
  auto rebuild = [&](const std::string& drop, const std::string& reshape) {
    st::Writer a;
    gdn::add_weights(a, w, "m.");
    const auto tmp = temp_file("bad-layer-src");
    a.write(tmp);
    const auto f = st::File::open(tmp);
    st::Writer b;
    for (const auto& t : f.tensors()) {
      if (t.name == drop) continue;
      auto shape = t.shape;
      if (t.name == reshape) shape = {shape[1], shape[0]};  // transposed: same bytes, wrong shape
      b.add(t.name, t.dtype, shape, f.read_raw(t.name));
    }
    for (const auto& [k, v] : f.metadata()) b.metadata(k, v);
    b.write(p);
    fs::remove(tmp);
  };
  rebuild("m.dt_bias", "");
  CHECK_THROWS_WITH_AS(gdn::load_weights(p), doctest::Contains("no tensor 'm.dt_bias'"), st::FormatError);
  rebuild("", "m.out_proj.weight");
  CHECK_THROWS_WITH_AS(gdn::load_weights(p), doctest::Contains("'m.out_proj.weight' has shape [8, 16]"), st::FormatError);
  rebuild("", "m.in_proj_b.weight");
  CHECK_THROWS_WITH_AS(gdn::load_weights(p), doctest::Contains("m.in_proj_b.weight"), st::FormatError);
  rebuild("m.in_proj_qkv.weight", "");
  CHECK_THROWS_WITH_AS(gdn::load_weights(p), doctest::Contains("no GDN layer"), st::FormatError);

  // Two layers in one file: the loader will not guess which.
  st::Writer two;
  gdn::add_weights(two, w, "model.layers.0.linear_attn.");
  gdn::add_weights(two, gdn::random_weights(g, 7), "model.layers.1.linear_attn.");
  two.write(p);
  CHECK_THROWS_WITH_AS(gdn::load_weights(p), doctest::Contains("--layer-prefix"), st::FormatError);
  CHECK(gdn::load_weights(p, {"model.layers.0.linear_attn."}).w_qkv == w.w_qkv);
  CHECK(gdn::load_weights(p, {"model.layers.1.linear_attn."}).w_qkv != w.w_qkv);
  fs::remove(p);
}

TEST_CASE("GDN fixture inputs and expectations are shape-checked against the geometry") {
  const gdn::Geometry g{8, 1, 2, 4, 4, 3, 1e-6};
  const auto p = temp_file("fixture");
  st::Writer out;
  gdn::add_weights(out, gdn::random_weights(g, 1));
  std::vector<float> h(3 * 8, 0.25f), y(3 * 8, 1.f), S(2 * 4 * 4, 2.f), hist(2 * g.conv_dim(), 3.f);
  out.add_f32(gdn::kInputsH, {3, 8}, h);
  out.add_f32(gdn::kExpectY, {3, 8}, y);
  out.add_f32(gdn::kExpectS, {2, 4, 4}, S);
  out.add_f32(gdn::kExpectHist, {2, g.conv_dim()}, hist);
  out.write(p);
  const auto in = gdn::load_inputs(p, g);
  CHECK(in.tokens == 3);
  CHECK(in.h == h);
  const auto ex = gdn::load_expected(p, g);
  CHECK(ex.tokens == 3);
  CHECK(ex.y == y);
  CHECK(ex.S == S);
  CHECK(ex.hist == hist);
  gdn::Geometry other = g;
  other.hidden = 9;
  CHECK_THROWS_WITH_AS(gdn::load_inputs(p, other), doctest::Contains("'inputs.h' has shape [3, 8]"), st::FormatError);
  other = g;
  other.dk = 2;
  other.nk = 2;
  CHECK_THROWS_WITH_AS(gdn::load_expected(p, other), doctest::Contains("expect.S"), st::FormatError);
  fs::remove(p);
}

#include "export_cli.hpp"
#include "command_options.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <span>
#include <stdexcept>

#include "klab/error.hpp"
#include "klab/problem.hpp"
#include "klab/ref/gdn.hpp"
#include "klab/ref/parse.hpp"
#include "klab/ref/safetensors.hpp"
#include "klab/registry.hpp"
#include "klab/report.hpp"
#include "gdn_recurrence/op.hpp"
#include "klab/metrics.hpp"
#include "q4_gemv/op.hpp"

namespace klab::experiments {

const char* const kExportUsage =
    "klab export --op q4_gemv --shape MxK | --op gdn_recurrence --batch B  [--input DIST] [--seed S] --out FILE.safetensors";

namespace {

namespace fs = std::filesystem;
namespace st = klab::ref::safetensors;
namespace gdn = klab::ref::gdn;

// Batches past this would make a file of gigabytes (9.4 MB per sequence) for no question we ask.
constexpr long long kMaxBatch = 256;

const char* kHelp =
    "klab export: write the exact problem klab races, and its f64 reference, as one .safetensors file\n"
    "(for peers outside klab: peers/run.py).\n\n"
    "  --op OP          q4_gemv or gdn_recurrence (required)\n"
    "  --shape MxK      q4_gemv: the problem shape, e.g. 17408x5120 (required for q4_gemv)\n"
    "  --batch B        gdn_recurrence: sequences in the batch, 1..256 (required for gdn_recurrence);\n"
    "                   the heads are Qwen3.5-27B's: 16 key heads, 48 value heads, dk = dv = 128\n"
    "  --input DIST     uniform (default), normal, student-t, outlier: x (q4_gemv); q, k, v and S0 (gdn_recurrence)\n"
    "  --seed S         problem seed (default 1, as `klab run`)\n"
    "  --out FILE       the file to write (its directory must exist); written whole or not at all\n"
    "  --help           this help\n\n"
    "q4_gemv tensors: codes U8 (m, k/2) (even column in the low nibble), scales F16 (m, k/32), x F32 (k),\n"
    "  y F64 (m) = dequant(W) x in f64: the same bytes `klab run` races for (shape, input, seed).\n"
    "gdn_recurrence tensors: q, k F32 (B, 16, 128) raw (NOT normalised), v F32 (B, 48, 128), g F32 (B, 48)\n"
    "  (log-domain decay), beta F32 (B, 48) (post-sigmoid), S0 F32 (B, 48, 128, 128) (dk, dv per head);\n"
    "  the f64 reference: o F64 (B, 48, 128), S F64 (B, 48, 128, 128), qn, kn F64 (B, 16, 128)\n"
    "  (q normalised and scaled by 1/sqrt(dk), k normalised: x * rsqrt(sum x^2 + 1e-6)).\n";

struct Options {
  std::string op, shape, input = "uniform", out;
  long long batch = 0;
  std::uint64_t seed = 1;
  bool help = false, has_shape = false, has_batch = false;
};

Options parse(const std::vector<std::string>& args) {
  Options o;
  namespace po = boost::program_options;
  po::options_description d;
  for (const char* name : {"op", "shape", "batch", "input", "seed", "out"}) d.add_options()(name, po::value<std::string>(), "");
  const auto lo = parse_command_options(args, d, "export");
  o.help = lo.help;
  for (const auto& [a, value] : lo.values) {
    if (a == "--op") o.op = value;
    else if (a == "--shape") o.shape = value, o.has_shape = true;
    else if (a == "--input") o.input = value;
    else if (a == "--out") o.out = value;
    else if (a == "--batch") {
      const auto x = ref::parse_whole_int(value);
      require(x.has_value(), "--batch needs an integer (got '" + value + "')");
      require(*x >= 1 && *x <= kMaxBatch, "--batch must be between 1 and " + std::to_string(kMaxBatch) + " (got " + value + ")");
      o.batch = *x;
      o.has_batch = true;
    } else {
      const auto x = ref::parse_whole_int(value);
      require(x.has_value() && *x >= 0, "--seed needs a non-negative integer (got '" + value + "')");
      o.seed = static_cast<std::uint64_t>(*x);
    }
  }
  return o;
}

// The target must be a file in an existing directory; checked before any work so that a bad
// path costs nothing and writes nothing.
void check_out(const std::string& out) {
  require(!out.empty(), "--out FILE is required (see `klab export --help`)");
  const fs::path p(out);
  fs::path dir = p.parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  require(fs::is_directory(dir, ec), "the directory of --out, '" + dir.string() + "', does not exist");
  require(!fs::is_directory(p, ec), "--out '" + out + "' is a directory; name a file");
}

std::string num(double x) {
  char b[64];
  std::snprintf(b, sizeof b, "%.17g", x);
  return b;
}

template <class T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

void common_metadata(st::Writer& w, const std::string& op, Dist dist, std::uint64_t seed) {
  const auto env = base_environment(0, nullptr);
  w.metadata("op", op);
  w.metadata("dist", to_string(dist));
  w.metadata("seed", std::to_string(seed));
  w.metadata("git_commit", env.value("git_commit", "unknown"));
  w.metadata("git_dirty", env.value("git_dirty", false) ? "true" : "false");
  w.metadata("klab_version", env.value("klab_version", "?"));
  w.metadata("writer", "klab export");
}

// q4_gemv: exactly what race() generates for Problem{shape, dist, seed}, and its reference.
void export_q4(const Registry& reg, const Options& o, Dist dist, st::Writer& w) {
  const Shape shape = parse_shape(o.shape);
  const Problem p{shape, dist, o.seed};
  const Op& op = reg.op("q4_gemv");
  if (auto why = op.validate(p); !why.empty()) throw Error("q4_gemv " + shape.str() + ": " + why);
  const auto work = op.generate(p);
  const auto& wl = q4_gemv::workload_of(*work);
  const std::vector<double> y = op.reference(*work);
  const Traffic t = op.traffic(p);
  const std::int64_t m = shape.m, k = shape.k;
  w.add("codes", st::Dtype::U8, {m, k / 2}, bytes_of(wl.w.codes));
  w.add("scales", st::Dtype::F16, {m, k / ref::kQ4Block}, bytes_of(wl.w.scales));
  w.add_f32("x", {k}, wl.x);
  w.add_f64("y", {m}, y);
  common_metadata(w, "q4_gemv", dist, o.seed);
  w.metadata("shape", shape.str());
  w.metadata("problem", p.key());
  w.metadata("input_hash", hash_hex(work->digest()));
  w.metadata("m", std::to_string(m));
  w.metadata("k", std::to_string(k));
  w.metadata("bytes", num(t.bytes));
  w.metadata("macs", num(t.macs));
  w.metadata("group_size", std::to_string(ref::kQ4Block));
  w.metadata("format",
             "value(i, j) = n4(i, j) * scale(i, j / 32); n4 int4 two's complement in [-8, 7]; codes byte i*(k/2) + j/2 holds "
             "column j, even j in the LOW nibble; scales are IEEE binary16");
  w.metadata("reference", "y = dequant(W) x, every product and sum in f64 (ref::q4_gemv_f64)");
  w.metadata("bytes_model", "m*k/2 (codes) + m*(k/32)*2 (scales) + 4k (x) + 4m (y)");
}

// gdn_recurrence: one step of operators 4-5 for `batch` sequences of Qwen3.5-27B's heads: exactly
// the workload the op generates for (its default heads, batch, dist, seed), the one `klab run
// gdn-recurrence` races (variants/gdn_recurrence/op.cpp: ONE generator), and its f64 reference.
void export_gdn(const Registry& reg, const Options& o, Dist dist, st::Writer& w) {
  const Op& op = reg.op("gdn_recurrence");
  Problem p = op.default_problem(dist, o.seed);
  p.params["batch"] = o.batch;
  if (auto why = op.validate(p); !why.empty()) throw Error("gdn_recurrence " + p.key() + ": " + why);
  const auto work = op.generate(p);
  const auto& wl = gdn_recurrence::workload_of(*work);
  const gdn_recurrence::Reference ref = gdn_recurrence::reference_f64(wl);
  const std::int64_t B = wl.batch, nk = wl.nk, nv = wl.nv, dk = wl.dk, dv = wl.dv;
  w.add_f32("q", {B, nk, dk}, wl.q);
  w.add_f32("k", {B, nk, dk}, wl.k);
  w.add_f32("v", {B, nv, dv}, wl.v);
  w.add_f32("g", {B, nv}, wl.g);
  w.add_f32("beta", {B, nv}, wl.beta);
  w.add_f32("S0", {B, nv, dk, dv}, wl.S0);
  w.add_f64("o", {B, nv, dv}, ref.o);
  w.add_f64("S", {B, nv, dk, dv}, ref.S);
  w.add_f64("qn", {B, nk, dk}, ref.qn);
  w.add_f64("kn", {B, nk, dk}, ref.kn);
  // Bytes a perfect kernel moves (q, k, v, g, beta and o once, the state read and written once) and
  // its multiply-accumulates (S^T k, the rank-1 update, S^T q): the op's own traffic model.
  const Traffic t = op.traffic(p);
  const double bytes = t.bytes, macs = t.macs;
  common_metadata(w, "gdn_recurrence", dist, o.seed);
  w.metadata("shape", std::to_string(B) + "x" + std::to_string(nv) + "x" + std::to_string(dk) + "x" + std::to_string(dv));
  w.metadata("batch", std::to_string(B));
  w.metadata("nk", std::to_string(nk));
  w.metadata("nv", std::to_string(nv));
  w.metadata("dk", std::to_string(dk));
  w.metadata("dv", std::to_string(dv));
  // What klab's records of the same problem carry: its parameters ("batch=1,dk=128,dv=128,nk=16,nv=48")
  // and the hash of every input byte (Workload::digest), so peers' records line up with ours.
  w.metadata("problem", p.key());
  w.metadata("input_hash", hash_hex(wl.digest()));
  w.metadata("scale", num(1.0 / std::sqrt(double(dk))));
  w.metadata("l2norm_eps", num(gdn::kL2NormEps));
  w.metadata("bytes", num(bytes));
  w.metadata("macs", num(macs));
  w.metadata("bytes_model", "B*(4*(2*nk*dk + nv*dv) (q, k, v) + 8*nv (g, beta) + 8*nv*dk*dv (S read and written) + 4*nv*dv (o))");
  w.metadata("q_k", "q and k are RAW (not L2-normalised, not scaled); qn, kn are the reference's normalised ones: "
                    "x * rsqrt(sum x^2 + 1e-6) per key head, qn also times scale = 1/sqrt(dk)");
  w.metadata("gqa", "value head h uses key head h / (nv/nk)");
  w.metadata("g", "log-domain decay: S *= exp(g) before the update");
  w.metadata("beta", "post-sigmoid");
  w.metadata("state_layout", "(B, nv, dk, dv) row-major: S[b][h][i][j], i over dk (keys), j over dv (values) (fla's [N, HV, K, V])");
  w.metadata("reference", "per value head: S *= exp(g); t = (v - S^T kn) beta; S += kn t^T; o = S^T qn; f64 (ref::gdn::recurrence)");
}

}  // namespace

int export_command(const Registry& reg, const std::vector<std::string>& args, int, char**) {
  const Options o = parse(args);
  if (o.help) {
    std::cout << kHelp;
    return 0;
  }
  require(!o.op.empty(), "--op is required: q4_gemv or gdn_recurrence (see `klab export --help`)");
  require(o.op == "q4_gemv" || o.op == "gdn_recurrence", "unknown op '" + o.op + "' (q4_gemv or gdn_recurrence)");
  const Dist dist = parse_dist(o.input);
  if (o.op == "q4_gemv") {
    require(o.has_shape, "klab export --op q4_gemv: --shape MxK is required");
    require(!o.has_batch, "klab export --op q4_gemv: --batch belongs to gdn_recurrence (q4_gemv takes --shape)");
    parse_shape(o.shape);  // refuses a malformed shape before the path is even looked at
  } else {
    require(o.has_batch, "klab export --op gdn_recurrence: --batch B is required");
    require(!o.has_shape, "klab export --op gdn_recurrence: --shape belongs to q4_gemv (the recurrence's heads are fixed; give --batch)");
  }
  check_out(o.out);

  st::Writer w;
  try {
    if (o.op == "q4_gemv") export_q4(reg, o, dist, w);
    else export_gdn(reg, o, dist, w);
    w.write(o.out);
  } catch (const std::invalid_argument& e) {  // the writer's and the reference's refusals
    throw Error(std::string("") + e.what());
  }
  std::uintmax_t size = 0;
  std::error_code ec;
  size = fs::file_size(o.out, ec);
  std::cout << "klab export: wrote " << o.out << " (" << o.op << ", " << (o.op == "q4_gemv" ? o.shape : "batch " + std::to_string(o.batch))
            << ", " << to_string(dist) << ", seed " << o.seed << "; " << size << " bytes)" << std::endl;
  return 0;
}

}  // namespace klab::experiments

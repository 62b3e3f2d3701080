#include "gdn_recurrence/op.hpp"

#include <cmath>
#include <span>

#include "klab/error.hpp"
#include "klab/metrics.hpp"
#include "klab/ref/gdn.hpp"

namespace klab::gdn_recurrence {

namespace {

const char* const kNames[] = {"nv", "nk", "dk", "dv", "batch"};

ref::gdn::Geometry geometry(const Workload& w) {
  ref::gdn::Geometry g;
  g.nk = w.nk;
  g.nv = w.nv;
  g.dk = w.dk;
  g.dv = w.dv;
  return g;
}

}  // namespace

Op make_op() {
  Op op;
  op.name = "gdn_recurrence";
  op.description = "GDN operators 4-5 for `batch` sequences: q/k L2 norm, then per value head S *= exp(g); t = (v - S^T k) beta; "
                   "S += k t^T; o = S^T q; f32 state (batch, nv, dk, dv) updated in place";
  // Qwen3.5-27B's heads by default; --quick keeps every path (several key heads, a group of value
  // heads per key head, two sequences) at a size the CPU reference does in a blink.
  op.params = {
      {"nv", "value heads (a multiple of nk)", 48, {48}, {4}},
      {"nk", "key heads (q and k)", 16, {16}, {2}},
      {"dk", "key head dim (rows of each head's state)", 128, {128}, {32}},
      {"dv", "value head dim (columns of each head's state)", 128, {128}, {32}},
      {"batch", "sequences stepped at once, one state each", 1, {1, 8, 32}, {2}},
  };
  op.validate = [](const Problem& p) -> std::string {
    for (const char* n : kNames)
      if (!p.has(n)) return std::string("no parameter ") + n + " (gdn_recurrence needs nv, nk, dk, dv and batch)";
    for (const char* n : kNames)
      if (p.param(n) <= 0 || p.param(n) > (1 << 20)) return std::string(n) + " must be between 1 and 2^20";
    if (p.param("nv") % p.param("nk") != 0) return "nv must be a multiple of nk (value head h uses key head h / (nv/nk))";
    const double state = 4.0 * double(p.param("batch")) * double(p.param("nv")) * double(p.param("dk")) * double(p.param("dv"));
    if (state > 8e9) return "the state would take over 8 GB";
    return "";
  };
  // Exactly what `klab export --op gdn_recurrence` writes (it calls this), so that a peer's records
  // of the exported file carry this workload's input_hash. Each tensor from its own stream of the
  // seed; q, k, v and S0 follow the distribution, S0 scaled by 1/sqrt(dk) (a state that has absorbed
  // many unit-norm keys). The gates span the ranges of ref::gdn::random_weights: exp(A_log) in
  // [1, 16), softplus(a + dt_bias) in [1e-3, 1e-1), so g = -exp(A_log) softplus(...) in (-1.6, -1e-3];
  // beta = sigmoid(4u), u in [-1, 1): (0.018, 0.98).
  op.generate = [](const Problem& p) {
    auto w = std::make_unique<Workload>();
    w->problem = p;
    w->nv = int(p.param("nv"));
    w->nk = int(p.param("nk"));
    w->dk = int(p.param("dk"));
    w->dv = int(p.param("dv"));
    w->batch = int(p.param("batch"));
    const std::size_t nb = std::size_t(w->batch), nv = std::size_t(w->nv), KD = std::size_t(w->nk) * w->dk,
                      V = nv * std::size_t(w->dv), SN = nv * std::size_t(w->dk) * std::size_t(w->dv);
    w->q = generate(p.dist, nb * KD, p.seed, 10);
    w->k = generate(p.dist, nb * KD, p.seed, 11);
    w->v = generate(p.dist, nb * V, p.seed, 12);
    const auto ug = generate(Dist::uniform, 2 * nb * nv, p.seed, 13);
    const auto ub = generate(Dist::uniform, nb * nv, p.seed, 14);
    w->S0 = generate(p.dist, nb * SN, p.seed, 15, 1.0 / std::sqrt(double(w->dk)));
    w->g.resize(nb * nv);
    w->beta.resize(nb * nv);
    for (std::size_t i = 0; i < w->g.size(); ++i) {
      const double a = 1.0 + 7.5 * (double(ug[2 * i]) + 1.0);                        // [1, 16)
      const double sp = 1e-3 + (1e-1 - 1e-3) * 0.5 * (double(ug[2 * i + 1]) + 1.0);  // [1e-3, 1e-1)
      w->g[i] = float(-a * sp);
      w->beta[i] = float(ref::gdn::sigmoid(4.0 * double(ub[i])));
    }
    return std::unique_ptr<klab::Workload>(std::move(w));
  };
  op.references = [](const klab::Workload& wl) {
    Reference r = reference_f64(workload_of(wl));
    return std::vector<Named<double>>{{"o", std::move(r.o)}, {"S", std::move(r.S)}};
  };
  // A perfect kernel reads q, k, v, g, beta once, reads and writes the state once, writes o once.
  op.traffic = [](const Problem& p) {
    const double B = double(p.param("batch")), nv = double(p.param("nv")), nk = double(p.param("nk")), dk = double(p.param("dk")),
                 dv = double(p.param("dv"));
    const double bytes = B * (4.0 * (2 * nk * dk + nv * dv) + 8.0 * nv + 8.0 * nv * dk * dv + 4.0 * nv * dv);
    // S^T k, the rank-1 update and S^T q: dk*dv each per value head.
    return Traffic{bytes, 3.0 * B * nv * dk * dv};
  };
  return op;
}

Reference reference_f64(const Workload& w) {
  const ref::gdn::Geometry g = geometry(w);
  const std::size_t nb = std::size_t(w.batch), nv = std::size_t(w.nv), KD = std::size_t(w.nk) * w.dk, V = nv * std::size_t(w.dv),
                    SN = nv * std::size_t(w.dk) * std::size_t(w.dv);
  Reference r;
  r.o.resize(nb * V);
  r.S.assign(w.S0.begin(), w.S0.end());
  r.qn.resize(nb * KD);
  r.kn.resize(nb * KD);
  auto d = [](const std::vector<float>& x, std::size_t at, std::size_t n) {
    return std::vector<double>(x.begin() + std::ptrdiff_t(at), x.begin() + std::ptrdiff_t(at + n));
  };
  for (std::size_t b = 0; b < nb; ++b) {
    ref::gdn::recurrence(g, d(w.q, b * KD, KD), d(w.k, b * KD, KD), d(w.v, b * V, V), d(w.g, b * nv, nv), d(w.beta, b * nv, nv),
                         std::span(r.S).subspan(b * SN, SN), std::span(r.o).subspan(b * V, V), std::span(r.qn).subspan(b * KD, KD),
                         std::span(r.kn).subspan(b * KD, KD));
  }
  return r;
}

std::uint64_t Workload::digest() const {
  const std::int64_t dims[5] = {nv, nk, dk, dv, batch};
  std::uint64_t h = fnv1a64(dims, sizeof dims);
  for (const auto* t : {&q, &k, &v, &g, &beta, &S0}) h = fnv1a64(std::span<const float>(*t), h);
  return h;
}

const Workload& workload_of(const klab::Workload& w) {
  auto* p = dynamic_cast<const Workload*>(&w);
  require(p != nullptr, "a gdn_recurrence variant was handed the workload of another op");
  return *p;
}

}  // namespace klab::gdn_recurrence

// What the GDN step experiments share (gdn_common.hpp).
#include "gdn_common.hpp"

#include <cstdlib>

#include "gdn/inputs.hpp"
#include "q4_gemv/q4_gemv.hpp"

namespace klab::experiments {

rg::Geometry small_geometry() { return rg::Geometry{256, 2, 6, 32, 48, 4, 1e-6}; }
rg::Geometry geometry_for(const Context& ctx) { return ctx.options().quick ? small_geometry() : rg::qwen35_27b(); }

nlohmann::json to_json(const rg::Geometry& g) {
  return {{"hidden", g.hidden}, {"nk", g.nk}, {"nv", g.nv}, {"dk", g.dk}, {"dv", g.dv}, {"ck", g.ck}, {"eps", g.eps}, {"str", g.str()}};
}

std::vector<float> make_inputs(const rg::Geometry& g, int T, std::uint64_t seed) { return gdn::inputs(g.hidden, T, Dist::outlier, seed, 1000); }

std::map<rg::What, std::vector<float>> snapshot(const gdn::GdnDevice& dev, int layer) {
  std::map<rg::What, std::vector<float>> m;
  for (rg::What w : rg::all_whats()) m[w] = dev.get(layer, w);
  return m;
}

void put_all(gdn::Q4Pool& pool, const rg::Q4Projections& q, int kq, int kz, int ko) {
  pool.put(kq, q.qkv);
  pool.put(kz, q.z);
  pool.put(ko, q.out);
}

void Worst::see(double r, bool fin, const std::string& at) {
  if (!fin) {
    finite = false;
    where = at + " (non-finite or unwritten)";
  }
  if (!(r <= max_rel)) {
    max_rel = r;
    if (finite) where = at;
  }
}

}  // namespace klab::experiments

#include "klab/trace.hpp"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "klab/cuda.hpp"
#include "klab/error.hpp"
#include "klab/stats.hpp"

#if __has_include(<cupti.h>)
#include <cupti.h>
#define KLAB_HAS_CUPTI 1
#else
#define KLAB_HAS_CUPTI 0
#endif

namespace klab {

namespace {
double median_of(std::vector<double> v) { return v.empty() ? 0.0 : summarize(std::move(v)).median; }
void sort_by_start(std::vector<KernelSpan>& spans) {
  std::stable_sort(spans.begin(), spans.end(), [](const KernelSpan& a, const KernelSpan& b) { return a.start_ns < b.start_ns; });
}
}  // namespace

std::string short_kernel_name(const std::string& name) {
  // Itanium mangling: _Z <name> or _ZN <qualifier>... <name> E; a source name is <length><chars>.
  if (name.rfind("_Z", 0) != 0) return name;
  std::size_t i = 2;
  const bool nested = i < name.size() && name[i] == 'N';
  if (nested) ++i;
  std::string last;
  while (i < name.size()) {
    if (name[i] == 'L') ++i;  // internal linkage
    if (i >= name.size() || name[i] < '0' || name[i] > '9') break;
    std::size_t len = 0;
    while (i < name.size() && name[i] >= '0' && name[i] <= '9') len = len * 10 + std::size_t(name[i++] - '0');
    if (len == 0 || i + len > name.size()) return name;
    last = name.substr(i, len);
    i += len;
    if (!nested) break;
    if (i < name.size() && (name[i] == 'I' || name[i] == 'E')) break;  // template arguments or the end
  }
  return last.empty() || last.rfind("_GLOBAL__N", 0) == 0 ? name : last;
}

TraceSummary summarize_trace(std::vector<KernelSpan> spans) {
  sort_by_start(spans);
  TraceSummary s;
  s.kernels = int(spans.size());
  if (spans.empty()) return s;
  std::uint64_t last_end = 0;
  for (const auto& k : spans) last_end = std::max(last_end, k.end_ns);
  s.span_us = double(last_end - spans.front().start_ns) * 1e-3;
  std::map<std::string, std::vector<double>> dur, period;
  std::map<std::string, std::uint64_t> prev_start;
  std::map<std::pair<std::string, std::string>, std::vector<double>> gaps;
  std::string prev_name;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const auto& k = spans[i];
    std::string n = short_kernel_name(k.name);
    dur[n].push_back(double(k.end_ns - k.start_ns) * 1e-3);
    if (auto it = prev_start.find(n); it != prev_start.end()) period[n].push_back(double(k.start_ns - it->second) * 1e-3);
    prev_start[n] = k.start_ns;
    if (i > 0) gaps[{prev_name, n}].push_back((double(k.start_ns) - double(spans[i - 1].end_ns)) * 1e-3);
    prev_name = std::move(n);
  }
  for (auto& [n, d] : dur) {
    auto& e = s.names[n];
    e.count = int(d.size());
    e.median_us = median_of(d);
    e.period_us = median_of(period[n]);
  }
  for (auto& [key, g] : gaps) s.pairs[key] = {int(g.size()), median_of(g)};
  return s;
}

nlohmann::json to_json(const std::vector<KernelSpan>& in) {
  std::vector<KernelSpan> spans = in;
  sort_by_start(spans);
  const TraceSummary s = summarize_trace(spans);
  nlohmann::json j;
  j["kernels"] = s.kernels;
  j["span_us"] = s.span_us;
  nlohmann::json names = nlohmann::json::object();
  for (const auto& [n, e] : s.names) names[n] = {{"count", e.count}, {"median_us", e.median_us}, {"period_us", e.period_us}};
  j["names"] = names;
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& [key, e] : s.pairs)
    pairs.push_back({{"from", key.first}, {"to", key.second}, {"count", e.count}, {"median_gap_us", e.median_gap_us}});
  j["pairs"] = pairs;
  std::vector<std::string> table;
  std::map<std::string, int> index;
  nlohmann::json rows = nlohmann::json::array();
  const std::uint64_t t0 = spans.empty() ? 0 : spans.front().start_ns;
  for (const auto& k : spans) {
    const std::string n = short_kernel_name(k.name);
    auto [it, fresh] = index.emplace(n, int(table.size()));
    if (fresh) table.push_back(n);
    rows.push_back({it->second, double(k.start_ns - t0) * 1e-3, double(k.end_ns - t0) * 1e-3});
  }
  j["span_names"] = table;
  j["spans"] = rows;
  return j;
}

KernelTracer& KernelTracer::instance() {
  static KernelTracer t;
  return t;
}

std::string trace_line(const std::vector<KernelSpan>& spans) {
  const TraceSummary s = summarize_trace(spans);
  auto num = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3g", v);
    return std::string(b);
  };
  std::string line = std::to_string(s.kernels) + " kernels over " + num(s.span_us) + " us";
  for (const auto& [n, e] : s.names) {
    line += "; " + n + " " + std::to_string(e.count) + " x " + num(e.median_us) + " us";
    if (e.count > 1) line += " every " + num(e.period_us) + " us";
  }
  for (const auto& [key, e] : s.pairs) line += "; " + key.first + "->" + key.second + " " + num(e.median_gap_us) + " us";
  return line;
}

#if KLAB_HAS_CUPTI
namespace {
// The CUPTI entry points the tracer uses, from the library dlopen found.
struct Cupti {
  CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*disable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*flush_all)(uint32_t) = nullptr;
  CUptiResult (*next_record)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*result_string)(CUptiResult, const char**) = nullptr;
};
Cupti g_cupti;
std::mutex g_mu;
std::vector<KernelSpan> g_spans;

constexpr std::size_t kBufferBytes = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(g_mu);
  CUpti_Activity* rec = nullptr;
  while (g_cupti.next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
    KernelSpan s;
    s.name = k->name ? k->name : "?";
    s.start_ns = k->start;
    s.end_ns = k->end;
    s.stream = k->streamId;
    s.grid = k->gridX * k->gridY * k->gridZ;
    s.block = k->blockX * k->blockY * k->blockZ;
    g_spans.push_back(std::move(s));
  }
  std::free(buffer);
}

std::string result_text(CUptiResult r) {
  const char* s = nullptr;
  if (g_cupti.result_string && g_cupti.result_string(r, &s) == CUPTI_SUCCESS && s) return s;
  return "CUPTI error " + std::to_string(int(r));
}

void check(CUptiResult r, const char* what) {
  if (r != CUPTI_SUCCESS) throw Error(std::string("kernel trace: ") + what + " failed: " + result_text(r));
}

// Where libcupti.so.13 may be: beside the running binary (carried with it), the library path,
// the CUDA toolkit's two homes for it.
std::vector<std::string> cupti_candidates() {
  std::vector<std::string> c;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string dir(self, std::size_t(n));
    dir = dir.substr(0, dir.rfind('/') + 1);
    c.push_back(dir + "libcupti.so.13");
  }
  c.push_back("libcupti.so.13");
  c.push_back("/usr/local/cuda/lib64/libcupti.so.13");
  c.push_back("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13");
  return c;
}
}  // namespace

bool KernelTracer::available() {
  if (tried_) return ok_;
  tried_ = true;
  void* h = nullptr;
  std::string tried;
  for (const auto& path : cupti_candidates()) {
    h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h) {
      library_ = path;
      break;
    }
    tried += (tried.empty() ? "" : ", ") + path;
  }
  if (!h) {
    why_ = "CUPTI (libcupti.so.13) not found: tried " + tried;
    return false;
  }
  auto sym = [&](const char* name) { return dlsym(h, name); };
  g_cupti.register_callbacks = reinterpret_cast<decltype(g_cupti.register_callbacks)>(sym("cuptiActivityRegisterCallbacks"));
  g_cupti.enable = reinterpret_cast<decltype(g_cupti.enable)>(sym("cuptiActivityEnable"));
  g_cupti.disable = reinterpret_cast<decltype(g_cupti.disable)>(sym("cuptiActivityDisable"));
  g_cupti.flush_all = reinterpret_cast<decltype(g_cupti.flush_all)>(sym("cuptiActivityFlushAll"));
  g_cupti.next_record = reinterpret_cast<decltype(g_cupti.next_record)>(sym("cuptiActivityGetNextRecord"));
  g_cupti.result_string = reinterpret_cast<decltype(g_cupti.result_string)>(sym("cuptiGetResultString"));
  if (!g_cupti.register_callbacks || !g_cupti.enable || !g_cupti.disable || !g_cupti.flush_all || !g_cupti.next_record) {
    why_ = library_ + " lacks the activity API (cuptiActivityRegisterCallbacks...)";
    return false;
  }
  const CUptiResult r = g_cupti.register_callbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) {
    why_ = "cuptiActivityRegisterCallbacks failed: " + result_text(r);
    return false;
  }
  ok_ = true;
  return true;
}

void KernelTracer::start() {
  require(available(), "kernel trace unavailable: " + why_);
  require(!running_, "kernel trace: start() while a trace is running");
  KLAB_CUDA(cudaDeviceSynchronize());
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_spans.clear();
  }
  check(g_cupti.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityEnable(CONCURRENT_KERNEL)");
  running_ = true;
}

std::vector<KernelSpan> KernelTracer::stop() {
  require(running_, "kernel trace: stop() without start()");
  running_ = false;
  KLAB_CUDA(cudaDeviceSynchronize());
  check(g_cupti.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityDisable(CONCURRENT_KERNEL)");
  check(g_cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<KernelSpan> out = std::move(g_spans);
  g_spans.clear();
  sort_by_start(out);
  return out;
}
#else
bool KernelTracer::available() {
  tried_ = true;
  why_ = "klab was built without CUPTI's headers (cupti.h)";
  return false;
}
void KernelTracer::start() { throw Error("kernel trace unavailable: " + why_); }
std::vector<KernelSpan> KernelTracer::stop() { throw Error("kernel trace unavailable: " + why_); }
#endif

}  // namespace klab

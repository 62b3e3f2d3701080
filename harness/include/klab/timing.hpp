#pragma once
// Timing with CUDA events: warm-up, many repetitions, L2-cold by default (a buffer of twice the L2
// is overwritten between repetitions, outside the timed region), the SM clock recorded beside each
// repetition, repetitions taken while the GPU ran throttled flagged and left out of the summary.
#include <cuda_runtime.h>

#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "klab/cuda.hpp"
#include "klab/device.hpp"
#include "klab/stats.hpp"

namespace klab {

struct TimingOptions {
  int reps = 50;
  int warmup = 5;
  bool l2_cold = true;
  // A repetition whose SM clock is below this share of the run's highest clock counts as throttled.
  double throttle_share = 0.90;
};

struct Timing {
  std::vector<double> ms;       // every repetition, in order
  std::vector<double> sm_mhz;   // SM clock measured right after each repetition
  std::vector<bool> throttled;
  std::vector<double> kept_ms;  // repetitions not throttled (all of them if fewer than half would remain)
  Summary summary;              // over kept_ms
  double clock_mhz_median = 0;
  int throttled_count = 0;
  bool l2_cold = true;
};

class Timer {
 public:
  Timer(const DeviceInfo& dev, cudaStream_t stream);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Times `body` (enqueued on the stream). `before_each` runs before every repetition, outside the
  // timed region (e.g. resetting a recurrent state).
  Timing time(const std::function<void(cudaStream_t)>& body, const TimingOptions& opt,
              const std::function<void(cudaStream_t)>& before_each = {});
  void flush_l2();
  cudaStream_t stream() const { return stream_; }

 private:
  cudaStream_t stream_;
  DeviceBuffer<unsigned char> flush_;
  DeviceBuffer<unsigned long long> clock_;  // per repetition: cycles, nanoseconds
};

nlohmann::json to_json(const Timing& t, bool with_samples = true);

}  // namespace klab

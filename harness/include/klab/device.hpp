#pragma once
// The device: whether there is one, what it is, and the ceilings measured on it.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace klab {

// True when a usable CUDA device exists (probe cached in a function-local static).
bool has_device();
// Why has_device() is false (the CUDA error string), empty when there is a device.
std::string no_device_reason();

struct DeviceInfo {
  int index = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  std::int64_t l2_bytes = 0;
  std::int64_t global_mem_bytes = 0;
  int sm_clock_khz = 0;      // peak SM clock (attribute)
  int mem_clock_khz = 0;     // peak memory clock (attribute)
  int mem_bus_width_bits = 0;
  double theoretical_gbps = 0;  // from memory clock and bus width; a lead, not a ceiling
  int driver_version = 0, runtime_version = 0;
};

// Selects device `index` and reads its properties. Throws klab::Error when it does not exist.
DeviceInfo select_device(int index);

nlohmann::json to_json(const DeviceInfo& d);

}  // namespace klab

// SPDX-License-Identifier: Apache-2.0
#include "plan/device_profile.hpp"

#include "cpu/thread_pool.hpp"
#ifdef KVINFER_WITH_CUDA
#include "cuda/runtime.hpp"
#endif

namespace kvinfer::detail {

DeviceProfile device_profile(Device device) {
#ifdef KVINFER_WITH_CUDA
  if (device.is_cuda()) return {cuda::multiprocessor_count(device.index), DeviceProfile::h200().work_items_per_processor};
#endif
  return DeviceProfile::cpu(cpu::num_threads());
}

}  // namespace kvinfer::detail

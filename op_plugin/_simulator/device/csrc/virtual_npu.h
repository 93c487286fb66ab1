// Shared between the virtual NPU's two sources: virtual_npu.cpp (the device: allocator, guard, hooks, the
// kernels every backend owns, the aliasing helpers) and cpu_fallback.cpp (the boxed fallback every other aten
// op on npu tensors goes through).
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <string>
#include <vector>

namespace vnpu {

constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;

// The index of the calling thread's current npu device.
int current_device();
// Refuses an index past device_count(), naming `call`.
void check_index(int64_t index, const std::string& call);
// An npu tensor seen as a CPU tensor over the same memory (no copy).
at::Tensor cpu_alias(const at::Tensor& tensor);
// A CPU result as an npu tensor: a view of one of `bases` when its memory lies in theirs, else its memory
// borrowed without a copy and counted on npu:`device`.
at::Tensor to_npu(const at::Tensor& cpu, const std::vector<at::Tensor>& bases, int64_t device);
// resize_ of an npu tensor (its storage reallocated from the counting allocator when it must grow).
const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format);
// The boxed fallback (cpu_fallback.cpp): `op`'s CPU kernel on the npu arguments' memory, results as npu tensors.
void npu_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace vnpu

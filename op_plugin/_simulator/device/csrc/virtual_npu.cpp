// The virtual NPU's native part: PrivateUse1 (renamed `npu` from Python) with storage in host memory.
//
// Built by `python -m op_plugin._simulator.device.build` (run by `make setup`) and loaded by
// op_plugin/_simulator/device/native.py at activation. It holds what Python alone cannot do:
//   - an allocator for PrivateUse1 that counts bytes per device (allocated, peak);
//   - the device guard (current device per thread, device_count, streams and events as no-ops:
//     the CPU runs every kernel synchronously);
//   - the PrivateUse1 hooks (is_available, current device, storage resize);
//   - the kernels every backend must own: empty, empty_strided, as_strided, view, _reshape_alias,
//     resize_, set_, _copy_from (npu <-> cpu <-> npu), _copy_from_and_resize, _local_scalar_dense;
//   - two aliasing helpers (also used by fallback.py): an npu tensor seen as a CPU tensor over the same
//     memory, and a CPU result seen as an npu tensor (no copy, counted).
// Every other aten op on npu tensors reaches the boxed fallback of cpu_fallback.cpp.

#include "virtual_npu.h"

#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/extension.h>
#include <torch/library.h>

#include <ATen/EmptyTensor.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

namespace vnpu {

constexpr int kMaxDevices = 64;

std::atomic<int> g_device_count{8};
thread_local int t_current_device = 0;

int current_device() { return t_current_device; }

struct DeviceCounters {
  std::atomic<int64_t> allocated{0};
  std::atomic<int64_t> peak{0};
};
DeviceCounters g_counters[kMaxDevices];

void count_alloc(int device, int64_t nbytes) {
  int64_t now = g_counters[device].allocated.fetch_add(nbytes) + nbytes;
  int64_t peak = g_counters[device].peak.load();
  while (now > peak && !g_counters[device].peak.compare_exchange_weak(peak, now)) {
  }
}

void count_free(int device, int64_t nbytes) {
  g_counters[device].allocated.fetch_sub(nbytes);
}

void check_index(int64_t index, const std::string& call) {
  int count = g_device_count.load();
  TORCH_CHECK(index >= 0 && index < count, call, ": device npu:", index,
              " does not exist: the virtual NPU has device_count() == ", count,
              " (indices 0..", count - 1, "; OP_PLUGIN_VIRTUAL_NPU_COUNT sets the count)");
}

int resolve_index(std::optional<c10::Device> device, const char* call) {
  if (!device.has_value() || !device->has_index()) {
    return t_current_device;
  }
  check_index(device->index(), call);
  return device->index();
}

// ---- allocator: host memory, counted per device ----

struct Block {
  void* data;
  int device;
  int64_t nbytes;
};

void free_block(void* ctx) {
  auto* block = static_cast<Block*>(ctx);
  count_free(block->device, block->nbytes);
  std::free(block->data);
  delete block;
}

struct VirtualNpuAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    int device = t_current_device;
    if (nbytes == 0) {
      return c10::DataPtr(nullptr, c10::Device(kNpu, device));
    }
    size_t rounded = (nbytes + 63) / 64 * 64;
    void* data = std::aligned_alloc(64, rounded);
    TORCH_CHECK(data != nullptr, "virtual NPU: out of host memory allocating ", nbytes, " bytes on npu:", device);
    auto* block = new Block{data, device, static_cast<int64_t>(nbytes)};
    count_alloc(device, block->nbytes);
    return {data, block, &free_block, c10::Device(kNpu, device)};
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
};

VirtualNpuAllocator g_allocator;
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

// A DataPtr over another storage's host memory (a CPU kernel's result), counted on an npu device.
struct Borrowed {
  c10::Storage keep;
  int device;
  int64_t nbytes;
};

void free_borrowed(void* ctx) {
  auto* borrowed = static_cast<Borrowed*>(ctx);
  count_free(borrowed->device, borrowed->nbytes);
  delete borrowed;
}

void resize_bytes(const c10::Storage& storage, size_t nbytes) {
  auto* impl = storage.unsafeGetStorageImpl();
  TORCH_CHECK(impl->resizable(), "virtual NPU: resizing a storage that is not resizable");
  int device = impl->device().has_index() ? impl->device().index() : t_current_device;
  int saved = t_current_device;
  t_current_device = device;
  c10::DataPtr fresh = g_allocator.allocate(nbytes);
  t_current_device = saved;
  size_t keep = std::min(nbytes, impl->nbytes());
  if (keep > 0 && impl->data() != nullptr) {
    std::memcpy(fresh.get(), impl->data(), keep);
  }
  impl->set_data_ptr_noswap(std::move(fresh));
  impl->set_nbytes(nbytes);
}

// ---- device guard ----

struct VirtualNpuGuard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNpu; }
  c10::Device exchangeDevice(c10::Device device) const override {
    c10::Device old = getDevice();
    if (device.index() != old.index()) {
      setDevice(device);
    }
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kNpu, t_current_device); }
  void setDevice(c10::Device device) const override {
    check_index(device.index(), "torch.npu.device guard");
    t_current_device = device.index();
  }
  void uncheckedSetDevice(c10::Device device) const noexcept override {
    if (device.index() >= 0 && device.index() < g_device_count.load()) {
      t_current_device = device.index();
    }
  }
  c10::Stream getStream(c10::Device device) const override { return c10::Stream(c10::Stream::DEFAULT, device); }
  c10::Stream getDefaultStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::DEFAULT, device);
  }
  c10::Stream exchangeStream(c10::Stream stream) const override {
    return c10::Stream(c10::Stream::DEFAULT, stream.device());
  }
  c10::DeviceIndex deviceCount() const noexcept override { return g_device_count.load(); }
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeEvent(void*) const override {}
  void synchronizeDevice(const c10::DeviceIndex) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, VirtualNpuGuard);

// ---- hooks ----

struct VirtualNpuHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return g_device_count.load() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return g_device_count.load(); }
  void setCurrentDevice(c10::DeviceIndex device) const override {
    check_index(device, "torch.npu.set_device");
    t_current_device = device;
  }
  c10::DeviceIndex getCurrentDevice() const override { return t_current_device; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    c10::DeviceIndex old = t_current_device;
    setCurrentDevice(device);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    if (device < 0 || device >= g_device_count.load()) {
      return t_current_device;
    }
    return exchangeDevice(device);
  }
  bool isPinnedPtr(const void*) const override { return false; }
  at::Allocator* getPinnedMemoryAllocator() const override { return c10::GetAllocator(c10::kCPU); }
  at::Device getDeviceFromPtr(void*) const override { return at::Device(kNpu, t_current_device); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t nbytes) const override {
    resize_bytes(storage, nbytes);
  }
};

// ---- aliasing between npu and cpu ----

at::Tensor cpu_alias(const at::Tensor& tensor) {
  TORCH_CHECK(tensor.device().type() == kNpu, "virtual NPU: cpu_alias expects an npu tensor, got ",
              tensor.device());
  auto options = tensor.options().device(c10::kCPU);
  at::Tensor alias;
  if (tensor.numel() == 0 || !tensor.has_storage() || tensor.storage().data() == nullptr) {
    alias = at::empty_strided(tensor.sizes(), tensor.strides(), options);
  } else {
    c10::Storage keep = tensor.storage();
    alias = at::from_blob(
        tensor.data_ptr(), tensor.sizes(), tensor.strides(), [keep](void*) {}, options, c10::Device(c10::kCPU));
  }
  if (tensor.is_conj()) alias._set_conj(true);
  if (tensor.is_neg()) alias._set_neg(true);
  return alias;
}

at::Tensor npu_over(c10::Storage storage, const at::Tensor& like, int64_t storage_offset) {
  auto out = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                      like.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(like.sizes(), like.strides(), storage_offset);
  if (like.is_conj()) out._set_conj(true);
  if (like.is_neg()) out._set_neg(true);
  return out;
}

// A CPU kernel's result as an npu tensor: a view of one of `bases` (npu tensors) when its memory lies in
// theirs, else its own memory borrowed without a copy and counted on npu:`device`.
at::Tensor to_npu(const at::Tensor& cpu, const std::vector<at::Tensor>& bases, int64_t device) {
  TORCH_CHECK(cpu.device().is_cpu(), "virtual NPU: to_npu expects a CPU tensor, got ", cpu.device());
  check_index(device, "virtual NPU result");
  if (cpu.numel() > 0 && cpu.has_storage() && cpu.storage().data() != nullptr) {
    auto* element = static_cast<const char*>(cpu.data_ptr());
    for (const auto& base : bases) {
      if (!base.has_storage() || base.storage().data() == nullptr) continue;
      auto* start = static_cast<const char*>(base.storage().data());
      auto nbytes = static_cast<std::ptrdiff_t>(base.storage().nbytes());
      std::ptrdiff_t at = element - start;
      if (at >= 0 && at < nbytes && at % static_cast<std::ptrdiff_t>(cpu.itemsize()) == 0) {
        return npu_over(base.storage(), cpu, at / static_cast<std::ptrdiff_t>(cpu.itemsize()));
      }
    }
  }
  if (!cpu.has_storage() || cpu.storage().nbytes() == 0 || cpu.storage().data() == nullptr) {
    c10::DeviceGuard guard(c10::Device(kNpu, device));
    auto empty = at::detail::empty_strided_generic(cpu.sizes(), cpu.strides(), &g_allocator,
                                                   c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                   cpu.scalar_type());
    return empty;
  }
  c10::Storage source = cpu.storage();
  auto nbytes = static_cast<int64_t>(source.nbytes());
  void* data = source.mutable_data();
  auto* borrowed = new Borrowed{source, static_cast<int>(device), nbytes};
  count_alloc(static_cast<int>(device), nbytes);
  c10::DataPtr data_ptr(data, borrowed, &free_borrowed, c10::Device(kNpu, device));
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, std::move(data_ptr), &g_allocator, true);
  return npu_over(std::move(storage), cpu, cpu.storage_offset());
}

// ---- the kernels every backend owns ----

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  int index = resolve_index(device, "torch.empty (aten::empty.memory_format)");
  c10::DeviceGuard guard(c10::Device(kNpu, index));
  return at::detail::empty_generic(size, &g_allocator, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  int index = resolve_index(device, "torch.empty_strided (aten::empty_strided; also .to(), .npu())");
  c10::DeviceGuard guard(c10::Device(kNpu, index));
  return at::detail::empty_strided_generic(size, stride, &g_allocator,
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) { return at::native::view(self, size); }

at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  if (self.sizes() != size) {
    int64_t numel = c10::multiply_integers(size);
    int64_t needed = numel == 0 ? 0 : (impl->storage_offset() + numel) * static_cast<int64_t>(self.itemsize());
    if (needed > static_cast<int64_t>(impl->storage().nbytes())) {
      resize_bytes(impl->storage(), needed);
    }
    impl->set_sizes_contiguous(size);
  }
  if (memory_format.has_value() && *memory_format != c10::MemoryFormat::Preserve) {
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& set_storage_offset(at::Tensor& self, c10::Storage source, int64_t storage_offset, c10::IntArrayRef size,
                               c10::IntArrayRef stride) {
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  if (stride.empty()) {
    impl->set_sizes_contiguous(size);
    impl->set_storage_offset(storage_offset);
  } else {
    impl->set_sizes_and_strides(size, stride, storage_offset);
  }
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source) {
  int64_t elements = static_cast<int64_t>(source.nbytes() / self.itemsize());
  return set_storage_offset(self, std::move(source), 0, {elements}, {});
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source)) return self;
  return set_storage_offset(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
}

at::Tensor host_view(const at::Tensor& tensor) {
  return tensor.device().type() == kNpu ? cpu_alias(tensor) : tensor;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  for (const auto* t : {&self, &dst}) {
    TORCH_CHECK(t->device().type() == kNpu || t->device().is_cpu(),
                "virtual NPU: copying between npu and ", t->device(), " is not supported (only npu and cpu)");
  }
  at::Tensor target = host_view(dst);
  target.copy_(host_view(self));
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.device().type() == kNpu) {
    resize_(dst, self.sizes(), std::nullopt);
  } else {
    dst.resize_(self.sizes());
  }
  return copy_from(self, dst, false);
}

c10::Scalar local_scalar_dense(const at::Tensor& self) { return at::_local_scalar_dense(cpu_alias(self)); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", as_strided);
  m.impl("view", view);
  m.impl("_reshape_alias", reshape_alias);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage_storage_offset", set_storage_offset);
  m.impl("set_.source_Storage", set_storage);
  m.impl("set_.source_Tensor", set_tensor);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
}

bool g_hooks_registered = false;

void register_hooks() {
  if (!g_hooks_registered) {
    at::RegisterPrivateUse1HooksInterface(new VirtualNpuHooks());
    g_hooks_registered = true;
  }
}

void set_device_count(int64_t count) {
  TORCH_CHECK(count >= 1 && count <= kMaxDevices, "virtual NPU: device count must be in 1..", kMaxDevices,
              ", got ", count);
  g_device_count.store(static_cast<int>(count));
}

}  // namespace vnpu

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "op_plugin's virtual NPU: PrivateUse1 storage in host memory (op_plugin/_simulator/device)";
  m.def("register_hooks", &vnpu::register_hooks);
  m.def("set_device_count", &vnpu::set_device_count);
  m.def("device_count", []() { return vnpu::g_device_count.load(); });
  m.def("current_device", []() { return vnpu::t_current_device; });
  m.def("set_device", [](int64_t index, const std::string& call) {
    vnpu::check_index(index, call);
    vnpu::t_current_device = static_cast<int>(index);
  });
  m.def("check_index", [](int64_t index, const std::string& call) { vnpu::check_index(index, call); });
  m.def("memory_allocated", [](int64_t d) { return vnpu::g_counters[d].allocated.load(); });
  m.def("max_memory_allocated", [](int64_t d) { return vnpu::g_counters[d].peak.load(); });
  m.def("reset_peak_memory_stats", [](int64_t d) {
    vnpu::g_counters[d].peak.store(vnpu::g_counters[d].allocated.load());
  });
  m.def("cpu_alias", &vnpu::cpu_alias);
  m.def("to_npu", &vnpu::to_npu);
  // An npu tensor over memory the caller keeps alive (torch_npu's _construct_storage_from_data_pointer +
  // _construct_NPU_Tensor_From_Storage_And_Metadata, which TorchAir's aclgraph capture uses): not owned, not
  // counted.
  m.def("tensor_at", [](int64_t address, int64_t nbytes, int64_t device, std::vector<int64_t> sizes,
                        std::vector<int64_t> strides, int64_t storage_offset, py::object dtype) {
    vnpu::check_index(device, "torch_npu._C._construct_NPU_Tensor_From_Storage_And_Metadata");
    auto scalar_type = torch::python::detail::py_object_to_dtype(dtype);
    c10::DataPtr data(reinterpret_cast<void*>(address), c10::Device(vnpu::kNpu, device));
    c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, std::move(data), nullptr, false);
    auto out = at::detail::make_tensor<c10::TensorImpl>(std::move(storage),
                                                        c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                        c10::scalarTypeToTypeMeta(scalar_type));
    out.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides, storage_offset);
    return out;
  });
  // The fallback called from Python (fallback.run_on_cpu): for ops with a Python PrivateUse1 kernel that hands
  // an input back to the CPU kernel (a GE adapter declining it, torch_npu's ops).
  m.def("run_on_cpu", [](const std::string& name, const std::string& overload, py::args args,
                         const py::kwargs& kwargs) {
    auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
    auto stack = torch::jit::createStackForSchema(op.schema(), args, kwargs, std::nullopt);
    {
      py::gil_scoped_release released;
      vnpu::npu_cpu_fallback(op, &stack);
    }
    return torch::jit::createPyObjectForStack(std::move(stack));
  });
}

// The boxed PrivateUse1 fallback: every aten op on npu tensors without a kernel of its own runs its CPU kernel
// on the same memory (the storage is host memory, so an npu tensor is seen as a CPU tensor over its bytes).
//
// Written in C++ because it runs for nearly every op of an eager model: a Python fallback cost about 30 us
// per op (14-20x CPU eager on small transformer layers; bench/npu_eager.py measures it). What it does, per op:
//   - refuses mixed devices as a real NPU does: npu tensors of two devices, or an npu tensor with a CPU tensor
//     that is not a 0-dim scalar ("Expected all tensors to be on the same device ..."); indexing ops take
//     CPU index tensors, as on a real device;
//   - replaces each npu tensor argument (also inside tensor lists) by its CPU alias, and an npu device
//     argument by the CPU device, then redispatches to the CPU kernel;
//   - out= arguments (a CPU alias of npu memory cannot grow) get a fresh CPU tensor; its result is copied into
//     the npu out, resized first when the shape differs;
//   - in-place arguments are written through their alias; an in-place op that changes metadata (unsqueeze_,
//     transpose_, as_strided_) has the change applied to the npu tensor;
//   - results: an in-place or out= return is the npu argument itself; any other tensor goes back through
//     to_npu (a view of an npu input's storage when it aliases one, else its own memory borrowed, counted).
// Ops with kernels of their own (the GE-kernel ops of ge_eager.py, torch_npu's ops) never come here.

#include "virtual_npu.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

namespace vnpu {
namespace {

bool is_npu(const at::Tensor& t) { return t.defined() && t.device().type() == kNpu; }

bool takes_cpu_indices(const c10::OperatorName& name) {
  const std::string& n = name.name;
  return n == "aten::index" || n == "aten::index_put" || n == "aten::index_put_" || n == "aten::_index_put_impl_";
}

template <typename F>
void for_each_tensor(const c10::IValue& value, F&& visit) {
  if (value.isTensor()) {
    visit(value.toTensor());
  } else if (value.isTensorList()) {
    for (const at::Tensor& t : value.toTensorList()) visit(t);
  } else if (value.isList()) {  // List[Optional[Tensor]] (index, index_put)
    for (const c10::IValue& element : value.toListRef()) {
      if (element.isTensor()) visit(element.toTensor());
    }
  }
}

[[noreturn]] void two_devices(const std::string& first, const std::string& second, const c10::OperatorHandle& op) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", first,
              " and ", second, "! (", op.schema().operator_name(), " on the virtual NPU)");
}

// The npu inputs (the bases results may alias) and the device the op runs on.
struct Placement {
  std::vector<at::Tensor> npu;
  int64_t device = -1;
};

Placement place(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t first, size_t count) {
  Placement placement;
  bool has_cpu_array = false;
  for (size_t i = first; i < first + count; ++i) {
    for_each_tensor(stack[i], [&](const at::Tensor& t) {
      if (is_npu(t)) {
        if (placement.device >= 0 && t.device().index() != placement.device) {
          std::string a = c10::Device(kNpu, placement.device).str(), b = t.device().str();
          if (b < a) std::swap(a, b);
          two_devices(a, b, op);
        }
        placement.device = t.device().index();
        placement.npu.push_back(t);
      } else if (t.defined() && t.device().is_cpu() && t.dim() > 0) {
        has_cpu_array = true;
      }
    });
  }
  if (!placement.npu.empty() && has_cpu_array && !takes_cpu_indices(op.schema().operator_name())) {
    two_devices(placement.npu.front().device().str(), "cpu", op);
  }
  if (placement.device < 0) {
    for (size_t i = first; i < first + count; ++i) {
      if (stack[i].isDevice() && stack[i].toDevice().type() == kNpu && stack[i].toDevice().has_index()) {
        placement.device = stack[i].toDevice().index();
        break;
      }
    }
  }
  if (placement.device < 0) placement.device = current_device();
  return placement;
}

at::Tensor host(const at::Tensor& t) { return is_npu(t) ? cpu_alias(t) : t; }

c10::IValue to_host(const c10::IValue& value) {
  if (value.isTensor()) return host(value.toTensor());
  if (value.isTensorList()) {
    c10::List<at::Tensor> out;
    out.reserve(value.toTensorList().size());
    for (const at::Tensor& t : value.toTensorList()) out.push_back(host(t));
    return out;
  }
  if (value.isList()) {
    const auto& list = value.toListRef();
    if (std::none_of(list.begin(), list.end(), [](const c10::IValue& e) { return e.isTensor(); })) return value;
    c10::impl::GenericList out(value.toList().elementType());
    out.reserve(list.size());
    for (const c10::IValue& e : list) out.push_back(e.isTensor() ? c10::IValue(host(e.toTensor())) : e);
    return out;
  }
  if (value.isDevice() && value.toDevice().type() == kNpu) return c10::Device(c10::kCPU);
  return value;
}

c10::IValue to_device(const c10::IValue& value, const Placement& placement) {
  auto back = [&](const at::Tensor& t) {
    return t.defined() && t.device().is_cpu() ? to_npu(t, placement.npu, placement.device) : t;
  };
  if (value.isTensor()) return back(value.toTensor());
  if (value.isTensorList()) {
    c10::List<at::Tensor> out;
    out.reserve(value.toTensorList().size());
    for (const at::Tensor& t : value.toTensorList()) out.push_back(back(t));
    return out;
  }
  return value;
}

bool is_out_argument(const c10::Argument& argument) {
  return argument.kwarg_only() && argument.alias_info() != nullptr && argument.alias_info()->isWrite();
}

}  // namespace

void npu_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const auto& arguments = schema.arguments();
  const size_t count = arguments.size();
  const size_t first = stack->size() - count;
  Placement placement = place(op, *stack, first, count);

  std::vector<c10::IValue> originals(stack->begin() + static_cast<std::ptrdiff_t>(first), stack->end());
  std::vector<size_t> outs, in_place;
  for (size_t i = 0; i < count; ++i) {
    c10::IValue& slot = (*stack)[first + i];
    if (is_out_argument(arguments[i]) && slot.isTensor() && is_npu(slot.toTensor())) {
      slot = at::empty({0}, slot.toTensor().options().device(c10::kCPU));
      outs.push_back(i);
      continue;
    }
    if (arguments[i].alias_info() != nullptr && arguments[i].alias_info()->isWrite() && slot.isTensor() &&
        is_npu(slot.toTensor())) {
      in_place.push_back(i);
    }
    slot = to_host(slot);
  }
  std::vector<c10::IValue> hosts(stack->begin() + static_cast<std::ptrdiff_t>(first), stack->end());

  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);

  for (size_t i : outs) {
    const at::Tensor& target = originals[i].toTensor();
    const at::Tensor& fresh = hosts[i].toTensor();
    if (target.sizes() != fresh.sizes()) resize_(target, fresh.sizes(), std::nullopt);
    cpu_alias(target).copy_(fresh);
  }
  for (size_t i : in_place) {  // unsqueeze_, transpose_, as_strided_: the alias's new metadata
    const at::Tensor& target = originals[i].toTensor();
    const at::Tensor& alias = hosts[i].toTensor();
    if (alias.sizes() != target.sizes() || alias.strides() != target.strides() ||
        alias.storage_offset() != target.storage_offset()) {
      target.unsafeGetTensorImpl()->set_sizes_and_strides(alias.sizes(), alias.strides(), alias.storage_offset());
    }
  }

  const auto& returns = schema.returns();
  const size_t produced = returns.size();
  const size_t base = stack->size() - produced;
  for (size_t r = 0; r < produced; ++r) {
    const c10::AliasInfo* alias = returns[r].alias_info();
    bool written = false;
    if (alias != nullptr && alias->isWrite()) {
      for (size_t i = 0; i < count; ++i) {
        const c10::AliasInfo* argument_alias = arguments[i].alias_info();
        if (argument_alias != nullptr && argument_alias->isWrite() &&
            argument_alias->beforeSets() == alias->beforeSets()) {
          (*stack)[base + r] = originals[i];
          written = true;
          break;
        }
      }
    }
    if (!written) (*stack)[base + r] = to_device((*stack)[base + r], placement);
  }
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&npu_cpu_fallback>());
}

}  // namespace vnpu

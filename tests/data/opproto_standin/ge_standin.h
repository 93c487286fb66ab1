// A stand-in for the few ge::Operator / TensorDesc / Shape calls generated infer functions make,
// with the signatures of the wheel's include/graph/operator.h and tensor.h, holding values in
// memory so the infer logic runs on the CPU in op_plugin's tests. Not a GE implementation.
#ifndef OP_PLUGIN_GE_STANDIN_H_
#define OP_PLUGIN_GE_STANDIN_H_
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/types.h"

namespace standin {
class Shape {
 public:
  Shape() = default;
  explicit Shape(const std::vector<int64_t> &dims) : dims_(dims) {}
  std::vector<int64_t> GetDims() const { return dims_; }

 private:
  std::vector<int64_t> dims_;
};

class TensorDesc {
 public:
  Shape GetShape() const { return shape_; }
  void SetShape(const Shape &shape) { shape_ = shape; }
  ge::DataType GetDataType() const { return dtype_; }
  void SetDataType(ge::DataType dt) { dtype_ = dt; }

 private:
  Shape shape_;
  ge::DataType dtype_ = ge::DT_UNDEFINED;
};

class Operator {
 public:
  std::map<std::string, TensorDesc> inputs, outputs;
  std::map<std::string, std::vector<TensorDesc>> dynamic_inputs;
  std::map<std::string, int64_t> ints;
  std::map<std::string, std::vector<int64_t>> int_lists;
  std::map<std::string, ge::DataType> dtypes;
  std::vector<std::string> updated;  // output names, in the order the infer function set them

  TensorDesc GetInputDescByName(const char *name) const { return inputs.at(name); }
  int32_t GetDynamicInputNum(const char *name) const {
    auto it = dynamic_inputs.find(name);
    return it == dynamic_inputs.end() ? 0 : static_cast<int32_t>(it->second.size());
  }
  TensorDesc GetDynamicInputDesc(const char *name, uint32_t index) const { return dynamic_inputs.at(name).at(index); }
  uint32_t GetAttr(const char *name, int64_t &value) const { return Find(ints, name, value); }
  uint32_t GetAttr(const char *name, std::vector<int64_t> &value) const { return Find(int_lists, name, value); }
  uint32_t GetAttr(const char *name, ge::DataType &value) const { return Find(dtypes, name, value); }
  TensorDesc GetOutputDescByName(const char *name) const {
    auto it = outputs.find(name);
    return it == outputs.end() ? TensorDesc() : it->second;
  }
  uint32_t UpdateOutputDesc(const char *name, const TensorDesc &desc) {
    outputs[name] = desc;
    updated.push_back(name);
    return 0U;
  }

 private:
  template <typename M, typename T>
  static uint32_t Find(const M &map, const char *name, T &value) {
    auto it = map.find(name);
    if (it == map.end()) return 0xFFFFFFFFU;
    value = it->second;
    return 0U;
  }
};
}  // namespace standin
#endif  // OP_PLUGIN_GE_STANDIN_H_

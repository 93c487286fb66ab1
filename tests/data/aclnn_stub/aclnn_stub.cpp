// A stand-in for CANN's aclnn runtime, for op_plugin's tests: aclCreateTensor & co. with the
// signatures of torch_npu's op_api_common_base.h (checked below against its typedefs), and two
// aclnn APIs (a vector add, a linear y = x @ w^T + b) computing on HOST memory. Every call is
// appended to the log file named by $ACLNN_STUB_LOG, which the tests read.
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "acl/acl_base.h"

extern "C" {
typedef struct aclOpExecutor aclOpExecutor;
struct aclTensor {
  std::vector<int64_t> dims, strides, storage;
  aclDataType dtype;
  int64_t offset;
  aclFormat format;
  void *data;
};
struct aclScalar { double value; aclDataType dtype; };
struct aclIntArray { std::vector<int64_t> values; };
struct aclFloatArray { std::vector<float> values; };
struct aclBoolArray { std::vector<bool> values; };
struct aclTensorList { std::vector<const aclTensor *> tensors; };
struct aclOpExecutor { std::string op; std::vector<const aclTensor *> args; uint64_t workspace; };
}

static char g_error[256] = "";

static void Log(const char *format, ...) {
  const char *path = std::getenv("ACLNN_STUB_LOG");
  if (path == nullptr) return;
  FILE *f = std::fopen(path, "a");
  va_list args;
  va_start(args, format);
  std::vfprintf(f, format, args);
  va_end(args);
  std::fputc('\n', f);
  std::fclose(f);
}

static std::string Join(const std::vector<int64_t> &v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out;
}

extern "C" {
aclTensor *aclCreateTensor(const int64_t *view_dims, uint64_t view_dims_num, aclDataType data_type,
                           const int64_t *stride, int64_t offset, aclFormat format, const int64_t *storage_dims,
                           uint64_t storage_dims_num, void *tensor_data) {
  auto *t = new aclTensor{std::vector<int64_t>(view_dims, view_dims + view_dims_num),
                          std::vector<int64_t>(stride, stride + view_dims_num),
                          std::vector<int64_t>(storage_dims, storage_dims + storage_dims_num), data_type, offset,
                          format, tensor_data};
  Log("create tensor %p dims=%s strides=%s offset=%lld dtype=%d format=%d storage=%s", (void *)t,
      Join(t->dims).c_str(), Join(t->strides).c_str(), (long long)offset, (int)data_type, (int)format,
      Join(t->storage).c_str());
  return t;
}
aclScalar *aclCreateScalar(void *value, aclDataType data_type) {
  double v = data_type == ACL_DOUBLE ? *static_cast<double *>(value)
             : data_type == ACL_INT64 ? static_cast<double>(*static_cast<int64_t *>(value))
                                      : static_cast<double>(*static_cast<bool *>(value));
  auto *s = new aclScalar{v, data_type};
  Log("create scalar %p value=%g dtype=%d", (void *)s, v, (int)data_type);
  return s;
}
aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size) {
  auto *a = new aclIntArray{std::vector<int64_t>(value, value + size)};
  Log("create intarray %p values=%s", (void *)a, Join(a->values).c_str());
  return a;
}
aclFloatArray *aclCreateFloatArray(const float *value, uint64_t size) {
  auto *a = new aclFloatArray{std::vector<float>(value, value + size)};
  Log("create floatarray %p", (void *)a);
  return a;
}
aclBoolArray *aclCreateBoolArray(const bool *value, uint64_t size) {
  auto *a = new aclBoolArray{std::vector<bool>(value, value + size)};
  Log("create boolarray %p", (void *)a);
  return a;
}
aclTensorList *aclCreateTensorList(const aclTensor *const *value, uint64_t size) {
  auto *l = new aclTensorList{std::vector<const aclTensor *>(value, value + size)};
  Log("create tensorlist %p size=%llu", (void *)l, (unsigned long long)size);
  return l;
}
int aclDestroyTensor(const aclTensor *tensor) { Log("destroy tensor %p", (const void *)tensor); delete tensor; return 0; }
int aclDestroyScalar(const aclScalar *scalar) { Log("destroy scalar %p", (const void *)scalar); delete scalar; return 0; }
int aclDestroyIntArray(const aclIntArray *array) { Log("destroy intarray %p", (const void *)array); delete array; return 0; }
int aclDestroyFloatArray(const aclFloatArray *array) { Log("destroy floatarray %p", (const void *)array); delete array; return 0; }
int aclDestroyBoolArray(const aclBoolArray *array) { Log("destroy boolarray %p", (const void *)array); delete array; return 0; }
int aclDestroyTensorList(const aclTensorList *list) { Log("destroy tensorlist %p", (const void *)list); delete list; return 0; }
const char *aclGetRecentErrMsg() { return g_error; }

// Element (i...) of a float tensor, through its strides and storage offset.
static float &At(const aclTensor *t, const std::vector<int64_t> &index) {
  int64_t linear = t->offset;
  for (size_t d = 0; d < index.size(); ++d) linear += index[d] * t->strides[d];
  return static_cast<float *>(t->data)[linear];
}

// y = x1 + x2 (float32, same shape, rank <= 2); fails with status 161002 when $ACLNN_STUB_FAIL is set.
int aclnnStubVectorAddGetWorkspaceSize(const aclTensor *x1, const aclTensor *x2, aclTensor *y,
                                       uint64_t *workspaceSize, aclOpExecutor **executor) {
  Log("call aclnnStubVectorAddGetWorkspaceSize x1=%p x2=%p y=%p", (const void *)x1, (const void *)x2, (void *)y);
  if (std::getenv("ACLNN_STUB_FAIL") != nullptr) {
    std::snprintf(g_error, sizeof(g_error), "EZ1001: x1 and x2 must have the same shape (stub)");
    return 161002;
  }
  *workspaceSize = 256;
  *executor = new aclOpExecutor{"add", {x1, x2, y}, 256};
  return 0;
}
int aclnnStubVectorAdd(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, void *stream) {
  Log("call aclnnStubVectorAdd workspace=%s size=%llu stream=%p", workspace ? "set" : "null",
      (unsigned long long)workspaceSize, stream);
  const aclTensor *x1 = executor->args[0], *x2 = executor->args[1], *y = executor->args[2];
  int64_t rows = y->dims.size() == 2 ? y->dims[0] : 1, cols = y->dims.back();
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      std::vector<int64_t> index = y->dims.size() == 2 ? std::vector<int64_t>{i, j} : std::vector<int64_t>{j};
      At(y, index) = At(x1, index) + At(x2, index);
    }
  delete executor;
  return 0;
}

// y[b, n] = sum_k x[b, k] * w[n, k] + bias[n] (float32; bias optional: NULL)
int aclnnStubLinearGetWorkspaceSize(const aclTensor *x, const aclTensor *w, const aclTensor *bias, aclTensor *y,
                                    uint64_t *workspaceSize, aclOpExecutor **executor) {
  Log("call aclnnStubLinearGetWorkspaceSize x=%p w=%p bias=%p y=%p", (const void *)x, (const void *)w,
      (const void *)bias, (void *)y);
  *workspaceSize = 0;
  *executor = new aclOpExecutor{"linear", {x, w, bias, y}, 0};
  return 0;
}
int aclnnStubLinear(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, void *stream) {
  Log("call aclnnStubLinear workspace=%s size=%llu stream=%p", workspace ? "set" : "null",
      (unsigned long long)workspaceSize, stream);
  const aclTensor *x = executor->args[0], *w = executor->args[1], *bias = executor->args[2], *y = executor->args[3];
  for (int64_t b = 0; b < y->dims[0]; ++b)
    for (int64_t n = 0; n < y->dims[1]; ++n) {
      float acc = bias ? At(bias, {n}) : 0.0f;
      for (int64_t k = 0; k < x->dims[1]; ++k) acc += At(x, {b, k}) * At(w, {n, k});
      At(y, {b, n}) = acc;
    }
  delete executor;
  return 0;
}
}

// cuDNN fused attention: the vendor's best, run as a peer on the same buffers as our variants.
//
// Algorithm: the operation graph cuDNN's runtime-fusion engine recognises as a flash-attention
// forward (the same graph cudnn-frontend builds for SDPA on sm_90 with cuDNN 9):
//   S = Q K^T (fp32) -> S * scale -> [causal: select(row >= col, S, -inf)]
//   -> softmax as max, sub, exp, sum, div; stats = max + log(sum) is written as the log-sum-exp
//   -> O = P V.
// Schedule: cuDNN's. It fuses the graph into one kernel (on the H200 a wgmma "sdpa_sm90_flash_
// fprop" kernel); its tiles are not visible here, so the IO model uses VariantInfo::model_tiles.
// Layout: Q, K, V, O are used in place (BHSD); K^T is K's descriptor with the last two dims and
// strides swapped, so nothing is converted, inside or outside the timed region.
// Loading: dlopen("libcudnn.so.9") so fa-bench builds and runs without cuDNN; the header is used
// for types and enum values only.
#include "kernels/cudnn/cudnn.hpp"

#include <cudnn_graph.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/common/per_device.hpp"
#include "kernels/cudnn/fp8_io.hpp"

namespace fa {
namespace {

struct CudnnApi {
  std::string error;  // non-empty: cuDNN cannot be used, and why
  std::size_t version = 0;
  std::size_t (*GetVersion)() = nullptr;
  cudnnStatus_t (*Create)(cudnnHandle_t*) = nullptr;
  cudnnStatus_t (*SetStream)(cudnnHandle_t, cudaStream_t) = nullptr;
  const char* (*GetErrorString)(cudnnStatus_t) = nullptr;
  void (*GetLastErrorString)(char*, std::size_t) = nullptr;
  cudnnStatus_t (*CreateDescriptor)(cudnnBackendDescriptorType_t,
                                    cudnnBackendDescriptor_t*) = nullptr;
  cudnnStatus_t (*DestroyDescriptor)(cudnnBackendDescriptor_t) = nullptr;
  cudnnStatus_t (*SetAttribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                cudnnBackendAttributeType_t, std::int64_t, const void*) = nullptr;
  cudnnStatus_t (*GetAttribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                cudnnBackendAttributeType_t, std::int64_t, std::int64_t*,
                                void*) = nullptr;
  cudnnStatus_t (*Finalize)(cudnnBackendDescriptor_t) = nullptr;
  cudnnStatus_t (*Execute)(cudnnHandle_t, cudnnBackendDescriptor_t,
                           cudnnBackendDescriptor_t) = nullptr;

  std::string version_text() const {
    return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
           std::to_string(version % 100);
  }
};

// The fused SDPA graph below needs the cuDNN 9 backend (GEN_INDEX/BINARY_SELECT, no stats bug).
constexpr std::size_t kMinVersion = 90000;

const CudnnApi& api() {
  static const CudnnApi loaded = [] {
    CudnnApi a;
    void* lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* why = dlerror();
      a.error = std::string("cuDNN not available: ") + (why ? why : "dlopen(libcudnn.so.9) failed");
      return a;
    }
    auto bind = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn && a.error.empty()) a.error = std::string("libcudnn.so.9 has no ") + name;
    };
    bind(a.GetVersion, "cudnnGetVersion");
    bind(a.Create, "cudnnCreate");
    bind(a.SetStream, "cudnnSetStream");
    bind(a.GetErrorString, "cudnnGetErrorString");
    bind(a.GetLastErrorString, "cudnnGetLastErrorString");
    bind(a.CreateDescriptor, "cudnnBackendCreateDescriptor");
    bind(a.DestroyDescriptor, "cudnnBackendDestroyDescriptor");
    bind(a.SetAttribute, "cudnnBackendSetAttribute");
    bind(a.GetAttribute, "cudnnBackendGetAttribute");
    bind(a.Finalize, "cudnnBackendFinalize");
    bind(a.Execute, "cudnnBackendExecute");
    if (!a.error.empty()) return a;
    a.version = a.GetVersion();
    if (a.version < kMinVersion) {
      a.error = "cuDNN " + a.version_text() + " is too old (the fused attention graph needs 9.0+)";
    }
    return a;
  }();
  return loaded;
}

struct CudnnError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(cudnnStatus_t status, const char* step) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  char detail[512] = {0};
  api().GetLastErrorString(detail, sizeof detail);
  std::string msg = std::string("cuDNN ") + step + ": " + api().GetErrorString(status);
  if (detail[0]) msg += " (" + std::string(detail) + ")";
  for (char& c : msg) {
    if (c == '\n') c = ' ';  // one line: the row's reason
  }
  throw CudnnError(msg);
}

// One handle per device, created on first use there (it belongs to that device's context).
cudnnHandle_t handle() {
  static PerDevice<std::pair<cudnnStatus_t, cudnnHandle_t>> handles;
  const auto [status, h] = handles.get([] {
    cudnnHandle_t created = nullptr;
    const cudnnStatus_t st = api().Create(&created);
    return std::pair{st, created};
  });
  check(status, "create handle");
  return h;
}

// A backend descriptor that destroys itself.
class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) {
    check(api().CreateDescriptor(type, &d_), "create descriptor");
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  Desc(Desc&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  ~Desc() {
    if (d_) api().DestroyDescriptor(d_);
  }
  cudnnBackendDescriptor_t get() const { return d_; }

  Desc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, std::int64_t count,
            const void* value) {
    check(api().SetAttribute(d_, name, type, count, value), "set attribute");
    return *this;
  }
  Desc& set_i64(cudnnBackendAttributeName_t name, std::int64_t v) {
    return set(name, CUDNN_TYPE_INT64, 1, &v);
  }
  Desc& set_i64s(cudnnBackendAttributeName_t name, const std::vector<std::int64_t>& v) {
    return set(name, CUDNN_TYPE_INT64, static_cast<std::int64_t>(v.size()), v.data());
  }
  Desc& set_type(cudnnBackendAttributeName_t name, cudnnDataType_t t) {
    return set(name, CUDNN_TYPE_DATA_TYPE, 1, &t);
  }
  Desc& set_bool(cudnnBackendAttributeName_t name, bool b) {
    return set(name, CUDNN_TYPE_BOOLEAN, 1, &b);
  }
  Desc& set_desc(cudnnBackendAttributeName_t name, const Desc& other) {
    cudnnBackendDescriptor_t raw = other.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
  }
  Desc& finalize(const char* what) {
    check(api().Finalize(d_), what);
    return *this;
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

using Dims = std::vector<std::int64_t>;

// Tensor ids in the variant pack; virtual (on-chip) tensors count up from kFirstVirtual.
enum Uid : std::int64_t { kQ = 1, kK, kV, kO, kStats, kScale, kNegInf, kFirstVirtual = 100 };

// Builds the operation graph; every descriptor stays alive as long as the plan that uses it.
class GraphBuilder {
 public:
  std::deque<Desc> keep;  // deque: references stay valid as it grows
  std::vector<cudnnBackendDescriptor_t> ops;

  const Desc& tensor(std::int64_t uid, const Dims& dims, const Dims& strides, cudnnDataType_t type,
                     bool is_virtual, bool by_value = false) {
    Desc& t = keep.emplace_back(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    t.set_type(CUDNN_ATTR_TENSOR_DATA_TYPE, type)
        .set_i64s(CUDNN_ATTR_TENSOR_DIMENSIONS, dims)
        .set_i64s(CUDNN_ATTR_TENSOR_STRIDES, strides)
        .set_i64(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid)
        .set_i64(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 16)
        .set_bool(CUDNN_ATTR_TENSOR_IS_VIRTUAL, is_virtual);
    if (by_value) t.set_bool(CUDNN_ATTR_TENSOR_IS_BY_VALUE, true);
    return t.finalize("tensor");
  }
  const Desc& on_chip(const Dims& dims, const Dims& strides,
                      cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    return tensor(next_virtual_++, dims, strides, type, /*is_virtual=*/true);
  }

  void matmul(const Desc& a, const Desc& b, const Desc& c) {
    Desc& mm = keep.emplace_back(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    mm.set_type(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_DATA_FLOAT).finalize("matmul");
    add_op(keep.emplace_back(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR)
               .set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a)
               .set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b)
               .set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c)
               .set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm)
               .finalize("matmul operation"));
  }

  // y = mode(x[, b][, t]); `math` is the precision the operation computes in.
  void pointwise(cudnnPointwiseMode_t mode, const Desc& x, const Desc* b, const Desc* t,
                 const Desc& y, cudnnDataType_t math = CUDNN_DATA_FLOAT, std::int64_t axis = -1) {
    Desc& pw = keep.emplace_back(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
        .set_type(CUDNN_ATTR_POINTWISE_MATH_PREC, math);
    if (axis >= 0) pw.set_i64(CUDNN_ATTR_POINTWISE_AXIS, axis);
    pw.finalize("pointwise");
    Desc& op = keep.emplace_back(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw)
        .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    if (t) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    add_op(op.finalize("pointwise operation"));
  }

  void reduction(cudnnReduceTensorOp_t reduce, const Desc& x, const Desc& y) {
    Desc& rd = keep.emplace_back(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    rd.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &reduce)
        .set_type(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_DATA_FLOAT)
        .finalize("reduction");
    add_op(keep.emplace_back(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR)
               .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
               .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y)
               .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, rd)
               .finalize("reduction operation"));
  }

 private:
  void add_op(const Desc& op) { ops.push_back(op.get()); }
  std::int64_t next_virtual_ = kFirstVirtual;
};

// A finalized execution plan for one shape, with what executing it needs.
struct Plan {
  GraphBuilder graph;
  std::deque<Desc> keep;
  cudnnBackendDescriptor_t plan = nullptr;
  std::int64_t workspace_bytes = 0;
  bool causal = false;
  float scale = 0;  // by-value tensors: cuDNN reads them from host memory at execute time
  float neg_inf = -std::numeric_limits<float>::infinity();
};

void find_plan(Plan& p);

// P = softmax over keys of the logits, causal keys j > query i masked with -inf first, P in
// `p_type`. The stats max + log(sum) go to `stats`, or to an on-chip tensor when it is null:
// cuDNN recognises the attention graph only with them (9.14 without: "Last operation in the
// graph is not the 2nd matmul"; cudnn-frontend adds them too).
const Desc& masked_softmax(GraphBuilder& g, const Shape& s, const Desc& logits_in,
                           const Desc* stats, cudnnDataType_t p_type) {
  const std::int64_t B = s.B, H = s.H, N = s.N;
  const Dims scores{B, H, N, N}, score_strides{H * N * N, N * N, N, 1};
  const Dims per_row{B, H, N, 1}, per_row_strides{H * N, N, 1, 1};
  const Dims scalar{1, 1, 1, 1};
  const Desc* logits = &logits_in;
  if (s.causal) {  // keep key j <= query i
    const Desc& neg_inf =
        g.tensor(kNegInf, scalar, scalar, CUDNN_DATA_FLOAT, false, /*by_value=*/true);
    const Desc& row = g.on_chip(scores, score_strides, CUDNN_DATA_INT32);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, logits_in, nullptr, nullptr, row, CUDNN_DATA_FLOAT, 2);
    const Desc& col = g.on_chip(scores, score_strides, CUDNN_DATA_INT32);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, logits_in, nullptr, nullptr, col, CUDNN_DATA_FLOAT, 3);
    const Desc& keep_mask = g.on_chip(scores, score_strides, CUDNN_DATA_BOOLEAN);
    g.pointwise(CUDNN_POINTWISE_CMP_GE, row, &col, nullptr, keep_mask, CUDNN_DATA_BOOLEAN);
    const Desc& masked = g.on_chip(scores, score_strides);
    g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, logits_in, &neg_inf, &keep_mask, masked);
    logits = &masked;
  }
  const Desc& row_max = g.on_chip(per_row, per_row_strides);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, *logits, row_max);
  const Desc& shifted = g.on_chip(scores, score_strides);
  g.pointwise(CUDNN_POINTWISE_SUB, *logits, &row_max, nullptr, shifted);
  const Desc& exps = g.on_chip(scores, score_strides);
  g.pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, nullptr, exps);
  const Desc& row_sum = g.on_chip(per_row, per_row_strides);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, exps, row_sum);
  const Desc& log_sum = g.on_chip(per_row, per_row_strides);
  g.pointwise(CUDNN_POINTWISE_LOG, row_sum, nullptr, nullptr, log_sum);
  g.pointwise(CUDNN_POINTWISE_ADD, row_max, &log_sum, nullptr,
              stats ? *stats : g.on_chip(per_row, per_row_strides));
  const Desc& probs = g.on_chip(scores, score_strides, p_type);
  g.pointwise(CUDNN_POINTWISE_DIV, exps, &row_sum, nullptr, probs);
  return probs;
}

// Device scalars of the FP8 graph: uid = kFp8Scalar0 + CudnnFp8Scalar index.
constexpr std::int64_t kFp8Scalar0 = 20;

// cuDNN's FP8 graph (as cudnn-frontend builds it for FP8 SDPA forward): E4M3 Q, K, V with one
// descale each, S = Q K^T x scale x descale_q x descale_k in fp32, softmax, amax(P), P stored as
// E4M3(scale_s P), O = P V x descale_s x descale_v, written as E4M3(scale_o O), amax(O). Stats
// computed on chip only.
std::unique_ptr<Plan> build_fp8_plan(const Shape& s) {
  auto p = std::make_unique<Plan>();
  GraphBuilder& g = p->graph;
  const std::int64_t B = s.B, H = s.H, N = s.N, d = s.d;
  const cudnnDataType_t e4m3 = CUDNN_DATA_FP8_E4M3;
  const Dims qkv{B, H, N, d}, qkv_strides{H * N * d, N * d, d, 1};
  const Dims kt{B, H, d, N}, kt_strides{H * N * d, N * d, 1, d};
  const Dims scores{B, H, N, N}, score_strides{H * N * N, N * N, N, 1};
  const Dims scalar{1, 1, 1, 1};
  p->causal = s.causal;
  p->scale = static_cast<float>(s.scale());
  auto device_scalar = [&](CudnnFp8Scalar which) -> const Desc& {
    return g.tensor(kFp8Scalar0 + which, scalar, scalar, CUDNN_DATA_FLOAT, false);
  };

  const Desc& q = g.tensor(kQ, qkv, qkv_strides, e4m3, false);
  const Desc& k_t = g.tensor(kK, kt, kt_strides, e4m3, false);
  const Desc& v = g.tensor(kV, qkv, qkv_strides, e4m3, false);
  const Desc& o = g.tensor(kO, qkv, qkv_strides, e4m3, false);
  const Desc& scale = g.tensor(kScale, scalar, scalar, CUDNN_DATA_FLOAT, false, /*by_value=*/true);
  const Desc& descale_q = device_scalar(kDescaleQ);
  const Desc& descale_k = device_scalar(kDescaleK);
  const Desc& descale_v = device_scalar(kDescaleV);
  const Desc& descale_s = device_scalar(kDescaleS);
  const Desc& scale_s = device_scalar(kScaleS);
  const Desc& scale_o = device_scalar(kScaleO);
  const Desc& amax_s = device_scalar(kAmaxS);
  const Desc& amax_o = device_scalar(kAmaxO);

  const Desc& s_raw = g.on_chip(scores, score_strides);
  g.matmul(q, k_t, s_raw);
  const Desc& s_scaled = g.on_chip(scores, score_strides);
  g.pointwise(CUDNN_POINTWISE_MUL, s_raw, &scale, nullptr, s_scaled);
  const Desc& s_dq = g.on_chip(scores, score_strides);
  g.pointwise(CUDNN_POINTWISE_MUL, s_scaled, &descale_q, nullptr, s_dq);
  const Desc& s_dk = g.on_chip(scores, score_strides);
  g.pointwise(CUDNN_POINTWISE_MUL, s_dq, &descale_k, nullptr, s_dk);
  const Desc& probs = masked_softmax(g, s, s_dk, nullptr, CUDNN_DATA_FLOAT);
  g.reduction(CUDNN_REDUCE_TENSOR_AMAX, probs, amax_s);
  const Desc& probs8 = g.on_chip(scores, score_strides, e4m3);  // P in the input type
  g.pointwise(CUDNN_POINTWISE_MUL, probs, &scale_s, nullptr, probs8);
  const Desc& pv = g.on_chip(qkv, qkv_strides);
  g.matmul(probs8, v, pv);
  const Desc& pv_ds = g.on_chip(qkv, qkv_strides);
  g.pointwise(CUDNN_POINTWISE_MUL, pv, &descale_s, nullptr, pv_ds);
  const Desc& pv_dv = g.on_chip(qkv, qkv_strides);
  g.pointwise(CUDNN_POINTWISE_MUL, pv_ds, &descale_v, nullptr, pv_dv);
  g.pointwise(CUDNN_POINTWISE_MUL, pv_dv, &scale_o, nullptr, o);
  g.reduction(CUDNN_REDUCE_TENSOR_AMAX, pv_dv, amax_o);
  find_plan(*p);
  return p;
}

std::unique_ptr<Plan> build_plan(const Shape& s) {
  auto p = std::make_unique<Plan>();
  GraphBuilder& g = p->graph;
  const std::int64_t B = s.B, H = s.H, N = s.N, d = s.d;
  const cudnnDataType_t io = s.dtype == DType::bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
  const Dims qkv{B, H, N, d}, qkv_strides{H * N * d, N * d, d, 1};
  const Dims kt{B, H, d, N}, kt_strides{H * N * d, N * d, 1, d};  // K read as K^T: strides swapped
  const Dims scores{B, H, N, N}, score_strides{H * N * N, N * N, N, 1};
  const Dims per_row{B, H, N, 1}, per_row_strides{H * N, N, 1, 1};
  const Dims scalar{1, 1, 1, 1};
  p->causal = s.causal;
  p->scale = static_cast<float>(s.scale());

  const Desc& q = g.tensor(kQ, qkv, qkv_strides, io, false);
  const Desc& k_t = g.tensor(kK, kt, kt_strides, io, false);
  const Desc& v = g.tensor(kV, qkv, qkv_strides, io, false);
  const Desc& o = g.tensor(kO, qkv, qkv_strides, io, false);
  const Desc& stats = g.tensor(kStats, per_row, per_row_strides, CUDNN_DATA_FLOAT, false);
  const Desc& scale = g.tensor(kScale, scalar, scalar, CUDNN_DATA_FLOAT, false, /*by_value=*/true);

  const Desc& s_raw = g.on_chip(scores, score_strides);
  g.matmul(q, k_t, s_raw);
  const Desc& s_scaled = g.on_chip(scores, score_strides);
  g.pointwise(CUDNN_POINTWISE_MUL, s_raw, &scale, nullptr, s_scaled);
  // P in the input precision: cuDNN's flash engines take both operands of P V in one type
  // ("A and B need to have the same datatype in the matmul", cuDNN 9.14 on the H200).
  const Desc& probs = masked_softmax(g, s, s_scaled, &stats, io);
  g.matmul(probs, v, o);
  find_plan(*p);
  return p;
}

// Finds an engine for the graph in p->graph and finalises the plan; throws CudnnError.
void find_plan(Plan& plan_out) {
  Plan* p = &plan_out;
  GraphBuilder& g = p->graph;
  cudnnHandle_t h = handle();
  Desc& op_graph = p->keep.emplace_back(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  op_graph
      .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
           static_cast<std::int64_t>(g.ops.size()), g.ops.data())
      .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h)
      .finalize("operation graph");

  // Engine configurations to try, best first: heuristic mode A's ranking, then the fallback
  // list, then every engine cuDNN has for this graph (by global index, default knobs).
  std::vector<cudnnBackendDescriptor_t> candidates;
  for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    try {
      Desc& heuristics = p->keep.emplace_back(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
      heuristics.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, op_graph)
          .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode)
          .finalize("engine heuristics");
      std::int64_t available = 0;
      check(api().GetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &available, nullptr),
            "engine count");
      std::vector<cudnnBackendDescriptor_t> configs;
      for (std::int64_t i = 0; i < available; ++i) {
        configs.push_back(p->keep.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR).get());
      }
      std::int64_t returned = 0;
      check(api().GetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, available, &returned, configs.data()),
            "engine configs");
      candidates.insert(candidates.end(), configs.begin(),
                        configs.begin() + std::min(returned, available));
    } catch (const CudnnError&) {
      // A heuristic mode that knows nothing of this graph: the next list may.
    }
  }
  std::int64_t engines = 0, returned = 0;
  check(api().GetAttribute(op_graph.get(), CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT,
                           CUDNN_TYPE_INT64, 1, &returned, &engines),
        "engine global count");
  for (std::int64_t index = 0; index < engines; ++index) {
    try {
      Desc& engine = p->keep.emplace_back(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
      engine.set_desc(CUDNN_ATTR_ENGINE_OPERATION_GRAPH, op_graph)
          .set_i64(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, index)
          .finalize("engine");
      candidates.push_back(p->keep.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)
                               .set_desc(CUDNN_ATTR_ENGINECFG_ENGINE, engine)
                               .finalize("engine config")
                               .get());
    } catch (const CudnnError&) {
      // This engine does not take the graph.
    }
  }
  // The first candidate that builds a plan.
  std::string last_error = "no engine accepts the graph";
  for (cudnnBackendDescriptor_t config : candidates) {
    try {
      Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h)
          .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &config)
          .finalize("execution plan");
      std::int64_t got = 0;
      check(api().GetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                               CUDNN_TYPE_INT64, 1, &got, &p->workspace_bytes),
            "workspace size");
      p->plan = p->keep.emplace_back(std::move(plan)).get();
      return;
    } catch (const CudnnError& e) {
      last_error = e.what();
    }
  }
  throw CudnnError("cuDNN " + api().version_text() + ": none of " +
                   std::to_string(candidates.size()) +
                   " engine configurations (heuristics, then all " + std::to_string(engines) +
                   " engines) builds this attention graph; last: " + last_error);
}

class CudnnLauncher final : public Launcher {
 public:
  explicit CudnnLauncher(bool fp8) : fp8_(fp8) {}

  std::size_t workspace_bytes(const Shape& s, const Tiles&) const override {
    return fp8_ ? cudnn_fp8_workspace_bytes(s) : 0;
  }

  ~CudnnLauncher() override {
    if (workspace_) cudaFree(workspace_);
  }

  // Builds the plan; fp8: quantises Q, K, V once, outside the timed region.
  std::string prepare(const Shape& s, const Tiles&, const DeviceBuffers& b,
                      cudaStream_t stream) override {
    if (std::string err = ensure_plan(s); !err.empty()) return err;
    return fp8_ ? quantise(s, b, stream) : "";
  }

  std::string run(const Shape& s, const Tiles&, const DeviceBuffers& b,
                  cudaStream_t stream) override {
    if (std::string err = ensure_plan(s); !err.empty()) return err;
    if (fp8_) return run_fp8(s, b, stream);
    return execute({kQ, kK, kV, kO, kStats, kScale},
                   {const_cast<void*>(b.q), const_cast<void*>(b.k), const_cast<void*>(b.v), b.o,
                    b.lse, &plan_->scale},
                   stream);
  }

 private:
  std::string quantise(const Shape& s, const DeviceBuffers& b, cudaStream_t stream) {
    if (b.workspace_bytes < cudnn_fp8_workspace_bytes(s)) return "cudnn-fp8: workspace too small";
    if (cudaError_t e =
            cudnn_fp8_quantise_inputs(s, b.q, b.k, b.v, cudnn_fp8_carve(s, b.workspace), stream);
        e != cudaSuccess) {
      return std::string("cudnn-fp8: quantise: ") + cudaGetErrorString(e);
    }
    quantised_q_ = b.q;
    return "";
  }

  // Runs the plan on these tensors (plus the by-value mask constant when causal); "" or why not.
  std::string execute(std::vector<std::int64_t> uids, std::vector<void*> pointers,
                      cudaStream_t stream) {
    if (plan_->causal) {
      uids.push_back(kNegInf);
      pointers.push_back(&plan_->neg_inf);
    }
    try {
      check(api().SetStream(handle(), stream), "set stream");
      Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
      pack.set_i64s(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, uids)
          .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
               static_cast<std::int64_t>(pointers.size()), pointers.data())
          .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace_)
          .finalize("variant pack");
      check(api().Execute(handle(), plan_->plan, pack.get()), "execute");
    } catch (const CudnnError& e) {
      return e.what();
    }
    return "";
  }

  std::string run_fp8(const Shape& s, const DeviceBuffers& b, cudaStream_t stream) {
    if (quantised_q_ != b.q) {  // run() without prepare(): quantise first (untimed callers)
      if (std::string e = quantise(s, b, stream); !e.empty()) return e;
    }
    const CudnnFp8Buffers w = cudnn_fp8_carve(s, b.workspace);
    std::vector<std::int64_t> uids{kQ, kK, kV, kO, kScale};
    std::vector<void*> pointers{w.q8, w.k8, w.v8, w.o8, &plan_->scale};
    for (int which :
         {kDescaleQ, kDescaleK, kDescaleV, kDescaleS, kScaleS, kScaleO, kAmaxS, kAmaxO}) {
      uids.push_back(kFp8Scalar0 + which);
      pointers.push_back(w.scalars + which);
    }
    if (std::string e = execute(std::move(uids), std::move(pointers), stream); !e.empty()) return e;
    // O leaves cuDNN in E4M3; the bf16 O every variant writes is part of the timed work.
    if (cudaError_t e = cudnn_fp8_dequantise_output(s, w, b.o, stream); e != cudaSuccess) {
      return std::string("cudnn-fp8: dequantise O: ") + cudaGetErrorString(e);
    }
    return "";
  }

  std::string ensure_plan(const Shape& s) {
    if (!api().error.empty()) return api().error;
    if (plan_ && s.B == shape_.B && s.H == shape_.H && s.N == shape_.N && s.d == shape_.d &&
        s.causal == shape_.causal && s.dtype == shape_.dtype) {
      return "";
    }
    try {
      plan_ = fp8_ ? build_fp8_plan(s) : build_plan(s);
      shape_ = s;
    } catch (const CudnnError& e) {
      plan_.reset();
      return std::string(e.what());
    }
    if (workspace_) cudaFree(workspace_);
    workspace_ = nullptr;
    if (plan_->workspace_bytes > 0 &&
        cudaMalloc(&workspace_, static_cast<std::size_t>(plan_->workspace_bytes)) != cudaSuccess) {
      cudaGetLastError();
      workspace_ = nullptr;
      plan_.reset();
      return "cuDNN workspace allocation failed";
    }
    return "";
  }

  bool fp8_;
  const void* quantised_q_ = nullptr;  // fp8: the Q whose E4M3 copy is in the workspace
  std::unique_ptr<Plan> plan_;
  Shape shape_;
  void* workspace_ = nullptr;  // cuDNN's own scratch (the plan says how much; often none)
};

}  // namespace

std::unique_ptr<Launcher> make_cudnn_launcher(bool fp8) {
  return std::make_unique<CudnnLauncher>(fp8);
}

std::string cudnn_shape_rule(const Shape& s) {
  if (s.N < 2) return "unsupported: cuDNN's fused attention rejects N=1 (one query, one key)";
  return "";
}

std::string cudnn_library_status() {
  const CudnnApi& a = api();
  if (!a.error.empty()) return a.error;
  return "cuDNN " + a.version_text() + " (libcudnn.so.9)";
}

}  // namespace fa

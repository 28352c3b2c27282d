// cuDNN fused attention: the vendor's best, run as a peer on the same buffers as our variants,
// through cudnn-frontend's graph API (the header-only C++ API PyTorch's cuDNN attention uses).
//
// Graphs (cudnn-frontend nodes; the frontend lowers each to the cuDNN backend graph its version
// knows is fastest, and picks the engine with heuristics mode A, then the fallback list):
//   forward     sdpa: O = softmax(scale Q K^T [causal: keys j <= query i]) V, and the stats
//               (natural-log log-sum-exp per row, fp32) unless the row sets stats=false (the
//               inference forward PyTorch requests when no gradient is needed).
//   backward    sdpa_backward: dQ, dK, dV from Q, K, V, O, dO and the stats our forward writes.
//   FP8         sdpa_fp8: E4M3 Q, K, V with one descale each, P stored as E4M3(scale_s P), O in
//               E4M3 (scale_o), amax of P and O; no stats.
// Layout: Q, K, V, O, dO, dQ, dK, dV are used in place (BHSD: dims [B, H, N, d], strides
// [H N d, N d, d, 1]); the stats are [B, H, N, 1] fp32 = our lse [B*H, N]. Nothing is converted.
// Plans: built once per (graph, shape, device) and cached (kernels/cudnn/plan_cache.hpp); each
// holds the workspace its graph asks for.
// Loading: cudnn-frontend's run-time loading (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING): every cuDNN
// call goes through dlsym on the handle below, so fa-bench builds and runs without cuDNN, and the
// frontend checks the loaded cuDNN's version before using anything newer.
#include "kernels/cudnn/cudnn.hpp"

#include <cuda_runtime_api.h>
#include <cudnn_frontend.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/common/device_buffer.hpp"
#include "kernels/common/per_device.hpp"
#include "kernels/cudnn/fp8_io.hpp"
#include "kernels/cudnn/plan_cache.hpp"

// Where cudnn-frontend's run-time loading looks cuDNN's symbols up; set by library() below before
// the first frontend call.
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend

namespace fa {
namespace {

namespace fe = cudnn_frontend;

// The frontend version this file was compiled with (the pinned wheel's headers).
std::string frontend_version() {
  return std::to_string(CUDNN_FRONTEND_MAJOR_VERSION) + "." +
         std::to_string(CUDNN_FRONTEND_MINOR_VERSION) + "." +
         std::to_string(CUDNN_FRONTEND_PATCH_VERSION);
}

struct Library {
  std::string error;  // non-empty: cuDNN cannot be used, and why
  std::size_t version = 0;
  cudnnStatus_t (*Create)(cudnnHandle_t*) = nullptr;
  cudnnStatus_t (*SetStream)(cudnnHandle_t, cudaStream_t) = nullptr;
  const char* (*GetErrorString)(cudnnStatus_t) = nullptr;

  std::string version_text() const {
    return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
           std::to_string(version % 100);
  }
};

// The fused attention graphs need the cuDNN 9 backend (the FP8 one 9.1; the frontend says so).
constexpr std::size_t kMinVersion = 90000;

// cudnn-frontend's run-time loading opens the shared CUDA runtime by name (libcudart.so.13 or
// .12) for its few runtime calls (device properties, workspace memsets); fa-bench links the
// runtime statically. Where the loader's path has no libcudart.so.<major>, the toolkit's copy
// fa-bench was built with is loaded by its full path, so the frontend's dlopen by name finds it
// already loaded. If neither is there, the frontend's own error is the row's reason.
void preload_cudart() {
  const std::string name = "libcudart.so." + std::to_string(CUDART_VERSION / 1000);
  if (dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return;
#ifdef FA_CUDART_DIR
  dlopen((std::string(FA_CUDART_DIR) + "/" + name).c_str(), RTLD_NOW | RTLD_LOCAL);
#endif
  dlerror();  // the frontend reports it if it still cannot load one
}

const Library& library() {
  static const Library loaded = [] {
    Library a;
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
    std::size_t (*get_version)() = nullptr;
    bind(get_version, "cudnnGetVersion");
    bind(a.Create, "cudnnCreate");
    bind(a.SetStream, "cudnnSetStream");
    bind(a.GetErrorString, "cudnnGetErrorString");
    if (!a.error.empty()) return a;
    a.version = get_version();
    if (a.version < kMinVersion) {
      a.error = "cuDNN " + a.version_text() + " is too old (the fused attention graphs need 9.0+)";
      return a;
    }
    fe::cudnn_dlhandle = lib;
    preload_cudart();
    return a;
  }();
  return loaded;
}

// One line: the row's reason.
std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string prefix() {
  return "cuDNN " + library().version_text() + " (frontend " + frontend_version() + ")";
}

// One handle per device, created on first use there (it belongs to that device's context).
cudnnHandle_t handle(std::string* error) {
  static PerDevice<std::pair<cudnnStatus_t, cudnnHandle_t>> handles;
  const auto [status, h] = handles.get([] {
    cudnnHandle_t created = nullptr;
    const cudnnStatus_t st = library().Create(&created);
    return std::pair{st, created};
  });
  if (status != CUDNN_STATUS_SUCCESS) {
    *error = prefix() + ": create handle: " + library().GetErrorString(status);
    return nullptr;
  }
  return h;
}

// Tensor ids in the variant pack.
enum Uid : std::int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kDO,
  kDQ,
  kDK,
  kDV,
  kPageTable,  // a paged cache's table (K's and V's: one)
  kSeqLenQ,    // the padding mask's lengths: N each
  kSeqLenKv,   // each sequence's K/V length
};
// The FP8 graph's scalars: uid = kFp8Scalar0 + CudnnFp8Scalar index (kernels/cudnn/fp8_io.hpp).
constexpr std::int64_t kFp8Scalar0 = 20;

// A built graph: its execution plan inside, and the workspace the plan asks for (held while the
// plan is among the cache's most recently used: kernels/cudnn/plan_cache.hpp).
struct Plan {
  std::shared_ptr<fe::graph::Graph> graph;
  void* workspace = nullptr;
  std::int64_t workspace_bytes = 0;
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() { release(); }

  std::string acquire() {
    if (workspace || workspace_bytes <= 0) return "";
    if (cudaMalloc(&workspace, static_cast<std::size_t>(workspace_bytes)) != cudaSuccess) {
      cudaGetLastError();
      workspace = nullptr;
      return "cuDNN: workspace of " + std::to_string(workspace_bytes) + " bytes: allocation failed";
    }
    return "";
  }
  void release() {
    if (workspace) cudaFree(workspace);
    workspace = nullptr;
  }
};

using Tensor = std::shared_ptr<fe::graph::Tensor_attributes>;

fe::DataType_t io_type(DType t) {
  return t == DType::bf16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF;
}

// A [B, H, N, d] tensor in place (BHSD); K and V: [B, H_kv, N_kv, d], or a paged cache's pool
// [pages][H_kv][P][d] (the container cuDNN's paged attention takes).
Tensor bhsd(fe::graph::Graph& g, const char* name, std::int64_t uid, const cudnn::PlanKey& k) {
  const bool kv = uid == kK || uid == kV;
  const std::int64_t H = kv ? k.H_kv : k.H, N = kv ? k.N_kv : k.N;
  std::int64_t outer = k.B, rows = N;
  if (kv && k.page_size > 0) {
    rows = k.page_size;
    outer = k.B * ((k.N_kv + k.page_size - 1) / k.page_size);
  }
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({outer, H, rows, k.d})
                      .set_stride({H * rows * k.d, rows * k.d, k.d, 1}));
}
// An int32 [B, 1, rows, 1] tensor: the page table (rows: pages per sequence) or the lengths.
Tensor int32_per_sequence(fe::graph::Graph& g, const char* name, std::int64_t uid, std::int64_t B,
                          std::int64_t rows) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({B, 1, rows, 1})
                      .set_stride({rows, rows, 1, 1})
                      .set_data_type(fe::DataType_t::INT32));
}
void as_bhsd_output(const Tensor& t, std::int64_t uid, const cudnn::PlanKey& k) {
  t->set_output(true)
      .set_uid(uid)
      .set_dim({k.B, k.H, k.N, k.d})
      .set_stride({k.H * k.N * k.d, k.N * k.d, k.d, 1});
}
// The stats / lse: [B, H, N, 1] fp32, row-contiguous: our lse [B*H, N].
void as_stats(const Tensor& t, std::int64_t uid, const cudnn::PlanKey& k) {
  t->set_uid(uid)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim({k.B, k.H, k.N, 1})
      .set_stride({k.H * k.N, k.N, 1, 1});
}

std::shared_ptr<fe::graph::Graph> new_graph(fe::DataType_t io) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(io)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

float softmax_scale(const cudnn::PlanKey& k) {
  Shape s;
  s.d = k.d;
  return static_cast<float>(s.scale());
}

void define_forward(fe::graph::Graph& g, const cudnn::PlanKey& k) {
  const Tensor q = bhsd(g, "Q", kQ, k), kk = bhsd(g, "K", kK, k), v = bhsd(g, "V", kV, k);
  auto options =
      fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(k.stats).set_attn_scale(
          softmax_scale(k));
  // Bottom-right where the K/V length is apart, as the reference aligns it (square: the same
  // mask, set as before so that cuDNN's engine choice for square rows stays its own).
  const bool apart = k.N_kv != k.N || k.ragged;
  if (k.causal && apart) options.set_causal_mask_bottom_right(true);
  if (k.causal && !apart) options.set_causal_mask(true);
  // A paged or ragged cache: the padding mask with each sequence's lengths (cuDNN takes pages
  // only with it), and the page table for K and V.
  if (k.page_size > 0 || k.ragged) {
    options.set_padding_mask(true)
        .set_seq_len_q(int32_per_sequence(g, "seq_len_q", kSeqLenQ, k.B, 1))
        .set_seq_len_kv(int32_per_sequence(g, "seq_len_kv", kSeqLenKv, k.B, 1));
  }
  if (k.page_size > 0) {
    const Tensor table = int32_per_sequence(g, "page_table", kPageTable, k.B,
                                            (k.N_kv + k.page_size - 1) / k.page_size);
    options.set_paged_attention_k_table(table)
        .set_paged_attention_v_table(table)
        .set_paged_attention_max_seq_len_kv(static_cast<int>(k.N_kv));
  }
  auto [o, stats] = g.sdpa(q, kk, v, options);
  as_bhsd_output(o, kO, k);
  if (k.stats) {
    stats->set_output(true);
    as_stats(stats, kStats, k);
  }
}

void define_backward(fe::graph::Graph& g, const cudnn::PlanKey& k) {
  const Tensor q = bhsd(g, "Q", kQ, k), kk = bhsd(g, "K", kK, k), v = bhsd(g, "V", kV, k);
  const Tensor o = bhsd(g, "O", kO, k), d_o = bhsd(g, "dO", kDO, k);
  Tensor stats = g.tensor(fe::graph::Tensor_attributes().set_name("Stats"));
  as_stats(stats, kStats, k);
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("sdpa_backward")
                     .set_attn_scale(softmax_scale(k));
  if (k.causal) options.set_causal_mask(true);
  auto [dq, dk, dv] = g.sdpa_backward(q, kk, v, o, d_o, stats, options);
  as_bhsd_output(dq, kDQ, k);
  as_bhsd_output(dk, kDK, k);
  as_bhsd_output(dv, kDV, k);
}

void define_fp8_forward(fe::graph::Graph& g, const cudnn::PlanKey& k) {
  const Tensor q = bhsd(g, "Q", kQ, k), kk = bhsd(g, "K", kK, k), v = bhsd(g, "V", kV, k);
  auto scalar = [&](const char* name, CudnnFp8Scalar which) {
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(name)
                        .set_uid(kFp8Scalar0 + static_cast<std::int64_t>(which))
                        .set_dim({1, 1, 1, 1})
                        .set_stride({1, 1, 1, 1})
                        .set_data_type(fe::DataType_t::FLOAT));
  };
  auto options = fe::graph::SDPA_fp8_attributes()
                     .set_name("sdpa_fp8")
                     .set_generate_stats(false)
                     .set_attn_scale(softmax_scale(k));
  if (k.causal) options.set_causal_mask(true);
  auto [o, stats, amax_s, amax_o] =
      g.sdpa_fp8(q, kk, v, scalar("Descale_Q", kDescaleQ), scalar("Descale_K", kDescaleK),
                 scalar("Descale_V", kDescaleV), scalar("Descale_S", kDescaleS),
                 scalar("Scale_S", kScaleS), scalar("Scale_O", kScaleO), options);
  (void)stats;  // none: generate_stats(false)
  as_bhsd_output(o, kO, k);
  for (auto [t, which] : {std::pair{amax_s, kAmaxS}, std::pair{amax_o, kAmaxO}}) {
    t->set_output(true)
        .set_uid(kFp8Scalar0 + static_cast<std::int64_t>(which))
        .set_dim({1, 1, 1, 1})
        .set_stride({1, 1, 1, 1})
        .set_data_type(fe::DataType_t::FLOAT);
  }
}

// Builds the graph of `key` and its plan; null and `error` when cuDNN refuses it.
std::shared_ptr<Plan> build_plan(const cudnn::PlanKey& key, std::string* error) {
  try {
    cudnnHandle_t h = handle(error);
    if (!h) return nullptr;
    auto plan = std::make_shared<Plan>();
    const fe::DataType_t io =
        key.kind == cudnn::GraphKind::forward_fp8 ? fe::DataType_t::FP8_E4M3 : io_type(key.dtype);
    plan->graph = new_graph(io);
    fe::graph::Graph& g = *plan->graph;
    switch (key.kind) {
      case cudnn::GraphKind::forward:
        define_forward(g, key);
        break;
      case cudnn::GraphKind::backward:
        define_backward(g, key);
        break;
      case cudnn::GraphKind::forward_fp8:
        define_fp8_forward(g, key);
        break;
    }
    auto step = [&](fe::error_t e, const char* what) {
      if (e.is_good()) return true;
      *error = one_line(prefix() + ": " + cudnn::to_string(key.kind) + " graph: " + what + ": " +
                        e.get_message());
      return false;
    };
    if (!step(g.validate(), "validate") || !step(g.build_operation_graph(h), "operation graph") ||
        !step(g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}),
              "engine heuristics") ||
        !step(g.check_support(h), "no engine supports it") ||
        !step(g.build_plans(h, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE), "no plan builds") ||
        !step(g.get_workspace_size(plan->workspace_bytes), "workspace size")) {
      return nullptr;
    }
    return plan;
  } catch (const std::exception& e) {  // the frontend throws for some refusals (and dlsym misses)
    *error = one_line(prefix() + ": " + cudnn::to_string(key.kind) + " graph: " + e.what());
    return nullptr;
  }
}

// How many plans keep their workspace: FA_CUDNN_WORKSPACES_KEPT (a positive integer), default 16.
std::size_t workspaces_kept() {
  const char* v = std::getenv("FA_CUDNN_WORKSPACES_KEPT");
  const long n = v ? std::strtol(v, nullptr, 10) : 0;
  return n > 0 ? static_cast<std::size_t>(n) : 16;
}

// The process's plans (kernels/cudnn/plan_cache.hpp). The cache itself is never destroyed either:
// freeing device memory and cuDNN descriptors after the CUDA runtime has shut down at exit is not
// safe.
cudnn::PlanCache<Plan>& plans() {
  static auto* cache = new cudnn::PlanCache<Plan>(workspaces_kept());
  return *cache;
}

std::shared_ptr<Plan> plan_for(cudnn::GraphKind kind, const Shape& s, bool stats,
                               std::string* error) {
  if (!library().error.empty()) {
    *error = library().error;
    return nullptr;
  }
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    device = 0;
  }
  auto entry = plans().get(cudnn::plan_key(kind, s, stats, device), build_plan);
  *error = entry.error;
  return entry.plan;
}

// Runs `plan` on these tensors on `stream`; "" or why not.
std::string execute(const Plan& plan, std::unordered_map<std::int64_t, void*> pack,
                    cudaStream_t stream) {
  try {
    std::string error;
    cudnnHandle_t h = handle(&error);
    if (!h) return error;
    if (cudnnStatus_t st = library().SetStream(h, stream); st != CUDNN_STATUS_SUCCESS) {
      return prefix() + ": set stream: " + library().GetErrorString(st);
    }
    if (auto e = plan.graph->execute(h, pack, plan.workspace); e.is_bad()) {
      return one_line(prefix() + ": execute: " + e.get_message());
    }
  } catch (const std::exception& e) {
    return one_line(prefix() + ": execute: " + e.what());
  }
  return "";
}

class CudnnLauncher final : public Launcher {
 public:
  CudnnLauncher(bool fp8, bool stats) : fp8_(fp8), stats_(stats && !fp8) {}

  std::size_t workspace_bytes(const Shape& s, const Tiles&) const override {
    return fp8_ ? cudnn_fp8_workspace_bytes(s) : 0;
  }

  // Builds the plan; fp8: quantises Q, K, V once, outside the timed region.
  std::string prepare(const Shape& s, const Tiles&, const DeviceBuffers& b,
                      cudaStream_t stream) override {
    if (std::string e = fp8_shape_refusal(s); !e.empty()) return e;
    std::string err;
    if (!plan_for(kind(), s, stats_, &err)) return err;
    return fp8_ ? quantise(s, b, stream) : "";
  }

  std::string run(const Shape& s, const Tiles&, const DeviceBuffers& b,
                  cudaStream_t stream) override {
    if (std::string e = fp8_shape_refusal(s); !e.empty()) return e;
    std::string err;
    const auto plan = plan_for(kind(), s, stats_, &err);
    if (!plan) return err;
    if (fp8_) return run_fp8(*plan, s, b, stream);
    std::unordered_map<std::int64_t, void*> pack{{kQ, const_cast<void*>(b.q)},
                                                 {kK, const_cast<void*>(b.k)},
                                                 {kV, const_cast<void*>(b.v)},
                                                 {kO, b.o}};
    if (stats_) pack[kStats] = b.lse;
    if (s.paged() || s.ragged()) {
      if (!b.kv_lengths || (s.paged() && !b.page_table))
        return "cudnn: the shape's page table or K/V lengths are not in its buffers";
      if (std::string e = query_lengths(s, stream); !e.empty()) return e;
      pack[kSeqLenQ] = query_lengths_.ptr;
      pack[kSeqLenKv] = const_cast<std::int32_t*>(b.kv_lengths);
      if (s.paged()) pack[kPageTable] = const_cast<std::int32_t*>(b.page_table);
    }
    return execute(*plan, std::move(pack), stream);
  }

  std::string run_backward(const Shape& s, const Tiles&, const BackwardBuffers& b,
                           cudaStream_t stream) override {
    if (fp8_) return "cudnn-fp8: no backward pass";
    if (std::string e = needs_square_mha(s, "cudnn's backward"); !e.empty()) return e;
    std::string err;
    const auto plan = plan_for(cudnn::GraphKind::backward, s, true, &err);
    if (!plan) return err;
    return execute(*plan,
                   {{kQ, const_cast<void*>(b.q)},
                    {kK, const_cast<void*>(b.k)},
                    {kV, const_cast<void*>(b.v)},
                    {kO, const_cast<void*>(b.o)},
                    {kDO, const_cast<void*>(b.d_o)},
                    {kStats, const_cast<float*>(b.lse)},
                    {kDQ, b.dq},
                    {kDK, b.dk},
                    {kDV, b.dv}},
                   stream);
  }

 private:
  cudnn::GraphKind kind() const {
    return fp8_ ? cudnn::GraphKind::forward_fp8 : cudnn::GraphKind::forward;
  }

  // The padding mask's query lengths (N for each of B sequences), written once per (B, N) on the
  // launch's stream (ordered before the graph that reads them): the first run of a shape is its
  // untimed verification, never a capture.
  std::string query_lengths(const Shape& s, cudaStream_t stream) {
    if (query_lengths_for_ == std::pair{s.B, s.N}) return "";
    const std::vector<std::int32_t> lengths(static_cast<std::size_t>(s.B),
                                            static_cast<std::int32_t>(s.N));
    if (query_lengths_.ptr) cudaFree(query_lengths_.ptr);
    query_lengths_.ptr = nullptr;
    if (!query_lengths_.allocate(lengths.size() * 4) ||
        cudaMemcpyAsync(query_lengths_.ptr, lengths.data(), lengths.size() * 4,
                        cudaMemcpyHostToDevice, stream) != cudaSuccess) {
      cudaGetLastError();
      return "cudnn: the padding mask's query lengths could not be written";
    }
    query_lengths_for_ = {s.B, s.N};
    return "";
  }

  // cudnn-fp8 quantises Q, K and V as one size (kernels/cudnn/fp8_io.cu): square multi-head
  // attention only, refused before prepare's quantisation and run's launch alike.
  std::string fp8_shape_refusal(const Shape& s) const {
    return fp8_ ? needs_square_mha(s, "cudnn-fp8") : "";
  }

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

  std::string run_fp8(const Plan& plan, const Shape& s, const DeviceBuffers& b,
                      cudaStream_t stream) {
    if (quantised_q_ != b.q) {  // run() without prepare(): quantise first (untimed callers)
      if (std::string e = quantise(s, b, stream); !e.empty()) return e;
    }
    const CudnnFp8Buffers w = cudnn_fp8_carve(s, b.workspace);
    std::unordered_map<std::int64_t, void*> pack{{kQ, w.q8}, {kK, w.k8}, {kV, w.v8}, {kO, w.o8}};
    for (int which :
         {kDescaleQ, kDescaleK, kDescaleV, kDescaleS, kScaleS, kScaleO, kAmaxS, kAmaxO}) {
      pack[kFp8Scalar0 + which] = w.scalars + which;
    }
    if (std::string e = execute(plan, std::move(pack), stream); !e.empty()) return e;
    // O leaves cuDNN in E4M3; the bf16 O every variant writes is part of the timed work.
    if (cudaError_t e = cudnn_fp8_dequantise_output(s, w, b.o, stream); e != cudaSuccess) {
      return std::string("cudnn-fp8: dequantise O: ") + cudaGetErrorString(e);
    }
    return "";
  }

  bool fp8_;
  bool stats_;
  DeviceAllocation query_lengths_;
  std::pair<std::int64_t, std::int64_t> query_lengths_for_{0, 0};  // (B, N) written there
  const void* quantised_q_ = nullptr;  // fp8: the Q whose E4M3 copy is in the workspace
};

}  // namespace

std::unique_ptr<Launcher> make_cudnn_launcher(const LaunchOptions& options, bool fp8) {
  return std::make_unique<CudnnLauncher>(fp8, cudnn::stats_option(options.options));
}

std::string cudnn_shape_rule(const Shape& s) {
  if (s.N < 2 && s.kv_len() < 2)
    return "unsupported: cuDNN's fused attention rejects N=1 (one query, one key)";
  return "";
}

std::string cudnn_library_status() {
  const Library& a = library();
  if (!a.error.empty()) return a.error;
  return "cuDNN " + a.version_text() + " (libcudnn.so.9), cudnn-frontend " + frontend_version();
}

std::size_t cudnn_plans_built() {
  return plans().builds();
}

}  // namespace fa

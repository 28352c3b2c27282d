// What identifies a cuDNN execution plan, and the cache that builds each one once: pure C++ (no
// CUDA, no cuDNN header), so the keying is tested without a GPU (tests/test_cudnn_cpu.cpp).
//
// A plan is built for one graph (forward, FP8 forward, backward) on one shape; building it costs
// milliseconds to seconds (cuDNN compiles the fused kernel at run time), executing it
// microseconds. The cache keeps every plan for the process's life (the workspaces of the last few
// only), so a row's verification, timing and counting, and a later row of the same shape (stats
// on and off, the backward after the forward), build nothing. A graph cuDNN refuses is remembered
// too: its reason is the row's, and asking again rebuilds nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "kernels/problem.hpp"
#include "kernels/variant.hpp"

namespace fa::cudnn {

enum class GraphKind { forward, forward_fp8, backward };
const char* to_string(GraphKind k);

struct PlanKey {
  GraphKind kind = GraphKind::forward;
  int device = 0;
  std::int64_t B = 0, H = 0, N = 0, d = 0;
  std::int64_t H_kv = 0, N_kv = 0;  // K and V's heads and rows (as H and N when square)
  std::int64_t page_size = 0;       // a paged cache's page rows (0: contiguous K/V)
  bool ragged = false;  // sequences at their own K/V lengths (the padding mask's lengths)
  bool causal = false;
  DType dtype = DType::bf16;
  bool stats = true;  // the forward writes the log-sum-exp (its only use: the 16-bit forward)

  auto tie() const {
    return std::tie(kind, device, B, H, N, d, H_kv, N_kv, page_size, ragged, causal, dtype, stats);
  }
  bool operator==(const PlanKey& o) const { return tie() == o.tie(); }
  bool operator<(const PlanKey& o) const { return tie() < o.tie(); }
};
// "forward bf16 B=2 H=3 N=129 d=64 causal stats device 0" (with H_kv= and N_kv= where they
// differ from H and N, page= and "ragged" for the cache)
std::string to_string(const PlanKey& k);

// The key of `kind` on `shape`: fields a graph does not depend on are fixed (the FP8 graph writes
// no stats and takes E4M3 whatever the caller's dtype; the backward reads the stats), so two
// requests for one graph share one plan.
PlanKey plan_key(GraphKind kind, const Shape& shape, bool stats, int device);

// The row's option "stats" (kOptionStats): true unless the row sets it false.
bool stats_option(const OptionValues& options);

// Plans by key, built once and never destroyed while the process runs; only the `capacity` most
// recently used hold their resources (the workspace on the device). Why never destroyed: destroying
// a cuDNN plan unloads the kernels it compiled, and CUPTI's range profiler (enabled for the whole
// run, profiler/cupti_range.hpp) then crashed inside the next cuDNN launch it profiled (H200:
// every sweep with more than 16 cuDNN plans segfaulted at the 17th plan's counters;
// with a capacity of 2 at the 3rd; never with the plans kept). A plan costs host memory and its
// compiled kernels; its workspace, the large part, is what is given back.
//
// Plan must provide `std::string acquire()` (take its resources; "" or why not: the entry then
// has no plan and that reason, this time) and `void release()` (give them back; idempotent).
// Build failures are kept with their reason, as plans are.
template <typename Plan>
class PlanCache {
 public:
  struct Entry {
    std::shared_ptr<Plan> plan;  // null when the build (or taking its resources) failed
    std::string error;           // why it failed
  };
  using Builder = std::function<std::shared_ptr<Plan>(const PlanKey&, std::string* error)>;

  explicit PlanCache(std::size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  // The entry for `key` (built on first use), its resources taken; the least recently used plan
  // beyond the capacity gives its resources back.
  Entry get(const PlanKey& key, const Builder& build) {
    auto it = index_.find(key);
    if (it != index_.end()) {
      order_.splice(order_.begin(), order_, it->second);  // now the most recently used
    } else {
      Entry e;
      ++builds_;
      e.plan = build(key, &e.error);
      if (!e.plan && e.error.empty()) e.error = "cuDNN: no plan for " + to_string(key);
      if (e.plan) e.error.clear();
      order_.emplace_front(key, e);
      index_[key] = order_.begin();
    }
    Entry e = order_.front().second;
    // Resources are held by the first `capacity_` plans of the recency order only.
    std::size_t held = 0;
    for (auto& [k, entry] : order_) {
      if (!entry.plan) continue;
      if (++held > capacity_) entry.plan->release();
    }
    if (e.plan) {
      if (std::string why = e.plan->acquire(); !why.empty()) return Entry{nullptr, why};
    }
    return e;
  }

  std::size_t size() const { return order_.size(); }  // every key asked for, built or refused
  std::size_t builds() const { return builds_; }      // how many times a builder ran
  bool contains(const PlanKey& key) const { return index_.count(key) != 0; }

 private:
  using Item = std::pair<PlanKey, Entry>;
  std::size_t capacity_;
  std::size_t builds_ = 0;
  std::list<Item> order_;  // most recently used first
  std::map<PlanKey, typename std::list<Item>::iterator> index_;
};

}  // namespace fa::cudnn

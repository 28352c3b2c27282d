// fa2 backward: the launcher (fa2's forward launcher with the backward's options), the workspace
// and the dispatch to the kernels, which kernels/fa2/fa2_bwd_kernels.cuh describes (the
// algorithm, both dq modes, the configurations) and four files compile.
#include <string>

#include "kernels/fa2/fa2.hpp"
#include "kernels/fa2/fa2_bwd_kernels.cuh"

namespace fa {
namespace {

// The launcher of fa2 with the backward's options: the forward is fa2's own launcher
// (kernels/fa2/fa2.cu); the backward reads option dq here.
class Fa2WithBackwardLauncher final : public Launcher {
 public:
  explicit Fa2WithBackwardLauncher(const LaunchOptions& o)
      : forward_(make_fa2_launcher(o)),
        heads_fastest_(o.is(kOptionBlockOrder, std::string("heads"))),
        dq_separate_(o.is(kOptionDq, std::string(kDqSeparate))),
        fault_(o.fault),
        relay_(this) {
    forward_->set_phase_marker(&relay_);
  }
  std::size_t workspace_bytes(const Shape& s, const Tiles& t) const override {
    return forward_->workspace_bytes(s, t);
  }
  std::string prepare(const Shape& s, const Tiles& t, const DeviceBuffers& b,
                      cudaStream_t stream) override {
    return forward_->prepare(s, t, b, stream);
  }
  std::string run(const Shape& s, const Tiles& t, const DeviceBuffers& b,
                  cudaStream_t stream) override {
    return forward_->run(s, t, b, stream);
  }
  std::size_t backward_workspace_bytes(const Shape& s, const Tiles&) const override {
    return fa2_backward_workspace_bytes(s, dq_separate_);
  }
  std::string run_backward(const Shape& s, const Tiles& t, const BackwardBuffers& b,
                           cudaStream_t stream) override {
    if (std::string e = needs_square_mha(s, "fa2's backward"); !e.empty()) return e;
    const Fa2BwdPhaseHooks hooks{[this](const char* name) { phase_begin(name); },
                                 [this] { phase_end(); }};
    return fa2_run_backward(s, t, b, stream, Fa2BwdOptions{heads_fastest_, dq_separate_}, fault_,
                            hooks);
  }

 private:
  // Passes the forward launcher's phase marks on to this launcher's marker.
  class Relay final : public PhaseMarker {
   public:
    explicit Relay(Fa2WithBackwardLauncher* owner) : owner_(owner) {}
    void begin(const char* name) override { owner_->phase_begin(name); }
    void end() override { owner_->phase_end(); }

   private:
    Fa2WithBackwardLauncher* owner_;
  };

  std::unique_ptr<Launcher> forward_;
  bool heads_fastest_;
  bool dq_separate_;
  FaultInjection fault_;
  Relay relay_;
};

}  // namespace

std::vector<Tiles> fa2_backward_tile_options(int d) {
  return d == 64 ? Fa2BwdTiles<64>::type::options(d) : Fa2BwdTiles<128>::type::options(d);
}

std::size_t fa2_backward_workspace_bytes(const Shape& s, bool dq_separate) {
  const std::size_t rows = static_cast<std::size_t>(s.heads_total() * s.N);
  return (dq_separate ? 0 : rows * static_cast<std::size_t>(s.d) * 4) + rows * 4;
}

std::size_t fa2_backward_workspace_bytes(const Shape& s) {
  return fa2_backward_workspace_bytes(s, false);
}

std::string fa2_run_backward(const Shape& s, const Tiles& t, const BackwardBuffers& b,
                             cudaStream_t stream, const Fa2BwdOptions& o,
                             const FaultInjection& fault, const Fa2BwdPhaseHooks& phases) {
  if (b.workspace_bytes < fa2_backward_workspace_bytes(s, o.dq_separate))
    return "fa2 backward: workspace too small";
  if (s.d == 64)
    return s.causal ? fa2_bwd::run<64, true>(s, t, b, stream, o, fault, phases)
                    : fa2_bwd::run<64, false>(s, t, b, stream, o, fault, phases);
  if (s.d == 128)
    return s.causal ? fa2_bwd::run<128, true>(s, t, b, stream, o, fault, phases)
                    : fa2_bwd::run<128, false>(s, t, b, stream, o, fault, phases);
  return "fa2 backward: no kernel compiled for d=" + std::to_string(s.d) + " tiles " +
         std::to_string(t.block_q) + "x" + std::to_string(t.block_kv);
}

std::string fa2_run_backward(const Shape& s, const Tiles& t, const BackwardBuffers& b,
                             cudaStream_t stream, bool heads_fastest, const FaultInjection& fault,
                             const Fa2BwdPhaseHooks& phases) {
  return fa2_run_backward(s, t, b, stream, Fa2BwdOptions{heads_fastest, false}, fault, phases);
}

std::unique_ptr<Launcher> make_fa2_launcher_with_backward(const LaunchOptions& o) {
  return std::make_unique<Fa2WithBackwardLauncher>(o);
}

}  // namespace fa

#include "profiler/energy_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>

namespace fa::energy {
namespace {

constexpr int kMaxTerms = 10;
using Vec = std::array<double, kMaxTerms>;
using Mat = std::array<Vec, kMaxTerms>;
enum Term {
  kFlops16,
  kFlops8,
  kMma16,
  kMma8,
  kInstructions,
  kL2Bytes,
  kBytes,
  kDramTime,
  kBusyTime,
  kTime
};
constexpr std::array<const char*, kMaxTerms> kTermNames{"bf16/fp16 wgmma FLOPs",
                                                        "fp8 wgmma FLOPs",
                                                        "bf16/fp16 mma.sync FLOPs",
                                                        "fp8 mma.sync FLOPs",
                                                        "warp instructions",
                                                        "SM <-> L2 bytes",
                                                        "DRAM bytes",
                                                        "time moving DRAM bytes",
                                                        "busy SM time",
                                                        "time"};

// The clock exponents tried (0, 0.05, ..., 3), and the spread of the calibration's clocks that
// lets the fit choose among them (below it, the CMOS default 2 and no floor). The floors tried:
// every kKneeStepMhz above the slowest calibration clock, while the clocks above the floor still
// span that spread (the exponent needs them).
constexpr int kExponentSteps = 60;
constexpr double kExponentMax = 3.0, kDefaultExponent = 2.0, kClockSpreadForExponent = 1.10;
constexpr double kKneeStepMhz = 10;

// A term's column for one point, in units that keep the columns of a similar size: GFLOP,
// G instructions, GB, s; the dynamic terms at the point's clock, scaled to f_ref.
Vec row_of(const CalibrationPoint& p, double f_ref_mhz, double exponent, double knee_mhz) {
  const double s = clock_scale(p.sm_clock_mhz, f_ref_mhz, exponent, knee_mhz);
  return {s * p.flops16 * 1e-9,
          s * p.flops8 * 1e-9,
          s * p.flops16_mma * 1e-9,
          s * p.flops8_mma * 1e-9,
          s * p.instructions * 1e-9,
          p.l2_bytes * 1e-9,
          p.bytes * 1e-9,
          p.bytes > 0 ? p.seconds : 0,
          p.seconds * p.active_sm_fraction,
          p.seconds};
}

// The least-squares problem on relative errors (each point's row divided by its measured energy,
// against 1), as its normal equations: g = A^T A, b = A^T 1, and n = the number of points, so
// that the sum of squared relative errors of x is x^T g x - 2 x^T b + n.
struct Normal {
  Mat g{};
  Vec b{};
  double n = 0;
};

Normal normal_of(const std::vector<Vec>& rows, const std::vector<double>& energy) {
  Normal ne;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    for (int r = 0; r < kMaxTerms; ++r) {
      const double ur = rows[i][r] / energy[i];
      for (int c = 0; c < kMaxTerms; ++c) ne.g[r][c] += ur * rows[i][c] / energy[i];
      ne.b[r] += ur;
    }
  }
  ne.n = static_cast<double>(rows.size());
  return ne;
}

// Per point, model / measured - 1.
std::vector<double> relative_errors(const std::vector<Vec>& rows, const std::vector<double>& energy,
                                    const Vec& x) {
  std::vector<double> r;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    double e = 0;
    for (int k = 0; k < kMaxTerms; ++k) e += rows[i][k] * x[k];
    r.push_back(e / energy[i] - 1);
  }
  return r;
}

// The sum of squared relative errors, from the points themselves (the normal equations' form
// n - 2 x.b + x.g.x loses the small differences the clock law is chosen by).
double relative_sse(const std::vector<Vec>& rows, const std::vector<double>& energy, const Vec& x) {
  double sse = 0;
  for (const double r : relative_errors(rows, energy, x)) sse += r * r;
  return sse;
}

// Solves the normal equations over the terms in `use` (the others held at 0). Returns false when
// they are singular: a pivot is the squared distance of its column from the span of the columns
// before it; tiny against the column's own squared length, the column moves with the others in
// every point.
bool solve(const Normal& ne, const std::array<bool, kMaxTerms>& use, Vec* x) {
  std::array<int, kMaxTerms> idx{};
  int n = 0;
  for (int k = 0; k < kMaxTerms; ++k)
    if (use[k]) idx[n++] = k;
  double a[kMaxTerms][kMaxTerms + 1] = {};
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < n; ++c) a[r][c] = ne.g[idx[r]][idx[c]];
    a[r][n] = ne.b[idx[r]];
  }
  // Gauss-Jordan (symmetric positive semi-definite: no pivoting needed).
  double length[kMaxTerms] = {};
  for (int c = 0; c < n; ++c) length[c] = a[c][c];
  for (int c = 0; c < n; ++c) {
    if (!(length[c] > 0) || a[c][c] < 1e-10 * length[c]) return false;
    for (int r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (int k = c; k <= n; ++k) a[r][k] -= f * a[c][k];
    }
  }
  x->fill(0);
  for (int r = 0; r < n; ++r) (*x)[idx[r]] = a[r][n] / a[r][r];
  return true;
}

// Non-negative least squares over the terms in `allowed` (Lawson and Hanson's active set): terms
// enter in the order of their gradient and leave when their coefficient would turn negative. A
// term that cannot enter (it moves with those in, or would not rise) is barred until the solution
// moves. False when no positive combination reduces the error at all.
bool solve_nonnegative(const Normal& ne, const std::array<bool, kMaxTerms>& allowed, Vec* out) {
  Vec x{};
  std::array<bool, kMaxTerms> in{}, barred{};
  for (int outer = 0; outer < 8 * kMaxTerms; ++outer) {
    // The gradient of -sse/2: b - g x.
    int enter = -1;
    double best = 0;
    for (int k = 0; k < kMaxTerms; ++k) {
      if (!allowed[k] || in[k] || barred[k]) continue;
      double w = ne.b[k];
      for (int c = 0; c < kMaxTerms; ++c) w -= ne.g[k][c] * x[c];
      if (w > best && w > 1e-12 * std::sqrt(ne.g[k][k] * ne.n)) {
        best = w;
        enter = k;
      }
    }
    if (enter < 0) break;
    in[enter] = true;
    bool moved = false;
    for (int inner = 0; inner <= kMaxTerms; ++inner) {
      Vec z{};
      const bool solvable = solve(ne, in, &z);
      if (!solvable || (!moved && !(z[enter] > 0))) {  // it cannot enter: out until x moves
        in[enter] = false;
        barred[enter] = true;
        break;
      }
      bool positive = true;
      for (int k = 0; k < kMaxTerms; ++k) positive = positive && (!in[k] || z[k] > 0);
      if (positive) {
        x = z;
        moved = true;
        break;
      }
      // Step from x towards z as far as every coefficient stays >= 0; the one that reaches 0
      // first leaves (and any other that lands on 0 with it).
      double step = 1;
      int blocking = -1;
      for (int k = 0; k < kMaxTerms; ++k) {
        if (!in[k] || z[k] > 0) continue;
        const double t = x[k] / (x[k] - z[k]);
        if (t < step) {
          step = t;
          blocking = k;
        }
      }
      for (int k = 0; k < kMaxTerms; ++k) {
        if (in[k]) x[k] += step * (z[k] - x[k]);
      }
      if (blocking >= 0) x[blocking] = 0;
      for (int k = 0; k < kMaxTerms; ++k) {
        if (in[k] && x[k] <= 0) {
          x[k] = 0;
          in[k] = false;
        }
      }
      moved = true;
    }
    if (moved) barred.fill(false);
  }
  *out = x;
  return std::any_of(x.begin(), x.end(), [](double v) { return v > 0; });
}

Fit refused(Fit f, std::string why) {
  f.status = "refused";
  f.reason = std::move(why);
  return f;
}

}  // namespace

Fit fit(const std::vector<CalibrationPoint>& points, double f_ref_mhz) {
  Fit f;
  f.points = points;
  for (const auto& p : points) {
    const std::array<double, 10> figures{p.flops16,      p.flops8,  p.flops16_mma, p.flops8_mma,
                                         p.bytes,        p.seconds, p.energy_j,    p.instructions,
                                         p.sm_clock_mhz, p.l2_bytes};
    const bool finite = std::all_of(figures.begin(), figures.end(),
                                    [](double v) { return std::isfinite(v) && v >= 0; });
    if (!finite || p.energy_j <= 0 || !(p.active_sm_fraction >= 0 && p.active_sm_fraction <= 1)) {
      return refused(
          f, "calibration point '" + p.kernel + "' has a negative, zero or non-finite figure");
    }
    if (p.sm_clock_mhz <= 0) {
      return refused(f, "calibration point '" + p.kernel +
                            "' has no SM clock reading: the dynamic energies scale with it");
    }
  }
  if (!(f_ref_mhz > 0) || !std::isfinite(f_ref_mhz)) {
    // No maximum clock from the driver: the fastest calibration window's.
    f_ref_mhz = 0;
    for (const auto& p : points) f_ref_mhz = std::max(f_ref_mhz, p.sm_clock_mhz);
  }
  f.f_ref_mhz = f_ref_mhz;
  std::vector<double> energy;
  std::vector<Vec> rows;
  std::array<bool, kMaxTerms> present{};
  for (const auto& p : points) {
    energy.push_back(p.energy_j);
    rows.push_back(row_of(p, f_ref_mhz, kDefaultExponent, 0));
    for (int k = 0; k < kMaxTerms; ++k) present[k] = present[k] || rows.back()[k] > 0;
  }
  // Busy SM time is a term of its own only where the points ran on different fractions of the
  // SMs (the sleep kernel's none beside the others' all): else it is part of the constant power.
  present[kBusyTime] = std::any_of(points.begin(), points.end(), [&](const CalibrationPoint& p) {
    return p.active_sm_fraction != points.front().active_sm_fraction;
  });
  // Likewise DRAM's active power: a term where some points move DRAM bytes and others do not.
  present[kDramTime] =
      present[kDramTime] &&
      std::any_of(points.begin(), points.end(), [](const auto& p) { return p.bytes == 0; });
  if (!present[kTime]) return refused(f, "no calibration point has a duration");
  if (!present[kFlops16]) return refused(f, "no bf16/fp16 calibration point (a GEMM)");
  if (!present[kBytes]) return refused(f, "no calibration point moves DRAM bytes (a copy)");
  if (!present[kInstructions]) {
    return refused(f, "no calibration point issues instructions (the softmax or FFMA kernel)");
  }
  const int unknowns = static_cast<int>(std::count(present.begin(), present.end(), true));
  if (static_cast<int>(points.size()) <= unknowns) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%zu calibration points for %d unknowns: more are needed",
                  points.size(), unknowns);
    return refused(f, buf);
  }
  {
    Vec full{};
    const Normal ne = normal_of(rows, energy);
    if (!solve(ne, present, &full)) {
      // Name a term that cannot be told apart: the first whose removal makes the rest solvable.
      std::string which = "the terms";
      for (int k = 0; k < kMaxTerms; ++k) {
        auto fewer = present;
        if (!fewer[k]) continue;
        fewer[k] = false;
        Vec x{};
        if (solve(ne, fewer, &x)) {
          which = kTermNames[k];
          break;
        }
      }
      return refused(f, "degenerate calibration: " + which +
                            " move in proportion with the others in every point (runs at one "
                            "rate cannot separate energy per operation from constant power)");
    }
  }
  // The clock law: fitted where the windows with dynamic energy ran at clocks at least 10% apart
  // (one clock cannot tell how energy per operation moves with it), else the CMOS default.
  double f_lo = 0, f_hi = 0;
  for (const auto& p : points) {
    if (p.flops16 + p.flops8 + p.flops16_mma + p.flops8_mma + p.instructions <= 0) continue;
    f_lo = f_lo == 0 ? p.sm_clock_mhz : std::min(f_lo, p.sm_clock_mhz);
    f_hi = std::max(f_hi, p.sm_clock_mhz);
  }
  const bool fit_clock = f_lo > 0 && f_hi >= kClockSpreadForExponent * f_lo;
  std::vector<double> exponents{kDefaultExponent}, knees{0};
  if (fit_clock) {
    exponents.clear();
    for (int step = 0; step <= kExponentSteps; ++step)
      exponents.push_back(kExponentMax * step / kExponentSteps);
    for (int i = 1;; ++i) {
      const double k = f_lo + i * kKneeStepMhz;
      if (k * kClockSpreadForExponent > f_hi * (1 + 1e-12)) break;
      knees.push_back(k);
    }
  }
  // The least error over the clock laws tried; a floor or another exponent wins only by more than
  // rounding, so that data without a floor keep none.
  double best = std::numeric_limits<double>::infinity();
  Vec best_x{};
  for (const double knee : knees) {
    for (const double exponent : exponents) {
      std::vector<Vec> at;
      for (const auto& p : points) at.push_back(row_of(p, f_ref_mhz, exponent, knee));
      const Normal ne = normal_of(at, energy);
      Vec x{};
      if (!solve_nonnegative(ne, present, &x)) continue;
      const double sse = relative_sse(at, energy, x);
      if (sse < best * (1 - 1e-9) - 1e-18) {
        best = sse;
        best_x = x;
        f.clock_exponent = exponent;
        f.clock_knee_mhz = knee;
        rows = at;
      }
    }
  }
  if (!std::isfinite(best)) return refused(f, "no non-negative fit exists for these points");
  char basis[200];
  if (fit_clock && f.clock_knee_mhz > 0) {
    std::snprintf(basis, sizeof basis,
                  "fitted over calibration clocks %.0f-%.0f MHz, with a floor at %.0f MHz", f_lo,
                  f_hi, f.clock_knee_mhz);
  } else if (fit_clock) {
    std::snprintf(basis, sizeof basis, "fitted over calibration clocks %.0f-%.0f MHz, no floor",
                  f_lo, f_hi);
  } else {
    std::snprintf(basis, sizeof basis,
                  "2 (CMOS), not fitted: the calibration's clocks (%.0f-%.0f MHz) are less than "
                  "10%% apart",
                  f_lo, f_hi);
  }
  f.clock_exponent_basis = basis;
  // Columns in GFLOP, G instructions and GB: x is J per G (= nJ each = 1e3 pJ each).
  f.eps_flop16_pj = best_x[kFlops16] * 1e3;
  if (present[kFlops8]) f.eps_flop8_pj = best_x[kFlops8] * 1e3;
  if (present[kMma16]) f.eps_mma16_pj = best_x[kMma16] * 1e3;
  if (present[kMma8]) f.eps_mma8_pj = best_x[kMma8] * 1e3;
  if (present[kL2Bytes]) f.eps_l2_byte_pj = best_x[kL2Bytes] * 1e3;
  f.eps_inst_pj = best_x[kInstructions] * 1e3;
  f.eps_byte_pj = best_x[kBytes] * 1e3;
  f.busy_w = best_x[kBusyTime];
  f.dram_active_w = best_x[kDramTime];
  f.idle_w = best_x[kTime];
  f.residuals = relative_errors(rows, energy, best_x);
  for (const double r : f.residuals) f.residual_max = std::max(f.residual_max, std::fabs(r));
  f.residual_rms = std::sqrt(best / static_cast<double>(rows.size()));
  return f;
}

bool fit_again(const std::optional<Fit>& cached, bool counters_on) {
  return !cached || cached->status != "ok" || (counters_on && !cached->eps_l2_byte_pj);
}

double clock_scale(double sm_clock_mhz, double f_ref_mhz, double exponent, double knee_mhz) {
  if (!(sm_clock_mhz > 0) || !(f_ref_mhz > 0)) return 0;
  return std::pow(std::max(sm_clock_mhz, knee_mhz) / f_ref_mhz, exponent);
}

std::optional<Breakdown> predict(const Fit& f, const Launch& l, std::string* why_not) {
  auto none = [&](std::string why) -> std::optional<Breakdown> {
    if (why_not) *why_not = std::move(why);
    return std::nullopt;
  };
  if (f.status != "ok") return none("no energy model: " + f.reason);
  if (f.version < 2 || !(f.f_ref_mhz > 0)) {
    return none("the energy model is an older fa-bench's (no instruction term, no clock factor)");
  }
  // A version-2 fit has one energy per FLOP whatever the instruction.
  const std::optional<double> eps_flop =
      l.mma_sync && f.version >= 3
          ? (l.fp8 ? f.eps_mma8_pj : f.eps_mma16_pj)
          : (l.fp8 ? f.eps_flop8_pj : std::optional<double>(f.eps_flop16_pj));
  if (!eps_flop && l.flops > 0) {
    return none(std::string("the energy model has no energy per ") + (l.fp8 ? "fp8" : "bf16") +
                (l.mma_sync ? " mma.sync" : " wgmma") +
                " FLOP (no such kernel in its calibration)");
  }
  if (f.eps_l2_byte_pj.value_or(0) > 0 && !(l.l2_bytes > 0)) {
    return none("the energy model prices SM <-> L2 bytes, and none were counted for this launch");
  }
  if (!(l.sm_clock_mhz > 0)) {
    return none(
        "no SM clock reading in the energy window: the model's dynamic energies scale "
        "with it");
  }
  Breakdown b;
  b.flops = l.flops;
  b.bytes = l.bytes;
  b.l2_bytes = l.l2_bytes;
  b.flop_instruction = l.mma_sync && f.version >= 3 ? "mma.sync" : "wgmma";
  b.instructions = l.instructions;
  b.seconds = l.seconds;
  b.bytes_basis = l.bytes_basis;
  b.sm_clock_mhz = l.sm_clock_mhz;
  b.clock_scale = clock_scale(l.sm_clock_mhz, f.f_ref_mhz, f.clock_exponent, f.clock_knee_mhz);
  // pJ x count x 1e-12 = J; x 1e3 = mJ.
  b.flop_mj = b.clock_scale * eps_flop.value_or(0) * 1e-9 * l.flops;
  b.inst_mj = b.clock_scale * f.eps_inst_pj * 1e-9 * l.instructions;
  b.l2_mj = f.eps_l2_byte_pj.value_or(0) * 1e-9 * b.l2_bytes;
  b.byte_mj =
      f.eps_byte_pj * 1e-9 * l.bytes + (l.bytes > 0 ? f.dram_active_w * l.seconds * 1e3 : 0);
  b.idle_mj = (f.idle_w + f.busy_w) * l.seconds * 1e3;
  return b;
}

std::vector<double> detail::nonnegative_least_squares(const std::vector<std::vector<double>>& rows,
                                                      const std::vector<double>& target) {
  std::vector<Vec> padded;
  std::array<bool, kMaxTerms> allowed{};
  std::size_t columns = 0;
  for (const auto& r : rows) {
    Vec v{};
    for (std::size_t k = 0; k < r.size() && k < kMaxTerms; ++k) {
      v[k] = r[k];
      allowed[k] = true;
    }
    columns = std::max(columns, std::min<std::size_t>(r.size(), kMaxTerms));
    padded.push_back(v);
  }
  Vec x{};
  solve_nonnegative(normal_of(padded, target), allowed, &x);
  return std::vector<double>(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(columns));
}

}  // namespace fa::energy

#include "profiler/energy_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>

namespace fa::energy {
namespace {

constexpr int kMaxTerms = 7;
using Vec = std::array<double, kMaxTerms>;
enum Term { kFlops16, kFlops8, kMma16, kMma8, kInstructions, kBytes, kTime };
constexpr std::array<const char*, kMaxTerms> kTermNames{"bf16/fp16 wgmma FLOPs",
                                                        "fp8 wgmma FLOPs",
                                                        "bf16/fp16 mma.sync FLOPs",
                                                        "fp8 mma.sync FLOPs",
                                                        "warp instructions",
                                                        "DRAM bytes",
                                                        "time"};

// The clock exponents tried (0, 0.05, ..., 3), and the spread of the calibration's clocks that
// lets the fit choose among them: below it, the CMOS default 2.
constexpr int kExponentSteps = 60;
constexpr double kExponentMax = 3.0, kDefaultExponent = 2.0, kClockSpreadForExponent = 1.10;

// A term's column for one point, in units that keep the columns of a similar size: GFLOP,
// G instructions, GB, s; the dynamic terms at the point's clock, scaled to f_ref.
Vec row_of(const CalibrationPoint& p, double f_ref_mhz, double exponent) {
  const double s = clock_scale(p.sm_clock_mhz, f_ref_mhz, exponent);
  return {s * p.flops16 * 1e-9,
          s * p.flops8 * 1e-9,
          s * p.flops16_mma * 1e-9,
          s * p.flops8_mma * 1e-9,
          s * p.instructions * 1e-9,
          p.bytes * 1e-9,
          p.seconds};
}

// Least squares over the terms in `use` (the others held at 0), on relative errors: each point's
// row divided by its measured energy. Returns false when the normal equations are singular.
bool solve(const std::vector<Vec>& rows, const std::vector<double>& energy,
           const std::array<bool, kMaxTerms>& use, Vec* x) {
  std::array<int, kMaxTerms> idx{};
  int n = 0;
  for (int k = 0; k < kMaxTerms; ++k)
    if (use[k]) idx[n++] = k;
  double a[kMaxTerms][kMaxTerms + 1] = {};
  for (std::size_t i = 0; i < rows.size(); ++i) {
    for (int r = 0; r < n; ++r) {
      const double ur = rows[i][idx[r]] / energy[i];
      for (int c = 0; c < n; ++c) a[r][c] += ur * rows[i][idx[c]] / energy[i];
      a[r][n] += ur;  // right-hand side: energy / energy
    }
  }
  // Gauss-Jordan on the normal equations (symmetric positive semi-definite: no pivoting needed).
  // A pivot is the squared distance of its column from the span of the columns before it; tiny
  // against the column's own squared length, the column moves with the others in every point.
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

double relative_sse(const std::vector<Vec>& rows, const std::vector<double>& energy, const Vec& x) {
  double sse = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    double e = 0;
    for (int k = 0; k < kMaxTerms; ++k) e += rows[i][k] * x[k];
    sse += (e / energy[i] - 1) * (e / energy[i] - 1);
  }
  return sse;
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
    const std::array<double, 9> figures{p.flops16,    p.flops8,       p.flops16_mma,
                                        p.flops8_mma, p.bytes,        p.seconds,
                                        p.energy_j,   p.instructions, p.sm_clock_mhz};
    const bool finite = std::all_of(figures.begin(), figures.end(),
                                    [](double v) { return std::isfinite(v) && v >= 0; });
    if (!finite || p.energy_j <= 0) {
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
  std::vector<Vec> rows;
  std::vector<double> energy;
  std::array<bool, kMaxTerms> present{};
  for (const auto& p : points) {
    const Vec r = row_of(p, f_ref_mhz, kDefaultExponent);
    rows.push_back(r);
    energy.push_back(p.energy_j);
    for (int k = 0; k < kMaxTerms; ++k) present[k] = present[k] || r[k] > 0;
  }
  if (!present[kTime]) return refused(f, "no calibration point has a duration");
  if (!present[kFlops16]) return refused(f, "no bf16/fp16 calibration point (a GEMM)");
  if (!present[kBytes]) return refused(f, "no calibration point moves DRAM bytes (a copy)");
  if (!present[kInstructions]) {
    return refused(f, "no calibration point issues instructions (the FFMA kernel)");
  }
  const int unknowns = static_cast<int>(std::count(present.begin(), present.end(), true));
  if (static_cast<int>(points.size()) <= unknowns) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%zu calibration points for %d unknowns: more are needed",
                  points.size(), unknowns);
    return refused(f, buf);
  }
  Vec full{};
  if (!solve(rows, energy, present, &full)) {
    // Name a term that cannot be told apart: the first whose removal makes the rest solvable.
    std::string which = "the terms";
    for (int k = 0; k < kMaxTerms; ++k) {
      auto fewer = present;
      if (!fewer[k]) continue;
      fewer[k] = false;
      Vec x{};
      if (solve(rows, energy, fewer, &x)) {
        which = kTermNames[k];
        break;
      }
    }
    return refused(f, "degenerate calibration: " + which +
                          " move in proportion with the others in every point (runs at one rate "
                          "cannot separate energy per operation from constant power)");
  }
  // The clock exponent: fitted where the windows with dynamic energy ran at clocks at least 10%
  // apart (one clock cannot tell how energy per operation moves with it), else the CMOS default.
  double f_lo = 0, f_hi = 0;
  for (const auto& p : points) {
    if (p.flops16 + p.flops8 + p.flops16_mma + p.flops8_mma + p.instructions <= 0) continue;
    f_lo = f_lo == 0 ? p.sm_clock_mhz : std::min(f_lo, p.sm_clock_mhz);
    f_hi = std::max(f_hi, p.sm_clock_mhz);
  }
  const bool fit_exponent = f_lo > 0 && f_hi >= kClockSpreadForExponent * f_lo;
  char basis[160];
  if (fit_exponent) {
    std::snprintf(basis, sizeof basis, "fitted over calibration clocks %.0f-%.0f MHz", f_lo, f_hi);
  } else {
    std::snprintf(basis, sizeof basis,
                  "2 (CMOS), not fitted: the calibration's clocks (%.0f-%.0f MHz) are less than "
                  "10%% apart",
                  f_lo, f_hi);
  }
  f.clock_exponent_basis = basis;
  // Non-negativity: every subset of the present terms solved unconstrained; the best one whose
  // solution is >= 0 wins (seven terms: at most 127 small systems per exponent).
  double best = std::numeric_limits<double>::infinity();
  Vec best_x{};
  for (int step = 0; step <= kExponentSteps; ++step) {
    const double exponent = fit_exponent ? kExponentMax * step / kExponentSteps : kDefaultExponent;
    if (!fit_exponent && step > 0) break;
    std::vector<Vec> at;
    for (const auto& p : points) at.push_back(row_of(p, f_ref_mhz, exponent));
    for (int mask = 1; mask < 1 << kMaxTerms; ++mask) {
      std::array<bool, kMaxTerms> use{};
      bool valid = true;
      for (int k = 0; k < kMaxTerms; ++k) {
        use[k] = mask >> k & 1;
        if (use[k] && !present[k]) valid = false;
      }
      Vec x{};
      if (!valid || !solve(at, energy, use, &x)) continue;
      if (std::any_of(x.begin(), x.end(), [](double v) { return v < 0; })) continue;
      const double sse = relative_sse(at, energy, x);
      if (sse < best) {
        best = sse;
        best_x = x;
        f.clock_exponent = exponent;
        rows = at;
      }
    }
  }
  if (!std::isfinite(best)) return refused(f, "no non-negative fit exists for these points");
  // Columns in GFLOP, G instructions and GB: x is J per G (= nJ each = 1e3 pJ each).
  f.eps_flop16_pj = best_x[kFlops16] * 1e3;
  if (present[kFlops8]) f.eps_flop8_pj = best_x[kFlops8] * 1e3;
  if (present[kMma16]) f.eps_mma16_pj = best_x[kMma16] * 1e3;
  if (present[kMma8]) f.eps_mma8_pj = best_x[kMma8] * 1e3;
  f.eps_inst_pj = best_x[kInstructions] * 1e3;
  f.eps_byte_pj = best_x[kBytes] * 1e3;
  f.idle_w = best_x[kTime];
  double sq = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    double e = 0;
    for (int k = 0; k < kMaxTerms; ++k) e += rows[i][k] * best_x[k];
    const double r = e / energy[i] - 1;
    f.residuals.push_back(r);
    sq += r * r;
    f.residual_max = std::max(f.residual_max, std::fabs(r));
  }
  f.residual_rms = std::sqrt(sq / static_cast<double>(rows.size()));
  return f;
}

double clock_scale(double sm_clock_mhz, double f_ref_mhz, double exponent) {
  if (!(sm_clock_mhz > 0) || !(f_ref_mhz > 0)) return 0;
  return std::pow(sm_clock_mhz / f_ref_mhz, exponent);
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
  if (!(l.sm_clock_mhz > 0)) {
    return none(
        "no SM clock reading in the energy window: the model's dynamic energies scale "
        "with it");
  }
  Breakdown b;
  b.flops = l.flops;
  b.bytes = l.bytes;
  b.instructions = l.instructions;
  b.seconds = l.seconds;
  b.bytes_basis = l.bytes_basis;
  b.sm_clock_mhz = l.sm_clock_mhz;
  b.clock_scale = clock_scale(l.sm_clock_mhz, f.f_ref_mhz, f.clock_exponent);
  // pJ x count x 1e-12 = J; x 1e3 = mJ.
  b.flop_mj = b.clock_scale * eps_flop.value_or(0) * 1e-9 * l.flops;
  b.inst_mj = b.clock_scale * f.eps_inst_pj * 1e-9 * l.instructions;
  b.byte_mj = f.eps_byte_pj * 1e-9 * l.bytes;
  b.idle_mj = f.idle_w * l.seconds * 1e3;
  return b;
}

}  // namespace fa::energy

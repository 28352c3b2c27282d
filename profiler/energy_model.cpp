#include "profiler/energy_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>

namespace fa::energy {
namespace {

constexpr int kMaxTerms = 4;
using Vec = std::array<double, kMaxTerms>;
constexpr std::array<const char*, kMaxTerms> kTermNames{"bf16/fp16 FLOPs", "fp8 FLOPs",
                                                        "DRAM bytes", "time"};

// A term's column for one point, in units that keep the columns of a similar size: GFLOP, GB, s.
Vec row_of(const CalibrationPoint& p) {
  return {p.flops16 * 1e-9, p.flops8 * 1e-9, p.bytes * 1e-9, p.seconds};
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

Fit fit(const std::vector<CalibrationPoint>& points) {
  Fit f;
  f.points = points;
  std::vector<Vec> rows;
  std::vector<double> energy;
  std::array<bool, kMaxTerms> present{};
  for (const auto& p : points) {
    const Vec r = row_of(p);
    const bool finite = std::isfinite(p.energy_j) && std::all_of(r.begin(), r.end(), [](double v) {
                          return std::isfinite(v) && v >= 0;
                        });
    if (!finite || p.energy_j <= 0) {
      return refused(
          f, "calibration point '" + p.kernel + "' has a negative, zero or non-finite figure");
    }
    rows.push_back(r);
    energy.push_back(p.energy_j);
    for (int k = 0; k < kMaxTerms; ++k) present[k] = present[k] || r[k] > 0;
  }
  if (!present[3]) return refused(f, "no calibration point has a duration");
  if (!present[0]) return refused(f, "no bf16/fp16 calibration point (a GEMM)");
  if (!present[2]) return refused(f, "no calibration point moves DRAM bytes (a copy)");
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
  // Non-negativity: every subset of the present terms solved unconstrained; the best one whose
  // solution is >= 0 wins (four terms: at most 16 small systems).
  double best = std::numeric_limits<double>::infinity();
  Vec best_x{};
  for (int mask = 1; mask < 1 << kMaxTerms; ++mask) {
    std::array<bool, kMaxTerms> use{};
    bool valid = true;
    for (int k = 0; k < kMaxTerms; ++k) {
      use[k] = mask >> k & 1;
      if (use[k] && !present[k]) valid = false;
    }
    Vec x{};
    if (!valid || !solve(rows, energy, use, &x)) continue;
    if (std::any_of(x.begin(), x.end(), [](double v) { return v < 0; })) continue;
    const double sse = relative_sse(rows, energy, x);
    if (sse < best) {
      best = sse;
      best_x = x;
    }
  }
  if (!std::isfinite(best)) return refused(f, "no non-negative fit exists for these points");
  // Columns in GFLOP and GB: x is J per GFLOP (= nJ/FLOP = 1e3 pJ/FLOP) and J per GB.
  f.eps_flop16_pj = best_x[0] * 1e3;
  if (present[1]) f.eps_flop8_pj = best_x[1] * 1e3;
  f.eps_byte_pj = best_x[2] * 1e3;
  f.idle_w = best_x[3];
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

std::optional<Breakdown> predict(const Fit& f, bool fp8, double flops, double bytes, double seconds,
                                 const std::string& bytes_basis) {
  if (f.status != "ok") return std::nullopt;
  if (fp8 && !f.eps_flop8_pj) return std::nullopt;
  Breakdown b;
  b.flops = flops;
  b.bytes = bytes;
  b.seconds = seconds;
  b.bytes_basis = bytes_basis;
  const double eps_flop = fp8 ? *f.eps_flop8_pj : f.eps_flop16_pj;
  b.flop_mj = eps_flop * 1e-12 * flops * 1e3;
  b.byte_mj = f.eps_byte_pj * 1e-12 * bytes * 1e3;
  b.idle_mj = f.idle_w * seconds * 1e3;
  return b;
}

}  // namespace fa::energy

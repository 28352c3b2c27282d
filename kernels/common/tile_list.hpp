// The list of a kernel's compiled tile shapes, the default first (pure C++: the IO model and the
// registry read the lists without CUDA). kernels/common/launch.hpp dispatches run-time tiles to
// them.
#pragma once

#include <string>
#include <vector>

#include "kernels/variant.hpp"

namespace fa {

template <int D_, int BR_, int BC_>
struct TileShape {
  static constexpr int D = D_;    // head dim
  static constexpr int BR = BR_;  // query rows per thread block
  static constexpr int BC = BC_;  // keys per inner step
};

template <typename... Shapes>
struct TileList {
  // The tiles compiled for head dim d, in list order (the first is the default).
  static std::vector<Tiles> options(int d) {
    std::vector<Tiles> out;
    ((d == Shapes::D ? out.push_back(Tiles{Shapes::BR, Shapes::BC}) : void()), ...);
    return out;
  }
  static bool contains(int d, const Tiles& t) {
    return ((d == Shapes::D && t == Tiles{Shapes::BR, Shapes::BC}) || ...);
  }
  // Calls f(Shape{}) for the listed shape matching (d, t) and returns its result; a one-line
  // reason when none matches.
  template <typename F>
  static std::string dispatch(const char* variant, int d, const Tiles& t, F&& f) {
    std::string out;
    const bool found =
        ((d == Shapes::D && t == Tiles{Shapes::BR, Shapes::BC} ? (out = f(Shapes{}), true)
                                                               : false) ||
         ...);
    if (found) return out;
    return std::string(variant) + ": no kernel compiled for d=" + std::to_string(d) + " tiles " +
           std::to_string(t.block_q) + "x" + std::to_string(t.block_kv);
  }
};

}  // namespace fa

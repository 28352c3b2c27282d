#include "kernels/problem.hpp"

#include <cmath>

namespace fa {

std::string_view to_string(DType t) {
  return t == DType::bf16 ? "bf16" : "fp16";
}

bool parse_dtype(std::string_view s, DType* out) {
  if (s == "bf16") {
    *out = DType::bf16;
    return true;
  }
  if (s == "fp16") {
    *out = DType::fp16;
    return true;
  }
  return false;
}

double Shape::scale() const {
  return 1.0 / std::sqrt(static_cast<double>(d));
}

}  // namespace fa

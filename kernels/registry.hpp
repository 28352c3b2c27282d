// The catalogue of attention variants: it only lists them (kernels/registry.cpp). What a variant
// is and how it is launched is the vocabulary's (kernels/variant.hpp); listing them links the
// kernels, so the record, the IO model, verification and the gate do not include this file.
#pragma once

#include <string>
#include <vector>

#include "kernels/variant.hpp"

namespace fa {

const std::vector<VariantInfo>& variant_registry();
const VariantInfo* find_variant(const std::string& name);

}  // namespace fa

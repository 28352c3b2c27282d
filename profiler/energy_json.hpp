// The energy figures as JSON: the fitted model (the ceilings cache and the result file's ceilings)
// and a row's measurement with the model's breakdown (the result file's rows). The readers check
// every figure and throw std::invalid_argument naming the key and what is accepted.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "profiler/energy.hpp"
#include "profiler/energy_model.hpp"

namespace fa::energy {

// A fit read from a file without clock_exponent is of version 2 (an fa-bench before the mma.sync
// terms and the fitted exponent), without eps_inst_pj of version 1 (before the instruction term
// and the clock factor: read for the record, never used to predict).
nlohmann::json energy_fit_to_json(const Fit& f);
Fit energy_fit_from_json(const nlohmann::json& j);

// A row's "energy" object: the measurement, and the model's breakdown beside it when there is one,
// or the one line saying why the row has none (`model_reason`, "" when not said).
nlohmann::json row_energy_to_json(const Measurement& m, const std::optional<Breakdown>& model,
                                  const std::string& model_reason = "");
void row_energy_from_json(const nlohmann::json& j, Measurement* m, std::optional<Breakdown>* model,
                          std::string* model_reason = nullptr);

}  // namespace fa::energy

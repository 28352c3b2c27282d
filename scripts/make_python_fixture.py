"""Write a schema-valid fa-bench/1 document with the Python writer (reports/schema.py).

    python3 scripts/make_python_fixture.py OUT.json

The C++ reader test reads it. The output is deterministic (fixed timestamp and revision).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

H200 = {
    "index": 0,
    "name": "NVIDIA H200",
    "uuid": "GPU-00000000-0000-0000-0000-000000000000",
    "pci_bus_id": "00000000:18:00.0",
    "compute_capability": "9.0",
    "sm_count": 132,
    "memory_bytes": 150754820096,
    "l2_bytes": 62914560,
    "smem_per_sm_bytes": 233472,
    "smem_per_block_optin_bytes": 232448,
    "memory_bus_bits": 6144,
    "sm_clock_max_mhz": 1980,
    "mem_clock_max_mhz": 3201,
    "driver_version": "580.159.04",
    "cuda_driver_version": 13000,
    "cuda_runtime_version": 13000,
}
H200_CEILINGS = {
    "source": "datasheet (H200)",
    "dram_bytes_per_s": 4.8e12,
    "tensor_flops_per_s": {"bf16": 989.4e12, "fp16": 989.4e12},
}


def build() -> dict:
    from reports import schema

    B, H, N, d, causal, dtype = 2, 3, 17, 64, True, "bf16"
    elem = 2
    qkvo = B * H * N * d * elem
    lse = B * H * N * 4
    convention = 4.0 * B * H * N * N * d * 0.5
    doc = schema.new_document(
        "fa-bench --B 2 --H 3 --N 17 --d 64 --causal --dtype bf16 --variants fa2,standard,torch_sdpa",
        device=H200,
        settings={"seed": 1234, "warmup": 3, "repetitions": 5, "min_time_s": 0.0,
                  "l2": "cold", "model_only": False, "inputs": "normal",
                  "timing_engine": "python-fixture"},
        ceilings=H200_CEILINGS,
    )
    doc["created_utc"] = "2026-11-21T10:00:00Z"
    doc["tool"]["git_revision"] = "unknown"

    # fa2 at N=17 with block_q=128, block_kv=64: one tile each way, whole tiles computed.
    fa2_model = {
        "flops_matrix": 4.0 * B * H * 128 * 64 * d,
        "flops_convention": convention,
        "flops_nonmatrix": 5.0 * B * H * N * N,
        "bytes_read": 3.0 * qkvo,
        "bytes_written": qkvo + lse,
        "bytes_compulsory": 4.0 * qkvo + lse,
        "bytes_asymptotic": B * H * N * N * d * d / (233472 / elem) * elem,
        "terms": [
            {"name": "Q read (once)", "write": False, "bytes": float(qkvo)},
            {"name": "K, V read (once per query block)", "write": False, "bytes": 2.0 * qkvo},
            {"name": "O write", "write": True, "bytes": float(qkvo)},
            {"name": "lse write", "write": True, "bytes": float(lse)},
        ],
    }
    samples = [0.0112, 0.0105, 0.0108, 0.0109, 0.0121]
    median = schema.summarize(samples)["median_ms"]
    fa2 = schema.make_result(
        "fa2",
        algorithm="fa2",
        status="ok",
        tiles={"block_q": 128, "block_kv": 64},
        verification={"passed": True, "all_finite": True, "nonfinite_count": 0,
                      "max_abs_error": 0.00390625, "rmse": 0.000412,
                      "baseline_max_abs_error": 0.0078125, "tolerance": 0.016625,
                      "rows_checked": 17, "heads_checked": 4},
        samples_ms=samples,
        model=fa2_model,
        derived=schema.derive(fa2_model, median, H200_CEILINGS["tensor_flops_per_s"][dtype],
                              H200_CEILINGS["dram_bytes_per_s"]),
        l2="cold",
        warmup=3,
    )
    standard_model = {
        "flops_matrix": 4.0 * B * H * N * N * d,
        "flops_convention": convention,
        "flops_nonmatrix": 5.0 * B * H * N * N,
        "bytes_read": 3.0 * qkvo + 2.0 * B * H * N * N * elem,
        "bytes_written": qkvo + 2.0 * B * H * N * N * elem,
        "bytes_compulsory": 4.0 * qkvo,
        "bytes_asymptotic": B * H * (N * N + N * d) * elem,
        "terms": [],
    }
    standard = schema.make_result(
        "standard",
        algorithm="standard",
        status="failed",
        reason="max_abs_error 0.5 > tolerance 0.016625",
        verification={"passed": False, "all_finite": True, "nonfinite_count": 0,
                      "max_abs_error": 0.5, "rmse": 0.01,
                      "baseline_max_abs_error": 0.0078125, "tolerance": 0.016625,
                      "rows_checked": 17, "heads_checked": 4},
        model=standard_model,
    )
    peer = schema.make_result(
        "torch_sdpa",
        algorithm="fa2",
        status="skipped",
        reason="PyTorch is not installed",
        peer=True,
        model={**fa2_model, "terms": []},
    )
    doc["configs"].append(
        schema.make_config(B=B, H=H, N=N, d=d, causal=causal, dtype=dtype, seed=1234,
                           results=[fa2, standard, peer])
    )
    return doc


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} OUT.json", file=sys.stderr)
        return 2
    sys.path.insert(0, str(REPO))
    from reports import schema

    schema.write_results(build(), argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

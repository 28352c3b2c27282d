#!/usr/bin/env bash
# Issue 15's open fa2 bar (fa2 >= torch-flash at N=4096): where fa2's loop loses to
# FlashAttention-2's own kernel, from Nsight Compute, kernel against kernel, on one H200 call.
#   scripts/fa2_profile.sh OUTDIR          (about 2-3 minutes after the build)
#   FA_PREBUILT=DIR  profile DIR/fa-bench instead of building; FA2_PROFILE_D  head dims (64 128)
# For d in FA2_PROFILE_D (default 64 128), N=4096, non-causal, bf16, B=4, H=2048/d:
#   1. ncu on fa2's forward kernel (fa2_forward_kernel: the verification launch of
#      fa-bench --variants fa2 --warmup 0 --repetitions 1 --no-counters --datasheet-roofs: the
#      roofline's ceiling kernels are not run under ncu);
#   2. ncu on PyTorch's flash backend (scaled_dot_product_attention under
#      sdpa_kernel(FLASH_ATTENTION), the kernel whose name holds "flash_fwd"), same shape;
#   each with ncu's sections LaunchStats, Occupancy, SpeedOfLight, ComputeWorkloadAnalysis,
#   InstructionStats, WarpStateStats, MemoryWorkloadAnalysis_Tables and SourceCounters, and the
#   stall reasons (smsp__average_warps_issue_stalled_*_per_issue_active)
#   (--cache-control all: L2 flushed first; --clock-control base), one launch each;
#   3. prints every metric both reports carry, fa2 beside torch-flash with their ratio, and the
#      rows that differ by more than 10% first (OUTDIR/compare-d<d>.txt; the raw CSVs beside).
# It does not time anything: ncu replays the kernel. The times to compare are fa-bench's and
# scripts/peers_torch.py's (docs/perf-notes.md, eighth step).
# Exit codes: 0 both profiled for every d; 1 the build failed; 3 a profile failed (its log).
set -uo pipefail
# shellcheck source=scripts/fa3_check.sh
source "$(dirname "$0")/fa3_check.sh"  # fa3_build (cd's to the repository root); sets bin
out=${1:?usage: scripts/fa2_profile.sh OUTDIR}
mkdir -p "$out"
if [ -n "${FA_PREBUILT:-}" ]; then  # FA_PREBUILT=DIR: DIR/fa-bench (scripts/fa2_tune.sh's build)
  bin=$FA_PREBUILT/fa-bench
else
  FA3_BUILD_TARGETS=fa-bench fa3_build "$out" || exit 1
fi
sections=(--section LaunchStats --section Occupancy --section SpeedOfLight
  --section ComputeWorkloadAnalysis --section InstructionStats --section WarpStateStats
  --section MemoryWorkloadAnalysis_Tables --section SourceCounters
  # the stall reasons (cycles per issued instruction, by reason): the details page of
  # WarpStateStats carries only their total
  --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio')
ncu_args=(--cache-control all --clock-control base --launch-count 1 --csv --page details
  "${sections[@]}")
failed=0
for d in ${FA2_PROFILE_D:-64 128}; do
  heads=$((2048 / d))
  # shellcheck disable=SC2154  # bin: set by fa3_build
  if ! ncu --kernel-name fa2_forward_kernel "${ncu_args[@]}" \
    "$bin" --N 4096 --d "$d" --batch 4 --heads "$heads" --variants fa2 --warmup 0 \
    --repetitions 1 --no-counters --datasheet-roofs >"$out/fa2-d$d.csv" 2>"$out/fa2-d$d.log"; then
    echo "fa2_profile: ncu on fa2 failed at d=$d: $out/fa2-d$d.log" >&2
    failed=1
  fi
  if ! ncu --kernel-name regex:flash_fwd "${ncu_args[@]}" python3 -c "
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
q, k, v = (torch.randn(4, $heads, 4096, $d, device='cuda', dtype=torch.bfloat16) for _ in range(3))
with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
    torch.nn.functional.scaled_dot_product_attention(q, k, v)
torch.cuda.synchronize()
" >"$out/torch-d$d.csv" 2>"$out/torch-d$d.log"; then
    echo "fa2_profile: ncu on torch-flash failed at d=$d: $out/torch-d$d.log" >&2
    failed=1
  fi
  python3 scripts/ncu_side_by_side.py "$out/fa2-d$d.csv" "$out/torch-d$d.csv" \
    --names fa2 torch-flash >"$out/compare-d$d.txt" 2>&1 || failed=1
  echo "== d=$d (N=4096, non-causal): fa2 against torch-flash, ncu =="
  head -60 "$out/compare-d$d.txt"
done
[ "$failed" -eq 0 ] || exit 3

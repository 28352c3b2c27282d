#!/usr/bin/env bash
# A sweep split over a Slurm job array: each task runs one shard (fa-bench reads
# SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT, and MIN/STEP when the array has them), then a
# dependent job merges the shards and gates the result. docs/multi-gpu.md.
#   sbatch docs/examples/slurm-array.sh
#SBATCH --job-name=fa-bench-sweep
#SBATCH --array=0-7
#SBATCH --gres=gpu:1
#SBATCH --time=00:30:00
#SBATCH --output=results/sweep-%A/shard-%a.log
set -euo pipefail
out=results/sweep-${SLURM_ARRAY_JOB_ID}
mkdir -p "$out"
# Every task runs the same command: the shard comes from the array variables (one line says so).
build/bin/fa-bench --N 1024:16384 --d 64,128 --causal both --variants all \
  --json "$out/shard-${SLURM_ARRAY_TASK_ID}.json" || [ $? -eq 1 ]  # 1: a row failed; it says why

# The last task to start submits the fan-in: merge every shard (a missing one is named), then gate
# against the committed baseline.
if [ "${SLURM_ARRAY_TASK_ID}" = "${SLURM_ARRAY_TASK_MAX:-7}" ]; then
  sbatch --dependency=afterany:"${SLURM_ARRAY_JOB_ID}" --gres=none --time=00:05:00 \
    --output="$out/merge.log" --wrap "build/bin/fa-bench merge $out/shard-*.json -o $out/sweep.json && \
      build/bin/fa-bench gate --baseline baselines/h200.json --current $out/sweep.json --markdown $out/gate.md"
fi

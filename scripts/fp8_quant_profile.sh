#!/usr/bin/env bash
# The FP8 quantisation pass under Nsight Compute: its time, DRAM bytes and achieved bandwidth per
# launch, beside fa-bench's own copy-roof kernel (copy_unrolled_kernel, profiler/ceilings.cu) in
# the same process, profiled the same way. For each BIN:
#   ncu --kernel-name "regex:quantise|copy_unrolled" --metrics gpu__time_duration.sum,dram__bytes_read.sum,
#       dram__bytes_write.sum,sm__warps_active.avg.pct_of_peak_sustained_active
#       BIN --N $QP_N --d 64,128 --variants fp8 --no-counters --repetitions 1 --warmup 0 --remeasure
# (--remeasure: the copy kernel runs even where the roofs are cached, as after a table run)
# (ncu flushes the caches before each profiled launch: cold-L2 figures). Never timed figures:
# fa-bench's own rows time the variant with the quantisation (the default) or without it
# (--fp8-prequantized); their difference is the timed cost of the pass.
#   scripts/fp8_quant_profile.sh OUTDIR LABEL=BIN [LABEL=BIN ...]
# QP_N: the N list (default 4096). Prints, per profiled launch in launch order: label, ncu's
# launch ID, kernel, grid, µs, MB, GB/s and warps active. The persistent pass has the same grid at
# every N (B*H*N is fixed), so the launch order tells the rows apart: fa-bench runs d=64 first,
# then d=128, each N in QP_N's order. ncu locks the clocks to base by default: the µs are
# base-clock figures for the pass and the copy kernel alike.
set -uo pipefail
out=${1:?usage: scripts/fp8_quant_profile.sh OUTDIR LABEL=BIN ...}
shift
mkdir -p "$out"
N=${QP_N:-4096}
rc=0
for spec in "$@"; do
  label=${spec%%=*} bin=${spec#*=}
  ncu --kernel-name "regex:quantise|copy_unrolled" --csv --page raw \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size \
    "$bin" --N "$N" --d 64,128 --variants fp8 --no-counters --repetitions 1 --warmup 0 --remeasure \
    >"$out/$label.csv" 2>"$out/$label.err" || rc=1
  python3 - "$label" "$out/$label.csv" <<'PY'
import csv, sys
label, path = sys.argv[1:3]
lines = [l for l in open(path) if l.startswith('"')]
rows = list(csv.DictReader(lines))
units = rows[0] if rows else {}
for r in rows[1:]:
    def f(k):
        v = r.get(k, "").replace(",", "")
        try:
            return float(v)
        except ValueError:
            return float("nan")
    t_ns = f("gpu__time_duration.sum") * {"nsecond": 1, "usecond": 1e3, "msecond": 1e6, "second": 1e9}.get(
        units.get("gpu__time_duration.sum", "nsecond"), 1)
    scale = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}
    rb = f("dram__bytes_read.sum") * scale.get(units.get("dram__bytes_read.sum", "byte"), 1)
    wb = f("dram__bytes_write.sum") * scale.get(units.get("dram__bytes_write.sum", "byte"), 1)
    name = r.get("Kernel Name", "")[:60]
    print(f"{label:6s} #{r.get('ID', '?'):>3s} {name:60s} grid {r.get('launch__grid_size','')}: {t_ns/1e3:8.1f} us "
          f"{(rb+wb)/1e6:8.1f} MB  {(rb+wb)/t_ns:7.1f} GB/s  warps active "
          f"{r.get('sm__warps_active.avg.pct_of_peak_sustained_active','')}%")
PY
done
exit $rc

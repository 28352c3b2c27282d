#!/usr/bin/env python3
"""fa3's alternatives side by side (scripts/fa3_tune.sh): TFLOP/s and the ratio to cudnn of
every fa3 row (schedule @ tile) per shape, then, per (d, causal), the alternative with the best
geometric-mean ratio to cudnn over the run's N, i.e. what fa3's defaults should be.

    scripts/fa3_tune_table.py RESULT.json

Setting the defaults from the "winner" lines: the grid and epilogue of a schedule go into
fa3::default_plan (kernels/fa3/fa3_launch.hpp, one line per (d, causal, rows of the tile)); a
winning tile becomes the first of its head dim in Fa3Tiles (kernels/fa3/fa3.cu), or, for some
shapes only, fa3_shape_default_tiles' choice. "full" is the current default.

Exit: 0 a table was printed; 1 the file is missing or holds no fa3 row; 3 a row failed
(status not ok, or verification failed), after printing the table.
"""

import json
import math
import sys

# schedule -> (grid, epilogue), as fa3::plan_of pins them (kernels/fa3/fa3_launch.hpp)
PLANS = {
    "persistent": ("Grid::persistent", "Epilogue::registers"),
    "tma-store": ("Grid::tiles", "Epilogue::tma_store"),
    "persistent-tma-store": ("Grid::persistent", "Epilogue::tma_store"),
    "dynamic": ("Grid::dynamic", "Epilogue::registers"),
    "dynamic-tma-store": ("Grid::dynamic", "Epilogue::tma_store"),
}


def label(r):
    kc = r.get("kernel_config") or {}
    sch = (r.get("options") or {}).get("schedule", "full")
    return f"{sch}@{kc.get('block_q')}x{kc.get('block_kv')}"


def collect(doc):
    """{(d, causal, N): {label: (tflops or None, status, verified)}} for fa3 and cudnn rows."""
    rows = {}
    for c in doc.get("configs", []):
        key = (c["d"], bool(c["causal"]), c["N"])
        for r in c.get("results", []):
            if r.get("variant") not in ("fa3", "cudnn") or r.get("direction", "forward") != "forward":
                continue
            lab = label(r) if r["variant"] == "fa3" else "cudnn"
            t = (r.get("derived") or {}).get("tflops_convention")
            ok = r.get("status") == "ok"
            verified = (r.get("verification") or {}).get("passed")
            rows.setdefault(key, {})[lab] = (t if ok and t else None, r.get("status"), verified)
    return rows


def winners(rows):
    """{(d, causal): [(label, geomean ratio, shapes)]}, best first; an alternative counts only if it
    ran (ok, verified) at every N of its (d, causal) that cudnn ran."""
    out = {}
    for d, causal in sorted({(k[0], k[1]) for k in rows}):
        keys = [k for k in rows if k[0] == d and k[1] == causal and rows[k].get("cudnn", (None,))[0]]
        labels = {lab for k in keys for lab in rows[k] if lab != "cudnn"}
        scored = []
        for lab in labels:
            ratios = []
            for k in keys:
                t, _, verified = rows[k].get(lab, (None, None, None))
                if t is None or verified is False:
                    ratios = None
                    break
                ratios.append(t / rows[k]["cudnn"][0])
            if ratios:
                scored.append((lab, math.exp(sum(map(math.log, ratios)) / len(ratios)), len(ratios)))
        out[(d, causal)] = sorted(scored, key=lambda x: -x[1])
    return out


def main(argv):
    if len(argv) != 2:
        print("usage: scripts/fa3_tune_table.py RESULT.json", file=sys.stderr)
        return 1
    try:
        with open(argv[1]) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"fa3_tune_table: error: {argv[1]}: {e}", file=sys.stderr)
        return 1
    rows = collect(doc)
    labels = sorted({lab for v in rows.values() for lab in v if lab != "cudnn"})
    if not labels:
        print(f"fa3_tune_table: error: no fa3 row in {argv[1]}", file=sys.stderr)
        return 1
    print("== fa3 alternatives: TFLOP/s (ratio to cudnn, same run); schedule@BrxBc ==")
    for d, causal in sorted({(k[0], k[1]) for k in rows}):
        keys = sorted(k for k in rows if k[0] == d and k[1] == causal)
        here = [lab for lab in labels if any(lab in rows[k] for k in keys)]
        print(f"\nd={d} {'causal' if causal else 'non-causal'}")
        print(f"{'row':>30} " + " ".join(f"{'N=' + str(k[2]):>15}" for k in keys))
        for lab in here + ["cudnn"]:
            cells = []
            for k in keys:
                t, status, verified = rows[k].get(lab, (None, "-", None))
                cu = rows[k].get("cudnn", (None,))[0]
                if t is None:
                    cells.append(f"{(status or '-')[:15]:>15}")
                elif lab == "cudnn" or not cu:
                    cells.append(f"{t:15.1f}")
                else:
                    flag = "!" if verified is False else ""
                    cells.append(f"{t:7.1f} ({t / cu:4.2f}){flag}")
            print(f"{lab:>30} " + " ".join(cells))
    print("\n== winners per (d, causal): geometric mean of the ratio to cudnn over N ==")
    for (d, causal), scored in winners(rows).items():
        what = f"d={d} {'causal' if causal else 'non-causal'}"
        if not scored:
            print(f"winner {what}: none (no fa3 row ran at every N)")
            continue
        best, g, n = scored[0]
        current = next((s for s in scored if s[0].startswith("full@")), None)
        sch, tile = best.split("@")
        plan = PLANS.get(sch)
        br = tile.split("x")[0]
        change = (f"default_plan({d}, {str(causal).lower()}, {br}) -> {{{plan[0]}, {plan[1]}}}"
                  if plan else "default_plan unchanged")
        print(f"winner {what}: {best} {g:.3f}x cudnn over {n} N"
              + (f" (full@default: {current[0]} {current[1]:.3f}x)" if current else "")
              + f"; {change}; tile {tile}")
        for lab, gm, _ in scored[1:4]:
            print(f"    next: {lab} {gm:.3f}x")
    bad = [(k, lab) for k, v in rows.items() for lab, (t, s, ver) in v.items()
           if s not in ("ok", "unsupported") or ver is False]
    print(f"\nrows not ok (other than unsupported) or failing verification: {len(bad)}"
          + ("".join(f"\n    d={k[0]} causal={int(k[1])} N={k[2]} {lab}" for k, lab in bad[:12])))
    return 3 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

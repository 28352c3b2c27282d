#!/usr/bin/env python3
"""PyTorch's attention backends as peers, written as fa-bench result rows.

    python3 scripts/peers_torch.py --N 4096 --d 64,128 --causal both --json torch.json
    python3 scripts/peers_torch.py --N 4096 --d 128 --direction both --json torch.json
    python3 scripts/peers_torch.py --N 1 --kv-len 4096,16384 --d 128 --heads 32 --heads-kv 8 \
        --backends flash,cudnn --json torch-decode.json

For every configuration it runs ``torch.nn.functional.scaled_dot_product_attention`` once per
backend (flash, efficient, cudnn, math; rows ``torch-flash`` ... ``torch-math``, all peers) on
fa-bench's conventions: Q, K, V of shape [B, H, N, d] (BHSD, contiguous), N(0, 1) inputs,
scale 1/sqrt(d), causal = key j > query i masked, B = 16384/N and H = 2048/d unless given.
Grouped-query heads and K/V lengths apart (``--heads-kv``, ``--kv-len``, forward rows): K and V
of shape [B, H_kv, N_kv, d], ``enable_gqa`` where H_kv < H, causal aligned bottom-right
(``torch.nn.attention.bias.causal_lower_right`` where N_kv != N: key j > i + N_kv - N masked),
B = 16384/N_kv unless given; a backend that cannot run the shape says why in its row.

Each backend is checked before it is timed: sampled rows of two heads against an fp64
reference, with fa-bench's rule (max error <= 2 x a plain same-precision implementation +
1e-3; docs/accuracy.md). Torch allocates O itself, so it cannot be poisoned beforehand; every
element is checked to be finite instead. Timing: CUDA events around each call, warm-up first,
the L2 flushed (a 2 x L2 buffer written) before every sample, every sample stored.

Backward rows (``--direction bwd|both``; default fwd): the forward runs once, untimed, with
Q, K, V requiring gradients; each timed sample is ``torch.autograd.grad(O, (Q, K, V), dO)`` on
the kept graph (dO N(0, 1)), so the time is the backend's backward kernels alone (dQ, dK, dV,
with their pre- and post-passes), as fa-bench's backward rows time theirs. Checked first: dQ on
sampled query rows and dK, dV on sampled key rows of two heads against fp64 (the full
backward, computed in query chunks), with the rule max error <= 2 x the error of a plain
same-precision backward on the same rows (P and dS rounded to the input type, fp32 products) +
1e-3 x the gradient's largest |value|. FLOPs: 2.5 x the forward's (the field's convention).

The IO model is fa-bench's own: the script asks ``fa-bench --model-only`` (``--fa-bench``,
default build/bin/fa-bench) for the cudnn row's model (flash backends: Q-outer fused, 128x128
tiles assumed) and the standard row's (math backend). Without fa-bench the model is left 0.

Exit status: 0 all rows ok, 1 a backend failed its check, 2 bad input or no PyTorch/GPU.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from reports.schema import (  # noqa: E402
    CURRENT_VERSION,
    flops_convention,
    make_config,
    make_result,
    new_document,
    write_results,
)

BACKENDS = (  # row name, SDPBackend member, fa-bench IO pattern whose model applies
    ("torch-flash", "FLASH_ATTENTION", "fa2"),
    ("torch-efficient", "EFFICIENT_ATTENTION", "fa2"),
    ("torch-cudnn", "CUDNN_ATTENTION", "fa2"),
    ("torch-math", "MATH", "standard"),
)
CHECKED_ROWS = 64


def bad(message: str) -> None:
    """Bad input: one line on stderr, exit status 2."""
    print(message, file=sys.stderr)
    raise SystemExit(2)


def int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",")]
    except ValueError:
        bad(f"error: {flag}: expected a comma-separated list of integers, got {text!r}")
    if not values or any(v <= 0 for v in values):
        bad(f"error: {flag}: values must be positive, got {text!r}")
    return values


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--N", default="4096", help="sequence lengths, comma-separated (default 4096)")
    p.add_argument("--d", default="64", help="head dims, comma-separated: 64, 128, 256 (default 64)")
    p.add_argument("--causal", default="off", choices=("off", "on", "both"))
    p.add_argument("--dtype", default="bf16", choices=("bf16", "fp16"))
    p.add_argument("--direction", default="fwd", choices=("fwd", "bwd", "both"),
                   help="forward rows, backward rows (dQ, dK, dV from dO), or both (default fwd)")
    p.add_argument("--batch", type=int, help="batch (default 16384/N)")
    p.add_argument("--heads", type=int, help="heads (default 2048/d)")
    p.add_argument("--heads-kv", dest="heads_kv", type=int,
                   help="K/V heads, a divisor of --heads (grouped-query attention; default --heads)")
    p.add_argument("--kv-len", dest="kv_len", help="K/V lengths, comma-separated, each against every N")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--repetitions", type=int, default=50)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--backends", default="flash,efficient,cudnn,math")
    p.add_argument("--fa-bench", dest="fa_bench", default="build/bin/fa-bench",
                   help="fa-bench binary, for the IO model (default build/bin/fa-bench)")
    p.add_argument("--json", required=True, help="result file to write (fa-bench schema)")
    a = p.parse_args(argv)
    a.N = int_list(a.N, "--N")
    a.d = int_list(a.d, "--d")
    if any(d not in (64, 128, 256) for d in a.d):
        bad(f"error: --d: accepted 64, 128 or 256, got {a.d}")
    a.kv_len = int_list(a.kv_len, "--kv-len") if a.kv_len else []
    if a.heads_kv is not None:
        if a.heads_kv <= 0:
            bad(f"error: --heads-kv: {a.heads_kv} (accepted: a positive integer)")
        for d in a.d:
            H = a.heads or max(1, 2048 // d)
            if H % a.heads_kv:
                bad(f"error: --heads-kv: {a.heads_kv} does not divide the {H} query heads "
                    "(accepted: a divisor of --heads)")
    if a.causal != "off" and any(kv < n for kv in a.kv_len for n in a.N):
        bad("error: --kv-len: shorter than --N with --causal (aligned bottom-right, early query rows "
            "would see no key; accepted: K/V lengths >= N when causal)")
    if (a.heads_kv or a.kv_len) and a.direction != "fwd":
        bad("error: --direction: backward rows are square multi-head attention only here "
            "(accepted: fwd with --heads-kv or --kv-len)")
    names = a.backends.split(",")
    known = [b[0].removeprefix("torch-") for b in BACKENDS]
    if any(n not in known for n in names):
        bad(f"error: --backends: accepted {','.join(known)}, got {a.backends!r}")
    a.backends = [b for b in BACKENDS if b[0].removeprefix("torch-") in names]
    if a.warmup < 0 or a.repetitions < 1:
        bad("error: --warmup >= 0 and --repetitions >= 1 are required")
    return a


def fa_bench_models(binary: str, N: int, d: int, B: int, H: int, causal: bool, dtype: str,
                    direction: str = "forward", H_kv: int | None = None,
                    N_kv: int | None = None) -> dict:
    """algorithm -> the model fa-bench computes (cudnn row for fa2, standard row) in `direction`
    ("forward" or "backward"); {} if absent."""
    if not Path(binary).is_file():
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "model.json"
        cmd = [binary, "--model-only", "--N", str(N), "--d", str(d), "--batch", str(B), "--heads", str(H),
               "--causal", "on" if causal else "off", "--dtype", dtype, "--variants", "standard,cudnn",
               "--direction", "bwd" if direction == "backward" else "fwd", "--json", str(out)]
        if H_kv is not None and H_kv != H:
            cmd += ["--heads-kv", str(H_kv)]
        if N_kv is not None and N_kv != N:
            cmd += ["--kv-len", str(N_kv)]
        if subprocess.run(cmd, capture_output=True).returncode != 0 or not out.exists():
            return {}
        rows = json.loads(out.read_text())["configs"][0]["results"]
    # Rows fa-bench cannot run on the shape (standard with grouped heads) carry no model: none is
    # taken from them, so the row keeps its convention FLOPs rather than zeros.
    by_name = {r["variant"]: r["model"] for r in rows
               if r.get("direction", "forward") == direction and r.get("status") != "unsupported"}
    return {"fa2": by_name.get("cudnn", {}), "standard": by_name.get("standard", {})}


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print(f"error: PyTorch is not installed ({e}); this script needs torch with CUDA "
              "(pip install torch)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("error: torch sees no CUDA GPU; the peers run on the GPU", file=sys.stderr)
        return 2

    props = torch.cuda.get_device_properties(0)
    device = {
        "index": 0, "name": props.name, "uuid": str(getattr(props, "uuid", "")),
        "compute_capability": f"{props.major}.{props.minor}", "sm_count": props.multi_processor_count,
        "memory_bytes": props.total_memory, "l2_bytes": props.L2_cache_size,
    }
    # Shapes other than square multi-head: fa-bench's current version (fa-bench/5), its K/V
    # contiguous and every sequence N_kv long (page_size 0, kv_lengths null).
    version = CURRENT_VERSION if (args.heads_kv or args.kv_len) else None
    doc = new_document(
        "python3 scripts/peers_torch.py " + " ".join(argv), device=device,
        **({"version": version} if version else {}),
        settings={"seed": args.seed, "warmup": args.warmup, "repetitions": args.repetitions,
                  "timing_engine": f"torch {torch.__version__} CUDA events"})
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    flush = torch.empty(2 * props.L2_cache_size, dtype=torch.uint8, device="cuda")
    exit_code = 0
    causal_modes = {"off": [False], "on": [True], "both": [False, True]}[args.causal]
    index = 0
    for N, N_kv in [(n, kv) for n in args.N for kv in (args.kv_len or [n])]:
        for d in args.d:
            for causal in causal_modes:
                B = args.batch or max(1, 16384 // N_kv)
                H = args.heads or max(1, 2048 // d)
                H_kv = args.heads_kv or H
                seed = args.seed + 1000003 * index
                index += 1
                gen = torch.Generator(device="cuda").manual_seed(seed)
                q = torch.randn(B, H, N, d, device="cuda", dtype=dtype, generator=gen)
                k, v = (torch.randn(B, H_kv, N_kv, d, device="cuda", dtype=dtype, generator=gen)
                        for _ in range(2))
                config = make_config(B=B, H=H, N=N, d=d, causal=causal, dtype=args.dtype, seed=seed,
                                     **({"H_kv": H_kv, "N_kv": N_kv, "page_size": 0,
                                         "kv_lengths": None, "version": version,
                                         "gpu": {"uuid": device["uuid"], "name": device["name"]}}
                                        if version else {}))
                directions = {"fwd": ["forward"], "bwd": ["backward"], "both": ["forward", "backward"]}
                for direction in directions[args.direction]:
                    models = fa_bench_models(args.fa_bench, N, d, B, H, causal, args.dtype, direction,
                                             H_kv, N_kv)
                    if direction == "forward":
                        reference = Reference(torch, q, k, v, causal, seed)
                    else:
                        d_o = torch.randn(B, H, N, d, device="cuda", dtype=dtype, generator=gen)
                        reference = BackwardReference(torch, q, k, v, d_o, causal, seed)
                    # The field's convention: N x N_kv pairs per query head, causal's N x N part
                    # halved (as fa-bench counts it; every sequence N_kv long here).
                    forward_flops = flops_convention(B=B, H=H, N=N, N_kv=N_kv, d=d, causal=causal)
                    flops = forward_flops * (2.5 if direction == "backward" else 1.0)
                    for name, member, algorithm in args.backends:
                        run = run_backend if direction == "forward" else run_backend_backward
                        row = run(torch, sdpa_kernel, getattr(SDPBackend, member), q, k, v, causal,
                                  reference, flush, args)
                        model = {"flops_convention": flops, **models.get(algorithm, {})}
                        model.setdefault("flops_matrix", flops)
                        result = make_result(name, algorithm=algorithm, peer=True, model=model,
                                             warmup=args.warmup, direction=direction,
                                             **({"version": version} if version else {}), **row)
                        if result["derived"] is not None:  # the field's convention, as fa-bench reports
                            result["derived"]["tflops_convention"] = flops / (result["timing"]["median_ms"] * 1e9)
                        config["results"].append(result)
                        if row["status"] == "failed":
                            exit_code = 1
                        kv_text = (f" H_kv={H_kv}" if H_kv != H else "") + (f" N_kv={N_kv}" if N_kv != N else "")
                        print(f"{name:16} {'bwd ' if direction == 'backward' else ''}B={B} H={H} N={N}{kv_text} d={d} "
                              f"causal={'on' if causal else 'off'}: {row['status']}"
                              + (f" ({row['reason']})" if row.get("reason") else "")
                              + (f" {result['timing']['median_ms']:.4f} ms, "
                                 f"{result['derived']['tflops_convention']:.1f} TFLOP/s" if result["timing"] else ""),
                              flush=True)
                doc["configs"].append(config)
                write_results(doc, args.json)  # after every configuration: Ctrl-C keeps what finished
    print(f"results: {os.path.abspath(args.json)}")
    return exit_code


class Reference:
    """fp64 rows of two heads and the plain same-precision error on them (fa-bench's rule)."""

    def __init__(self, torch, q, k, v, causal: bool, seed: int):
        B, H, N, d = q.shape
        H_kv, N_kv = k.shape[1], k.shape[2]
        gen = torch.Generator().manual_seed(seed)
        self.rows = torch.randperm(N, generator=gen)[: min(N, CHECKED_ROWS)].sort().values.cuda()
        self.heads = [(0, 0), (B - 1, H - 1)]
        scale = 1.0 / math.sqrt(d)
        self.expected, self.plain_error = [], 0.0
        for b, h in self.heads:
            h_kv = h // (H // H_kv)  # query head h reads K/V head h / g
            qs, kk, vv = q[b, h, self.rows], k[b, h_kv], v[b, h_kv]
            cols = torch.arange(N_kv, device=q.device)
            # Causal, bottom-right: query i sees keys j <= i + N_kv - N.
            masked = (cols[None, :] > self.rows[:, None] + (N_kv - N)) if causal else None
            s = (qs.double() @ kk.double().T) * scale
            if masked is not None:
                s = s.masked_fill(masked, float("-inf"))
            ref = torch.softmax(s, dim=-1) @ vv.double()
            # Plain: fp32 scores and softmax, P rounded to the input type, fp32 P V, O rounded.
            s32 = (qs.float() @ kk.float().T) * scale
            if masked is not None:
                s32 = s32.masked_fill(masked, float("-inf"))
            plain = (torch.softmax(s32, dim=-1).to(q.dtype).float() @ vv.float()).to(q.dtype)
            self.plain_error = max(self.plain_error, (plain.double() - ref).abs().max().item())
            self.expected.append(ref)

    def check(self, out) -> dict:
        finite = bool(torch_isfinite_all(out))
        err = 0.0
        for (b, h), ref in zip(self.heads, self.expected):
            err = max(err, (out[b, h, self.rows].double() - ref).abs().max().item())
        tolerance = 2 * self.plain_error + 1e-3
        nonfinite = 0 if finite else int((~out.isfinite()).sum().item())
        passed = finite and err <= tolerance
        return {"metric": "max_abs_error", "passed": passed, "all_finite": finite,
                "nonfinite_count": nonfinite, "max_abs_error": err if math.isfinite(err) else 1e300,
                "rmse": 0.0, "baseline_max_abs_error": self.plain_error, "baseline_rmse": 0.0,
                "tolerance": tolerance, "rows_checked": len(self.rows) * len(self.heads),
                "heads_checked": len(self.heads)}


class BackwardReference:
    """fp64 dQ (sampled query rows) and dK, dV (sampled key rows) of two heads, and the error of a
    plain same-precision backward on the same rows."""

    CHUNK = 1024  # query rows per step: the fp64 scores of a chunk are CHUNK x N

    def __init__(self, torch, q, k, v, d_o, causal: bool, seed: int):
        B, H, N, d = q.shape
        gen = torch.Generator().manual_seed(seed + 1)
        self.rows = torch.randperm(N, generator=gen)[: min(N, CHECKED_ROWS)].sort().values.cuda()
        self.heads = [(0, 0), (B - 1, H - 1)]
        self.d_o = d_o
        self.expected, self.plain_error, self.scale = [], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]
        for b, h in self.heads:
            exact = self._grads(torch, q[b, h], k[b, h], v[b, h], d_o[b, h], causal, torch.float64, None)
            plain = self._grads(torch, q[b, h], k[b, h], v[b, h], d_o[b, h], causal, torch.float32, q.dtype)
            for g in range(3):
                self.plain_error[g] = max(self.plain_error[g], (plain[g].double() - exact[g]).abs().max().item())
                self.scale[g] = max(self.scale[g], exact[g].abs().max().item())
            self.expected.append(exact)

    def _grads(self, torch, q, k, v, d_o, causal, acc, rounded):
        """(dQ[rows], dK[rows], dV[rows]) in `acc`; `rounded`: P, O, dS rounded to that type."""
        N, d = q.shape
        scale = 1.0 / math.sqrt(d)
        rnd = (lambda t: t.to(rounded).to(acc)) if rounded is not None else (lambda t: t)
        q, k, v, d_o = q.to(acc), k.to(acc), v.to(acc), d_o.to(acc)
        cols = torch.arange(N, device=q.device)
        dq = torch.zeros(len(self.rows), d, dtype=acc, device=q.device)
        dk = torch.zeros(len(self.rows), d, dtype=acc, device=q.device)
        dv = torch.zeros(len(self.rows), d, dtype=acc, device=q.device)
        pos = {int(r): i for i, r in enumerate(self.rows.tolist())}
        for start in range(0, N, self.CHUNK):
            rows = torch.arange(start, min(N, start + self.CHUNK), device=q.device)
            s = (q[rows] @ k.T) * scale
            if causal:
                s = s.masked_fill(cols[None, :] > rows[:, None], float("-inf"))
            p = torch.softmax(s, dim=-1)
            o = rnd(p) @ v
            dp = d_o[rows] @ v.T
            D = (d_o[rows] * rnd(o)).sum(dim=-1, keepdim=True)
            ds = rnd(p * (dp - D))
            pr = rnd(p)
            dk += scale * (ds[:, self.rows].T @ q[rows])
            dv += pr[:, self.rows].T @ d_o[rows]
            for r in rows[(rows[:, None] == self.rows[None, :]).any(dim=1)].tolist():
                dq[pos[r]] = scale * (ds[r - start] @ k)
        return dq, dk, dv

    def check(self, grads) -> dict:
        finite = all(bool(torch_isfinite_all(g)) for g in grads)
        ratio, err_max = 0.0, 0.0
        for i, ((b, h), ref) in enumerate(zip(self.heads, self.expected)):
            for g, (grad, exact) in enumerate(zip(grads, ref)):
                err = (grad[b, h, self.rows].double() - exact).abs().max().item()
                err_max = max(err_max, err)
                ratio = max(ratio, err / (2 * self.plain_error[g] + 1e-3 * self.scale[g]))
        nonfinite = 0 if finite else sum(int((~g.isfinite()).sum().item()) for g in grads)
        passed = finite and ratio <= 1.0
        return {"metric": "max_abs_error", "passed": passed, "all_finite": finite,
                "nonfinite_count": nonfinite, "max_abs_error": err_max if math.isfinite(err_max) else 1e300,
                "rmse": 0.0, "baseline_max_abs_error": max(self.plain_error), "baseline_rmse": 0.0,
                "tolerance": max(2 * e + 1e-3 * sc for e, sc in zip(self.plain_error, self.scale)),
                "rows_checked": 3 * len(self.rows) * len(self.heads), "heads_checked": len(self.heads)}


def torch_isfinite_all(t) -> bool:
    return bool(t.isfinite().all().item())


def time_calls(torch, call, flush, args) -> list[float]:
    """Warm-up calls, then one CUDA-event sample per call, the L2 flushed before each."""
    for _ in range(args.warmup):
        call()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(args.repetitions):
        flush.zero_()  # evict the inputs and outputs from L2: every sample starts cold
        start.record()
        call()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop))
    return samples


def run_backend(torch, sdpa_kernel, backend, q, k, v, causal, reference, flush, args) -> dict:
    """kwargs for make_result: status, reason, verification, samples_ms."""
    sdpa = torch.nn.functional.scaled_dot_product_attention

    gqa = {"enable_gqa": True} if k.shape[1] != q.shape[1] else {}
    N, N_kv = q.shape[2], k.shape[2]
    if causal and N_kv != N:  # bottom-right: is_causal aligns top-left
        from torch.nn.attention.bias import causal_lower_right

        mask = causal_lower_right(N, N_kv)

        def call():
            return sdpa(q, k, v, attn_mask=mask, **gqa)
    else:
        def call():
            return sdpa(q, k, v, is_causal=causal, **gqa)

    try:
        with sdpa_kernel([backend]):
            out = call()
            torch.cuda.synchronize()
            verification = reference.check(out)
            del out
            if not verification["passed"]:
                reason = (f"max error {verification['max_abs_error']:.3e} > tolerance "
                          f"{verification['tolerance']:.3e}" if verification["all_finite"]
                          else f"{verification['nonfinite_count']} non-finite output elements")
                return {"status": "failed", "reason": reason, "verification": verification}
            samples = time_calls(torch, call, flush, args)
    except RuntimeError as e:  # backend not available for this shape / build / GPU
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        torch.cuda.synchronize()
        return {"status": "unsupported", "reason": first[:300]}
    return {"status": "ok", "verification": verification, "samples_ms": samples}


def run_backend_backward(torch, sdpa_kernel, backend, q, k, v, causal, reference, flush, args) -> dict:
    """kwargs for make_result of a backward row: the forward once, untimed; backward samples."""
    sdpa = torch.nn.functional.scaled_dot_product_attention
    qg, kg, vg = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    try:
        with sdpa_kernel([backend]):
            out = sdpa(qg, kg, vg, is_causal=causal)

            def call():
                return torch.autograd.grad(out, (qg, kg, vg), reference.d_o, retain_graph=True)

            grads = call()
            torch.cuda.synchronize()
            verification = reference.check(grads)
            del grads
            if not verification["passed"]:
                reason = (f"max error {verification['max_abs_error']:.3e}: over its tolerance"
                          if verification["all_finite"]
                          else f"{verification['nonfinite_count']} non-finite gradient elements")
                return {"status": "failed", "reason": reason, "verification": verification}
            samples = time_calls(torch, call, flush, args)
    except RuntimeError as e:  # backend without a backward for this shape / build / GPU
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        torch.cuda.synchronize()
        return {"status": "unsupported", "reason": first[:300]}
    return {"status": "ok", "verification": verification, "samples_ms": samples}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

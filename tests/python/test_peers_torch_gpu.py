"""scripts/peers_torch.py's backward reference where PyTorch and a GPU exist (the H200: run by
scripts/gpu_check.sh; skipped in CI). Its fp64 gradients must equal autograd's, and its rule must
fail a backward with a dropped key block and one with the softmax scale off by 5%.
"""

import importlib.util
import math
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "peers_torch.py"

torch = pytest.importorskip("torch")


def load():
    spec = importlib.util.spec_from_file_location("peers_torch", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def needs_gpu():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU: the backward reference runs on the GPU")


def inputs(N=300, d=64, B=2, H=3, seed=5):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(4)]


@pytest.mark.parametrize("causal", [False, True])
def test_fp64_gradients_equal_autograd(causal):
    needs_gpu()
    mod = load()
    q, k, v, d_o = inputs()

    class SmallChunks(mod.BackwardReference):
        CHUNK = 128  # 300 rows: three chunks, the last partial

    ref = SmallChunks(torch, q, k, v, d_o, causal, 5)
    qd, kd, vd = (t.double().requires_grad_(True) for t in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(qd, kd, vd, is_causal=causal)
    grads = torch.autograd.grad(out, (qd, kd, vd), d_o.double())
    for (b, h), exact in zip(ref.heads, ref.expected):
        for g, (auto, mine) in enumerate(zip(grads, exact)):
            assert torch.allclose(auto[b, h, ref.rows], mine, atol=1e-9, rtol=1e-9), g


@pytest.mark.parametrize("causal", [False, True])
def test_rule_passes_bf16_autograd_and_fails_wrong_backwards(causal):
    needs_gpu()
    mod = load()
    q, k, v, d_o = inputs()
    ref = mod.BackwardReference(torch, q, k, v, d_o, causal, seed=5)
    qg, kg, vg = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    with torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.MATH]):
        out = torch.nn.functional.scaled_dot_product_attention(qg, kg, vg, is_causal=causal)
        grads = torch.autograd.grad(out, (qg, kg, vg), d_o)
    assert ref.check(grads)["passed"]
    # A dropped key block: the last 64 keys take no part.
    kk, vv = k.clone(), v.clone()
    N = k.shape[2]
    mask = torch.ones(N, N, dtype=torch.bool, device="cuda").tril() if causal else torch.ones(
        N, N, dtype=torch.bool, device="cuda")
    mask[:, N - 64:] = False
    mask[N - 64:, N - 64] = True  # keep every row with at least one key
    qg, kg, vg = (t.detach().clone().requires_grad_(True) for t in (q, kk, vv))
    out = torch.nn.functional.scaled_dot_product_attention(qg, kg, vg, attn_mask=mask)
    dropped = torch.autograd.grad(out, (qg, kg, vg), d_o)
    assert not ref.check(dropped)["passed"]
    # The softmax scale off by 5%.
    qg, kg, vg = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(
        qg, kg, vg, is_causal=causal, scale=1.05 / math.sqrt(q.shape[-1]))
    wrong_scale = torch.autograd.grad(out, (qg, kg, vg), d_o)
    assert not ref.check(wrong_scale)["passed"]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))

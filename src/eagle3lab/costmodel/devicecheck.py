"""Raw-PyTorch checks of the cost model's per-pass parts on one GPU (issue 36), run once on a lent H200.

Why: the EAGLE-3 cycle at TP 8 is built from parts the model computes from bytes and FLOPs; this script measures
three of them on real hardware so the model's numbers for them can be checked (``costmodel.h200_check``), not fitted:

- the routed-expert GEMMs of one MoE layer for T tokens (T = k x batch in a verify pass), routed uniformly at random,
  at the shapes of one TP-8 rank of a DeepSeek-V3/Kimi-K2 layer and at Qwen3-30B-A3B's (TP 1): time against the
  distinct experts the tokens touch (``arch.expected_distinct_experts``);
- the EAGLE-3 drafter's forward (one Llama layer fed 2 x hidden, MLP, a 32000-row head) at a TP-8 rank's shapes;
- the host's eager dispatch per small op and a replayed CUDA-graph node (the engine's work between passes).

Raw PyTorch (cuBLAS / CUTLASS grouped GEMM via ``torch._grouped_mm``, SDPA), bf16, each pass captured in one CUDA graph
and timed with CUDA events; weights for several layers so the L2 never holds a whole layer. These are not an engine's
kernels: they check physics, not sglang or vLLM. Writes one JSON (``--out``); standalone (needs only torch).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from typing import Any, Callable

LAYER_COPIES = 4  # distinct weight sets cycled per timed replay (each layer's experts are several times the L2)
ROW_ALIGN = 8  # rows of each expert group padded to a multiple of this (grouped-GEMM alignment)


def _timed(torch: Any, fn: Callable[[], None], replays: int = 20) -> float:
    """Seconds per call of ``fn`` captured in one CUDA graph, median of ``replays`` event-timed replays."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    for _ in range(3):
        graph.replay()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    times.sort()
    return times[len(times) // 2]


def moe_layer(torch: Any, name: str, experts: int, top_k: int, hidden: int, inter: int,
              token_counts: list[int]) -> dict[str, Any]:
    """Routed-expert GEMMs (gate_up, SiLU*mul, down) of ``LAYER_COPIES`` layers, per layer, per token count."""
    dev = "cuda"
    w1 = [torch.randn(experts, 2 * inter, hidden, device=dev, dtype=torch.bfloat16) * 0.02
          for _ in range(LAYER_COPIES)]
    w2 = [torch.randn(experts, hidden, inter, device=dev, dtype=torch.bfloat16) * 0.02
          for _ in range(LAYER_COPIES)]
    gen = torch.Generator(device="cpu").manual_seed(0)
    rows = []
    for tokens in token_counts:
        choice = torch.stack([torch.randperm(experts, generator=gen)[:top_k] for _ in range(tokens)])
        counts = torch.bincount(choice.flatten(), minlength=experts)
        padded = ((counts + ROW_ALIGN - 1) // ROW_ALIGN) * ROW_ALIGN
        padded[counts == 0] = 0
        offs = torch.cumsum(padded, 0).to(torch.int32).to(dev)
        total = int(padded.sum())
        x = torch.randn(total, hidden, device=dev, dtype=torch.bfloat16)
        method = "torch._grouped_mm"

        def grouped() -> None:
            for i in range(LAYER_COPIES):
                h = torch._grouped_mm(x, w1[i].transpose(-2, -1), offs=offs)
                a = torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]
                torch._grouped_mm(a, w2[i].transpose(-2, -1), offs=offs)

        active = [int(e) for e in torch.nonzero(counts).flatten()]
        starts = [0] + [int(v) for v in torch.cumsum(padded, 0)[:-1]]

        def looped() -> None:
            for i in range(LAYER_COPIES):
                for e in active:
                    s, n = starts[e], int(padded[e])
                    h = x[s:s + n] @ w1[i][e].t()
                    a = torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]
                    _ = a @ w2[i][e].t()

        try:
            seconds = _timed(torch, grouped) / LAYER_COPIES
        except Exception as exc:  # noqa: BLE001 - the fallback is recorded, never hidden
            method = f"per-expert matmul loop (torch._grouped_mm failed: {type(exc).__name__}: {exc})"[:300]
            seconds = _timed(torch, looped) / LAYER_COPIES
        distinct = int((counts > 0).sum())
        weight_bytes = distinct * 3 * hidden * inter * 2
        rows.append({"tokens": tokens, "distinct_experts": distinct, "padded_rows": total, "seconds": seconds,
                     "expert_weight_bytes": weight_bytes, "achieved_bytes_per_s": weight_bytes / seconds,
                     "method": method})
    w1.clear()  # the GPU memory goes back before the next layer's weights
    w2.clear()
    torch.cuda.empty_cache()
    return {"name": name, "experts": experts, "top_k": top_k, "hidden": hidden, "intermediate_per_rank": inter,
            "weights": "bf16, random", "routing": "uniform, k distinct experts per token, seed 0", "rows": rows}


def drafter_pass(torch: Any, token_counts: list[int], hidden: int = 7168, heads: int = 8, kv_heads: int = 1,
                 head_dim: int = 128, inter: int = 2304, head_rows: int = 4000,
                 context: int = 1024) -> dict[str, Any]:
    """One EAGLE-3 drafter forward at a TP-8 rank's shapes (Kimi-K2.5 drafter: 64 heads / 8, 8 KV heads / 8, MLP
    18432 / 8, 32000-row head / 8): RMSNorm, q/k/v over 2 x hidden, SDPA over ``context`` cached tokens, o, MLP,
    head, argmax. No all-reduce (one GPU)."""
    dev, bf = "cuda", torch.bfloat16
    copies = LAYER_COPIES
    wqkv = [torch.randn((heads + 2 * kv_heads) * head_dim, 2 * hidden, device=dev, dtype=bf) * 0.02
            for _ in range(copies)]
    wo = [torch.randn(hidden, heads * head_dim, device=dev, dtype=bf) * 0.02 for _ in range(copies)]
    wgu = [torch.randn(2 * inter, hidden, device=dev, dtype=bf) * 0.02 for _ in range(copies)]
    wd = [torch.randn(hidden, inter, device=dev, dtype=bf) * 0.02 for _ in range(copies)]
    wh = [torch.randn(head_rows, hidden, device=dev, dtype=bf) * 0.02 for _ in range(copies)]
    rows = []
    for tokens in token_counts:
        x = torch.randn(tokens, 2 * hidden, device=dev, dtype=bf)
        k_cache = torch.randn(tokens, kv_heads, context, head_dim, device=dev, dtype=bf)
        v_cache = torch.randn_like(k_cache)

        def forward() -> None:
            for i in range(copies):
                h = torch.nn.functional.rms_norm(x, (2 * hidden,))
                qkv = h @ wqkv[i].t()
                q = qkv[:, :heads * head_dim].view(tokens, heads, 1, head_dim)
                att = torch.nn.functional.scaled_dot_product_attention(q, k_cache, v_cache, enable_gqa=True)
                o = att.reshape(tokens, heads * head_dim) @ wo[i].t()
                gu = torch.nn.functional.rms_norm(o, (hidden,)) @ wgu[i].t()
                m = (torch.nn.functional.silu(gu[:, :inter]) * gu[:, inter:]) @ wd[i].t()
                logits = m @ wh[i].t()
                torch.argmax(logits.float(), dim=-1)

        seconds = _timed(torch, forward) / copies
        weight_bytes = 2 * (wqkv[0].numel() + wo[0].numel() + wgu[0].numel() + wd[0].numel() + wh[0].numel())
        rows.append({"tokens": tokens, "seconds": seconds, "weight_bytes": weight_bytes, "context": context})
    return {"name": "EAGLE-3 drafter, Kimi-K2.5 shapes, one TP-8 rank", "hidden": hidden, "heads_per_rank": heads,
            "kv_heads_per_rank": kv_heads, "head_dim": head_dim, "intermediate_per_rank": inter,
            "head_rows_per_rank": head_rows, "rows": rows}


def host_dispatch(torch: Any, ops: int = 400) -> dict[str, Any]:
    """Host seconds per eager small op (the engine's bookkeeping between passes) and GPU seconds per replayed
    CUDA-graph node of the same op."""
    x = torch.zeros(128, device="cuda")
    for _ in range(50):
        x.add_(1)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(ops):
            x.add_(1)
        host = time.perf_counter() - start
        torch.cuda.synchronize()
        best = min(best, host)

    def many() -> None:
        for _ in range(ops):
            x.add_(1)

    node = _timed(torch, many) / ops
    return {"ops": ops, "host_seconds_per_eager_op": best / ops, "gpu_seconds_per_graph_node": node}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file to write")
    args = parser.parse_args()
    import torch  # heavy: imported only when the check runs

    started = time.time()
    counts = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]

    def write() -> None:  # results written as they arrive, so a late failure keeps the earlier sections
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=1)

    def section(key: str, run: Callable[[], Any]) -> None:
        try:
            result[key] = run()
        except Exception as exc:  # noqa: BLE001 - recorded in the JSON, the other sections still run
            result[key] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        write()

    result: dict[str, Any] = {
        "kind": "measured: raw PyTorch, H200 (costmodel.devicecheck)",
        "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
        "sms": torch.cuda.get_device_properties(0).multi_processor_count, "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()),
    }
    section("host", lambda: host_dispatch(torch))
    section("moe_tp8_rank", lambda: moe_layer(torch, "DeepSeek-V3/Kimi-K2 routed experts, one TP-8 rank (384 experts, "
                                                     "k 8, hidden 7168, 2048 / 8 wide)", 384, 8, 7168, 256, counts))
    section("moe_qwen3_30b", lambda: moe_layer(torch, "Qwen3-30B-A3B routed experts, TP 1 (128 experts, k 8, hidden "
                                                      "2048, 768 wide)", 128, 8, 2048, 768, counts))
    section("drafter", lambda: drafter_pass(torch, [1, 4, 16, 64, 128, 512]))
    result["wall_seconds"] = time.time() - started
    write()
    print(json.dumps({k: v for k, v in result.items() if k not in ("moe", "drafter")}, indent=1))


if __name__ == "__main__":
    main()

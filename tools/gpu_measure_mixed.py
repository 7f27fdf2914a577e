"""Measure mixed (decode + prefill chunk) iterations and training memory on one GPU.

Run on a machine with PyTorch and a CUDA GPU (not part of the toolkit or its tests):

    python3 tools/gpu_measure_mixed.py --out DIR

Part 1, mixed iterations (issue 39): a Llama-2-7B forward in plain PyTorch (random bf16 weights, cuBLAS
GEMMs, SDPA attention, unfused RMSNorm, RoPE and SiLU), the way vLLM V1 and Sarathi-Serve run a chunked-
prefill iteration: the projections and the MLP see all tokens of the step at once (``decode`` tokens of
sequences holding ``context`` tokens of KV, plus one prompt chunk of ``chunk`` tokens), attention is run
per part (decode queries over their KV cache; the chunk causally over itself). Each configuration is
replayed as a CUDA graph and timed with CUDA events (median of 20 replays), so no host dispatch is
included. Decode-only and prefill-only steps are measured the same way, so a mixed step can be compared
with the sum of its parts. Power and SM clock (NVML) over 3 s of replays for a few configurations.

Part 2, training memory (issue 35): a Llama-style 1.1B model (TinyLlama's shape) trained with AdamW on
fp32 master weights under bf16 autocast, SDPA (flash) attention, no activation recomputation: peak
allocated memory and step time per micro-batch at sequence 2,048. The slope of peak memory over
micro-batch tokens is the activation memory per token that a model of fused attention must reproduce.

Writes ``mixed_llama2_7b.csv``, ``train_memory_tinyllama.csv`` and ``env.json`` to ``--out``.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import statistics
import threading
import time

import torch
import torch.nn.functional as F

LLAMA2_7B = dict(hidden=4096, heads=32, kv_heads=32, ffn=11008, layers=32, vocab=32000)
TINYLLAMA = dict(hidden=2048, heads=32, kv_heads=4, ffn=5632, layers=22, vocab=32000)
HEAD_DIM = 128


def rms_norm(x, weight, eps=1e-5):
    """RMSNorm, unfused (as in the H200 step measurements)."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


def rope(x, positions):
    """Rotary embedding over the last dimension (half-split form), positions per token."""
    half = x.shape[-1] // 2
    freq = 1.0 / (10000 ** (torch.arange(half, device=x.device, dtype=torch.float32) / half))
    angle = positions.float()[:, None] * freq[None, :]
    cos = angle.cos().to(x.dtype)[:, None, :]
    sin = angle.sin().to(x.dtype)[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class InferenceModel:
    """Llama weights (random, bf16) and a KV cache for decode sequences."""

    def __init__(self, shape, max_decode, context, device):
        g = torch.Generator(device=device).manual_seed(0)
        h, f, kv = shape["hidden"], shape["ffn"], shape["kv_heads"] * HEAD_DIM
        self.shape = shape

        def w(rows, cols):
            return (torch.randn(rows, cols, device=device, dtype=torch.bfloat16, generator=g)
                    * (1.0 / math.sqrt(rows)))

        self.layers = [dict(qkv=w(h, h + 2 * kv), o=w(h, h), gate_up=w(h, 2 * f), down=w(f, h),
                            n1=torch.ones(h, device=device, dtype=torch.bfloat16),
                            n2=torch.ones(h, device=device, dtype=torch.bfloat16))
                       for _ in range(shape["layers"])]
        self.embed = w(shape["vocab"], h)
        self.lm_head = w(h, shape["vocab"])
        self.norm = torch.ones(h, device=device, dtype=torch.bfloat16)
        self.context = context
        self.k_cache = [torch.randn(max_decode, shape["kv_heads"], context, HEAD_DIM, device=device,
                                    dtype=torch.bfloat16, generator=g) for _ in range(shape["layers"])]
        self.v_cache = [torch.randn_like(k) for k in self.k_cache]

    def forward(self, tokens, positions, last, decode, chunk):
        """One iteration: ``decode`` single-token sequences first, then one chunk of ``chunk`` tokens.

        ``last`` indexes the tokens whose logits are computed (each decode token, the chunk's last).
        """
        s = self.shape
        nh, nkv = s["heads"], s["kv_heads"]
        x = self.embed[tokens]
        for i, p in enumerate(self.layers):
            y = rms_norm(x, p["n1"])
            qkv = y @ p["qkv"]
            q = qkv[:, : nh * HEAD_DIM].view(-1, nh, HEAD_DIM)
            k = qkv[:, nh * HEAD_DIM: (nh + nkv) * HEAD_DIM].view(-1, nkv, HEAD_DIM)
            v = qkv[:, (nh + nkv) * HEAD_DIM:].view(-1, nkv, HEAD_DIM)
            q, k = rope(q, positions), rope(k, positions)
            parts = []
            if decode:
                qd = q[:decode].unsqueeze(2)                        # [d, nh, 1, hd]
                kd, vd = self.k_cache[i][:decode], self.v_cache[i][:decode]
                od = F.scaled_dot_product_attention(qd, kd, vd, enable_gqa=nh != nkv)
                parts.append(od.reshape(decode, nh * HEAD_DIM))
            if chunk:
                qc = q[decode:].transpose(0, 1).unsqueeze(0)        # [1, nh, c, hd]
                kc = k[decode:].transpose(0, 1).unsqueeze(0)
                vc = v[decode:].transpose(0, 1).unsqueeze(0)
                oc = F.scaled_dot_product_attention(qc, kc, vc, is_causal=True, enable_gqa=nh != nkv)
                parts.append(oc.squeeze(0).transpose(0, 1).reshape(chunk, nh * HEAD_DIM))
            attn = parts[0] if len(parts) == 1 else torch.cat(parts, 0)
            x = x + attn @ p["o"]
            y = rms_norm(x, p["n2"])
            gu = y @ p["gate_up"]
            gate, up = gu.chunk(2, dim=-1)
            x = x + (F.silu(gate) * up) @ p["down"]
        return rms_norm(x[last], self.norm) @ self.lm_head


def time_graph(fn, replays=20):
    """Capture fn as a CUDA graph; median replay time in ms (CUDA events)."""
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
        times.append(start.elapsed_time(end))
    return statistics.median(times), graph


def power_and_clock(graph, seconds=3.0):
    """Mean power (NVML energy counter) and median SM clock while replaying ``graph``."""
    try:
        import pynvml
    except ImportError:
        return None, None
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    clocks, stop = [], threading.Event()

    def sample():
        while not stop.is_set():
            clocks.append(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
            time.sleep(0.02)

    thread = threading.Thread(target=sample)
    e0 = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    t0 = time.time()
    thread.start()
    while time.time() - t0 < seconds:
        for _ in range(10):
            graph.replay()
        torch.cuda.synchronize()
    elapsed = time.time() - t0
    e1 = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    stop.set()
    thread.join()
    return (e1 - e0) / 1000.0 / elapsed, statistics.median(clocks) if clocks else None


def measure_mixed(out, device):
    context = 1024
    decodes, chunks = (0, 32, 128), (0, 512, 2048)
    model = InferenceModel(LLAMA2_7B, max(decodes), context, device)
    rows = []
    power_at = {(128, 0), (0, 2048), (128, 2048), (32, 512)}
    for d in decodes:
        for c in chunks:
            if d == 0 and c == 0:
                continue
            n = d + c
            tokens = torch.randint(0, LLAMA2_7B["vocab"], (n,), device=device)
            positions = torch.cat([torch.full((d,), context, device=device, dtype=torch.long),
                                   torch.arange(c, device=device, dtype=torch.long)])
            last = torch.tensor(list(range(d)) + ([n - 1] if c else []), device=device)
            with torch.no_grad():
                ms, graph = time_graph(lambda: model.forward(tokens, positions, last, d, c))
                watts, clock = power_and_clock(graph) if (d, c) in power_at else (None, None)
            rows.append(dict(model="llama-2-7b", decode=d, context=context, chunk=c, tokens=n,
                             step_ms=round(ms, 4),
                             power_w=None if watts is None else round(watts, 1),
                             sm_clock_mhz=clock))
            print(rows[-1], flush=True)
            del graph
            torch.cuda.empty_cache()
    write_csv(os.path.join(out, "mixed_llama2_7b.csv"), rows)
    del model
    torch.cuda.empty_cache()


class TrainModel(torch.nn.Module):
    """A Llama-style decoder for training (fp32 master weights, bf16 autocast, SDPA attention)."""

    def __init__(self, shape):
        super().__init__()
        h, f = shape["hidden"], shape["ffn"]
        self.head_dim = h // shape["heads"]
        kv = shape["kv_heads"] * self.head_dim
        self.shape = shape
        self.embed = torch.nn.Embedding(shape["vocab"], h)
        self.blocks = torch.nn.ModuleList()
        for _ in range(shape["layers"]):
            block = torch.nn.ModuleDict(dict(
                qkv=torch.nn.Linear(h, h + 2 * kv, bias=False), o=torch.nn.Linear(h, h, bias=False),
                gate_up=torch.nn.Linear(h, 2 * f, bias=False), down=torch.nn.Linear(f, h, bias=False),
                n1=torch.nn.RMSNorm(h), n2=torch.nn.RMSNorm(h)))
            self.blocks.append(block)
        self.norm = torch.nn.RMSNorm(h)
        self.lm_head = torch.nn.Linear(h, shape["vocab"], bias=False)

    def forward(self, tokens):
        s = self.shape
        b, t = tokens.shape
        nh, nkv, hd = s["heads"], s["kv_heads"], self.head_dim
        x = self.embed(tokens)
        positions = torch.arange(t, device=tokens.device)
        for blk in self.blocks:
            qkv = blk["qkv"](blk["n1"](x))
            q = qkv[..., : nh * hd].view(b, t, nh, hd)
            k = qkv[..., nh * hd: (nh + nkv) * hd].view(b, t, nkv, hd)
            v = qkv[..., (nh + nkv) * hd:].view(b, t, nkv, hd)
            q = rope(q.reshape(b * t, nh, hd), positions.repeat(b)).view(b, t, nh, hd)
            k = rope(k.reshape(b * t, nkv, hd), positions.repeat(b)).view(b, t, nkv, hd)
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                               is_causal=True, enable_gqa=nh != nkv)
            x = x + blk["o"](o.transpose(1, 2).reshape(b, t, nh * hd))
            gate, up = blk["gate_up"](blk["n2"](x)).chunk(2, dim=-1)
            x = x + blk["down"](F.silu(gate) * up)
        return self.lm_head(self.norm(x))


def measure_training(out, device):
    seq = 2048
    model = TrainModel(TINYLLAMA).to(device)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    rows = []
    for micro in (1, 2, 4, 8):
        tokens = torch.randint(0, TINYLLAMA["vocab"], (micro, seq + 1), device=device)

        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        try:
            for _ in range(2):
                step()
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            times = []
            for _ in range(5):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                step()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            peak = torch.cuda.max_memory_allocated()
            rows.append(dict(model="tinyllama-1.1b-shape", params=params, seq=seq, micro_batch=micro,
                             step_ms=round(statistics.median(times), 3),
                             peak_allocated_gib=round(peak / 2**30, 3),
                             optimizer="AdamW fused, fp32 master weights, bf16 autocast",
                             recompute="none", attention="sdpa causal"))
        except torch.OutOfMemoryError:
            rows.append(dict(model="tinyllama-1.1b-shape", params=params, seq=seq, micro_batch=micro,
                             step_ms=None, peak_allocated_gib=None, optimizer="AdamW", recompute="none",
                             attention="out of memory"))
        print(rows[-1], flush=True)
        torch.cuda.empty_cache()
    write_csv(os.path.join(out, "train_memory_tinyllama.csv"), rows)


def write_csv(path, rows):
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--part", choices=("mixed", "train", "all"), default="all")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    device = torch.device("cuda")
    props = torch.cuda.get_device_properties(0)
    env = dict(torch=torch.__version__, name=props.name, sms=props.multi_processor_count,
               memory_gib=props.total_memory / 2**30, cuda=torch.version.cuda)
    with open(os.path.join(args.out, "env.json"), "w") as fh:
        json.dump(env, fh, indent=1)
    print(env, flush=True)
    if args.part in ("mixed", "all"):
        measure_mixed(args.out, device)
    if args.part in ("train", "all"):
        measure_training(args.out, device)


if __name__ == "__main__":
    main()

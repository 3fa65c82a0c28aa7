"""Pipelined plans (docs/model.md section 7) against the named schedules and the usual stage splits.

For each model, device count K and micro-batch count M, one row per method, every plan scored
on the unrolled step by the evaluator (the makespan is what the plan runs in, its memory under
``peak``):

* ``optpart``: ``optpart.solve(problem, micro_batches=M)`` (stages and orders found);
* every named schedule (``gpipe``, ``1f1b``, ``zbh1``, ``interleaved1f1b``, ``zbv``,
  ``dualpipev``) **on the stages optpart found** where it applies to that layout;
* ``DP partitioner``: the dynamic program of pytorch#179212 (AutoPipe: contiguous layers, the
  heaviest stage's forward plus backward as light as possible, over per-layer costs; torch 2.13
  has no such function, so it is written here), then the same order search;
* ``equal layers``: K stages of equal layer counts, then the same order search.

Columns: step time, speed-up over one device (the step's work run on one device), the gap to
the bound over every plan and to the bound over every order on the plan's stages, the largest
peak per device over the capacity, and the solve time. Models: the bundled GPT-2 (8 x 512
tokens), a Llama-style decoder and a small ResNet, both imported with ``from_torch`` on fake
tensors (tiny configurations, named in the table). A last table times a pipelined solve of the
10^5-operator scale graph at M = 8 against the single-step heuristic, back to back (same load).

    nice -n 10 python benchmarks/pipeline_schedules.py                   # everything (tens of minutes)
    nice -n 10 python benchmarks/pipeline_schedules.py --models gpt2 --ks 4 --ms 8   # the headline
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from _common import table

import optpart
from optpart.pipeline.bound import pipeline_bound, stage_bound
from optpart.pipeline.costs import stage_costs
from optpart.pipeline.plan import PipelinePlan
from optpart.pipeline.schedules import NAMED
from optpart.pipeline.solve import plan_on_stages
from optpart.pipeline.stages import forward_chain, stage_of_cuts
from optpart.pipeline.step import PipelineStep
from optpart.units import format_bytes

ROOT = Path(__file__).resolve().parent.parent


def llama(layers: int = 8, d: int = 512, heads: int = 8, vocab: int = 8192, batch: int = 16, seq: int = 256):
    """A Llama-style decoder (RMSNorm, rotary-free causal attention, SwiGLU, untied head) on fake tensors."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class RMSNorm(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
            self.qkv, self.o = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
            self.gate, self.up = nn.Linear(d, 4 * d, bias=False), nn.Linear(d, 4 * d, bias=False)
            self.down = nn.Linear(4 * d, d, bias=False)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.n1(x)).split(d, dim=-1)
            q, k, v = (z.view(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
            x = x + self.o(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d))
            h = self.n2(x)
            return x + self.down(F.silu(self.gate(h)) * self.up(h))

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.layers = nn.ModuleList(Layer() for _ in range(layers))
            self.norm, self.head = RMSNorm(d), nn.Linear(d, vocab, bias=False)

        def forward(self, ids):
            x = self.embed(ids)
            for layer in self.layers:
                x = layer(x)
            return self.head(self.norm(x))

    with torch.device("meta"):
        model = Llama()
        x, y = torch.zeros(batch, seq, dtype=torch.long), torch.zeros(batch, seq, dtype=torch.long)
    return model, x, y, f"Llama-style {layers} layers, d={d}, {batch} x {seq} tokens"


def resnet(blocks=(2, 2, 2, 2), width: int = 32, batch: int = 32, size: int = 64):
    """A small ResNet (basic blocks) on fake tensors."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
            self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
            self.down = None if stride == 1 and cin == cout else nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = F.relu(self.b1(self.c1(x)))
            y = self.b2(self.c2(y))
            return F.relu(y + (x if self.down is None else self.down(x)))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
            layers, cin = [], width
            for i, n in enumerate(blocks):
                cout = width * 2 ** i
                for j in range(n):
                    layers.append(Block(cin, cout, 2 if j == 0 and i > 0 else 1))
                    cin = cout
            self.layers = nn.Sequential(*layers)
            self.fc = nn.Linear(cin, 100)

        def forward(self, x):
            return self.fc(self.layers(self.stem(x)).mean(dim=(2, 3)))

    with torch.device("meta"):
        model = Net()
        x, y = torch.empty(batch, 3, size, size), torch.zeros(batch, dtype=torch.long)
    return model, x, y, f"ResNet, basic blocks {list(blocks)}, width {width}, {batch} x {size}x{size}"


def imported(make) -> tuple[optpart.Problem, str]:
    from optpart.formats.costmodel import CostModel
    from optpart.formats.torch_import import cross_entropy, from_torch

    model, x, y, text = make()
    p = from_torch(model, (x,), loss_fn=cross_entropy, targets=(y,), cost_model=CostModel(), name=text)
    return p.with_meta(batch_size=int(x.shape[0])), text


def layer_of_positions(problem: optpart.Problem, order: np.ndarray) -> np.ndarray:
    """Layer index per forward position: modules cut at the repeated containers' children
    (``blocks.3``, ``layers.2``), everything else at its top-level module, numbered in the
    order their first heavy operator runs (at least a quarter of the 90th percentile of the
    forward operators' times: a convolution, a matmul, not a batch-norm counter); any other
    position joins the layer before it."""
    out, names, last = [], {}, 0
    times = problem.time[order]
    heavy = 0.25 * float(np.percentile(times[times > 0], 90)) if (times > 0).any() else 0.0
    for v in order.tolist():
        mod = (problem.node_meta[v].get("module") or "") if problem.node_meta else ""
        parts = mod.split(".")
        key = ".".join(parts[:2]) if len(parts) >= 2 and parts[1].isdigit() else parts[0]
        if key and problem.time[v] >= heavy and problem.time[v] > 0:
            last = names.setdefault(key, len(names))
        out.append(last)
    return np.maximum.accumulate(np.array(out, dtype=np.int64))


def layer_split(chain, layer: np.ndarray, groups: list[list[int]]) -> list[int]:
    """Chain cuts for contiguous layer groups: the first allowed boundary at or after each group's start."""
    allowed = np.flatnonzero(chain.allowed)
    cuts = []
    for g in groups[1:]:
        b = int(np.searchsorted(layer, g[0], side="left"))
        i = int(np.searchsorted(allowed, b))
        if i < allowed.size and (not cuts or allowed[i] > cuts[-1]):
            cuts.append(int(allowed[i]))
    return cuts


def dp_partitioner(cost: np.ndarray, k: int) -> list[list[int]]:
    """Contiguous groups of layers minimising the heaviest group (exact dynamic program)."""
    n = cost.size
    prefix = np.concatenate([[0.0], np.cumsum(cost)])
    f = np.full((k + 1, n + 1), np.inf)
    arg = np.zeros((k + 1, n + 1), dtype=np.int64)
    f[0, 0] = 0.0
    for s in range(1, k + 1):
        for j in range(1, n + 1):
            cand = np.maximum(f[s - 1, :j], prefix[j] - prefix[:j])
            arg[s, j] = int(np.argmin(cand))
            f[s, j] = cand[arg[s, j]]
    bounds, j = [n], n
    for s in range(k, 0, -1):
        j = int(arg[s, j])
        bounds.append(j)
    bounds = bounds[::-1]
    return [list(range(bounds[i], bounds[i + 1])) for i in range(k) if bounds[i + 1] > bounds[i]]


def equal_layers(n: int, k: int) -> list[list[int]]:
    """``k`` groups of consecutive layers, sizes differing by at most one."""
    edges = np.linspace(0, n, k + 1).round().astype(int)
    return [list(range(edges[i], edges[i + 1])) for i in range(k) if edges[i + 1] > edges[i]]


def row(model, k, m, method, r, step, wall, cap, bound):
    if r is None or not r.ok:
        return [model, k, m, method, "does not fit", "-", "-", "-", "-", f"{wall:.1f} s"]
    plan = PipelinePlan.from_result(r, step.base)
    costs = stage_costs(step, plan.stage_of, plan.stage_device)
    sb = max(stage_bound(costs), r.stats.get("stage_bound", 0.0))
    peak = float(r.memory_peak.max())
    return [model, k, m, method + (f" ({plan.schedule})" if plan.schedule != "custom" else ""),
            f"{r.makespan * 1e3:.1f} ms", f"{step.work() / r.makespan:.2f}x", f"{max(0.0, 1 - bound / r.makespan):.1%}",
            f"{max(0.0, (r.makespan - sb) / r.makespan):.1%}", f"{format_bytes(peak)} / {format_bytes(cap)}",
            f"{wall:.1f} s"]


def bench_model(name: str, base: optpart.Problem, ks, ms, capacity) -> list[list]:
    rows = []
    for k in ks:
        p = base.with_devices(k, memory=capacity(base, k))
        cap = float(p.device_memory[0])
        for m in ms:
            if m > int(p.meta.get("batch_size", m)) or int(p.meta.get("batch_size", m)) % m:
                continue
            step = PipelineStep(p, m)
            t0 = time.perf_counter()
            ours = optpart.solve(p, micro_batches=m)
            bound = pipeline_bound(step)[0]  # every row's gap to the same bound over every plan
            rows.append(row(name, k, m, "optpart", ours, step, time.perf_counter() - t0, cap, bound))
            if not ours.ok:
                continue
            plan = PipelinePlan.from_result(ours, p)
            for sched in NAMED:
                t0 = time.perf_counter()
                r = plan_on_stages(step, plan.stage_of, plan.stage_device, effort=0, names=[sched])
                if r is not None:
                    rows.append(row(name, k, m, f"{sched} on its stages", r, step, time.perf_counter() - t0, cap,
                                    bound))
            chain = forward_chain(step)
            layer = layer_of_positions(p, chain.order)
            cost = np.bincount(layer, weights=chain.fwd_time + chain.bwd_time)
            for label, groups in (("DP partitioner", dp_partitioner(cost, k)),
                                  ("equal layers", equal_layers(cost.size, k))):
                t0 = time.perf_counter()
                cuts = layer_split(chain, layer, groups)
                stage_of = stage_of_cuts(chain, cuts)
                r = plan_on_stages(step, stage_of, list(range(len(cuts) + 1)))
                rows.append(row(name, k, m, label, r, step, time.perf_counter() - t0, cap, bound))
    return rows


def scale_row() -> list[list]:
    p = optpart.load(ROOT / "instances" / "scale" / "transformer-1e5.json.gz")
    t0 = time.perf_counter()
    one = optpart.solve(p)
    single = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = optpart.solve(p, micro_batches=8)
    piped = time.perf_counter() - t0
    return [[p.n_nodes, f"{single:.1f} s ({one.makespan:.3f} s step)", f"{piped:.1f} s ({r.makespan:.3f} s step, "
             f"{r.stats.get('stage_gap', float('nan')):.1%} from its stages' bound)", f"{piped / single:.2f}x"]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="gpt2,llama,resnet")
    ap.add_argument("--ks", default="2,4,8")
    ap.add_argument("--ms", default="4,8,16")
    ap.add_argument("--no-scale", action="store_true", help="skip the 10^5-operator timing")
    args = ap.parse_args()
    ks = [int(x) for x in args.ks.split(",")]
    ms = [int(x) for x in args.ms.split(",")]
    header = ["model", "K", "M", "method", "step", "speed-up", "gap (every plan)", "gap (its stages)",
              "peak max / capacity", "solve"]
    for name in args.models.split(","):  # one table per model, printed as soon as it is measured
        if name == "gpt2":
            base = optpart.load(ROOT / "instances" / "gpt2-training.json")
            rows = bench_model("GPT-2 small, 8 x 512 (bundled)", base, ks, ms, lambda b, k: 3 * 2**30)
        else:
            base, text = imported(llama if name == "llama" else resnet)
            one = float(base.param_bytes.sum() + base.output_bytes.sum())
            rows = bench_model(text, base, ks, ms, lambda b, k, one=one: max(one / k, one / 8) * 1.5)
        print(table(rows, header) + "\n", flush=True)
    if not args.no_scale:
        print()
        print(table(scale_row(), ["operators", "single-step heuristic", "pipelined, M = 8", "ratio"]))


if __name__ == "__main__":
    main()

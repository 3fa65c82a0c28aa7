"""Hypothesis strategies of pipelined training steps, stage cuts and valid action orders
(imported by the tests of tests/pipeline/ with ``from pipeline_strategies import ...``)."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import strategies as st

from optpart import LinkOverride, Links, Problem
from optpart.model.devices import Device
from optpart.pipeline.plan import Action

__all__ = ["training_steps", "random_cuts", "random_actions"]

#: Time units: zero, tiny, ordinary, huge (every node's time is a small integer times one).
TIME_UNITS = (1.0, 2.0 ** -30, 2.0 ** 20)


@st.composite
def training_steps(draw, max_layers: int = 6, max_devices: int = 3):
    """A training step with ``phase`` labels: forward layers (some with skip edges and weight
    views), a mirrored backward, optimizer updates colocated with their layer, a tied
    parameter across two modules now and then; times 0, tiny, ordinary or huge, equal times
    too; devices with uniform or per-pair links."""
    n_layers = draw(st.integers(1, max_layers))
    unit = draw(st.sampled_from(TIME_UNITS))
    equal = draw(st.booleans())
    t_draw = lambda: float(draw(st.integers(0, 3)) if not equal else 1) * unit  # noqa: E731
    nodes, edges, groups = [], [], []

    def node(nid, phase, module, out=0, param=0, temp=0, op=None):
        nodes.append({"id": nid, "time": t_draw(), "param_bytes": param, "output_bytes": out, "temp_bytes": temp,
                      "phase": phase, "module": module, **({"op": op} if op else {})})

    node("x", "forward", "", param=draw(st.integers(0, 8)))
    prev = "x"
    fwd = []
    for i in range(n_layers):
        f = f"f{i}"
        node(f, "forward", f"m{i}", out=draw(st.integers(0, 64)), temp=draw(st.integers(0, 8)))
        edges.append((prev, f, draw(st.integers(0, 32))))
        if i >= 2 and draw(st.integers(0, 3)) == 0:  # a skip connection
            edges.append((f"f{i - 2}", f, draw(st.integers(0, 32))))
        if draw(st.booleans()):  # a weight view (a source) and its update
            w = f"w{i}"
            node(w, "forward", f"m{i}")
            edges.append((w, f, draw(st.integers(0, 16))))
            groups.append([w, f])
        fwd.append(f)
        prev = f
    node("loss", "forward", "", out=draw(st.integers(0, 8)))
    edges.append((prev, "loss", draw(st.integers(0, 8))))
    node("gloss", "backward", "", out=draw(st.integers(0, 8)))
    edges.append(("loss", "gloss", draw(st.integers(0, 8))))
    grad_of = {"loss": "gloss"}
    for i in reversed(range(n_layers)):
        f, b = fwd[i], f"b{i}"
        node(b, "backward", f"m{i}", out=draw(st.integers(0, 64)), temp=draw(st.integers(0, 8)))
        edges.append((f, b, draw(st.integers(0, 16))))  # the saved activation
        for (s, d, _) in list(edges):
            if s == f and d in grad_of:
                edges.append((grad_of[d], b, draw(st.integers(0, 16))))
        grad_of[f] = b
        if f"w{i}" in {n["id"] for n in nodes}:
            u = f"update.w{i}"
            node(u, "optimizer", f"m{i}", param=draw(st.integers(0, 64)), op="optimizer.update")
            edges.append((b, u, draw(st.integers(0, 16))))
            groups[[g[0] for g in groups].index(f"w{i}")] += [b, u]
    if n_layers >= 2 and draw(st.integers(0, 3)) == 0:  # the last layer reuses the first weight: tied
        first = next((g for g in groups if g[0] == "w0"), None)
        if first is not None:
            last = f"f{n_layers - 1}"
            node("wt", "forward", "tail")
            edges.append(("wt", last, 4))
            first.append("wt")
    k = draw(st.integers(1, max_devices))
    speeds = draw(st.lists(st.sampled_from([1.0, 2.0]), min_size=k, max_size=k))
    latency = draw(st.sampled_from([0.0, unit, 3 * unit]))
    bandwidth = draw(st.sampled_from([np.inf, 4.0 / unit, 64.0 / unit]))
    pairs = ()
    if k >= 3 and draw(st.booleans()):
        pairs = (LinkOverride("d0", "d2", latency + unit, bandwidth / 4),)
    devices = [Device(f"d{i}", float("inf"), speeds[i]) for i in range(k)]
    ids = {n["id"] for n in nodes}
    groups = [g for g in groups if len(g) > 1 and all(x in ids for x in g)]
    p = Problem.build(nodes, [{"src": s, "dst": d, "bytes": b} for s, d, b in edges], name="step",
                      constraints={"colocate": groups} if groups else None)
    m = draw(st.integers(1, 4))
    per = draw(st.booleans())
    p = p.with_meta(per_micro_batch=True) if per else p
    return p.with_devices(devices, links=Links(latency, bandwidth, pairs), constraints=p.constraints), m


def random_cuts(draw, chain, max_stages: int = 4) -> list[int]:
    """Increasing allowed boundaries of ``chain`` (at most ``max_stages - 1``)."""
    allowed = np.flatnonzero(chain.allowed).tolist()
    if not allowed:
        return []
    n = draw(st.integers(0, min(max_stages - 1, len(allowed))))
    return sorted(draw(st.lists(st.sampled_from(allowed), min_size=n, max_size=n, unique=True)))


def random_actions(seed: int, n_stages: int, stage_device, n_devices: int, m: int) -> list[list[Action]]:
    """A valid, deadlock-free random order: a random global interleaving of every (stage,
    micro-batch)'s ``F``, then ``B`` or ``I`` and ``W``, that respects the dependencies of
    the stage chain; each device keeps its share."""
    rng = random.Random(seed)
    split = {(s, i): rng.random() < 0.5 for s in range(n_stages) for i in range(m)}
    done: set[tuple[int, str, int]] = set()
    nf, nx, nw = [0] * n_stages, [0] * n_stages, [0] * n_stages  # next F, backward, weight-stream
    out: list[list[Action]] = [[] for _ in range(n_devices)]
    total = sum(3 if split[k] else 2 for k in split)
    while len(done) < total:
        ready = []
        for s in range(n_stages):
            if nf[s] < m and (s == 0 or (s - 1, "F", nf[s]) in done):
                ready.append(Action(s, "F", nf[s]))
            i = nx[s]
            if i < m and (s, "F", i) in done and (s == n_stages - 1 or (s + 1, "X", i) in done) \
                    and (split[(s, i)] or nw[s] == i):  # a full B joins the weight stream in order
                ready.append(Action(s, "I" if split[(s, i)] else "B", i))
            i = nw[s]
            if i < m and split[(s, i)] and (s, "X", i) in done:
                ready.append(Action(s, "W", i))
        a = rng.choice(ready)
        out[stage_device[a.stage]].append(a)
        key = "X" if a.kind in "BI" else a.kind
        done.add((a.stage, key, a.micro_batch))
        if a.kind == "F":
            nf[a.stage] += 1
        else:
            if a.kind != "W":
                nx[a.stage] += 1
            if a.kind != "I":
                nw[a.stage] += 1
    return out

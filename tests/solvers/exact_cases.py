"""Random and published cases shared by the exact solvers' tests (``cpsat``, ``milp``).

``random_problem``: tiny random DAGs mixing the model's features (the brute force's range);
``random_split``: tiny DAGs with the peak split; ``stg_problems``: the STG set's proven optima.
"""

from __future__ import annotations

import csv

import numpy as np
from conftest import shared_data
from oracle import brute_force

import optpart
from optpart import Constraints, Device
from optpart.model.devices import LinkOverride, Links


def random_problem(seed: int) -> optpart.Problem:
    """A random DAG of 3-7 nodes on 1-3 devices, with a random mix of the model's features."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 8))
    k = int(rng.integers(1, 4))
    integral = rng.random() < 0.5
    time_s = rng.integers(0, 10, size=n).astype(float) if integral else np.round(rng.uniform(0.1, 5.0, n), 3)
    memory = rng.integers(1, 20, size=n).astype(float)
    edges = [(u, w) for w in range(n) for u in range(w) if rng.random() < 0.35]
    src = [u for u, _ in edges]
    dst = [w for _, w in edges]
    nbytes = rng.integers(0, 50, size=len(edges)).astype(float)
    speeds = [1.0] * k if rng.random() < 0.5 else [float(s) for s in rng.choice([0.5, 1.0, 2.0], size=k)]
    total = float(memory.sum())
    tight = rng.random() < 0.5
    caps = [float(np.ceil(total / k * rng.uniform(1.0, 1.4))) if tight else 1e9 for _ in range(k)]
    devices = [Device(f"d{i}", caps[i], speeds[i]) for i in range(k)]
    pairs: tuple = ()
    if k >= 2 and rng.random() < 0.4:
        pairs = (LinkOverride("d0", "d1", float(rng.uniform(0, 1)), float(rng.choice([5.0, 50.0]))),)
    links = Links(latency=float(rng.choice([0.0, 0.5, 1.0])), bandwidth=float(rng.choice([10.0, 20.0, np.inf])),
                  pairs=pairs)
    ids = [f"v{i}" for i in range(n)]
    pin, colocate, forbid = {}, (), {}
    if k >= 2 and rng.random() < 0.3:
        pin = {ids[int(rng.integers(n))]: f"d{int(rng.integers(k))}"}
    if rng.random() < 0.3:
        a, b = rng.choice(n, size=2, replace=False)
        colocate = ((ids[int(a)], ids[int(b)]),)
    if k >= 2 and rng.random() < 0.3:
        forbid = {ids[int(rng.integers(n))]: (f"d{int(rng.integers(k))}",)}
    try:
        cons = Constraints(pin=pin, colocate=colocate, forbid=forbid)
        return optpart.Problem.from_arrays(ids, time_s, memory, src, dst, nbytes, devices=devices, links=links,
                                           constraints=cons, name=f"rand-{seed}")
    except optpart.ProblemError:  # e.g. a pin on a forbidden device: drop the constraints
        return optpart.Problem.from_arrays(ids, time_s, memory, src, dst, nbytes, devices=devices, links=links,
                                           name=f"rand-{seed}")


def feasible_random_problem(seed: int) -> tuple[optpart.Problem, float]:
    """The first draw of :func:`random_problem` at ``seed``, ``seed + 1000``, ... that some
    placement fits, with its brute-force optimum: tests that compare with an optimum get one
    on every item (about one draw in ten fits nothing)."""
    for draw in range(seed, seed + 100_000, 1000):
        p = random_problem(draw)
        best = brute_force(p)[0]
        if np.isfinite(best):
            return p, best
    raise AssertionError(f"no feasible draw from seed {seed}")


def random_split(seed: int, n_max: int, k_choices, integral_only: bool) -> optpart.Problem:
    """A random DAG of 3 to ``n_max`` nodes whose nodes give the param/output/temp split, on
    ``k_choices`` devices sized near the single-device need; ``integral_only``: integer times,
    no transfer bytes (what the integer brute force of the peak model needs)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, n_max + 1))
    k = int(rng.choice(k_choices))
    if integral_only:
        time_s = rng.integers(1, 4, size=n).astype(float)
    else:
        time_s = np.where(rng.random(n) < 0.2, 0.0, np.round(rng.uniform(0.1, 3.0, n), 2))
    par = rng.integers(0, 4, size=n).astype(float)
    out = rng.integers(0, 10, size=n).astype(float)
    tmp = np.where(rng.random(n) < 0.5, rng.integers(0, 6, size=n), 0).astype(float)
    edges = [(u, w) for w in range(n) for u in range(w) if rng.random() < 0.4]
    src = [u for u, _ in edges]
    dst = [w for _, w in edges]
    need = par.sum() + out.sum() + tmp.max()
    caps = [float(np.ceil(need / k * rng.uniform(0.8, 1.6))) for _ in range(k)]
    devices = [Device(f"d{i}", caps[i]) for i in range(k)]
    if integral_only:
        pairs = ((LinkOverride("d0", "d1", float(rng.integers(0, 3)), np.inf),) if rng.random() < 0.3 else ())
        links = Links(latency=float(rng.integers(0, 3)), pairs=pairs)
        nbytes = np.zeros(len(edges))
    else:
        links = Links(latency=float(rng.choice([0.0, 0.3])), bandwidth=float(rng.choice([10.0, np.inf])))
        nbytes = rng.integers(0, 20, size=len(edges)).astype(float)
    ids = [f"v{i}" for i in range(n)]
    cons = None
    if k >= 2 and rng.random() < 0.25:
        cons = Constraints(pin={ids[int(rng.integers(n))]: f"d{int(rng.integers(k))}"})
    return optpart.Problem.from_arrays(ids, time_s, None, src, dst, nbytes, devices=devices, links=links,
                                       constraints=cons, param_bytes=par, output_bytes=out, temp_bytes=tmp,
                                       name=f"peak-{seed}")


def _stg_cases(p: int, count: int) -> list[tuple[str, int]]:
    root = shared_data("stg")
    out = []
    for line in (root / "optima" / f"Case50_{p}_OPT.csv").read_text().splitlines():
        fields = line.strip().split(",")
        if len(fields) == 3:
            out.append((fields[0], int(fields[2])))
    return out[:count]


def stg_problems(p: int, count: int) -> list[tuple[str, optpart.Problem, int]]:
    """``(file, problem on p identical devices, published optimum)`` of the first ``count``
    proven STG instances (skipped, saying so, without ../shared/data)."""
    from optpart.formats.stg import read_stg
    root = shared_data("stg")
    return [(rel, read_stg(root / rel).with_devices(p), opt) for rel, opt in _stg_cases(p, count)]


def stg_optimum_bounds(k: int) -> dict[str, tuple[float, float]]:
    """The published STG optimum per file for ``k`` processors as (lower, upper), equal when proven."""
    rows = csv.reader(shared_data("stg", "optima", f"Case50_{k}_OPT.csv").read_text().splitlines())
    return {r[0]: (float(r[2]), float(r[-1])) for r in rows if r}

"""The fast paths that make 10^6-node graphs cheap give the same answers as the plain ones.

* the stored topological order (``.npz`` member ``topo``) is accepted exactly when it is
  the order Kahn's algorithm computes (:func:`optpart.model.problem._is_kahn_order`);
* the ``.npz`` round trip keeps metadata, constraints and the order, and refuses a
  stale order; cycles and duplicates are still reported by node name;
* the EFT engine's ``near`` mode (candidates from :meth:`StaticPolicy.memory_filter`,
  uniform links without per-pair lookups) schedules exactly as a plain implementation
  from the full :meth:`StaticPolicy.devices_for` list and the per-pair formula;
* the result writer's float text and row joining equal ``repr`` and a plain join, and a
  result file reads back to the same result.
"""

from __future__ import annotations

import gc
import json

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import optpart
from optpart import Constraints, Device, Problem
from optpart.errors import OptpartError, ProblemError
from optpart.formats.optpart_json import _joined_rows, float_reprs, problem_to_json, result_to_json
from optpart.model.graph import is_kahn_order as _is_kahn_order
from optpart.schedule import NoRoom, StaticPolicy, eft_schedule
from optpart.schedule.graph import Graph
from optpart.model.paths import priority_order

from strategies import examples


# ---------------------------------------------------------------------- random DAGs
@st.composite
def dags(draw, max_nodes: int = 14, shuffled: bool = False):
    """``(n, src, dst)``: a random DAG; node indices in a topological order, or shuffled."""
    n = draw(st.integers(1, max_nodes))
    pairs = [(u, w) for w in range(n) for u in range(w)]
    picked = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=3 * n)) if pairs else []
    if shuffled:
        perm = draw(st.permutations(range(n)))
        picked = [(perm[u], perm[w]) for u, w in picked]
    picked = draw(st.permutations(picked))  # edge order matters to Kahn's tie-breaks
    src = [u for u, _ in picked]
    dst = [w for _, w in picked]
    return n, src, dst


def _problem(n, src, dst, **kw) -> Problem:
    return Problem.from_arrays([f"v{i}" for i in range(n)], np.ones(n), np.ones(n), src, dst, **kw)


@settings(max_examples=examples(150))
@given(st.one_of(dags(), dags(shuffled=True)))
def test_kahn_order_is_recognised_and_reused(dag):
    n, src, dst = dag
    p = _problem(n, src, dst)
    assert _is_kahn_order(p.topo, p.edge_src, p.in_edges, p.in_ptr)
    q = _problem(n, src, dst, topo=p.topo)
    assert q.topo.tolist() == p.topo.tolist()
    assert q.topo_rank.tolist() == p.topo_rank.tolist()


@settings(max_examples=examples(150))
@given(st.one_of(dags(), dags(shuffled=True)), st.data())
def test_any_other_order_is_refused(dag, data):
    """Every permutation other than Kahn's order, topological or not, is refused."""
    n, src, dst = dag
    p = _problem(n, src, dst)
    other = data.draw(st.permutations(p.topo.tolist()))
    accepted = _is_kahn_order(np.array(other, dtype=np.int64), p.edge_src, p.in_edges, p.in_ptr)
    assert accepted == (other == p.topo.tolist())
    if not accepted:
        with pytest.raises(ProblemError, match="topological order"):
            _problem(n, src, dst, topo=other)


def test_other_topological_orders_are_refused():
    # 0 -> 1 and a second source 2: Kahn's order (FIFO) is 0, 2, 1; 0, 1, 2 is also topological
    p = _problem(3, [0], [1])
    assert p.topo.tolist() == [0, 2, 1]
    for wrong in ([0, 1, 2], [2, 0, 1], [0, 2], [0, 0, 1], [0, 2, 3]):
        assert not _is_kahn_order(np.array(wrong), p.edge_src, p.in_edges, p.in_ptr)
    assert not _is_kahn_order(np.array([0.0, 2.0, 1.0]), p.edge_src, p.in_edges, p.in_ptr)


def test_a_cycle_is_named_even_with_a_claimed_order():
    with pytest.raises(ProblemError, match="cycle: node 'v[12]' lies on a cycle"):
        _problem(3, [0, 1, 2], [1, 2, 1], topo=[0, 1, 2])


def test_duplicates_and_self_loops_are_named():
    with pytest.raises(ProblemError, match="duplicate edge 'v0' -> 'v1'"):
        _problem(3, [0, 1, 0], [1, 2, 1], topo=[0, 1, 2])
    with pytest.raises(ProblemError, match="node 'v2' has an edge to itself"):
        _problem(3, [0, 2], [1, 2])
    with pytest.raises(ProblemError, match="duplicate node id 'a'"):
        Problem.from_arrays(["a", "b", "a"], np.ones(3), np.ones(3), copy=False)


def test_copy_false_keeps_the_readers_lists_and_copy_true_does_not():
    from optpart.model.frozen import FrozenList  # what the readers build (a frozen problem's lists)
    ids, meta = FrozenList(["a", "b"]), FrozenList([{"op": "x"}, {"op": "y"}])
    p = Problem.from_arrays(ids, np.ones(2), np.ones(2), [0], [1], node_meta=meta, copy=False)
    assert p.node_ids is ids and p.node_meta is meta
    q = Problem.from_arrays(ids, np.ones(2), np.ones(2), [0], [1], node_meta=meta)
    assert q.node_ids is not ids and q.node_meta[0] is not meta[0]
    assert q.node_ids == ids and q.node_meta == meta


# ---------------------------------------------------------------------- .npz round trip
def _rich_problem() -> Problem:
    return Problem.build(
        nodes=[{"id": "w", "time": 0.5, "param_bytes": 8, "output_bytes": 2, "module": "fc", "phase": "fwd"},
               {"id": "x", "time": 1.0, "memory": 3, "module": "fc", "phase": "fwd"},
               {"id": "y", "time": 2.0, "memory": 1, "module": "loss", "phase": "bwd"},
               {"id": "u", "time": 0.0, "memory": 2, "module": "fc", "phase": "bwd"},
               {"id": "s", "time": 1.5, "memory": 1, "module": "head", "phase": "fwd"}],
        edges=[{"src": "x", "dst": "y", "bytes": 4}, {"src": "w", "dst": "y", "bytes": 1},
               {"src": "y", "dst": "u"}, {"src": "w", "dst": "u", "bytes": 2}, {"src": "s", "dst": "u"}],
        devices=[Device("g0", 64.0), Device("g1", 32.0, 2.0)],
        links={"latency": 0.25, "bandwidth": 8},
        constraints={"colocate": [["w", "u"]], "pin": {"s": "g1"}, "forbid": {"x": ["g1"]}},
        name="rich", meta={"source": "test"})


def test_npz_round_trip_with_metadata_and_order(tmp_path):
    p = _rich_problem()
    path = tmp_path / "rich.npz"
    optpart.save(p, path)
    q = optpart.load(path)
    assert problem_to_json(q) == problem_to_json(p)
    assert q.node_meta == p.node_meta and q.node_meta[0] == {"module": "fc", "phase": "fwd"}
    assert q.topo.tolist() == p.topo.tolist()
    assert [g.tolist() for g in q.groups] == [g.tolist() for g in p.groups]
    for arr in (q.time, q.memory, q.edge_src, q.topo, q.groups[0]):
        assert not arr.flags.writeable


def test_npz_without_an_order_still_reads(tmp_path):
    """Files written before the ``topo`` member existed read the same."""
    import zipfile
    p = _rich_problem()
    path, old = tmp_path / "new.npz", tmp_path / "old.npz"
    optpart.save(p, path)
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(old, "w") as out:
        for info in src.infolist():
            if info.filename != "topo.npy":
                out.writestr(info, src.read(info))
    q = optpart.load(old)
    assert q.topo.tolist() == p.topo.tolist()
    assert problem_to_json(q) == problem_to_json(p)


def test_npz_with_a_stale_order_is_refused(tmp_path):
    import io
    import zipfile
    p = _rich_problem()
    path, bad = tmp_path / "p.npz", tmp_path / "bad.npz"
    optpart.save(p, path)
    buf = io.BytesIO()
    np.lib.format.write_array(buf, p.topo[::-1].copy())
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(bad, "w") as out:
        for info in src.infolist():
            out.writestr(info, buf.getvalue() if info.filename == "topo.npy" else src.read(info))
    with pytest.raises(OptpartError, match="topological order"):
        optpart.load(bad)


def test_load_restores_the_garbage_collector(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"format": "optpart-problem", "version": 1, "nodes": [{"id": "a"}]}')
    assert gc.isenabled()
    with pytest.raises(OptpartError):
        optpart.load(path)
    assert gc.isenabled()


# ---------------------------------------------------------------------- EFT near candidates
def _reference_near(g, order, policy):
    """``candidates="near"`` EFT written plainly (the oracle): the full allowed list from
    ``devices_for``; with more than two, the allowed predecessors' devices plus the allowed
    device whose timeline ends first (ties: lowest index); the per-pair arrival formula;
    earliest finish with insertion, ties to the lower device."""
    from optpart.schedule import GapLine, NoRoom

    lines = [GapLine() for _ in range(g.k)]
    place, start, finish = [-1] * g.n, [0.0] * g.n, [0.0] * g.n
    for v in order:
        devs = policy.devices_for(v)
        if not devs:
            raise NoRoom(v, policy.no_room_message(v))
        preds = range(g.in_ptr[v], g.in_ptr[v + 1])
        if len(devs) > 2:
            cand = []
            for i in preds:
                d = place[g.pred[i]]
                if d in devs and d not in cand:
                    cand.append(d)
            first = min(devs, key=lambda d: (lines[d].end, d))
            devs = sorted(set(cand) | {first})
        best = None
        for d in devs:
            ready = max([finish[g.pred[i]] + (g.lat[place[g.pred[i]]][d] + g.in_bytes[i] / g.bw[place[g.pred[i]]][d])
                         for i in preds], default=0.0)
            dur = g.time[v] / g.speed[d]
            s = ready if ready >= lines[d].end else lines[d].earliest_start(ready, dur)
            if best is None or s + dur < best[0]:
                best = (s + dur, d, s)
        f, d, s = best
        lines[d].reserve(s, f)
        policy.place(v, d, s, f)
        place[v], start[v], finish[v] = d, s, f
    return place, start, finish


def _schedule_or_stuck(run):
    """The schedule, or ``("stuck", node, message)`` when a node finds no room (``NoRoom``); any
    other exception propagates, so two crashes never compare equal."""
    try:
        return run()
    except NoRoom as exc:
        return ("stuck", exc.node, exc.message)


@settings(max_examples=examples(60))
@given(n=st.integers(8, 80), k=st.integers(3, 9), seed=st.integers(0, 10**6),
       slack=st.sampled_from([1.05, 1.3, 1.6, 3.0]), constrained=st.booleans())
def test_near_candidates_equal_the_plain_selection_from_the_full_list(n, k, seed, slack, constrained):
    rng = np.random.default_rng(seed)
    src, dst = [], []
    for w in range(1, n):
        for u in rng.choice(w, size=min(w, int(rng.integers(1, 4))), replace=False).tolist():
            src.append(u)
            dst.append(w)
    memory = rng.integers(1, 50, size=n).astype(float)
    cap = slack * memory.sum() / k
    ids = [f"n{i}" for i in range(n)]
    cons = None
    if constrained:
        pin = {ids[i]: f"d{int(rng.integers(k))}" for i in rng.choice(n, size=2, replace=False).tolist()}
        forbid = {ids[i]: (f"d{int(rng.integers(k))}",) for i in rng.choice(n, size=3, replace=False).tolist()
                  if ids[i] not in pin}
        groups = tuple((ids[a], ids[a + 1]) for a in range(0, n - 1, 7) if ids[a] not in pin and ids[a + 1] not in pin)
        cons = Constraints(pin=pin, forbid=forbid, colocate=groups)
    devices = [Device(f"d{d}", float(cap * (0.7 + 0.6 * rng.random())), float(rng.choice([1.0, 2.0])))
               for d in range(k)]
    try:
        p = Problem.from_arrays(ids, rng.random(n), memory, src, dst, rng.integers(0, 9, size=len(src)),
                                devices=devices, links=optpart.Links(0.1, 4.0), constraints=cons)
    except ProblemError:
        assume(False)  # a node larger than every device: hypothesis draws another case
    g = Graph(p)
    order = priority_order(g.problem, np.asarray(g.mean_bottom)).tolist()

    def engine():
        r = eft_schedule(g, order, StaticPolicy(p), candidates="near")
        return r.place, r.start, r.finish

    assert _schedule_or_stuck(engine) == _schedule_or_stuck(lambda: _reference_near(g, order, StaticPolicy(p)))


# ---------------------------------------------------------------------- result writer
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=40))
def test_float_text_equals_repr(values):
    assert float_reprs(np.array(values, dtype=np.float64)) == [repr(float(x)) for x in values]


def test_float_text_at_the_format_boundaries():
    edge = [0.0, -0.0, 1e-4, 9.999999999999999e-05, 1e-5, 5e-324, 1e16, 9999999999999998.0, 1.5e-7,
            1.7976931348623157e308, -1e-5, 123.456, 2.0 ** 60]
    assert float_reprs(np.array(edge)) == [repr(x) for x in edge]


@given(st.lists(st.tuples(st.text(max_size=5), st.text(max_size=5)), max_size=10))
def test_joined_rows_equal_a_plain_join(rows):
    a = [x for x, _ in rows]
    b = [y for _, y in rows]
    assert _joined_rows([a, ": ", b, "}"], len(rows)) == ",\n    ".join(f"{x}: {y}}}" for x, y in rows)


def test_result_json_round_trip(tmp_path):
    p = _rich_problem()
    r = optpart.solve(p, "heuristic", memory_model="static")
    path = tmp_path / "r.json"
    optpart.save_result(r, p, path)
    doc = json.loads(path.read_text())
    assert list(doc["placement"]) == p.node_ids
    back = optpart.load_result(path, p)
    assert back.placement.tolist() == r.placement.tolist()
    assert back.start.tolist() == r.start.tolist() and back.finish.tolist() == r.finish.tolist()
    assert back.makespan == r.makespan
    assert result_to_json(back, p, include_wall_time=False) == result_to_json(r, p, include_wall_time=False)


@settings(max_examples=examples(40))
@given(n=st.integers(2, 60), k=st.integers(2, 6), seed=st.integers(0, 10**6),
       candidates=st.sampled_from(["all", "near"]), free=st.booleans())
def test_uniform_link_arrivals_equal_the_per_pair_formula(n, k, seed, candidates, free):
    """The engine's shortcut for uniform links (no per-pair lookups) gives the same schedule."""
    rng = np.random.default_rng(seed)
    src, dst = [], []
    for w in range(1, n):
        for u in rng.choice(w, size=min(w, int(rng.integers(1, 4))), replace=False).tolist():
            src.append(u)
            dst.append(w)
    links = optpart.Links(0.0, float("inf")) if free else optpart.Links(float(rng.random()), float(rng.uniform(1, 9)))
    p = Problem.from_arrays([f"n{i}" for i in range(n)], rng.random(n) * rng.integers(0, 2, size=n), np.ones(n),
                            src, dst, rng.random(len(src)) * 10,
                            devices=[Device(f"d{d}", 1e9, float(rng.choice([1.0, 1.5]))) for d in range(k)],
                            links=links)
    fast, plain = Graph(p), Graph(p)
    assert fast.uniform
    plain.uniform = False  # the per-pair formula for every device pair
    order = priority_order(fast.problem, np.asarray(fast.mean_bottom)).tolist()
    a = eft_schedule(fast, order, StaticPolicy(p), candidates=candidates)
    b = eft_schedule(plain, order, StaticPolicy(p), candidates=candidates)
    assert (a.place, a.start, a.finish) == (b.place, b.start, b.finish)

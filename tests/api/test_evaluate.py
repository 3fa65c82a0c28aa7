"""The evaluator on hand-computed schedules, and the checker tested against mutations."""

from __future__ import annotations

import numpy as np
import pytest

import optpart
from optpart import Device, Problem, ScheduleError, Status
from optpart.evaluate import bottom_levels, canonical_schedule, peak_memory, static_memory, violations


def test_diamond_by_hand(diamond):
    # a, b, d on gpu0 and c on gpu1; a transfer takes 0.5 + 10/10 = 1.5 s.
    # a [0,1]; b [1,3]; c ready 1+1.5 = 2.5 -> [2.5,5.5]; d ready max(3, 5.5+1.5) = 7 -> [7,8].
    start, finish = canonical_schedule(diamond, [0, 0, 1, 0])
    assert start.tolist() == [0.0, 1.0, 2.5, 7.0]
    assert finish.tolist() == [1.0, 3.0, 5.5, 8.0]
    r = optpart.evaluate(diamond, [0, 0, 1, 0])
    assert r.makespan == 8.0 and r.status is Status.FEASIBLE
    assert r.memory_static.tolist() == [12.0, 4.0]
    optpart.check(diamond, r)


def test_single_device_order_follows_bottom_level():
    # x and y ready at 0 on one device; y leads to z (5 s), so y and then z run before x,
    # although x has the lower index.
    p = Problem.build(nodes=[{"id": "x", "time": 1, "memory": 0}, {"id": "y", "time": 1, "memory": 0},
                             {"id": "z", "time": 5, "memory": 0}],
                      edges=[{"src": "y", "dst": "z"}], devices=[Device("g", 1)])
    assert bottom_levels(p, [0, 0, 0]).tolist() == [1.0, 6.0, 5.0]
    start, finish = canonical_schedule(p, [0, 0, 0])
    assert start.tolist() == [6.0, 0.0, 1.0] and finish.max() == 7.0


def test_ties_go_to_the_lower_index_and_idle_devices_wait():
    p = Problem.build(nodes=[{"id": "s", "time": 2, "memory": 0}, {"id": "p", "time": 1, "memory": 0},
                             {"id": "q", "time": 1, "memory": 0}],
                      edges=[{"src": "s", "dst": "p", "bytes": 0}, {"src": "s", "dst": "q", "bytes": 0}],
                      devices=[Device("g0", 1), Device("g1", 1)], links={"latency": 3, "bandwidth": "inf"})
    # s on g0; p and q on g1 wait for s (2) plus latency (3); equal priority: p (lower index) first.
    start, finish = canonical_schedule(p, [0, 1, 1])
    assert start.tolist() == [0.0, 5.0, 6.0]


def test_speed_divides_time():
    p = Problem.build(nodes=[{"id": "a", "time": 4, "memory": 0}], devices=[Device("slow", 1, 1.0), Device("fast", 1, 4.0)])
    assert optpart.evaluate(p, [1]).makespan == 1.0
    assert optpart.evaluate(p, [0]).makespan == 4.0


def test_peak_memory_by_hand():
    # a -> b on one device. a: param 1, output 10, temp 3; b: param 1, output 5.
    # t in [0,1): params 2 + a.temp 3 + a.out 10 = 15; [1,2): params 2 + a.out 10 + b.out 5 = 17.
    p = Problem.build(nodes=[{"id": "a", "time": 1, "param_bytes": 1, "output_bytes": 10, "temp_bytes": 3},
                             {"id": "b", "time": 1, "param_bytes": 1, "output_bytes": 5}],
                      edges=[{"src": "a", "dst": "b", "bytes": 10}], devices=[Device("g", 100), Device("h", 100)],
                      links={"latency": 1, "bandwidth": "inf"})
    r = optpart.evaluate(p, [0, 0])
    assert r.memory_static.tolist() == [20.0, 0.0]
    assert r.memory_peak.tolist() == [17.0, 0.0]
    # Across devices: a on g [0,1]; its output lives on g until the transfer lands at 2;
    # the copy on h lives from 2 until b finishes at 3. g: 1 + 3 + 10 = 14; h: 1 + 10 + 5 = 16.
    r = optpart.evaluate(p, [0, 1])
    assert r.finish.tolist() == [1.0, 3.0]
    assert r.memory_peak.tolist() == [14.0, 16.0]


def test_peak_equals_static_without_split(diamond):
    r = optpart.evaluate(diamond, [0, 1, 1, 0])
    assert np.array_equal(r.memory_peak, r.memory_static)


def _valid(diamond):
    r = optpart.evaluate(diamond, [0, 0, 1, 0])
    assert violations(diamond, r) == []
    return r


def test_checker_rejects_a_node_moved_earlier(diamond):
    r = _valid(diamond)
    r.start[3] -= 0.5
    r.finish[3] -= 0.5
    r.makespan = float(r.finish.max())
    with pytest.raises(ScheduleError, match="edge 'c' -> 'd'"):
        optpart.check(diamond, r)


def test_checker_rejects_overlap(diamond):
    r = _valid(diamond)
    r.placement = np.array([0, 0, 0, 0])  # b [1,3] and c [2.5,5.5] now share gpu0
    r.start[2], r.finish[2] = 2.5, 5.5
    assert any("overlap" in v for v in violations(diamond, r))


def test_checker_rejects_memory_overflow(diamond):
    small = diamond.with_devices([Device("gpu0", 11), Device("gpu1", 12)])
    r = optpart.evaluate(small, [0, 0, 1, 0])
    assert any("device 'gpu0' holds" in v for v in violations(small, r))


def test_checker_rejects_wrong_duration_makespan_and_status(diamond):
    r = _valid(diamond)
    r.finish[0] = 0.5
    assert any("runs 0.5" in v for v in violations(diamond, r))
    r = _valid(diamond)
    r.makespan = 7.0
    assert any("reported makespan" in v for v in violations(diamond, r))
    r = _valid(diamond)
    r.status = Status.OPTIMAL
    assert any("status 'optimal'" in v for v in violations(diamond, r))


def test_checker_rejects_broken_constraints():
    p = Problem.build(nodes=[{"id": x, "time": 1, "memory": 1} for x in "abc"],
                      devices=[Device("g0", 9), Device("g1", 9)],
                      constraints={"pin": {"a": "g1"}, "colocate": [["b", "c"]]})
    r = optpart.evaluate(p, [0, 0, 1])
    found = " | ".join(violations(p, r))
    assert "node 'a' is on device 'g0'" in found and "split over devices" in found


def test_evaluator_accepts_a_solver_schedule(diamond):
    r = optpart.evaluate(diamond, [0, 0, 1, 0], start=np.array([0.0, 1.0, 2.5, 7.5]))
    assert r.makespan == 8.5 and violations(diamond, r) == []


def test_bounds(diamond):
    b = optpart.all_bounds(diamond)
    assert b == {"critical_path": 5.0, "work": 3.5, "largest_node": 3.0}
    assert optpart.lower_bound(diamond) == 5.0
    fast = diamond.with_devices([Device("gpu0", 12, 2.0), Device("gpu1", 12, 1.0)])
    assert optpart.all_bounds(fast) == {"critical_path": 2.5, "work": 7 / 3, "largest_node": 1.5}


def test_bounds_respect_pins():
    p = Problem.build(nodes=[{"id": "a", "time": 4, "memory": 0}], devices=[Device("slow", 1, 1.0), Device("fast", 1, 4.0)],
                      constraints={"pin": {"a": "slow"}})
    assert optpart.critical_path_bound(p) == 4.0


def test_static_memory_is_a_bincount(diamond):
    assert static_memory(diamond, [1, 1, 1, 0]).tolist() == [4.0, 12.0]
    assert peak_memory(diamond, [1, 1, 1, 0], *canonical_schedule(diamond, [1, 1, 1, 0])).tolist() == [4.0, 12.0]


def test_random_placements_are_always_valid():
    from optpart.generators import layered_dag
    rng = np.random.default_rng(0)
    for seed in range(20):
        p = layered_dag(40, k=3, seed=seed, ccr=2.0)
        placement = rng.integers(0, 3, size=p.n_nodes)
        r = optpart.evaluate(p, placement)
        assert violations(p, r) == []
        assert r.makespan >= optpart.lower_bound(p) - 1e-9


# ---------------------------------------------------------------- the judge (optpart evaluate)
def _claims(problem, solver="heft", **kw):
    """A result document written by optpart, as a dict, and a function to judge a variant of it."""
    import json

    from optpart.formats import result_to_json
    from optpart.formats.optpart_json import result_from_dict

    doc = json.loads(result_to_json(optpart.solve(problem, solver, **kw), problem))

    def verdict(change=None, trust_bound=False):
        d = json.loads(json.dumps(doc))
        if change:
            change(d)
        return optpart.judge(problem, d, result_from_dict(d, problem), trust_bound=trust_bound)

    return doc, verdict


def test_judge_accepts_an_honest_result(diamond):
    _, verdict = _claims(diamond)
    v = verdict()
    assert v.valid and not v.false_claims and not v.unverifiable


@pytest.mark.parametrize("field, change, needle", [
    ("makespan", lambda d: d.update(makespan=d["makespan"] - 0.5), "makespan: stated"),
    ("finish", lambda d: d["schedule"]["b"].update(finish=d["schedule"]["b"]["finish"] + 1), "finish of node 'b'"),
    ("gap", lambda d: d.update(gap=0.0), "gap: stated 0"),
    ("memory", lambda d: d["memory"]["gpu0"].update(static=d["memory"]["gpu0"]["static"] + 1),
     "memory (static) of device 'gpu0'"),
    ("memory device", lambda d: d["memory"].update(gpu9={"static": 0, "peak": 0}), "device 'gpu9'"),
    ("start", lambda d: d["schedule"]["d"].update(start=0.0, finish=1.0), "'d' starts at 0"),
    ("bound above makespan", lambda d: d.update(lower_bound=d["makespan"] * 2), "above the makespan"),
    ("optimal above own bound", lambda d: d.update(status="optimal", lower_bound=0.1, gap=(d["makespan"] - 0.1)
                                                   / d["makespan"]), "above the file's own lower bound"),
])
def test_judge_names_each_false_claim_with_both_values(diamond, field, change, needle):
    _, verdict = _claims(diamond)
    v = verdict(change)
    assert not v.valid, field
    assert any(needle in c for c in v.false_claims), v.false_claims


def test_judge_memory_over_capacity_under_the_claimed_model():
    p = optpart.Problem.build(nodes=[{"id": "a", "time": 1, "memory": 6}, {"id": "b", "time": 1, "memory": 6}],
                              devices=[Device("g0", 12), Device("g1", 12)])
    _, verdict = _claims(p)
    small = optpart.Problem.build(nodes=[{"id": "a", "time": 1, "memory": 6}, {"id": "b", "time": 1, "memory": 6}],
                                  devices=[Device("g0", 8), Device("g1", 8)])
    import json

    from optpart.formats.optpart_json import result_from_dict
    doc = json.loads(json.dumps(_claims(p)[0]))
    doc["placement"] = {"a": "g0", "b": "g0"}
    doc["schedule"] = {"a": {"start": 0, "finish": 1}, "b": {"start": 1, "finish": 2}}
    doc.pop("memory")
    v = optpart.judge(small, doc, result_from_dict(doc, small))
    assert any("device 'g0' holds 12 B" in c for c in v.false_claims), v.false_claims
    assert verdict().valid


def test_an_optimal_claim_beyond_the_generic_bound_is_not_verifiable(diamond):
    doc, verdict = _claims(diamond)
    # The makespan is above the generic bound here, so only the solver's word could make it optimal.
    assert doc["makespan"] > optpart.lower_bound(diamond) + 1e-9

    def claim(d):
        d.update(status="optimal", lower_bound=d["makespan"], gap=0.0)

    v = verdict(claim)
    assert v.valid and not v.false_claims and v.wording == "valid; optimality not re-proved"
    assert any("not verifiable" in u for u in v.unverifiable) and any("lower_bound" in u for u in v.unverifiable)
    trusted = verdict(claim, trust_bound=True)
    assert trusted.valid and trusted.notes and trusted.wording == "valid"
    # A false claim, and only that, is invalid.
    false = verdict(lambda d: d.update(status="optimal", lower_bound=d["makespan"] * 2, gap=0.0))
    assert not false.valid and false.wording == "invalid"


def test_an_optimal_claim_at_the_generic_bound_is_proven():
    p = optpart.Problem.build(nodes=[{"id": "a", "time": 1.0, "memory": 1}, {"id": "b", "time": 1.0, "memory": 1}],
                              devices=[Device("g0", 8), Device("g1", 8)])
    from conftest import budget
    doc, verdict = _claims(p, "cpsat", **budget("cpsat"))
    assert doc["status"] == "optimal"
    assert verdict().valid


def test_a_false_infeasible_claim_is_caught(diamond):
    def claim_infeasible(d):
        for key in ("placement", "schedule", "memory", "makespan", "gap"):
            d.pop(key)
        d["status"] = "infeasible"

    _, verdict = _claims(diamond)
    v = verdict(claim_infeasible)
    assert not v.valid and any("status 'infeasible': heft finds a placement" in c for c in v.false_claims)


def test_an_infeasible_claim_is_proven_by_the_screening_or_not_verifiable():
    import json

    from optpart.formats.optpart_json import result_from_dict
    # Proven: the node is larger than every device.
    p = optpart.Problem.build(nodes=[{"id": "a", "time": 1, "memory": 20}], devices=[Device("g0", 8)])
    doc = json.loads(optpart.formats.result_to_json(optpart.solve(p, "heft"), p))
    v = optpart.judge(p, doc, result_from_dict(doc, p))
    assert v.valid and doc["status"] == "infeasible" and "proven by the evaluator's screening" in v.notes[0]
    # Not provable by the screening and heft finds nothing: bin packing 3 x 6 B into two 10 B devices.
    q = optpart.Problem.build(nodes=[{"id": x, "time": 1, "memory": 6} for x in "abc"],
                              devices=[Device("g0", 10), Device("g1", 10)])
    assert q.infeasibility() is None
    doc = {"format": "optpart-result", "version": 1, "problem": "problem", "solver": "cpsat",
           "status": "infeasible", "lower_bound": 0.0, "memory_model": "static"}
    v = optpart.judge(q, doc, result_from_dict(doc, q))
    assert v.wording == "valid; infeasibility not re-proved"
    assert any("not verifiable here (claimed by cpsat" in n for n in v.unverifiable)
    assert optpart.judge(q, doc, result_from_dict(doc, q), trust_bound=True).wording == "valid"


def test_a_forged_infeasible_claim_on_a_tight_packing_is_refuted_by_a_witness():
    """A tight bin packing (6+4 and 5+5 in two 10 B devices) that the screening cannot decide:
    a witness placement refutes the forged claim."""

    from optpart.formats.optpart_json import result_from_dict
    q = optpart.Problem.build(nodes=[{"id": x, "time": t, "memory": m}
                                     for x, t, m in (("a", 4, 6), ("b", 3, 5), ("c", 2, 5), ("d", 1, 4))],
                              devices=[Device("g0", 10), Device("g1", 10)])
    doc = {"format": "optpart-result", "version": 1, "problem": "problem", "solver": "forged",
           "status": "infeasible", "lower_bound": 0.0, "memory_model": "static"}
    v = optpart.judge(q, doc, result_from_dict(doc, q))
    assert not v.valid and any(c.startswith("status 'infeasible':") and "finds a placement" in c
                               for c in v.false_claims)


def test_a_result_for_another_problem_is_a_false_claim(diamond):
    import json

    from optpart.formats.optpart_json import result_from_dict
    doc = json.loads(optpart.formats.result_to_json(optpart.solve(diamond, "heft"), diamond))
    doc["problem"] = "other"
    v = optpart.judge(diamond, doc, result_from_dict(doc, diamond))
    assert not v.valid and any("the result is for 'other'" in c for c in v.false_claims)


def test_evaluate_cli_exit_codes_and_json_verdict(tmp_path, diamond, capsys):
    import json

    from optpart.cli import main
    problem_file = tmp_path / "p.json"
    optpart.save(diamond, problem_file)
    result_file = tmp_path / "r.json"
    assert main(["solve", str(problem_file), "-s", "heft", "-o", str(result_file)]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(problem_file), str(result_file), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == {"valid": True, "verdict": "valid", "false_claims": [],
                                                              "unverifiable": [], "notes": []}
    doc = json.loads(result_file.read_text())
    doc["makespan"] = 1.0
    result_file.write_text(json.dumps(doc))
    assert main(["evaluate", str(problem_file), str(result_file), "--json"]) == 1
    captured = capsys.readouterr()
    verdict = json.loads(captured.out)["verdict"]
    assert not verdict["valid"] and verdict["false_claims"][0].startswith("makespan: stated 1, recomputed")
    assert captured.err.count("\n") == 1 and "false claim: makespan" in captured.err


def test_a_scored_placement_over_capacity_is_never_feasible():
    """Python and CLI alike: memory broken under the model it is scored in means status 'invalid'."""
    nodes = [{"id": "a", "time": 1, "param_bytes": 8, "output_bytes": 4}, {"id": "b", "time": 1, "param_bytes": 8}]
    p = optpart.Problem.build(nodes=nodes, edges=[{"src": "a", "dst": "b", "bytes": 4}],
                              devices=[Device("g0", 16), Device("g1", 16)])
    both = {"a": "g0", "b": "g0"}  # 8 + 8 parameters + a's 4 B output > 16 B under peak
    r = optpart.evaluate(p, both)  # the default memory model is peak, as everywhere
    assert r.memory_model == "peak" and r.status is optpart.Status.INVALID and not r.ok
    assert "device 'g0' holds 20 B (peak) but has 16 B" in r.message
    with pytest.raises(ScheduleError, match="device 'g0' holds"):
        optpart.check(p, r)
    apart = optpart.evaluate(p, {"a": "g0", "b": "g1"})
    assert apart.status is optpart.Status.FEASIBLE
    optpart.check(p, apart)
    pinned = p.with_devices(list(p.devices), constraints=optpart.model.problem.Constraints(pin={"b": "g0"}))
    assert optpart.evaluate(pinned, {"a": "g0", "b": "g1"}).status is optpart.Status.INVALID


def test_the_cli_never_calls_a_placement_over_capacity_feasible(tmp_path, capsys):
    import dataclasses
    import json

    from optpart.cli import main

    nodes = [{"id": "a", "time": 1, "param_bytes": 8, "output_bytes": 4}, {"id": "b", "time": 1, "param_bytes": 8}]
    p = optpart.Problem.build(nodes=nodes, edges=[{"src": "a", "dst": "b", "bytes": 4}],
                              devices=[Device("g0", 16), Device("g1", 16)])
    optpart.save(p, tmp_path / "p.json")
    over = optpart.evaluate(p, {"a": "g0", "b": "g0"})
    lie = dataclasses.replace(over, status=Status.FEASIBLE, message="")  # a file claiming 'feasible' at 1.25x
    optpart.save_result(lie, p, tmp_path / "lie.json")
    assert main(["evaluate", str(tmp_path / "p.json"), str(tmp_path / "lie.json"), "--json"]) == 1
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["status"] == "invalid" and doc["verdict"]["false_claims"] == [
        "status 'feasible': device 'g0' holds 20 B (peak) but has 16 B"]
    assert captured.err.count("\n") == 1 and "false claim: status 'feasible'" in captured.err
    # The human table says so too.
    assert main(["evaluate", str(tmp_path / "p.json"), str(tmp_path / "lie.json")]) == 1
    assert "status    invalid" in capsys.readouterr().out


def test_a_result_knows_its_problem_and_writes_itself(diamond, tmp_path):
    import json

    from optpart.formats import load_result

    r = optpart.solve(diamond, "heft")
    assert r.source_problem is diamond
    doc = r.to_dict()
    assert doc["status"] == r.status.value and doc["placement"] == r.placement_ids() == r.placement_ids(diamond)
    assert set(doc["placement"]) == set(diamond.node_ids) and set(doc["placement"].values()) <= {"gpu0", "gpu1"}
    text = r.to_json(path=tmp_path / "r.json")
    assert json.loads(text) == doc == json.loads((tmp_path / "r.json").read_text())
    again = load_result(tmp_path / "r.json", diamond)
    assert again.makespan == pytest.approx(r.makespan) and again.placement.tolist() == r.placement.tolist()
    bare = optpart.Result(problem="x", solver="s", status=Status.UNKNOWN, message="nothing found")
    assert bare.to_dict()["status"] == "unknown" and "placement" not in bare.to_dict()
    with pytest.raises(ValueError, match="does not know its problem"):
        optpart.Result(problem="x", solver="s", status=Status.FEASIBLE, placement=np.zeros(4, int)).to_dict()


def test_evaluate_cli_words_an_unverifiable_optimum_as_valid_and_exits_0(diamond, tmp_path, capsys):
    import json

    from optpart.cli import main

    optpart.save(diamond, tmp_path / "p.json")
    doc = optpart.solve(diamond, "heft").to_dict()
    doc.update(status="optimal", lower_bound=doc["makespan"], gap=0.0)  # true, but beyond the generic bound
    (tmp_path / "r.json").write_text(json.dumps(doc))
    assert main(["evaluate", str(tmp_path / "p.json"), str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "verdict   valid; optimality not re-proved" in out and "INVALID" not in out
    doc.update(makespan=doc["makespan"] / 2)  # a false claim
    (tmp_path / "r.json").write_text(json.dumps(doc))
    assert main(["evaluate", str(tmp_path / "p.json"), str(tmp_path / "r.json")]) == 1
    assert "verdict   invalid" in capsys.readouterr().out

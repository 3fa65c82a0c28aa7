"""The pipelined plan's format: torch's action strings and CSV rows, the result document, checks."""

from __future__ import annotations

import numpy as np
import pytest

import optpart
from optpart.errors import ProblemError
from optpart.pipeline.plan import Action, PipelinePlan


def _problem() -> optpart.Problem:
    nodes = [{"id": n, "time": 1.0, "phase": ph, "output_bytes": 1} for n, ph in
             (("a", "forward"), ("b", "forward"), ("gb", "backward"), ("ga", "backward"))]
    edges = [{"src": "a", "dst": "b", "bytes": 1}, {"src": "b", "dst": "gb", "bytes": 1},
             {"src": "gb", "dst": "ga", "bytes": 1}, {"src": "a", "dst": "ga", "bytes": 1}]
    return optpart.Problem.build(nodes, edges, name="p").with_devices(3)


def _plan(actions=None) -> PipelinePlan:
    one_f_one_b = actions or (
        (Action(0, "F", 0), Action(0, "F", 1), Action(0, "B", 0), Action(0, "B", 1)),
        (),
        (Action(1, "F", 0), Action(1, "I", 0), Action(1, "F", 1), Action(1, "W", 0), Action(1, "B", 1)),
    )
    return PipelinePlan(2, np.array([0, 1, 1, 0]), (0, 2), one_f_one_b, "custom")


def test_action_strings_are_torchs():
    a = Action(12, "W", 3)
    assert str(a) == "12W3" and Action.parse(" 12W3 ") == a
    for bad in ("1X0", "F0", "1F", "-1F0", "1 F 0"):
        with pytest.raises(ProblemError, match="pipeline action"):
            Action.parse(bad)


def test_document_round_trip_and_csv_rows():
    p = _problem()
    plan = _plan()
    plan.check(p)
    doc = plan.to_dict(p)
    assert doc["stages"] == [{"stage": 0, "device": "dev0", "nodes": ["a", "ga"]},
                             {"stage": 1, "device": "dev2", "nodes": ["b", "gb"]}]
    assert doc["actions"] == {"dev0": ["0F0", "0F1", "0B0", "0B1"], "dev2": ["1F0", "1I0", "1F1", "1W0", "1B1"]}
    assert "dev1" not in doc["actions"]  # a device without a stage is no torch rank
    back = PipelinePlan.from_dict(doc, p)
    assert back.same_as(plan) and back.schedule == "custom"
    assert plan.csv_rows() == [["0F0", "0F1", "0B0", "0B1"], ["1F0", "1I0", "1F1", "1W0", "1B1"]]
    assert plan.ranks() == [0, 2]
    result = optpart.Result(problem="p", solver="x", status=optpart.Status.FEASIBLE, options={"pipeline": doc})
    assert PipelinePlan.from_result(result, p).same_as(plan)
    with pytest.raises(ProblemError, match="no pipelined plan"):
        PipelinePlan.from_result(optpart.Result(problem="p", solver="x", status=optpart.Status.FEASIBLE), p)


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["stages"][0]["nodes"].append("nope"), "unknown node 'nope'"),
    (lambda d: d["stages"][1]["nodes"].append("a"), "node 'a' is in stages 0 and 1"),
    (lambda d: d["stages"][0]["nodes"].remove("ga"), "node 'ga' is in no stage"),
    (lambda d: d["stages"][0].update(device="gpu9"), "unknown device 'gpu9'"),
    (lambda d: d["actions"]["dev0"].append("0F2"), "out of range"),
    (lambda d: d["actions"]["dev0"].insert(0, "1F0"), "stage 1 runs on 'dev2'"),
    (lambda d: d["actions"]["dev0"].reverse(), "micro-batch order"),
    (lambda d: d["actions"]["dev0"].remove("0B1"), "stage 0, micro-batch 1 needs one F"),
    (lambda d: d["actions"]["dev2"].__setitem__(3, "1B0"), "appears twice|micro-batch order|needs one F"),
    (lambda d: d.update(micro_batches=0), "micro_batches"),
    (lambda d: d["actions"].update(dev0="0F0"), "list of action strings"),
])
def test_bad_documents_are_one_line_naming_what_is_wrong(edit, words):
    p = _problem()
    doc = _plan().to_dict(p)
    edit(doc)
    with pytest.raises(ProblemError, match=words) as err:
        PipelinePlan.from_dict(doc, p)
    assert "\n" not in str(err.value)


def test_w_before_its_i_and_b_before_its_f_are_refused():
    p = _problem()
    bad = ((Action(0, "F", 0), Action(0, "F", 1), Action(0, "B", 0), Action(0, "B", 1)), (),
           (Action(1, "F", 0), Action(1, "W", 0), Action(1, "I", 0), Action(1, "F", 1), Action(1, "B", 1)))
    with pytest.raises(ProblemError, match="'1W0' runs before '1I0'"):
        _plan(bad).check(p)
    bad = ((Action(0, "B", 0), Action(0, "F", 0), Action(0, "F", 1), Action(0, "B", 1)), (),
           (Action(1, "F", 0), Action(1, "B", 0), Action(1, "F", 1), Action(1, "B", 1)))
    with pytest.raises(ProblemError, match="'0B0' runs before '0F0'"):
        _plan(bad).check(p)

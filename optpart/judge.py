"""The judge: compare every claim of a result document with the evaluator's own figures.

``optpart evaluate`` does not trust a result file. The evaluator recomputes the
schedule's finish times, the makespan, the memory per device under both models and
the generic lower bound (docs/model.md sections 2-4), then :func:`judge` compares
each stated figure with its recomputation and lists every false claim as one line
naming the claim and both values. Nothing stated is silently replaced.

What is accepted as proof:

* a schedule, when it obeys every rule (:func:`optpart.evaluate.violations`);
* a lower bound, only up to the generic bound :func:`optpart.bounds.lower_bound`,
  which the evaluator can check. A larger stated bound (an exact solver's) is
  *not verifiable* here; so is an ``optimal`` claim whose makespan is above the
  generic bound. Both leave the verdict valid, worded "valid; optimality not re-proved"
  (``trust_bound=True`` moves them to the notes);
* an ``infeasible`` claim, when :meth:`Problem.infeasibility` proves it. It is
  false when a witness (the ``heuristic``, then the ``heft`` baseline, under the
  claimed memory model) finds a placement that fits; otherwise it is *not
  verifiable* here (the solver's word only), like a bound above the generic one;
* a false claim, and only that, makes the verdict invalid.
* the problem a result names must be the problem it is judged against.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from .bounds import problem_lower_bound
from .errors import FormatError
from .evaluate import time_tolerance, violations
from .model.memory import MEMORY_RTOL
from .model.problem import Problem
from .result import Result, Status

__all__ = ["Verdict", "judge"]


@dataclass
class Verdict:
    """The judge's answer: ``valid`` when no claim is false; ``false_claims`` one line each;
    ``unverifiable`` the certificates (bounds, optimal and infeasible claims) the evaluator
    cannot re-prove, which leave the verdict valid but say so (:attr:`wording`); ``notes``
    what was accepted without proof or not checked."""

    valid: bool = True
    false_claims: list[str] = field(default_factory=list)
    unverifiable: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def wording(self) -> str:
        """``invalid`` (a false claim), ``valid; optimality not re-proved`` (a certificate the
        evaluator cannot check: a bound above its own, an optimal or infeasible claim), or ``valid``."""
        if self.false_claims:
            return "invalid"
        if not self.unverifiable:
            return "valid"
        what = ("infeasibility" if all(u.startswith("status 'infeasible'") for u in self.unverifiable)
                else "optimality" if any(u.startswith("status 'optimal'") for u in self.unverifiable)
                else "lower bound")
        return f"valid; {what} not re-proved"

    def to_dict(self) -> dict[str, Any]:
        """The verdict as JSON-ready values (the ``verdict`` field of ``optpart evaluate --json``).

        Returns
        -------
        dict
            ``valid``, the wording, false claims, unverifiable claims and notes.
        """
        return {"valid": self.valid, "verdict": self.wording, "false_claims": list(self.false_claims),
                "unverifiable": list(self.unverifiable), "notes": list(self.notes)}


def _number(doc: Mapping[str, Any], key: str) -> float | None:
    """A stated number (``"inf"`` allowed), None when absent; a non-number is a format error."""
    if key not in doc or doc[key] is None:
        return None
    value = doc[key]
    if isinstance(value, bool):
        raise FormatError(f"result field '{key}' is {value!r}; it must be a number")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise FormatError(f"result field '{key}' is {value!r}; it must be a number") from None


def _same_time(a: float, b: float) -> bool:
    return abs(a - b) <= time_tolerance(max(abs(a), abs(b)))


def _same_bytes(a: float, b: float) -> bool:
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= MEMORY_RTOL * max(1.0, abs(a), abs(b))


def judge(problem: Problem, doc: Mapping[str, Any], result: Result, *, trust_bound: bool = False) -> Verdict:
    """Compare the claims of result document ``doc`` with ``result``, its recomputation.

    ``result`` is ``doc`` read by :func:`optpart.formats.optpart_json.result_from_dict`
    (placement and start times taken from the file, everything else recomputed).

    Parameters
    ----------
    problem : Problem
        The problem the file claims to solve.
    doc : mapping
        The result document as read from the file (its claims).
    result : Result
        The same result recomputed by the evaluator.
    trust_bound : bool
        Accept a stated lower bound (and so an ``optimal`` claim) above the evaluator's own
        bounds instead of calling it unverifiable.

    Returns
    -------
    Verdict
        ``valid``, the false claims (each naming the claim and both values), the unverifiable
        ones and notes.
    """
    v = Verdict()
    false = v.false_claims.append
    # The claimed status (the recomputed result says 'invalid' when the placement breaks memory).
    status = Status(str(doc["status"])) if result.status is Status.INVALID else result.status
    model = str(doc.get("memory_model", result.memory_model))
    if model not in ("static", "peak"):
        false(f"memory_model: '{model}' is not a memory model (static or peak)")
        model = "static"
    if doc.get("problem") is not None and str(doc["problem"]) != problem.name:
        false(f"problem: the result is for '{doc['problem']}', but it is judged against '{problem.name}'")
    _compare_devices(problem, doc, v)
    generic = problem_lower_bound(problem)
    stated_bound = _number(doc, "lower_bound")
    stated_makespan = _number(doc, "makespan")
    stated_gap = _number(doc, "gap")

    if status.has_solution:
        # The rules, judged with only the evaluator's bound (status honesty is judged below).
        plain = dataclasses.replace(result, status=Status.FEASIBLE, lower_bound=generic)
        for msg in violations(problem, plain, limit=20):
            false(f"status '{status.value}': {msg}")
        _compare_schedule(problem, doc, result, v)
        _compare_memory(problem, doc, result, v)
        makespan = result.makespan
        if stated_makespan is None:
            false(f"makespan: missing, recomputed {makespan:.9g}")
        elif not _same_time(stated_makespan, makespan):
            false(f"makespan: stated {stated_makespan:.9g}, recomputed {makespan:.9g}")
        bound = stated_bound if stated_bound is not None else 0.0
        if stated_gap is not None:
            gap = 0.0 if makespan <= 0 else max(0.0, (makespan - bound) / makespan)
            if not abs(stated_gap - gap) <= 1e-9 + 1e-6 * abs(gap):
                false(f"gap: stated {stated_gap:.9g}, recomputed {gap:.9g} from makespan {makespan:.9g} "
                      f"and lower bound {bound:.9g}")
        if stated_bound is not None and stated_bound > makespan + time_tolerance(makespan):
            false(f"lower_bound: stated {stated_bound:.9g} is above the makespan {makespan:.9g} of a valid schedule")
        elif stated_bound is not None and stated_bound > generic + time_tolerance(generic):
            v.unverifiable.append(f"lower_bound: stated {stated_bound:.9g} is above the evaluator's bound "
                                  f"{generic:.9g}; only the solver's word supports it")
        if status is Status.OPTIMAL and stated_bound is not None \
                and makespan > stated_bound + max(time_tolerance(makespan), 1e-6 * makespan):
            false(f"status 'optimal': makespan {makespan:.9g} is above the file's own lower bound {stated_bound:.9g}")
        elif status is Status.OPTIMAL and makespan > generic + time_tolerance(makespan):
            v.unverifiable.append(f"status 'optimal': makespan {makespan:.9g} is above the evaluator's bound "
                                  f"{generic:.9g}, so optimality is not verifiable here")
    else:
        if doc.get("placement"):
            false(f"status '{status.value}' but the file holds a placement")
        if stated_makespan is not None:
            false(f"makespan: stated {stated_makespan:.9g} for status '{status.value}', which has no schedule")
        if stated_bound is not None and stated_bound > generic + time_tolerance(generic):
            v.unverifiable.append(f"lower_bound: stated {stated_bound:.9g} is above the evaluator's bound "
                                  f"{generic:.9g}; only the solver's word supports it")
        if status is Status.INFEASIBLE:
            _judge_infeasible(problem, model, result.solver, v)
    v.valid = not v.false_claims
    if trust_bound and v.unverifiable:
        v.notes.append("bounds trusted (--trust-bound): " + "; ".join(v.unverifiable))
        v.unverifiable = []
    return v


def _compare_devices(problem: Problem, doc: Mapping[str, Any], v: Verdict) -> None:
    """A result records the devices it was computed for; they must be the ones judged against."""
    stated = doc.get("devices")
    if not isinstance(stated, list):
        return
    ids = [d.get("id") if isinstance(d, Mapping) else None for d in stated]
    if ids != problem.device_ids:
        v.false_claims.append(f"devices: the result was computed for {ids}, the problem has {problem.device_ids}")
        return
    for d, item in zip(problem.devices, stated):
        mem, speed = _number(item, "memory"), _number(item, "speed")
        if mem is not None and not _same_bytes(mem, d.memory):
            v.false_claims.append(f"devices: '{d.id}' has memory {mem:.9g} in the result, {d.memory:.9g} in the problem")
        if speed is not None and not _same_time(speed, d.speed):
            v.false_claims.append(f"devices: '{d.id}' has speed {speed:.9g} in the result, {d.speed:.9g} in the problem")


def _compare_schedule(problem: Problem, doc: Mapping[str, Any], result: Result, v: Verdict) -> None:
    """Stated finish times against start + run time (the starts are the file's own)."""
    sched = doc.get("schedule")
    if not isinstance(sched, Mapping):
        if sched:
            raise FormatError("result field 'schedule' must be an object {node: {start, finish}}")
        return
    bad = []
    for i, nid in enumerate(problem.node_ids):
        entry = sched.get(nid)
        if isinstance(entry, Mapping) and entry.get("finish") is not None:
            stated = _number(entry, "finish")
            if not _same_time(stated, float(result.finish[i])):
                bad.append((nid, stated, float(result.finish[i])))
    if bad:
        nid, stated, real = bad[0]
        more = f" (and {len(bad) - 1} more nodes)" if len(bad) > 1 else ""
        v.false_claims.append(f"finish of node '{nid}': stated {stated:.9g}, recomputed {real:.9g} "
                              f"(start + run time){more}")


def _compare_memory(problem: Problem, doc: Mapping[str, Any], result: Result, v: Verdict) -> None:
    """Stated bytes per device and model against the evaluator's."""
    memory = doc.get("memory")
    if memory is None:
        return
    if not isinstance(memory, Mapping):
        raise FormatError("result field 'memory' must be an object {device: {static, peak}}")
    figures = {"static": result.memory_static, "peak": result.memory_peak}
    for did in sorted(memory):
        if did not in problem.device_index:
            v.false_claims.append(f"memory: names device '{did}', which the problem does not have")
            continue
        d = problem.device_index[did]
        entry = memory[did]
        if not isinstance(entry, Mapping):
            raise FormatError(f"result field 'memory' of device '{did}' must be an object {{static, peak}}")
        for key in ("static", "peak"):
            stated = _number(entry, key)
            if stated is not None and not _same_bytes(stated, float(figures[key][d])):
                v.false_claims.append(f"memory ({key}) of device '{did}': stated {stated:.12g} B, "
                                      f"recomputed {float(figures[key][d]):.12g} B")


def _judge_infeasible(problem: Problem, model: str, solver: str, v: Verdict) -> None:
    """An ``infeasible`` claim: proven by the screening, refuted by a witness, or not checked."""
    reason = problem.infeasibility(model)
    if reason is not None:
        v.notes.append(f"infeasible: proven by the evaluator's screening ({reason})")
        return
    from .solvers.registry import solve  # the judge sits above the solvers

    # Witnesses, cheapest first: a placement that fits refutes the claim. Fixed, small
    # budgets (effort 0.2, seed 0) keep the verdict deterministic and quick.
    for name, options in (("heft", {}), ("heuristic", {"effort": 0.2})):
        witness = solve(problem, name, memory_model=model, seed=0, **options)
        if witness.ok:
            v.false_claims.append(f"status 'infeasible': {name} finds a placement with makespan "
                                  f"{witness.makespan:.9g} that fits under the {model} model")
            return
    v.unverifiable.append(f"status 'infeasible': not verifiable here (claimed by {solver}; the evaluator's "
                          f"screening proves nothing and neither heft nor the heuristic found a placement)")

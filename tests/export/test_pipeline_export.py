"""``optpart export -f pipeline``: stages, ranks, torch's schedule CSV or the built-in class, the predicted time.

The CSV is read back by torch's own ``_load_csv`` (its validation of the action lists); the
time printed is the pipelined result's makespan; ``optpart run``'s reader gives back the plan.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "torch"))
import pipeline_models  # noqa: E402

import optpart  # noqa: E402
from optpart.cli import main  # noqa: E402
from optpart.cli.run import read_plan  # noqa: E402
from optpart.formats.torch_import import from_torch  # noqa: E402
from optpart.pipeline.plan import Action, PipelinePlan  # noqa: E402
from optpart.pipeline.solve import score_plan  # noqa: E402
from optpart.units import format_time  # noqa: E402

M = 2
CUSTOM = {"dev0": ["0F0", "0F1", "0I0", "0W0", "0I1", "0W1"], "dev1": ["1F0", "1I0", "1F1", "1W0", "1I1", "1W1"]}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pipeline-export")
    d = pipeline_models.gpt2()
    p = from_torch(d["module"], d["inputs"], micro_batches=M).with_devices(2)
    optpart.save(p, tmp / "p.json")
    out = {"dir": tmp, "problem": p}
    one = optpart.solve(p, "1f1b", micro_batches=M, action_overhead=2e-3)
    plan = PipelinePlan.from_result(one, p)
    as1f1b = {"dev0": ["0F0", "0F1", "0B0", "0B1"], "dev1": ["1F0", "1B0", "1F1", "1B1"]}  # custom lists, 1F1B's
    for name, r in (("1F1B", one), ("custom", _scored(p, plan, CUSTOM)), ("as1f1b", _scored(p, plan, as1f1b))):
        optpart.save_result(r, r.source_problem, tmp / f"{name}.json")
        out[name] = r
    return out


def _scored(p, plan, actions):
    lists = [[Action.parse(a) for a in actions.get(d, [])] for d in p.device_ids]
    return score_plan(p, plan.with_actions(lists), action_overhead=2e-3)


def _export(files, name, out, capsys):
    code = main(["export", str(files["dir"] / f"{name}.json"), "-p", str(files["dir"] / "p.json"), "-f", "pipeline",
                 "-o", str(out)])
    return code, capsys.readouterr()


def test_a_custom_order_is_written_as_torchs_csv_and_torch_reads_it_back(files, tmp_path, capsys):
    from torch.distributed.pipelining.schedules import PipelineScheduleMulti, _PipelineScheduleRuntime

    code, cap = _export(files, "custom", tmp_path / "plan", capsys)
    assert code == 0
    doc = json.loads((tmp_path / "plan" / "pipeline.json").read_text())
    assert doc["schedule"] == "custom" and doc["schedule_class"] == "_PipelineScheduleRuntime"
    assert doc["schedule_csv"] == "schedule.csv" and doc["devices"] == ["dev0", "dev1"]
    assert (tmp_path / "plan" / "schedule.csv").read_text().splitlines() == [",".join(CUSTOM["dev0"]),
                                                                              ",".join(CUSTOM["dev1"])]
    runtime = _PipelineScheduleRuntime.__new__(_PipelineScheduleRuntime)  # torch's reader, without stages
    runtime.pipeline_order, runtime.pp_group_size, runtime._num_stages = {}, 2, 2
    runtime._n_microbatches, runtime._stages = M, []
    PipelineScheduleMulti._load_csv(runtime, str(tmp_path / "plan" / "schedule.csv"))
    assert [str(a) for a in runtime.pipeline_order[1]] == CUSTOM["dev1"]
    assert runtime.stage_index_to_group_rank == {0: 0, 1: 1}
    r = files["custom"]
    assert doc["predicted"]["step_time"] == pytest.approx(r.makespan, rel=1e-12)
    assert f"predicted step {format_time(r.makespan)}" in cap.out
    assert doc["predicted"]["assumes"]["action_overhead"] == 2e-3
    stages = doc["stages"]
    assert [s["rank"] for s in stages] == [0, 1] and stages[0]["first_module"].startswith("transformer")
    assert stages[1]["last_module"] == "lm_head" or "lm_head" in {s["last_module"] for s in stages}
    assert "'transformer.wte.weight'" in cap.out  # the tied weight: replicated, gradients summed by the runner
    back = read_plan(tmp_path / "plan")
    plan, ids, _ = PipelinePlan.read(back["pipeline"])
    assert plan.csv_rows() == [CUSTOM["dev0"], CUSTOM["dev1"]] and ids.device_ids == ("dev0", "dev1")
    assert set(plan.stage_by_id(ids)) == {n for s in stages for n in s["forward_nodes"]}
    assert back["predicted"] == doc["predicted"]["step_time"]


def test_a_builtin_order_is_written_as_its_class_name(files, tmp_path, capsys):
    for name in ("1F1B", "as1f1b"):
        code, cap = _export(files, name, tmp_path / f"{name}.json", capsys)
        assert code == 0
        doc = json.loads((tmp_path / f"{name}.json").read_text())
        assert doc["schedule"] == "1F1B" and doc["schedule_class"] == "Schedule1F1B"
        assert doc["schedule_csv"] is None and not (tmp_path / f"{name}.csv").exists()
        assert doc["predicted"]["step_time"] == pytest.approx(files[name].makespan, rel=1e-12)


def test_a_result_that_is_not_pipelined_is_refused_in_one_line(files, tmp_path, capsys):
    p = files["problem"]
    r = optpart.solve(p, "single", micro_batches=1)
    optpart.save_result(r, r.source_problem, tmp_path / "one.json")
    code = main(["export", str(tmp_path / "one.json"), "-p", str(files["dir"] / "p.json"), "-f", "pipeline",
                 "-o", str(tmp_path / "x")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "no pipelined plan" in err

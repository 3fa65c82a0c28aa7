"""Hardware profiles (optpart/hardware.py): names, figures as the docs state them, exact re-pricing."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optpart
from optpart import hardware as hw
from optpart.errors import OptpartError
from optpart.formats.costmodel import CostModel
from strategies import examples

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "costmodel.md"


def test_names_resolve_without_regard_to_case_dashes_and_spaces():
    for spelling in ("H100-SXM", "h100sxm", "h100_sxm", "H100 SXM"):
        got = hw.resolve(spelling, "bf16")
        assert got.device.name == "H100-SXM" and got.dtype == "bf16" and got.link.name == "nvlink4"
    assert hw.resolve("L4").dtype == "fp32" and hw.resolve("L4").link.name == "pcie4"  # fp32 and the board's link
    assert hw.resolve("A30", link="nvlink").link.bandwidth == 100e9  # its own bridge: 200 GB/s total


@pytest.mark.parametrize("call, words", [
    (dict(device_type="H1000"), ["--device-type 'H1000'", "H100-SXM", "MI300X"]),
    (dict(device_type="V100", dtype="bf16"), ["--dtype bf16", "V100", "fp32, fp16"]),
    (dict(dtype="bf16"), ["--dtype bf16", "--device-type"]),
    (dict(device_type="L4", link="nvlink"), ["--link nvlink", "L4", "has none"]),
    (dict(link="ethernet"), ["--link 'ethernet'", "nvlink4", "ib-ndr"]),
    (dict(device_type="A100-80GB", dtype="fp8"), ["--dtype 'fp8'", "fp32, tf32, bf16, fp16"]),
])
def test_bad_names_are_one_line_errors_naming_the_choices(call, words):
    with pytest.raises(OptpartError) as info:
        hw.resolve(**call)
    text = str(info.value)
    assert "\n" not in text and all(w in text for w in words), text


def _doc_rows() -> dict[str, list[str]]:
    """The device table of docs/costmodel.md: name -> its cells."""
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 6 and cells[0].strip("`") in hw.DEVICE_TYPES:
            rows[cells[0].strip("`")] = cells
    return rows


def test_the_docs_table_states_every_figure_the_code_uses():
    rows = _doc_rows()
    assert set(rows) == set(hw.DEVICE_TYPES)  # every device type documented, none more
    for name, dev in hw.DEVICE_TYPES.items():
        cells = rows[name]
        # columns: name, product, memory GB, bandwidth GB/s, fp32, tf32, bf16, fp16 (TFLOP/s), link, source
        assert float(cells[2]) * 2**30 == dev.memory, name
        assert float(cells[3].replace(",", "")) * 1e9 == pytest.approx(dev.memory_bandwidth), name
        for col, dtype in zip(cells[4:8], hw.DTYPES):
            if col == "-":
                assert dtype not in dev.peak, (name, dtype)
            else:
                assert float(col.replace(",", "")) * 1e12 == pytest.approx(dev.peak[dtype]), (name, dtype)
        assert dev.link in cells[8], name
        assert re.search(r"https?://|whitepaper", cells[9]), name  # a cited source
    for name, link in hw.LINK_TYPES.items():  # every link preset and its figure in the docs
        assert re.search(rf"`{re.escape(name)}`\s*\|[^|]*\|\s*{link.bandwidth / 1e9:g} GB/s", DOC.read_text()), name


def _priced(problem: optpart.Problem, cm: CostModel) -> optpart.Problem:
    return problem.with_meta(cost_model=cm.to_dict())


@st.composite
def _kernels(draw):
    """A chain of nodes with recorded FLOPs and bytes (zero, tiny, huge and equal values), priced
    by a cost model, some nodes views (no bytes, 0 s)."""
    n = draw(st.integers(1, 8))
    value = st.sampled_from([0, 1, 7, 10**3, 10**9, 10**15, 2**53 - 1])
    meta, kernels = [], []
    for _ in range(n):
        if draw(st.booleans()) or not kernels:
            meta.append({"flops": draw(value), "bytes": draw(value)})
            kernels.append(True)
        else:
            meta.append({"flops": 0})
            kernels.append(False)
    return meta, kernels


@settings(max_examples=examples(40), deadline=None)
@given(_kernels(), st.sampled_from(sorted(hw.DEVICE_TYPES)), st.sampled_from(hw.DTYPES),
       st.sampled_from(sorted(hw.DEVICE_TYPES)))
def test_repricing_equals_pricing_there_and_back_again(graph, first, dtype, second):
    meta, kernels = graph
    a = hw.resolve(first, dtype if dtype in hw.DEVICE_TYPES[first].peak else "fp32").cost_model()
    b = hw.resolve(second, "fp32").cost_model()
    times = [a.op_time(m["flops"], m["bytes"]) if k else 0.0 for m, k in zip(meta, kernels)]
    p = optpart.Problem.build(nodes=[{"id": f"v{i}", "time": t, "memory": 1, **m}
                                     for i, (t, m) in enumerate(zip(times, meta))],
                              edges=[{"src": f"v{i}", "dst": f"v{i + 1}", "bytes": 8} for i in range(len(meta) - 1)],
                              links=optpart.Links(a.link_latency, a.link_bandwidth))
    p = _priced(p, a)
    there = hw.reprice(p, b)
    assert there.time.tolist() == [b.op_time(m["flops"], m["bytes"]) if k else 0.0 for m, k in zip(meta, kernels)]
    assert there.links.bandwidth == b.link_bandwidth and hw.costs_label(there).startswith(b.hardware)
    back = hw.reprice(there, a)
    assert back.time.tolist() == p.time.tolist()  # exact: the roofline's inputs are recorded


def test_a_file_without_recorded_bytes_is_refused_in_one_line_naming_a_node():
    p = optpart.Problem.build(nodes=[{"id": "mm", "time": 1e-3, "memory": 1, "flops": 10**9}])
    p = _priced(p, CostModel())
    with pytest.raises(OptpartError) as info:
        hw.with_hardware(p, "H100-SXM", devices=2)
    text = str(info.value)
    assert "\n" not in text and "'mm'" in text and "--device-type" in text and "H100-SXM fp32" in text


def test_times_given_by_the_file_keep_their_values_and_say_so():
    p = optpart.load(ROOT / "instances" / "small" / "mlp6-training.json")
    q = hw.with_hardware(p, "L40S", devices=3)
    assert np.array_equal(q.time, p.time) and hw.costs_label(q) == "costs as given in the file"
    assert q.device_memory.tolist() == [48 * 2**30] * 3 and q.links.bandwidth == 32e9
    assert hw.with_hardware(p, "L40S", devices=3, memory="40GiB", bandwidth="10GB/s").device_memory[0] == 40 * 2**30
    with pytest.raises(OptpartError, match="--dtype bf16: 'mlp6-training' has its own times"):
        hw.with_hardware(p, "L40S", dtype="bf16", devices=3)


def test_measured_times_override_a_profile():
    p = optpart.Problem.build(nodes=[{"id": "mm", "time": 2e-3, "memory": 1, "flops": 10, "bytes": 10}])
    p = p.with_meta(cost_model={**CostModel().to_dict(), "times": "measured", "profile": {"device": "cuda:0"}})
    q = hw.with_hardware(p, "H200", devices=2)
    assert q.time.tolist() == [2e-3] and hw.costs_label(q) == "times measured on cuda:0 (--profile)"
    assert q.device_memory[0] == 141 * 2**30


def test_a_profile_name_survives_the_file_and_is_dropped_by_other_figures():
    cm = hw.resolve("MI300X", "bf16").cost_model()
    assert CostModel.from_dict(cm.to_dict()) == cm and cm.describe().startswith("MI300X bf16: 1.31 PFLOP/s at 50%")
    assert cm.replace(efficiency=0.4).hardware == "MI300X bf16"  # the device is still the MI300X
    assert cm.replace(peak_flops="500TFLOP/s").describe().startswith("custom: 500 TFLOP/s")
    assert "hardware" not in CostModel().to_dict()  # files priced by the default keep their bytes


def test_imported_models_record_what_repricing_needs(tmp_path):
    torch = pytest.importorskip("torch")
    from optpart.formats.torch_import import from_torch

    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    x = torch.randn(16, 64)
    default = from_torch(model, (x,))
    h100 = hw.resolve("H100-SXM", "bf16")
    direct = from_torch(model, (x,), cost_model=h100.cost_model())
    repriced = hw.reprice(default, h100.cost_model(CostModel()))
    assert repriced.time.tolist() == direct.time.tolist() and repriced.links == direct.links
    assert repriced.meta["cost_model"] == direct.meta["cost_model"]
    assert all("bytes" in m for m, t in zip(default.node_meta, default.time) if t > 0)

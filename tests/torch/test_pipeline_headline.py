"""The README's headline pipelined run at a tiny size: solve, export and run as commands do.

``instances/make.py`` traces ``instances/torch_models.py``'s GPT-2 on meta tensors; ``optpart
solve --micro-batches``, ``optpart export -f pipeline`` and ``optpart run`` (``read_plan`` and
``run_pipeline``) then run the plan on 2 processes of the seeded factory; loss and every
gradient equal one process's autograd over the whole batch (``benchmarks/pipeline_headline.py``
runs the full-size commands).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "instances"))
import pipeline_models  # noqa: E402
from torch_models import torch_models  # noqa: E402

import optpart  # noqa: E402
from optpart.cli import main  # noqa: E402
from optpart.cli.run import read_plan  # noqa: E402
from optpart.formats.torch_import import cross_entropy, from_torch  # noqa: E402
from optpart.torch import run_pipeline  # noqa: E402


def test_solve_export_run_of_a_meta_traced_gpt2_equals_autograd(tmp_path):
    with torch.device("meta"):  # as instances/make.py traces the bundled instance
        model = torch_models()["GPT2"](layers=2, d=32, heads=2, vocab=100, ctx=32)
        x, y = torch.zeros(4, 16, dtype=torch.long), torch.zeros(4, 16, dtype=torch.long)
    p = from_torch(model, (x,), loss_fn=cross_entropy, targets=(y,), name="gpt2-tiny").with_meta(batch_size=4)
    optpart.save(p.with_devices(2, memory=2.0 ** 30), tmp_path / "gpt2.json")
    assert main(["solve", str(tmp_path / "gpt2.json"), "--micro-batches", "2", "-o", str(tmp_path / "r.json")]) == 0
    assert main(["export", str(tmp_path / "r.json"), "-p", str(tmp_path / "gpt2.json"), "-f", "pipeline",
                 "-o", str(tmp_path / "plan")]) == 0
    plan = read_plan(tmp_path / "plan")
    run = run_pipeline(str(HERE / "pipeline_models.py") + ":gpt2_plain", None, plan["pipeline"], processes=2,
                       steps=1, optimizer=None, threads=1)
    d = pipeline_models.gpt2_plain()
    loss = d["loss_fn"](d["module"](*d["inputs"]), *d["targets"])
    loss.backward()
    assert run.loss == pytest.approx(float(loss), rel=1e-5)
    ref = {n: q.grad for n, q in d["module"].named_parameters()}
    assert sorted(run.grads) == sorted(ref)
    for n, g in ref.items():
        torch.testing.assert_close(run.grads[n], g, rtol=1e-4, atol=1e-6, msg=n)

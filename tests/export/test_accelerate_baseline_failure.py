"""accelerate failing on a model is one line naming it, not a traceback out of the baseline.

accelerate 1.x fails on a tiny BigBird (IndexError in its tie bookkeeping); a release that no
longer fails makes this test fail, and it then goes.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

import optpart  # noqa: E402
from optpart.export.accelerate import accelerate_map  # noqa: E402
from optpart.export.plan import ExportError  # noqa: E402


def test_accelerates_own_failure_is_one_line():
    model = tf.BigBirdForMaskedLM(tf.BigBirdConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2, sep_token_id=3))
    problem = optpart.Problem.build(nodes=[{"id": "a", "time": 1.0, "memory": 1.0}], edges=[]).with_devices(
        4, memory=2 ** 20)
    with pytest.raises(ExportError) as exc:  # accelerate 1.x's tie bookkeeping on BigBird's head
        accelerate_map(problem, model, balanced=True)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("accelerate's infer_auto_device_map fails on BigBirdForMaskedLM")

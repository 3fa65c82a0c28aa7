"""Fuzzing the readers: mutated problem documents give a clean error or a valid problem.

Each example starts from a valid document (optpart JSON, dnn-partitioning JSON, STG
text or .npz arrays), applies a few hostile mutations (a value replaced by a wrong type,
a huge, negative or non-finite number, a key deleted or added, an item duplicated,
bytes cut or flipped) and loads it. The only acceptable outcomes are a
:class:`~optpart.errors.OptpartError` of one line or a :class:`~optpart.Problem`; anything else
(a TypeError, a KeyError, an OverflowError, a numpy warning turned error) is a bug.
"""

from __future__ import annotations

import copy
import json
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import optpart
from optpart.errors import OptpartError
from optpart.formats import load
from optpart.formats.dnn_partitioning import dnn_partitioning_from_dict
from optpart.formats.optpart_json import problem_from_dict
from optpart.formats.stg import parse_stg

from strategies import examples

HOSTILE = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([10**400, -(10**400), 1e308, -1e308, 5e-324, -0.0, 2**63, 2**64 + 1]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
    st.sampled_from(["inf", "-inf", "nan", "", "\x1b[31m", "a\nb"]),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)

BASE = {
    "format": "optpart-problem", "version": 1, "name": "fuzz",
    "nodes": [{"id": "a", "time": 1.0, "memory": 4, "op": "x"},
              {"id": "b", "time": 2.0, "memory": 3, "param_bytes": 1, "output_bytes": 2},
              {"id": "c", "time": 0.5, "memory": 2}],
    "edges": [{"src": "a", "dst": "b", "bytes": 10}, {"src": "b", "dst": "c", "bytes": 5}],
    "devices": [{"id": "g0", "memory": 100, "speed": 1.0}, {"id": "g1", "memory": "inf"}],
    "links": {"latency": 0.001, "bandwidth": 1e9, "pairs": [{"src": "g0", "dst": "g1", "bandwidth": 5e8}]},
    "constraints": {"pin": {"a": "g0"}, "colocate": [["b", "c"]], "forbid": {"c": ["g1"]}},
    "meta": {"k": 1},
}

DNN = {"maxSizePerFPGA": 100, "maxFPGAs": 2,
       "nodes": [{"id": 1, "fpgaLatency": 1.0, "size": 4, "colorClass": 0, "supportedOnFpga": 1},
                 {"id": 2, "fpgaLatency": 2.0, "size": 4, "colorClass": 0}],
       "edges": [{"sourceId": 1, "destId": 2, "size": 8, "cost": 1.0}]}

STG = "3\n0 0 0\n1 2 1 0\n2 3 1 0\n3 1 2 1 2\n4 0 1 3\n"


def _paths(doc, prefix=()):
    """Every (path, value) in a JSON document, containers included."""
    yield prefix, doc
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, prefix + (i,))


@st.composite
def mutated(draw, base):
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p, _ in _paths(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        last = path[-1]
        action = draw(st.sampled_from(["replace", "replace", "delete", "duplicate", "add"]))
        if action == "replace":
            parent[last] = draw(HOSTILE)
        elif action == "delete":
            del parent[last]
        elif action == "duplicate" and isinstance(parent, list):
            parent.insert(last, copy.deepcopy(parent[last]))
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.text(max_size=6))] = draw(HOSTILE)
    return doc


def _has_newline(doc) -> bool:
    """Whether a key or string anywhere in ``doc`` holds a line break (an error may quote it;
    the CLI escapes it, :func:`optpart.text.safe`)."""
    if isinstance(doc, str):
        return "\n" in doc or "\r" in doc
    if isinstance(doc, dict):
        return any(_has_newline(k) or _has_newline(v) for k, v in doc.items())
    return isinstance(doc, list) and any(_has_newline(v) for v in doc)


def _clean(fn, *args):
    """Call ``fn``; an OptpartError is a clean refusal, a Problem a valid load.

    A refusal says something, on one line unless it quotes a line break of the input.
    """
    with np.errstate(all="raise"):
        try:
            out = fn(*args)
        except OptpartError as err:
            message = str(err).strip()
            assert message, f"{type(err).__name__} without a message"
            assert "\n" not in message or not isinstance(args[0], dict) or _has_newline(args[0]), message
            return None
    assert isinstance(out, optpart.Problem)
    assert np.isfinite(out.time).all() and (out.time >= 0).all()
    assert math.isfinite(float(out.time.sum())) and math.isfinite(float(out.memory.sum()))
    return out


@given(mutated(BASE))
def test_mutated_optpart_documents_load_or_fail_cleanly(doc):
    _clean(problem_from_dict, doc)


@given(mutated(BASE))
@settings(max_examples=examples(25))
def test_mutated_optpart_files_load_or_fail_cleanly(tmp_path_factory, doc):
    path = tmp_path_factory.mktemp("fuzz") / "p.json"
    path.write_text(json.dumps(doc))  # NaN/Infinity literals are written as such: the reader must refuse them
    _clean(load, path)


@given(mutated(DNN))
def test_mutated_dnn_partitioning_documents_load_or_fail_cleanly(doc):
    _clean(dnn_partitioning_from_dict, doc)


@given(st.lists(st.tuples(st.integers(0, 200), st.sampled_from(["-1", "x", "1e400", "inf", "nan", "", "9" * 30,
                                                                 "\n", "#", "0", "-2", "3.5"])), max_size=4))
def test_mutated_stg_text_loads_or_fails_cleanly(edits):
    text = STG
    for pos, piece in edits:
        pos = min(pos, len(text))
        text = text[:pos] + piece + text[pos + 1:]
    _clean(parse_stg, text)


@given(st.data())
@settings(max_examples=examples(25))
def test_corrupted_npz_files_load_or_fail_cleanly(tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("npz")
    path = folder / "p.npz"
    optpart.save(problem_from_dict(BASE), path)
    raw = bytearray(path.read_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    path.write_bytes(bytes(raw))
    _clean(load, path)

"""The progress helper draws on a terminal only, and never when quiet."""

from __future__ import annotations

import io

import pytest

from optpart import progress as prog


def test_forced_display_writes_stage_and_notes_to_stderr(monkeypatch):
    pytest.importorskip("tqdm")
    err = io.StringIO()
    monkeypatch.setattr(prog.sys, "stderr", err)
    with prog.progress("importing Net", enabled=True) as bar:
        bar.stage("tracing with fake tensors")
        bar.note("fell back to real tensors")
    text = err.getvalue()
    assert "importing Net: tracing with fake tensors" in text and "fell back to real tensors" in text


def test_silent_when_piped_or_quiet(monkeypatch):
    monkeypatch.setattr(prog, "_QUIET", False)  # a CLI run with -q earlier in this process sets it
    monkeypatch.delenv("OPTPART_QUIET", raising=False)
    err = io.StringIO()  # not a terminal
    monkeypatch.setattr(prog.sys, "stderr", err)
    assert not prog.is_enabled()
    with prog.progress("x") as bar:
        bar.stage("y")
        bar.note("z")
        bar.advance()
    assert err.getvalue() == ""
    monkeypatch.setattr(err, "isatty", lambda: True)
    assert prog.is_enabled()
    with prog.quiet():
        assert not prog.is_enabled()
    assert prog.is_enabled()
    monkeypatch.setenv("OPTPART_QUIET", "1")
    assert not prog.is_enabled()


def test_fit_and_export_show_their_progress_on_a_terminal(monkeypatch, tmp_path, capsys):
    """'fit' names each probe (a whole solve) as it ends, 'export' its stages."""
    pytest.importorskip("tqdm")
    import optpart
    from optpart.cli import main
    from optpart.generators import training_graph

    path = tmp_path / "g.json"
    optpart.save(training_graph(3, seed=1), path)
    monkeypatch.setattr(prog, "_QUIET", False)
    monkeypatch.delenv("OPTPART_QUIET", raising=False)
    monkeypatch.setattr(prog, "is_enabled", lambda: True)  # as on a terminal
    assert main(["fit", str(path), "--devices", "2", "-o", str(tmp_path / "r.json")]) == 0
    err = capsys.readouterr().err
    assert "fit g.json: probe 1: 2 x " in err and "final solve: 2 x " in err
    lines = []
    fit = optpart.fit.min_capacity(optpart.load(path), 2, report=lines.append)
    assert len(lines) == len(fit.probes) + 1 and all(("fits" in s) for s in lines if s.startswith("final"))
    assert [s.endswith("does not fit") for s in lines[:-1]] == [not ok for _, _, ok in fit.probes]
    nodes = [{"id": "a", "time": 1, "memory": 1, "module": "layers.0"},
             {"id": "b", "time": 1, "memory": 1, "module": "layers.1"}]
    p = optpart.Problem.build(nodes=nodes, edges=[{"src": "a", "dst": "b", "bytes": 1}]).with_devices(2, memory=4)
    optpart.save(p, tmp_path / "m.json")
    optpart.save_result(optpart.evaluate(p, {"a": "dev0", "b": "dev1"}), p, tmp_path / "mr.json")
    assert main(["export", str(tmp_path / "mr.json"), "-p", str(tmp_path / "m.json"), "-o",
                 str(tmp_path / "dm.json")]) == 0
    err = capsys.readouterr().err
    assert "export mr.json: reading" in err and "export mr.json: building the device_map" in err

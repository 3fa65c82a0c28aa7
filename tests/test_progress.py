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

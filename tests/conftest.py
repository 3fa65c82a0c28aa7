"""Shared fixtures: hypothesis profiles, paths to shared data, tiny hand-made problems."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

import optpart

# Hypothesis: "ci" (the default) is fast and deterministic: derandomized (the examples follow
# from each test's own code, the same on every machine and run) and without the example
# database, so a run never depends on what an earlier run found, nor on timing (no deadline).
# "thorough" (HYPOTHESIS_PROFILE=thorough) is for local hunting: random, 12.5x the examples
# (tests that state their own count scale it through ``strategies.examples``), and failing
# examples are kept in .hypothesis/ and replayed first on the next run.
_QUIET_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile("ci", max_examples=16, deadline=None, derandomize=True, database=None,
                          print_blob=True, suppress_health_check=_QUIET_HEALTH)
settings.register_profile("thorough", max_examples=500, deadline=None, suppress_health_check=_QUIET_HEALTH)
_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
if _PROFILE not in ("ci", "thorough"):
    raise pytest.UsageError(f"HYPOTHESIS_PROFILE={_PROFILE!r}: the profiles are 'ci' and 'thorough'")
settings.load_profile(_PROFILE)

ROOT = Path(__file__).resolve().parent.parent


def _main_checkout(root: Path) -> Path:
    """The main checkout of a git worktree (its ``.git`` file names the shared git folder), or
    ``root`` itself: the shared data sits beside the main checkout, not beside a worktree."""
    marker = root / ".git"
    if not marker.is_file():
        return root
    text = marker.read_text().strip()
    if not text.startswith("gitdir:"):
        return root
    gitdir = Path(text[len("gitdir:"):].strip())
    common = gitdir / "commondir"
    shared = (gitdir / common.read_text().strip()).resolve() if common.is_file() else gitdir
    return shared.parent if shared.name == ".git" else root


#: The shared benchmark data sits beside the (main) checkout; OPTPART_SHARED_DATA points elsewhere.
SHARED_DATA = Path(os.environ.get("OPTPART_SHARED_DATA") or _main_checkout(ROOT).parent / "shared" / "data")
INSTANCES = ROOT / "instances"


def shared_data(*parts: str) -> Path:
    """A path under the shared benchmark data, or skip the test (saying why) when it is absent.

    Parameters
    ----------
    *parts : str
        Path components below :data:`SHARED_DATA` (``$OPTPART_SHARED_DATA``, else
        ``../shared/data`` beside the checkout; a worktree sets the variable).

    Returns
    -------
    pathlib.Path
        The existing path (the data is optional: a clean clone has none, and skips).
    """
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not found at {path} (it sits beside the project checkout, "
                    "or set OPTPART_SHARED_DATA)")
    return path


@pytest.fixture
def diamond() -> optpart.Problem:
    """a -> (b, c) -> d on two devices; transfers take 0.5 + 10 B / 10 B/s = 1.5 s."""
    return optpart.Problem.build(
        nodes=[{"id": "a", "time": 1.0, "memory": 4}, {"id": "b", "time": 2.0, "memory": 4},
               {"id": "c", "time": 3.0, "memory": 4}, {"id": "d", "time": 1.0, "memory": 4}],
        edges=[{"src": "a", "dst": "b", "bytes": 10}, {"src": "a", "dst": "c", "bytes": 10},
               {"src": "b", "dst": "d", "bytes": 10}, {"src": "c", "dst": "d", "bytes": 10}],
        devices=[optpart.Device("gpu0", 12), optpart.Device("gpu1", 12)],
        links={"latency": 0.5, "bandwidth": 10},
        name="diamond",
    )


#: Wall-clock safety net for solvers that take a time limit: never reached in the tests,
#: whose outcomes rest on deterministic budgets (``budget``), not on the machine's speed.
SAFETY_NET_S = 600.0
#: Branch-and-bound nodes a MILP test may use (``milp``'s ``max_nodes``, a work limit that
#: does not depend on the machine's speed); the small graphs of the tests close far below it.
MILP_NODES = 20_000


def budget(solver: str, deterministic_time: float = 10.0, max_nodes: int = MILP_NODES) -> dict:
    """Keyword arguments that bound ``solver`` deterministically in a test.

    A solver whose spec offers ``deterministic_time`` (CP-SAT) or ``max_nodes`` (MILP) gets
    it, plus the safety net as its time limit; other solvers that take a time limit get only
    the safety net (their own work counters bound them); solvers that ignore time limits get
    nothing.
    """
    from optpart.solvers.registry import solver_spec

    spec = solver_spec(solver)
    kw: dict = {}
    if spec.uses_time_limit:
        kw["time_limit"] = SAFETY_NET_S
    if spec.option("deterministic_time") is not None:
        kw["deterministic_time"] = deterministic_time
    if spec.option("max_nodes") is not None:
        kw["max_nodes"] = max_nodes
    return kw


def execute_notebook(notebook: Path, tmp_path: Path, monkeypatch) -> list[dict]:
    """Run ``notebook`` top to bottom with a kernel of this interpreter (so it imports the
    optpart under test) and return every code cell's outputs. A failing cell raises
    nbclient's CellExecutionError; notebooks assert their own claims.

    Parameters
    ----------
    notebook : pathlib.Path
        The ``.ipynb`` file; it runs in its own folder (relative paths as a user's would).
    tmp_path : pathlib.Path
        Where the kernel spec is written (``JUPYTER_PATH`` points there).
    monkeypatch : pytest.MonkeyPatch
        Sets ``JUPYTER_PATH`` and ``MPLBACKEND=Agg`` for the test only.

    Returns
    -------
    list of dict
        Every output of every code cell, in order.
    """
    import json
    import sys

    import nbclient
    import nbformat

    spec = tmp_path / "kernels" / "optpart-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "optpart test", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(notebook, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="optpart-test",
                                     resources={"metadata": {"path": str(notebook.parent)}})
    client.execute()
    return [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]


def run_cli(capsys, *argv: str) -> tuple[int, str]:
    """Run ``optpart ARGV`` in process and return its exit code and what it wrote to stderr.

    Parameters
    ----------
    capsys : pytest.CaptureFixture
        The test's capture fixture (stderr is read and cleared).
    *argv : str
        The command line after ``optpart``.

    Returns
    -------
    tuple of (int, str)
        The exit code and the captured stderr.
    """
    from optpart.cli import main

    code = main(list(argv))
    return code, capsys.readouterr().err


def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    """Assert a bad-input exit: code 2 and exactly one ``optpart: error:`` line holding ``needles``.

    Parameters
    ----------
    code : int
        The command's exit code.
    err : str
        What it wrote to stderr.
    *needles : str
        Texts the line must contain (the culprit's name, its value).
    """
    assert code == 2, err
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1, err
    assert lines[0].startswith("optpart: error: "), err
    for needle in needles:
        assert needle in lines[0], (needle, err)

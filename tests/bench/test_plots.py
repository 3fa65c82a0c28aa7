"""Memory timelines and plots (optpart.bench.plots): the timeline meets peak_memory, figures are labelled."""

from __future__ import annotations

import numpy as np
import pytest

import optpart
from optpart.bench.sweep import plan_sweep, run_sweep
from optpart.evaluate import memory_timeline
from optpart.cli import main
from optpart.generators import layered_dag

pytest.importorskip("matplotlib")

from optpart.bench import plots  # noqa: E402
from oracle import sweep_peak  # noqa: E402


def split_problem(n: int = 30, k: int = 3, seed: int = 0) -> optpart.Problem:
    """A random DAG with the param/output/temp split, so liveness differs from static."""
    base = layered_dag(n, seed=seed)
    rng = np.random.default_rng(seed)
    return optpart.Problem.from_arrays(
        base.node_ids, base.time, None, base.edge_src, base.edge_dst, base.edge_bytes,
        param_bytes=rng.integers(0, 50, n) * 1e6, output_bytes=rng.integers(0, 80, n) * 1e6,
        temp_bytes=rng.integers(0, 20, n) * 1e6, links=base.links, name=f"split-{n}-s{seed}",
        devices=[optpart.Device(f"dev{i}", 4e9) for i in range(k)])


@pytest.mark.parametrize("seed", range(6))
def test_memory_timeline_peaks_equal_peak_memory(seed):
    p = split_problem(seed=seed)
    placement = np.random.default_rng(seed).integers(0, p.n_devices, p.n_nodes)
    start, finish = optpart.canonical_schedule(p, placement)
    peak = sweep_peak(p, placement, start, finish)  # the independent oracle of tests/oracle.py
    lines = memory_timeline(p, placement, start, finish)
    assert len(lines) == p.n_devices
    params = np.bincount(placement, weights=p.param_bytes, minlength=p.n_devices)
    for d, (t, b) in enumerate(lines):
        assert b.max() == pytest.approx(peak[d], rel=1e-12)
        assert np.all(np.diff(t) >= 0) and t[0] == 0 and t[-1] == pytest.approx(finish.max())
        assert b[0] == params[d] and b.min() >= params[d]
    # Not a constant: with outputs and temporaries the level moves over time.
    assert any(np.unique(b).size > 2 for _, b in lines)


def test_memory_timeline_is_flat_for_static_only_graphs(diamond):
    placement = np.array([0, 0, 1, 1])
    start, finish = optpart.canonical_schedule(diamond, placement)
    lines = memory_timeline(diamond, placement, start, finish)
    assert [b.tolist() for _, b in lines] == [[8.0, 8.0], [8.0, 8.0]]


def test_schedule_plot_is_complete_and_draws_transfers(tmp_path):
    p = split_problem(24)
    result = optpart.solve(p, "single")
    placement = np.arange(p.n_nodes) % p.n_devices  # many cross-device edges
    spread = optpart.evaluate(p, placement, solver="test")
    optpart.check(p, spread)
    fig = plots.plot_schedule(p, spread)
    assert plots.figure_problems(fig) == []
    gantt = fig.axes[0]
    assert len(gantt.collections) == p.n_devices + 1  # one bar set per device + the transfer lines
    crossing = int((placement[p.edge_src] != placement[p.edge_dst]).sum())
    assert len(gantt.collections[-1].get_segments()) == crossing
    plots.save_figure(fig, tmp_path / "g.png")
    assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Too many transfers: none drawn, and the legend says so.
    fig = plots.plot_schedule(p, spread, max_transfers=3)
    assert len(fig.axes[0].collections) == p.n_devices
    assert any("not drawn" in t.get_text() for t in fig.axes[0].get_legend().get_texts())
    plots.save_figure(fig, tmp_path / "g2.png")
    fig = plots.plot_schedule(p, result)
    assert plots.figure_problems(fig) == []
    plots.save_figure(fig, tmp_path / "g3.svg")


def test_figure_problems_finds_what_is_missing():
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    found = plots.figure_problems(fig)
    assert found == ["axes 0 (untitled): no title", "axes 0 (untitled): no x label",
                     "axes 0 (untitled): no y label", "no legend"]
    plt.close(fig)


def test_gap_plot_from_a_database_and_the_plot_command(tmp_path, capsys):
    p = split_problem(20)
    files = [tmp_path / "p.json"]
    optpart.save(p, files[0])
    db_path = tmp_path / "r.sqlite"
    run_sweep(plan_sweep(files, ["single"], devices=[1, 2], memory_scales=[1.0, 3.0]), db_path, executor="inline")
    fig = plots.plot_gaps(db_path)
    assert plots.figure_problems(fig) == []
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["single"]
    plots.save_figure(fig, tmp_path / "gaps.png")
    assert main(["plot", str(db_path), "-o", str(tmp_path / "gaps2.png")]) == 0
    assert (tmp_path / "gaps2.png").stat().st_size > 1000
    # A result file: solve, save, plot.
    result = optpart.solve(p, "single")
    optpart.save_result(result, p, tmp_path / "r.json")
    assert main(["plot", str(tmp_path / "r.json"), "--problem", str(files[0]), "-o", str(tmp_path / "s.png")]) == 0
    assert (tmp_path / "s.png").stat().st_size > 1000
    assert main(["plot", str(tmp_path / "r.json"), "-o", str(tmp_path / "x.png")]) == 2
    assert "give its problem with --problem" in capsys.readouterr().err

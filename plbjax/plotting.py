"""Pictures of a plan (PNG): node loads per metric before and after; its searches' trace."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from plbjax.files import write_figure


def plot_node_loads(plan: dict, path: str) -> None:
    """One panel per metric: load per node before and after, capacity as a marker."""
    nodes = plan["Nodes"]
    metrics = sorted({m for n in nodes for m in n["LoadsBefore"]})
    fig, axes = plt.subplots(
        len(metrics), 1, figsize=(max(6, 0.25 * len(nodes)), 2.2 * len(metrics) + 0.5), squeeze=False
    )
    x = np.arange(len(nodes))
    for ax, metric in zip(axes[:, 0], metrics):
        ax.bar(x - 0.2, [n["LoadsBefore"][metric] for n in nodes], 0.4, label="before")
        ax.bar(x + 0.2, [n["LoadsAfter"][metric] for n in nodes], 0.4, label="after")
        caps = [n["Capacities"].get(metric, np.nan) for n in nodes]
        if not np.all(np.isnan(caps)):
            ax.plot(x, caps, "k_", markersize=10, label="capacity")
        ax.set_ylabel(metric)
        ax.set_xticks(x, [n["NodeName"] for n in nodes], rotation=90, fontsize=6)
    axes[0, 0].legend(fontsize=7)
    axes[0, 0].set_title(f"node loads: AvgStdDev {plan['Score']['Before']:.3f} -> {plan['Score']['After']:.3f}")
    write_figure(path, fig, dpi=120)


def plot_trace(plan: dict, path: str | Path) -> None:
    """Best energy against steps, a line per phase searched (`Search.Phases[].Trace`); log-y when
    every energy drawn is positive."""
    fig, ax = plt.subplots(figsize=(7, 4))
    energies = []
    for phase in plan["Search"]["Phases"]:
        trace = phase.get("Trace", [])
        energies += [b["BestEnergy"] for b in trace]
        ax.plot([b["Steps"] for b in trace], [b["BestEnergy"] for b in trace], marker=".", label=phase["Phase"])
    if energies and min(energies) > 0:
        ax.set_yscale("log")
    ax.set_xlabel("steps (per chain, from the phase's start)")
    ax.set_ylabel("best energy")
    ax.set_title("search trace: each phase's best energy at the end of each block")
    if energies:
        ax.legend(fontsize=8)
    write_figure(path, fig, dpi=110)

"""Picture of node loads per metric before and after a plan (PNG)."""

from __future__ import annotations

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

"""What `plbjax` prints: a plan's console summary (what ran and why, the largest actions, what is
left), the run's report around it, and a sweep job's one line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hydra.core.hydra_config import HydraConfig

TABLE_ROWS = 5  # the largest actions the console summary lists


def largest_actions(actions: list[dict]) -> list[str]:
    """The summary's table: the actions that fix or place first, then balancing's by share; each
    listed right after the plan's earlier actions on the same replica (a swap before its move)."""
    order = sorted(
        range(len(actions)),
        key=lambda i: (actions[i].get("Phase") == "Balancing", -(actions[i].get("EnergyShare") or 0), i),
    )

    def replica_of(i: int) -> tuple:
        return actions[i]["ServiceName"], str(actions[i]["PartitionId"]), actions[i]["ReplicaId"]

    listed: list[int] = []
    for i in order[:TABLE_ROWS]:
        earlier = [j for j in range(i) if replica_of(i)[2] is not None and replica_of(j) == replica_of(i)]
        listed += [j for j in [*earlier, i] if j not in listed]
    rows = [("Phase", "Action", "Replica", "From -> To", "Reason")]
    for a in (actions[i] for i in listed):
        replica = f"{a['ServiceName']}/{a['PartitionId']}/{a['ReplicaId'] if a['ReplicaId'] is not None else 'new'}"
        rows.append(
            (a.get("Phase", ""), a["Action"], replica, f"{a['SourceNode']} -> {a['TargetNode']}", a.get("Reason", ""))
        )
    widths = [max(len(str(r[k])) for r in rows) for k in range(4)]
    lines = ["  largest actions:"]
    lines += ["    " + "  ".join(str(c).ljust(w) for c, w in zip(r, widths)) + "  " + r[4] for r in rows]
    if len(actions) > len(listed):
        lines.append(f"    ... and {len(actions) - len(listed)} more (the plan's Actions)")
    return lines


def summary(plan: dict, seconds: float) -> str:
    """The console summary of a plan: what ran and why, where each phase stopped, the largest
    actions, and what is left (metrics still imbalanced, violations by kind)."""
    ran = [p["Phase"] for p in plan["Phases"] if p["Ran"]]
    lines = [
        f"plbjax: phases run: {', '.join(ran) or 'none'}; {len(plan['Actions'])} action(s); "
        f"AvgStdDev {plan['Score']['Before']:.4f} -> {plan['Score']['After']:.4f}; {seconds:.1f} s"
    ]
    for phase in plan["Phases"]:
        lines.append(f"  {phase['Phase']}: {phase['Reason']}")
        if phase.get("Stopped"):
            lines.append(f"    -> {phase['Stopped']}")
    if plan["Actions"]:
        lines += largest_actions(plan["Actions"])
    left = plan.get("Remaining", {})
    for metric in left.get("Imbalanced", []):
        ratio = "inf" if metric["Ratio"] is None else f"{metric['Ratio']:.2f}"
        where = f" on {metric['NodeType']}" if metric["NodeType"] else ""
        lines.append(
            f"  still imbalanced: {metric['Metric']}{where}, max/min {ratio} against threshold "
            f"{metric['BalancingThreshold']:g} ({metric['MostLoadedNode']} {metric['MaxLoad']:g}, "
            f"{metric['LeastLoadedNode']} {metric['MinLoad']:g})"
        )
        lines += [f"    - {cause}" for cause in metric["Causes"]]
    violations = left.get("Violations", [])
    counts = ", ".join(f"{v['Constraint']} {v['Count']} {v['Of'].lower()}" for v in violations)
    lines.append(f"  violations left: {counts or 'none'}")
    return "\n".join(lines)


def report(plan: dict, seconds: float, notes: Sequence[str], targets: list) -> str:
    """The console report of a run: the plan's summary, the state's notes, how the run ended, where
    the plan went."""
    lines = [summary(plan, seconds)]
    if notes:
        more = f" (and {len(notes) - 3} more)" if len(notes) > 3 else ""
        lines.append("plbjax: note: " + "; ".join(notes[:3]) + more)
    if plan["Search"]["Interrupted"]:
        lines.append("plbjax: the run was interrupted; the plan is the best found until then (Search.Interrupted)")
    if not plan["Search"]["Minimal"]:
        lines.append("plbjax: the minimal-movement pass had no time to finish: some movements may be unneeded")
    if targets:
        lines.append("plan written to " + ", ".join(str(t) for t in targets))
    return "\n".join(lines)


def job_line(plan: dict, run_dir: Path) -> str:
    """A sweep job's one console line: its number, what it ran with, the plan's outcome (the whole
    report is the job folder's summary.txt)."""
    overrides = " ".join(HydraConfig.get().overrides.task)
    interrupted = ", interrupted" if plan["Search"]["Interrupted"] else ""
    return (
        f"plbjax: job {run_dir.name} ({overrides}): {len(plan['Actions'])} action(s), AvgStdDev "
        f"{plan['Score']['Before']:.4f} -> {plan['Score']['After']:.4f}, {plan['Search']['Seconds']:.1f} s"
        f"{interrupted}"
    )

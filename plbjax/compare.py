"""`plbjax-compare SWEEP_A SWEEP_B`: two sweeps (their multirun folders) joined on their swept keys
and input, per configuration the difference B - A of each number's mean over the seeds with its 95 %
confidence interval (Welch's t: unequal variances, Welch-Satterthwaite degrees of freedom), printed
and written to compare.csv, compare.md and compare.png.

A sweep is read from its jobs.parquet, else its summary.csv (`plbjax.sweep` writes both). A
configuration is a group of finished jobs that agree on every swept key but the seed; a group of A
pairs with each group of B that has the same input (SHA-256 of the state or timeline) and the same
values of the keys both sweep. Folders that are not sweeps, or that share no configuration, exit 2
with one line.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
from pathlib import Path

from plbjax.errors import BadInput
from plbjax.files import write_figure, write_text
from plbjax.sweep import AGGREGATES, JOBS_TABLE, SEED, markdown_table, swept_keys, t975, write_csv
from plbjax.version import add_flag as add_version_flag

EXAMPLES = """exit status: 0 written; 2 not sweeps, or no configuration shared (one line naming it); 130 after
Ctrl-C (SIGINT), 143 after SIGTERM (its files are written atomically: none is left half-written)

examples:
  plbjax-compare multirun/before multirun/after
  plbjax-compare sweeps/parallel sweeps/sequential --out sweeps/compare
  plbjax-compare day-threshold-1.1 day-threshold-2 --out compare"""
INPUT = "input_sha256"
COLUMNS = ("mean_a", "mean_b", "difference", "ci95_low", "ci95_high", "df", "n_a", "n_b")


def read_sweep(folder: Path) -> list[dict]:
    """A sweep's jobs, from its jobs.parquet or summary.csv; BadInput when the folder has neither."""
    if (folder / JOBS_TABLE).exists():
        import pyarrow.parquet as pq

        rows = pq.read_table(folder / JOBS_TABLE).to_pylist()
    elif (folder / "summary.csv").exists():
        with open(folder / "summary.csv", newline="") as f:
            rows = [{k: _cell(v) for k, v in row.items()} for row in csv.DictReader(f)]
    else:
        raise BadInput(f"{folder}: not a sweep (no {JOBS_TABLE} or summary.csv: made by plbjax -m, plbjax-replay -m)")
    if not rows or "status" not in rows[0] or "job" not in rows[0]:
        raise BadInput(f"{folder}: not a sweep's table (no jobs, or no job and status columns)")
    return rows


def _cell(text: str):
    """A CSV cell: a number where it reads as one, None where empty, else the text."""
    if text == "":
        return None
    try:
        return float(text)
    except ValueError:
        return text


def _groups(rows: list[dict]) -> dict[tuple, list[dict]]:
    """The finished jobs by configuration: (input, (key, value) for each swept key but the seed)."""
    keys = [k for k in swept_keys(rows) if k != SEED]
    out: dict[tuple, list[dict]] = {}
    for row in rows:
        if row["status"] == "ok":
            config = tuple((k, _text(row[k])) for k in keys)
            out.setdefault((row.get(INPUT), config), []).append(row)
    return out


def _text(value) -> str:
    """A swept value as the command line gave it (a CSV's 1.0 and a Parquet's '1.0' alike)."""
    return format(value, "g") if isinstance(value, float) else str(value)


def welch(a: list[float], b: list[float]) -> dict:
    """The difference of means b - a with its 95 % confidence interval by Welch's t (the degrees of
    freedom by Welch-Satterthwaite, rounded down); no interval where a side has under two values."""
    mean_a, mean_b = statistics.fmean(a), statistics.fmean(b)
    out = dict(zip(COLUMNS, (mean_a, mean_b, mean_b - mean_a, None, None, None, len(a), len(b))))
    if len(a) < 2 or len(b) < 2:
        return out
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        return out | {"ci95_low": mean_b - mean_a, "ci95_high": mean_b - mean_a, "df": len(a) + len(b) - 2}
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = t975(max(int(df), 1)) * math.sqrt(va + vb)
    return out | {"ci95_low": mean_b - mean_a - half, "ci95_high": mean_b - mean_a + half, "df": df}


def compare(a: list[dict], b: list[dict]) -> list[dict]:
    """One row per joined configuration and number: the configuration's keys, the number, `welch`'s
    columns. BadInput when no configuration of A matches one of B."""
    kind = "replay" if "time_averaged_avg_std_dev" in a[0] else "plan"
    if kind != ("replay" if "time_averaged_avg_std_dev" in b[0] else "plan"):
        raise BadInput("one sweep is of plans, the other of replays: nothing to compare")
    groups_a, groups_b = _groups(a), _groups(b)
    rows = []
    for (input_a, config_a), jobs_a in groups_a.items():
        for (input_b, config_b), jobs_b in groups_b.items():
            shared = dict(config_a).keys() & dict(config_b).keys()
            if input_a != input_b or any(dict(config_a)[k] != dict(config_b)[k] for k in shared):
                continue
            label = {"configuration": _label(config_a, config_b), "input": (input_a or "")[:12]}
            for name in AGGREGATES[kind]:
                values_a = [float(r[name]) for r in jobs_a if r.get(name) is not None]
                values_b = [float(r[name]) for r in jobs_b if r.get(name) is not None]
                if values_a and values_b:
                    rows.append({**label, "number": name, **welch(values_a, values_b)})
    if not rows:
        raise BadInput("the sweeps share no configuration (the same input and values of the keys both sweep)")
    return rows


def _label(config_a: tuple, config_b: tuple) -> str:
    """A configuration's name: its keys and values, A's then those only B sweeps."""
    pairs = dict(config_a) | dict(config_b)
    return " ".join(f"{k}={v}" for k, v in pairs.items()) or "(every job)"


def _number(value, digits: str = ".4g") -> str:
    return "-" if value is None else format(value, digits)


def table(rows: list[dict], names: tuple[str, str]) -> list[str]:
    """The comparison as Markdown lines."""
    head = f"B - A, A = {names[0]}, B = {names[1]}: the difference of the means over the seeds"
    lines = [f"{head}, 95 % CI by Welch's t (unequal variances, Welch-Satterthwaite df)", ""]
    cells = (
        (r["configuration"], r["input"], r["number"], *(_number(r[c]) for c in COLUMNS[:3]))
        + (f"{_number(r['ci95_low'])} to {_number(r['ci95_high'])}", _number(r["df"], ".3g"), f"{r['n_a']}, {r['n_b']}")
        for r in rows
    )
    head_cells = ["configuration", "input", "number", "mean A", "mean B", "B - A", "95 % CI", "df", "n A, B"]
    return lines + markdown_table(head_cells, cells)


def figure(rows: list[dict], names: tuple[str, str]):
    """One panel per number: each configuration's B - A with its 95 % Welch interval as an error bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    numbers = list(dict.fromkeys(r["number"] for r in rows))
    fig, axes = plt.subplots(len(numbers), 1, figsize=(8, 2.2 * len(numbers) + 0.6), squeeze=False)
    for ax, name in zip(axes[:, 0], numbers):
        mine = [r for r in rows if r["number"] == name]
        y = range(len(mine))
        low = [r["difference"] - (r["ci95_low"] if r["ci95_low"] is not None else r["difference"]) for r in mine]
        high = [(r["ci95_high"] if r["ci95_high"] is not None else r["difference"]) - r["difference"] for r in mine]
        ax.errorbar(
            [r["difference"] for r in mine], list(y), xerr=[low, high], fmt="o", capsize=3, label="B - A, 95 % CI"
        )
        ax.axvline(0.0, color="grey", linestyle="--", label="no difference")
        ax.set_yticks(list(y), [r["configuration"] for r in mine], fontsize=7)
        ax.set_xlabel(f"{name}: B - A")
        ax.set_ylabel("configuration")
        ax.margins(y=0.3)
        ax.legend(fontsize=7, loc="best")
    fig.suptitle(f"plbjax-compare: B = {names[1]} minus A = {names[0]} (Welch's t over seeds)", fontsize=9)
    fig.tight_layout()
    return fig


def run(sweep_a: Path, sweep_b: Path, out: Path) -> list[dict]:
    """Compare, print, write compare.csv, compare.md and compare.png into `out`."""
    names = (str(sweep_a), str(sweep_b))
    rows = compare(read_sweep(sweep_a), read_sweep(sweep_b))
    lines = table(rows, names)
    write_csv(out / "compare.csv", rows)
    write_text(out / "compare.md", "\n".join(lines) + "\n")
    write_figure(out / "compare.png", figure(rows, names), dpi=120)
    print("\n".join(lines))
    print(f"comparison written to {out / 'compare.md'} (and compare.csv, compare.png)")
    return rows


def main(argv: list[str] | None = None) -> int:
    """`plbjax-compare`; exit 2 with one line on bad input."""
    parser = argparse.ArgumentParser(
        prog="plbjax-compare",
        description=(__doc__ or "").split("\n\n")[0],
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_version_flag(parser)
    parser.add_argument("sweep_a", type=Path, help="a sweep's folder (the baseline of the difference)")
    parser.add_argument("sweep_b", type=Path, help="another sweep's folder")
    parser.add_argument("--out", type=Path, default=Path("."), help="where compare.csv, .md and .png go (default .)")
    args = parser.parse_args(argv)
    try:
        run(args.sweep_a, args.sweep_b, args.out)
    except BadInput as exc:
        print(f"plbjax-compare: bad input: {exc}", file=sys.stderr)
        return 2
    return 0

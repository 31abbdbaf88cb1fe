"""What the benchmark scripts share: their cluster sizes, the machine description stored with every
result, how busy the rest of the machine was, waiting for it to go quiet, and timing a jitted call."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import time
from pathlib import Path

import jax
import numba
import numpy as np

import plbjax
from plbjax.sf import ClusterSpec

PACKAGE = Path(plbjax.__file__).resolve().parent

CLUSTER_SEED = 1  # the generator seed of every benchmark cluster

# name -> ClusterSpec (3 replicas per partition, skew 0.8, 2-8 metrics) of bench_annealer's runs and
# bench_scaling's kernel comparison
SIZES = {
    "100": ClusterSpec(
        nodes=10, fault_domains=5, upgrade_domains=5, metrics=2, services=5, partitions_per_service=7, skew=0.8
    ),
    "1k": ClusterSpec(
        nodes=50, fault_domains=5, upgrade_domains=10, metrics=3, services=10, partitions_per_service=33, skew=0.8
    ),
    "10k": ClusterSpec(
        nodes=200, fault_domains=10, upgrade_domains=10, metrics=4, services=20, partitions_per_service=167, skew=0.8
    ),
    "100k": ClusterSpec(
        nodes=1000, fault_domains=10, upgrade_domains=10, metrics=4, services=50, partitions_per_service=667, skew=0.8
    ),
    "100k8": ClusterSpec(
        nodes=1000, fault_domains=10, upgrade_domains=10, metrics=8, services=50, partitions_per_service=667, skew=0.8
    ),  # the 100k-replica, 8-metric target cluster
    "300k": ClusterSpec(
        nodes=10000,
        fault_domains=10,
        upgrade_domains=10,
        metrics=8,
        services=100,
        partitions_per_service=1000,
        skew=0.8,
    ),  # the 10,000-node cluster
}


def _sources_hash() -> str:
    """sha256 of plbjax's Python sources as run, the baseline's included (the tree may differ from the commit)."""
    h = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        h.update(str(path.relative_to(PACKAGE)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def machine() -> dict:
    """The machine, the libraries and the plbjax sources a result was measured with."""
    model = platform.processor() or ""
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass

    def git(*args):
        try:
            done = subprocess.run(["git", *args], cwd=PACKAGE.parent, capture_output=True, text=True, timeout=10)
            return done.stdout.strip() if done.returncode == 0 else None
        except (OSError, subprocess.SubprocessError):
            return None

    return dict(
        cpu_model=model,
        logical_cores=os.cpu_count(),
        affinity_cores=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        platform=platform.platform(),
        python=platform.python_version(),
        jax_version=jax.__version__,
        jax_backend=jax.default_backend(),
        jax_devices=[str(d) for d in jax.devices()],
        numba_version=numba.__version__,
        numpy_version=np.__version__,
        load_average_at_start=list(os.getloadavg()),
        jax_device_kind=jax.devices()[0].device_kind,
        git_commit=git("rev-parse", "--verify", "HEAD"),
        git_dirty_files=[
            ln[3:]
            for ln in (git("status", "--porcelain") or "").splitlines()
            if ln[3:].startswith(("plbjax/", "scripts/"))
        ],
        plbjax_sources_sha256=_sources_hash(),
    )


class Contention:
    """Average cores used by other processes over a span (from /proc/stat less this process's CPU)."""

    def __enter__(self):
        self.start = (self._busy(), time.process_time(), time.perf_counter())
        return self

    def __exit__(self, *exc):
        busy, own, wall = self._busy(), time.process_time(), time.perf_counter()
        span = max(wall - self.start[2], 1e-9)
        self.other_cores = (
            None
            if busy is None or self.start[0] is None
            else max((busy - self.start[0]) - (own - self.start[1]), 0.0) / span
        )
        return False

    @staticmethod
    def _busy():
        try:
            with open("/proc/stat") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def wait_idle(what: str, limit: float) -> float:
    """Wait (up to `limit` s) until other processes have used < 0.1 cores for 10 s; the seconds waited."""
    start, quiet = time.perf_counter(), 0
    while time.perf_counter() - start < limit:
        with Contention() as c:
            time.sleep(2.0)
        quiet = quiet + 1 if (c.other_cores or 0.0) < 0.1 else 0
        if quiet >= 5:
            break
    waited = time.perf_counter() - start
    if waited > 12:
        print(f"   (waited {waited:.0f} s for an idle machine before {what})", flush=True)
    return waited


def timed(fn, *args, repeats: int = 3) -> tuple[float, float]:
    """(compile seconds, best run seconds) of a jitted function."""
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    compile_s = time.perf_counter() - start
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - start)
    return compile_s, best

"""`plbjax-warm`: compile, once, every program a plan of these states (or of clusters of these
sizes) builds, into the compilation cache (`PLBJAX_CACHE_DIR`, by default ~/.cache/plbjax/xla), so
that a container image or a CI cache ships them and its first plan compiles nothing.

Each state is planned through the public API with the default search cut to its first block
(`WARM_STEPS`: the programs of a search do not depend on its length, so this plan builds exactly
the programs a default plan does); a size is a generated cluster of about that many replicas (the
benchmarks' clusters: 3 replicas a partition, about 30 a node, 4 metrics), whose padded shape stands
for its bucket (`plbjax.sf._encoding`'s buckets). One line a state or size says how many programs it
traced and stored or found stored, how many XLA compiled or found in its cache, and the seconds; a
last line names the cache and what it holds. Bad input exits 2 with one line.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from plbjax.errors import BadInput

EXAMPLES = """exit status: 0 compiled or found stored; 2 bad input (one line naming it); 130 after Ctrl-C (SIGINT),
143 after SIGTERM (what was stored stays: every entry is written atomically)

examples:
  plbjax-warm examples/small.yaml   (the programs of the bundled example's default plan)
  plbjax-warm state.json --replicas 1000 10000 30000   (a state, and generated clusters of these sizes)
  plbjax-warm --replicas 100000   (with PLBJAX_CACHE_DIR set to the cache an image ships)
"""
WARM_STEPS = 1  # the default search cut to its first block: the same programs, built at once
_HIT = "/jax/compilation_cache/cache_hits"  # JAX's monitoring events: an executable from XLA's cache
_COMPILE = "/jax/core/compile/backend_compile_duration"  # ... every request for one (compiled or from the cache)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (`main`), not argparse's usage
        raise BadInput(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="plbjax-warm",
        description="Compile every program a plan of each STATE (or of a generated cluster of each size) "
        "builds with the default search, into the compilation cache (PLBJAX_CACHE_DIR, by default "
        "~/.cache/plbjax/xla): for container builds and CI images, so their first plan compiles nothing. "
        "With a GPU plugin installed, warm at the cache path the plans will use (XLA's GPU caches name "
        "their directory in every entry's key); without one, the cache may be copied or moved.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("states", nargs="*", metavar="STATE", help="a state document (JSON or YAML)")
    parser.add_argument(
        "--replicas",
        nargs="+",
        type=int,
        default=[],
        metavar="N",
        help="also a generated cluster of about N replicas each (its shape bucket)",
    )
    return parser


def spec_for(replicas: int):
    """The benchmarks' cluster of about `replicas` replicas (the scripts' `bench_cli.spec_for`): 3
    replicas a partition, about 30 a node, 4 metrics, skewed loads; 1k: 10 services, 10k: 22, 30k: 31."""
    from plbjax.sf import ClusterSpec

    services = max(2, round(10 * (replicas / 1000) ** (1 / 3)))
    nodes = max(10, round(replicas / 30))
    domains = 5 if nodes < 100 else 10
    return ClusterSpec(
        nodes=nodes,
        fault_domains=domains,
        upgrade_domains=domains,
        metrics=4,
        services=services,
        partitions_per_service=max(1, round(replicas / (3 * services))),
        replicas_per_partition=3,
        skew=0.8,
    )


def _targets(states: list[str], sizes: list[int]) -> list[tuple[str, Any]]:
    """(label, parsed state) for each state and size, all read before anything compiles."""
    from plbjax.sf import generate, load_state, parse_state

    if not states and not sizes:
        raise BadInput("nothing to warm: give a STATE or --replicas N")
    targets: list[tuple[str, Any]] = []
    for path in states:
        if not Path(path).is_file():
            raise BadInput(f"{path}: no such state document")
        targets.append((path, load_state(path)))
    for n in sizes:
        if n < 1:
            raise BadInput(f"--replicas {n}: needs at least 1 replica")
        targets.append((f"{n} replicas", parse_state(generate(0, spec_for(n)))))
    return targets


def _cache_line(directory: Path) -> str:
    files = [p for p in directory.rglob("*") if p.is_file()] if directory.is_dir() else []
    size = sum(p.stat().st_size for p in files)
    return f"cache {directory}: {len(files)} file(s), {size / 1e6:.1f} MB"


def warm(states: list[str], sizes: list[int], out=None) -> None:
    """Plan each state and size with `WARM_STEPS` steps, the compilation cache on and every program
    written to it, however small (a plan keeps only those that took 0.5 s to compile, but reads
    them all); a line for each, then the cache's. Raises BadInput."""
    targets = _targets(states, sizes)
    out = out or sys.stdout
    import jax

    from plbjax.anneal import _store, enable_compilation_cache
    from plbjax.sf import SearchConfig, plan

    search = SearchConfig(steps=WARM_STEPS)

    enable_compilation_cache()
    floor = jax.config.values["jax_persistent_cache_min_compile_time_secs"]
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    heard: Counter[str] = Counter()
    count = lambda event, *_, **__: heard.update([event])
    jax.monitoring.register_event_listener(count)
    jax.monitoring.register_event_duration_secs_listener(count)
    try:
        for label, state in targets:
            before, was = Counter(heard), dict(_store.counts)
            start = time.perf_counter()
            plan(state, search)
            seconds = time.perf_counter() - start
            traced = _store.counts["traced"] - was["traced"]
            loaded = _store.counts["loaded"] - was["loaded"]
            hits = heard[_HIT] - before[_HIT]
            compiled = heard[_COMPILE] - before[_COMPILE] - hits
            print(
                f"{label}: {traced} program(s) traced and stored, {loaded} found stored; "
                f"XLA compiled {compiled}, found {hits} in its cache; {seconds:.1f} s",
                file=out,
                flush=True,
            )
    finally:
        jax.monitoring.unregister_event_listener(count)
        jax.monitoring.unregister_event_duration_listener(count)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", floor)
    print(_cache_line(Path(jax.config.values["jax_compilation_cache_dir"])), file=out, flush=True)


def main(argv=None) -> int:
    """``plbjax-warm STATE [STATE...] [--replicas N [N...]]``: 0, or 2 on bad input (one line)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = _parser().parse_args(argv)
        warm(args.states, args.replicas)
    except BadInput as error:
        print(f"plbjax-warm: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

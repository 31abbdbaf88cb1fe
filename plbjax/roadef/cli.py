"""`plbjax-roadef -t SECONDS -p MODEL -i ORIGINAL -o NEW [-s SEED]`: the challenge's solver command.

The original assignment is written to NEW at once, so a feasible solution exists whatever happens;
the search then runs until the time limit (start-up and compilation included) and NEW is replaced
by the best feasible solution found. The last line on stderr splits the limit: start-up (interpreter,
imports, reading), compilation (JAX's own measure; the persistent cache makes a second run on
instances of the same sizes skip most of it) and search. Bad input exits with status 2 and one line.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import threading
import time

from plbjax.version import add_flag as add_version_flag

MARGIN = 1.0  # seconds kept back from the limit for writing the solution and exiting
SEARCH_MARGIN = 1.0  # the search aims to end this much earlier still (its last block may run over)


def _started() -> float:
    """When this process started, on the `time.perf_counter()` clock (interpreter start-up and imports
    count against the time limit); now, where /proc does not say."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
        return time.perf_counter() - max(0.0, age)
    except (OSError, ValueError, IndexError):
        return time.perf_counter()


START = _started()


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        """One line and exit status 2 (argparse would print the usage too)."""
        self.exit(2, f"plbjax-roadef: {message}\n")


def _one_device_per_core() -> None:
    """Before JAX starts: one XLA host device per core this process may use, so that chains sharded
    over them run on separate cores (a GPU backend is unaffected)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    flags = os.environ.get("XLA_FLAGS", "")
    if cores > 1 and "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={cores}".strip()


class _CompileClock:
    """Seconds JAX spends tracing, lowering and compiling (its /jax/core/compile/ duration events)."""

    def __init__(self) -> None:
        import jax.monitoring

        self.seconds = 0.0
        jax.monitoring.register_event_duration_secs_listener(self._event)

    def _event(self, event: str, duration_secs: float, **_) -> None:
        if event.startswith("/jax/core/compile/"):
            self.seconds += duration_secs


def _split(limit: float, started: float, compiled: float, searched: float | None) -> str:
    """Where the time limit went."""
    search = "still running at the limit" if searched is None else f"{searched:.1f} s"
    return (
        f"time: start-up {started:.1f} s, compilation {compiled:.1f} s, search {search}; "
        f"total {time.perf_counter() - START:.1f} s of the {limit:g} s limit"
    )


def _parser() -> _Parser:
    assert __doc__ is not None  # the module's docstring
    parser = _Parser(
        prog="plbjax-roadef",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit status: 0 a feasible assignment written (the best found within the limit); 1 the search failed\n"
        "(the best written so far stands); 2 bad input (one line naming it); 130 after Ctrl-C (SIGINT), 143 after\n"
        "SIGTERM\n\n"
        "examples:\n"
        "  plbjax-roadef -t 300 -p model_a1_1.txt -i assignment_a1_1.txt -o new_a1_1.txt\n"
        "  plbjax-roadef -t 60 -p model.txt -i original.txt -o new.txt -s 3 --chains 2\n"
        "  plbjax-roadef -t 30 -p model.txt -i original.txt -o new.txt --probe-factor 0.01 --no-parallel\n"
        "the last line says where the time went: start-up, compilation, search",
    )
    add_version_flag(parser)
    parser.add_argument("-t", dest="seconds", type=float, required=True, help="time limit in seconds")
    parser.add_argument("-p", dest="model", required=True, help="instance (model) file")
    parser.add_argument("-i", dest="original", required=True, help="original assignment file")
    parser.add_argument("-o", dest="new", required=True, help="where to write the new assignment")
    parser.add_argument("-s", dest="seed", type=int, default=0, help="random seed")
    parser.add_argument("--chains", type=int, help="chains (default: the solver's setting)")
    parser.add_argument("--tries", type=int, help="proposals evaluated together per step (default: by size)")
    parser.add_argument(
        "--probe-factor",
        type=float,
        help="starting temperature as a fraction of the largest first-block energy change (default: conf/roadef.yaml)",
    )
    parser.add_argument(
        "--final-ratio",
        type=float,
        help="last temperature as a fraction of the starting one (default: conf/roadef.yaml)",
    )
    parser.add_argument(
        "--parallel",
        action=argparse.BooleanOptionalAction,
        help="apply every independent accepted proposal of a step (default: on)",
    )
    parser.add_argument(
        "--population",
        action=argparse.BooleanOptionalAction,
        help="population annealing: redraw the chains by Boltzmann weight after each block (default: off)",
    )
    return parser


def _read(args):
    """The instance and original assignment; the original is written to NEW at once. Bad input exits 2."""
    from plbjax.errors import BadInput
    from plbjax.roadef._instance import read_instance, read_solution, write_solution
    from plbjax.roadef._objective import violations

    try:
        if os.path.realpath(args.new) in {os.path.realpath(args.model), os.path.realpath(args.original)}:
            raise BadInput(f"-o {args.new}: would overwrite an input file")
        instance = read_instance(args.model)
        original = read_solution(args.original, instance)
        if bad := violations(instance, original, original):
            raise BadInput(f"{args.original}: the original assignment is infeasible ({bad[0]})")
        write_solution(args.new, original)
    except BadInput as e:
        print(f"plbjax-roadef: {e}", file=sys.stderr)
        sys.exit(2)
    except OSError as e:
        print(f"plbjax-roadef: {args.new}: cannot write ({e.strerror})", file=sys.stderr)
        sys.exit(2)
    return instance, original


def _search(args, instance):
    """The solver's search for this instance, with the command line's overrides."""
    from plbjax.roadef._solver import search_config

    config = search_config(instance)
    kernel = dataclasses.replace(
        config.kernel,
        tries=args.tries or config.kernel.tries,
        parallel=config.kernel.parallel if args.parallel is None else args.parallel,
        population=config.kernel.population if args.population is None else args.population,
    )
    schedule = dataclasses.replace(
        config.schedule,
        seed=args.seed,
        chains=args.chains or config.schedule.chains,
        probe_factor=args.probe_factor or config.schedule.probe_factor,
        final_ratio=args.final_ratio or config.schedule.final_ratio,
    )
    return dataclasses.replace(config, kernel=kernel, schedule=schedule)


def _solve_in_time(args, instance, original, config, deadline: float):
    """The solver's result, the exception it raised, or None when it outlasted the deadline; NEW holds
    the best feasible solution found so far whatever happens."""
    from plbjax.roadef._instance import write_solution
    from plbjax.roadef._objective import costs
    from plbjax.roadef._solver import solve

    found: list = []
    written = [costs(instance, original, original).total]

    def write_better(assignment, cost):
        if cost.total < written[0]:
            write_solution(args.new, assignment)
            written[0] = cost.total

    def search_thread():
        try:
            found.append(solve(instance, original, config, deadline - SEARCH_MARGIN, on_better=write_better))
        except BaseException as e:  # reported by the caller; a feasible solution is already written
            found.append(e)

    search = threading.Thread(target=search_thread, daemon=True)
    search.start()
    search.join(timeout=max(0.0, deadline - time.perf_counter()))
    if found and not isinstance(found[0], BaseException):
        write_better(found[0].assignment, found[0].costs)
    return (found[0] if found else None), written[0]


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.seconds <= 0:
        parser.error(f"-t: the time limit must be positive, got {args.seconds}")
    for flag, value in (("--probe-factor", args.probe_factor), ("--final-ratio", args.final_ratio)):
        if value is not None and not value > 0:
            parser.error(f"{flag}: must be positive, got {value}")

    _one_device_per_core()
    from plbjax.anneal import enable_compilation_cache

    deadline = START + args.seconds - MARGIN
    instance, original = _read(args)
    enable_compilation_cache()
    clock, started = _CompileClock(), time.perf_counter() - START
    result, best = _solve_in_time(args, instance, original, _search(args, instance), deadline)
    if result is None:
        print(
            f"plbjax-roadef: the search did not finish within {args.seconds:g} s; the best solution written "
            f"so far stands (cost {best}); {_split(args.seconds, started, clock.seconds, None)}",
            file=sys.stderr,
            flush=True,
        )
        os._exit(0)
    if isinstance(result, BaseException):
        print(
            f"plbjax-roadef: the search failed ({type(result).__name__}: {result}); the best solution "
            f"written so far stands (cost {best})",
            file=sys.stderr,
            flush=True,
        )
        os._exit(1)
    print(
        f"plbjax-roadef: cost {result.costs.total} (initial {result.initial_cost}), {result.proposals} proposals; "
        + _split(args.seconds, started, clock.seconds, result.search_seconds),
        file=sys.stderr,
        flush=True,
    )
    os._exit(0)  # skip the interpreter's slow teardown of the XLA runtime


if __name__ == "__main__":
    main()

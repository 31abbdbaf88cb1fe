"""``python -m plbjax.sf.live.simulator DUMP_DIR_OR_STATE --port 19080``: serve a simulated cluster until Ctrl-C."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from plbjax.errors import BadInput
from plbjax.sf.live.simulator import Simulator


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, build the simulator and serve until interrupted."""
    parser = argparse.ArgumentParser(
        prog="python -m plbjax.sf.live.simulator",
        description=__doc__.splitlines()[0] if __doc__ else None,
        epilog="examples:\n"
        "  python -m plbjax.sf.live.simulator tests/data/sf-dump/small --port 19080\n"
        "  python -m plbjax.sf.live.simulator examples/small.yaml --clock-rate 10 --follow-plan plan.json\n"
        "  python -m plbjax.sf.live.simulator dump/ --build-seconds 30 --clock-rate 5\n"
        "  python -m plbjax.sf.live.simulator examples/small.yaml --day 0 --clock-rate 3600  (an hour a second)\n"
        "\n"
        "faults to inject while it serves (POST, no api-version; 400 E_INVALIDARG if malformed):\n"
        "  curl -X POST 'http://127.0.0.1:19080/$/SimulatorFault?Kind=Health&Entity=partition&Name=PID&HealthState=Error'\n"
        "     Entity: partition, node, application or service (ids as in the REST paths);\n"
        "     HealthState: Ok, Warning, Error or Unknown\n"
        "  curl -X POST 'http://127.0.0.1:19080/$/SimulatorFault?Kind=Upgrade&Seconds=600'\n"
        "     a cluster upgrade starts now (GetUpgradeProgress: RollingForwardInProgress); no Seconds: until stopped\n"
        "     (&Application=ID: that application's upgrade, /Applications/ID/$/GetUpgradeProgress)\n"
        "  curl -X POST 'http://127.0.0.1:19080/$/SimulatorFault?Kind=BalancerMove&PartitionId=PID"
        "&CurrentNodeName=A&NewNodeName=B'\n"
        "     SF's own balancer moves the partition's replica from A to B at once\n"
        "\n"
        "it serves SF's REST calls plbjax-dump, plbjax-apply and sfctl make: nodes, applications, services,\n"
        "partitions, replicas, their health, loads and info, GetClusterHealth, GetUpgradeProgress,\n"
        "GetClusterVersion, GetLoadInformation and the three move calls (with --day: the EventStore's\n"
        "/EventsStore/{Cluster,Nodes,Applications,Services,Partitions}/Events); any other route answers 404 with\n"
        "SF's error JSON (FABRIC_E_INVALID_ADDRESS). Its Failover Manager restores replica counts within the\n"
        "services' placement constraints and the nodes' capacities, never on Down or Disabled nodes.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("source", help="a dump directory (plbjax-dump's layout) or a state document")
    parser.add_argument("--port", type=int, default=19080, help="the port on 127.0.0.1 (default 19080)")
    parser.add_argument("--clock-rate", type=float, default=1.0, help="simulated seconds per wall second")
    parser.add_argument("--build-seconds", type=float, default=2.0, help="simulated seconds a replica takes to build")
    parser.add_argument(
        "--follow-plan",
        metavar="PLAN",
        help="its Failover Manager adds, drops and promotes where this plan's actions say (plbjax plays SF's PLB)",
    )
    parser.add_argument(
        "--day",
        type=int,
        metavar="SEED",
        help="live a seeded day (node faults, a deactivation, an upgrade in its EventStore; diurnal loads; SF's "
        "balancer moving): what plbjax-record records",
    )
    args = parser.parse_args(argv)
    options = {"clock_rate": args.clock_rate, "build_seconds": args.build_seconds}
    try:
        path = Path(args.source)
        sim = Simulator.from_dump(path, **options) if path.is_dir() else Simulator.from_state(path, **options)
        if args.follow_plan:
            sim.follow_plan(json.loads(Path(args.follow_plan).read_text()))
        if args.day is not None:
            sim.live_day(seed=args.day)
    except (BadInput, OSError, KeyError, ValueError) as exc:
        print(f"simulator: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    with sim.serve(args.port) as endpoint:
        print(f"simulator: serving {args.source} at {endpoint} (Ctrl-C stops)", file=sys.stderr)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()

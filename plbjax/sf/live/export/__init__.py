"""``plbjax-export PLAN --format sfctl|powershell|rest [-o FILE]``: the commands that carry a plan out.

One command per movement, in the order `steps.order` gives; nothing runs until the user runs it. Commands and
parameters as Service Fabric documents them:

* sfctl (Azure/service-fabric-cli, src/sfctl/commands.py and tests/request_generation_test.py):
  ``sfctl partition move-primary-replica --partition-id --node-name``,
  ``move-secondary-replica --partition-id --current-node-name --new-node-name``,
  ``move-instance --service-id --partition-id --current-node-name --new-node-name``;
* PowerShell (Move-ServiceFabricPrimaryReplica.md etc. in MicrosoftDocs/azure-docs-powershell):
  ``-PartitionId -ServiceName -NodeName``, ``-CurrentSecondaryNodeName -NewSecondaryNodeName``,
  ``-CurrentInstanceNodeName -NewInstanceNodeName``; the cmdlets' ``PartitionId`` parameter set
  requires ``-ServiceName`` with ``-PartitionId`` (learn.microsoft.com/powershell/module/servicefabric/
  move-servicefabricprimaryreplica, Syntax), and Service Fabric Explorer writes
  ``Move-ServiceFabricInstance -ServiceName -PartitionId -CurrentInstanceNodeName -NewInstanceNodeName``
  (microsoft/service-fabric-explorer, its replica commands); ``-IgnoreConstraints`` is never written,
  so SF checks every constraint again before it moves anything;
* REST (learn.microsoft.com/rest/api/servicefabric: Move Primary Replica, Move Secondary Replica,
  Move Instance): ``POST /Partitions/{partitionId}/$/MovePrimaryReplica?api-version=6.5&NodeName=``,
  ``.../$/MoveSecondaryReplica?api-version=6.5&CurrentNodeName=&NewNodeName=``,
  ``/Services/{serviceId}/$/GetPartitions/{partitionId}/$/MoveInstance?api-version=8.0&CurrentNodeName=&NewNodeName=``
  (serviceId: the name without ``fabric:`` and with ``~`` for ``/``, as the 6.0+ API writes it).

Every format is a script: bash for sfctl and REST (curl), PowerShell for the cmdlets. It starts with
its interpreter's line. Its steps come in the order `steps.order` gives: each after the steps it
depends on (the partition's previous step; the moves off a node that make room on it). A request
may be answered before its move is done, so before a step that needs an earlier one the script
polls the cluster (``sfctl replica list``, ``Get-ServiceFabricReplica``, ``GET .../$/GetReplicas``,
every page) until that step is done, read by `expectations` (the bash scripts run that module's own
source in python3; PowerShell has it translated): the replica Ready on its target node in the role
expected (SF's ``Primary``, ``ActiveSecondary``, an instance) and gone from its source.

Before its command a step checks that the replica is where the plan assumed
(`expectations.before`); a step already done (`expectations.after`, or a later step of its
partition done) is not issued again, so a stopped script may simply be run again;
``PLBJAX_START_AT=N`` starts at step N (the steps before it are taken as issued; their waits still
check the cluster). After the last step the script waits for every step not confirmed yet (an add
of the Failover Manager's: also the partition holding as many Ready replicas of its role as the
plan leaves, on any node, where ``--state`` tells how many) and ends with ``plbjax: all N step(s)
done``. Every line it prints goes to stderr, after the UTC time. Exit status: 0 every step done;
3 a wait timed out (``PLBJAX_WAIT_TIMEOUT`` seconds, default ``--wait-timeout``; the line names the
step); 4 a step refused (the line names it, with SF's error) or not as the plan assumed; 2 a tool or
setting missing.

A SwapPrimarySecondary is the move of the primary onto its secondary's node, which SF carries out
as a swap. Adds, drops and promotions have no command: the Failover Manager makes them (to restore
the target replica count), so they are steps without a command, waited for where a later one needs them.
"""

import importlib

_HOMES = {"export_plan": "script", "main": "script"}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    """Import on first use, so that importing one of its modules does not import the command."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)

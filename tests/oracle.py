"""An exact, brute-force reference for plans on tiny clusters (issue 21 point 9).

`tiny_cluster(seed)` draws a state document of at most 4 nodes and 6 replicas, 1-2 metrics, with
(sometimes) tight capacities, NodeBufferPercentage, fault and upgrade domains (some of them holding
only Down nodes), move costs with UseMoveCostReports, placement constraints, a defragmentation
metric, affinity and small movement throttles. Every replica is placed on an Up node, so only the
constraint check and balancing can run.

`Oracle(doc)` reads the document on its own (no plbjax code: its own loads, capacities, domains,
constraint counts, AvgStdDev and energy) and enumerates every placement reachable within the
movement throttles, all at once with NumPy (replica -> node with one replica of a partition per
node, and the primary of each stateful partition). `Oracle.expect(actions)` applies a plan's
Actions (tests/validity.py's own `apply`) and compares the final state with the optimum of the
phase that runs:

* the input breaks an enforced constraint (capacity, placement, fault domain, affinity: hard; upgrade
  domain: soft): the constraint check may move the replicas in violation (all replicas of a partition
  whose domain spread is broken, those on an overloaded node, out of place, away from their affinity
  parent) and swap their partitions' primaries (SF does not throttle the constraint check). The plan may
  not end with more hard violations, then soft ones, than the best such placement (counted per
  overloaded node and metric, misplaced replica, badly spread partition, child replica away from its
  parent);
* otherwise, if no metric triggers balancing (SF's strict max/min rule, inverted for
  defragmentation), or MaxPercentageToMove is 0, the plan is empty;
* otherwise balancing may move every replica of the service domains (services linked by shared
  metrics) with an imbalanced metric and swap their primaries, within the balancing throttles
  (GlobalMovementThrottleThreshold, MaxPercentageToMove of the placed replicas), breaking no enforced
  constraint; the plan's final energy (AvgStdDev + 0.001) x (±cost + replicas + 1000) must be no
  higher than the lowest such energy (ties allowed).

Movements are counted as SF's throttles count them: each replica on another node, and each partition
whose primary changed. Replicas of an affinity parent stay put (the engine moves children to parents,
never parents), as in the engine's phases.
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
from validity import apply

METRICS = ("CPU", "Memory")
COLORS = ("Blue", "Red")
PAD = "Pad"
WEIGHTS = {"Zero": 0.0, "Low": 0.1, "Medium": 0.3, "High": 1.0}  # SF's MetricWeight values
MOVE_COSTS = {"Zero": 0.0, "Low": 1.0, "Medium": 15.0, "High": 40.0, "VeryHigh": 200.0}
SWAP_COST = 0.1
LOCAL_DOMAIN_WEIGHT = 0.25
DOMAIN_FACTOR = 0.01
SMALL_VALUE = 0.001
MOVE_COST_OFFSET = 1000.0
HARD_SETTINGS = {
    "CapacityConstraintPriority": 0,
    "PlacementConstraintPriority": 0,
    "FaultDomainConstraintPriority": 0,
    "UpgradeDomainConstraintPriority": 1,
    "AffinityConstraintPriority": 0,
}


# ----------------------------------------------------------------------------- random tiny clusters


def _predicate(expression: str | None):
    if expression is None:
        return lambda props: True
    name, op, value = expression.split()
    return (lambda props: props.get(name) == value) if op == "==" else (lambda props: props.get(name) != value)


def tiny_cluster(seed: int) -> dict:
    """A random tiny cluster: 4 node entries (3-4 Up, the others Down and empty) in 3 fault and 3
    upgrade domains, 3 services (one of them without partitions now and then), at most 6 replicas,
    all placed.

    Every cluster has the engine's padded shape of all others but for affinity (two compiled
    searches in all): two metrics and a third, "Pad", all declared by the first service (a metric a
    cluster does not use has Weight Zero and no load: it counts nowhere), Pad a defragmentation
    metric, and a first partition of three replicas."""
    rng = random.Random(f"oracle-{seed}")
    n_metrics = rng.choice([1, 2])
    metrics = list(METRICS[:n_metrics])
    settings: dict = {}
    r = rng.random()
    if r < 0.35:
        settings["MaxPercentageToMove"] = 1.0  # throttles lifted
    elif r < 0.5:
        settings["MaxPercentageToMove"] = rng.choice([0.2, 0.5])
    if rng.random() < 0.15:
        settings["GlobalMovementThrottleThreshold"] = rng.choice([1, 2])
    if rng.random() < 0.3:
        settings["UseMoveCostReports"] = True
    doc: dict = {"SchemaVersion": 1, "Settings": settings, "Nodes": [], "Services": [], "Partitions": []}
    doc["MetricBalancingThresholds"] = {m: rng.choice([1.0, 1.0, 1.5, 3.0]) for m in metrics}
    if rng.random() < 0.2:
        doc["MetricActivityThresholds"] = {metrics[0]: rng.choice([10, 40])}
    doc["DefragmentationMetrics"] = {PAD: True}
    if rng.random() < 0.3:
        doc["DefragmentationMetrics"][metrics[-1]] = True
    if rng.random() < 0.3:
        doc["NodeBufferPercentage"] = {metrics[0]: rng.choice([0.1, 0.25])}

    n_up = rng.choice([3, 4, 4])
    fds = ["fd:/dc0", "fd:/dc1", "fd:/dc2"]
    fd_of = fds + [rng.choice(fds)]
    rng.shuffle(fd_of)
    uds = ["UD0", "UD1", "UD2"]
    ud_of = uds + [rng.choice(uds)]
    rng.shuffle(ud_of)
    tight = rng.random() < 0.4
    up = sorted(rng.sample(range(4), n_up))
    for i in range(4):
        node = {
            "NodeName": f"N{i}",
            "FaultDomain": fd_of[i],
            "UpgradeDomain": ud_of[i],
            "PlacementProperties": {"Color": rng.choice(COLORS)},
        }
        if i not in up:
            node["NodeStatus"] = "Down"
        caps = {m: rng.choice([20, 30, 40] if tight else [50, 80, 150]) for m in metrics if rng.random() < 0.8}
        if caps:
            node["Capacities"] = caps
        doc["Nodes"].append(node)

    ids = itertools.count(1)
    names = [f"fabric:/App/S{k}" for k in range(3)]
    affinity = rng.random() < 0.25
    left = 3  # replicas after the first partition's three
    for k, name in enumerate(names):
        stateful = rng.random() < 0.7
        svc: dict = {
            "ServiceName": name,
            "ServiceTypeName": f"T{k}",
            "ServiceKind": "Stateful" if stateful else "Stateless",
        }
        if k == 0:
            target, n_parts = 3, 1 if affinity else rng.choice([1, 1, 2])
            left -= 3 * (n_parts - 1)
        elif left == 0 or (rng.random() < 0.15 and not (affinity and k == 1)):
            target, n_parts = rng.randint(1, 2), 0  # a service without partitions
        else:
            target = rng.randint(1, min(3, left))
            n_parts = 1 if k == 1 and affinity else rng.randint(1, left // target)
            left -= target * n_parts
        svc["TargetReplicaSetSize" if stateful else "InstanceCount"] = target
        used = list(metrics) if k == 0 or rng.random() < 0.6 else [rng.choice(metrics)]
        svc["Metrics"] = []
        for m in used:
            scale = 12 if tight else 25
            entry = {"Name": m, "Weight": rng.choice(["Low", "Medium", "High", "High"])}
            if stateful:
                entry.update(PrimaryDefaultLoad=rng.randint(1, scale), SecondaryDefaultLoad=rng.randint(0, scale))
            else:
                entry["DefaultLoad"] = rng.randint(1, scale)
            svc["Metrics"].append(entry)
        if k == 0:
            for m in METRICS[n_metrics:] + (PAD,):
                svc["Metrics"].append(
                    {"Name": m, "Weight": "Zero"}
                    | ({"PrimaryDefaultLoad": 0, "SecondaryDefaultLoad": 0} if stateful else {"DefaultLoad": 0})
                )
        if rng.random() < 0.3:
            svc["PlacementConstraints"] = f"Color {rng.choice(['==', '!='])} {rng.choice(COLORS)}"
        if rng.random() < 0.3:
            svc["DefaultMoveCost"] = rng.choice(["Zero", "Low", "Medium", "High"])
        if affinity and k == 1:
            parent_stateful = doc["Services"][0]["ServiceKind"] == "Stateful"
            schemes = ["Affinity", "AlignedAffinity", "NonAlignedAffinity"] if parent_stateful else ["Affinity"]
            svc["Correlations"] = [{"ServiceName": names[0], "Scheme": rng.choice(schemes)}]
        doc["Services"].append(svc)
        for p in range(n_parts):
            replicas = []
            for i in range(target):
                rep = {
                    "ReplicaId": f"r{next(ids)}",
                    "Role": "Instance" if not stateful else ("Primary" if i == 0 else "Secondary"),
                    "NodeName": None,
                }
                if rng.random() < 0.15:
                    rep["Loads"] = {
                        e["Name"]: rng.randint(0, 12 if tight else 25) for e in svc["Metrics"] if e["Weight"] != "Zero"
                    }
                if rng.random() < 0.1:
                    rep["MoveCost"] = rng.choice(["Low", "High"])
                replicas.append(rep)
            doc["Partitions"].append({"ServiceName": name, "PartitionId": f"{name[-2:]}-{p}", "Replicas": replicas})
    _place(rng, doc, up)
    return doc


def _place(rng: random.Random, doc: dict, up: list[int]) -> None:
    """Replicas on Up nodes, one per partition and node; most clusters start without violations."""
    best = None
    want_valid = rng.random() < 0.7
    for attempt in range(30):
        for part in doc["Partitions"]:
            hosts = rng.sample(up, len(part["Replicas"]))
            for rep, host in zip(part["Replicas"], hosts):
                rep["NodeName"] = f"N{host}"
        oracle = Oracle(doc)
        bad = oracle.violation_counts(oracle.node0[None], oracle.primary0[None])
        valid = not bad[0].any()
        best = [[r["NodeName"] for r in p["Replicas"]] for p in doc["Partitions"]]
        if valid == want_valid:
            return
    for part, hosts in zip(doc["Partitions"], best):
        for rep, host in zip(part["Replicas"], hosts):
            rep["NodeName"] = host


# ----------------------------------------------------------------------------- the reference


class Oracle:
    """The document read independently of plbjax, and its exact optimum by enumeration."""

    def __init__(self, doc: dict):
        self.doc = doc
        settings = doc.get("Settings", {})
        self.priority = {k: int(settings.get(k, v)) for k, v in HARD_SETTINGS.items()}
        self.settings = settings
        self.nodes = [n["NodeName"] for n in doc["Nodes"]]
        node_ix = {n: i for i, n in enumerate(self.nodes)}
        N = len(self.nodes)
        self.up = np.array([n.get("NodeStatus", "Up") == "Up" for n in doc["Nodes"]])
        self.metrics = sorted({m["Name"] for s in doc["Services"] for m in s.get("Metrics", [])})
        metric_ix = {m: i for i, m in enumerate(self.metrics)}
        M = len(self.metrics)
        buffer = doc.get("NodeBufferPercentage", {})
        self.capacity = np.full((N, M), np.inf)
        for i, n in enumerate(doc["Nodes"]):
            for m, c in n.get("Capacities", {}).items():
                if m in metric_ix:
                    p = buffer.get(m, 0.0)
                    self.capacity[i, metric_ix[m]] = math.floor(c * (1 - p)) if p else c
        self.fd = [n["FaultDomain"] for n in doc["Nodes"]]
        self.ud = [n["UpgradeDomain"] for n in doc["Nodes"]]
        self.defrag = np.array([bool(doc.get("DefragmentationMetrics", {}).get(m)) for m in self.metrics])

        # services
        self.services = [s["ServiceName"] for s in doc["Services"]]
        svc_ix = {s: i for i, s in enumerate(self.services)}
        S = len(self.services)
        self.allowed = np.zeros((S, N), bool)  # Up nodes the service may use
        self.svc_weights = np.zeros((S, M))
        self.svc_uses = np.zeros((S, M), bool)
        for si, s in enumerate(doc["Services"]):
            pred = _predicate(s.get("PlacementConstraints"))
            self.allowed[si] = [
                self.up[i] and pred(n.get("PlacementProperties", {})) for i, n in enumerate(doc["Nodes"])
            ]
            for m in s.get("Metrics", []):
                self.svc_weights[si, metric_ix[m["Name"]]] = WEIGHTS[m.get("Weight", "Low")]
                self.svc_uses[si, metric_ix[m["Name"]]] = True
        self.metric_nodes = np.array([np.any(self.allowed[self.svc_uses[:, m]], axis=0) for m in range(M)]).reshape(
            M, N
        )
        use_costs = bool(settings.get("UseMoveCostReports", False))
        self.swap_cost = SWAP_COST if use_costs else 1.0

        # partitions and replicas
        self.parts = []  # (service index, [replica indices], stateful)
        self.rep_part, self.rep_svc, self.rep_id = [], [], []
        lp, ls, cost, node0 = [], [], [], []
        primary0 = []
        for part in doc["Partitions"]:
            si = svc_ix[part["ServiceName"]]
            svc = doc["Services"][si]
            stateful = svc["ServiceKind"] == "Stateful"
            rows, primary = [], -1
            for rep in part["Replicas"]:
                r = len(self.rep_id)
                rows.append(r)
                self.rep_part.append(len(self.parts))
                self.rep_svc.append(si)
                self.rep_id.append(rep["ReplicaId"])
                node0.append(node_ix[rep["NodeName"]])
                own = rep.get("Loads", {})
                p_load, s_load = np.zeros(M), np.zeros(M)
                for m in svc.get("Metrics", []):
                    k = metric_ix[m["Name"]]
                    if not stateful:
                        p_load[k] = s_load[k] = own.get(m["Name"], m.get("DefaultLoad", 0))
                        continue
                    p_load[k] = (
                        own[m["Name"]] if m["Name"] in own and rep["Role"] == "Primary" else m["PrimaryDefaultLoad"]
                    )
                    s_load[k] = (
                        own[m["Name"]] if m["Name"] in own and rep["Role"] == "Secondary" else m["SecondaryDefaultLoad"]
                    )
                lp.append(p_load)
                ls.append(s_load)
                cost.append(MOVE_COSTS[rep.get("MoveCost", svc.get("DefaultMoveCost", "Low"))] if use_costs else 1.0)
                if rep["Role"] == "Primary":
                    primary = r
            if primary >= 0:  # the load follows the role (SF's FailoverUnit)
                for r in rows:
                    lp[r] = lp[primary]
                secondaries = [r for r, rep in zip(rows, part["Replicas"]) if rep["Role"] == "Secondary"]
                if secondaries and self.up[node0[primary]]:
                    ls[primary] = np.mean([ls[r] for r in secondaries], axis=0)
            self.parts.append((si, rows, stateful))
            primary0.append(primary)
        self.R = len(self.rep_id)
        self.load_p, self.load_s = np.array(lp).reshape(self.R, M), np.array(ls).reshape(self.R, M)
        self.move_cost = np.array(cost)
        self.node0, self.primary0 = np.array(node0, int), np.array(primary0, int)
        self.rep_part, self.rep_svc = np.array(self.rep_part, int), np.array(self.rep_svc, int)

        # affinity: child service -> (parent's first partition, aligned)
        self.affinity = {}
        first = {}
        for pi, (si, _, _) in enumerate(self.parts):
            first.setdefault(si, pi)
        for si, s in enumerate(doc["Services"]):
            for c in s.get("Correlations", []):
                psi = svc_ix[c["ServiceName"]]
                if psi in first:
                    self.affinity[si] = (
                        first[psi],
                        c["Scheme"] == "AlignedAffinity" and s["ServiceKind"] == "Stateful",
                    )
        self.parent_parts = {pp for pp, _ in self.affinity.values()}

        # energy weights: global 0.75 over metrics (weight: mean of the services' weights, normalised),
        # 0.25 over the local domains of services with two or more partitions (each its own normalised weights)
        gw = np.array(
            [self.svc_weights[self.svc_uses[:, m], m].mean() if self.svc_uses[:, m].any() else 0.0 for m in range(M)]
        )
        self.metric_weight = gw.copy()
        gw = gw / gw.sum() if gw.sum() > 1e-9 else gw * 0
        n_parts = np.bincount([si for si, _, _ in self.parts], minlength=S)
        local = [si for si in range(S) if n_parts[si] >= 2 and self.svc_weights[si].sum() > 1e-9]
        self.local_weight = np.zeros((S, M))
        for si in local:
            self.local_weight[si] = self.svc_weights[si] / self.svc_weights[si].sum() * LOCAL_DOMAIN_WEIGHT / len(local)
        self.global_weight = gw * (1 - LOCAL_DOMAIN_WEIGHT)

    # ------------------------------------------------------------------ measures of placements [C, R], [C, P]

    def node_loads(self, node_of: np.ndarray, primary_of: np.ndarray, service: int | None = None) -> np.ndarray:
        """[C, N, M] node loads (of one service's replicas when given)."""
        is_primary = np.zeros(node_of.shape, bool)
        for p, (_, rows, stateful) in enumerate(self.parts):
            if stateful:
                for r in rows:
                    is_primary[:, r] = primary_of[:, p] == r
        loads = np.where(is_primary[..., None], self.load_p[None], self.load_s[None])  # [C, R, M]
        if service is not None:
            loads = loads * (self.rep_svc == service)[None, :, None]
        onehot = node_of[..., None] == np.arange(len(self.nodes))[None, None, :]  # [C, R, N]
        return np.einsum("crn,crm->cnm", onehot.astype(float), loads)

    @staticmethod
    def _cv(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Coefficient of variation of values [C, K] over mask [K] (0 when the mean is 0)."""
        v = values[:, mask]
        if v.shape[1] == 0:
            return np.zeros(values.shape[0])
        mean = v.mean(axis=1)
        std = v.std(axis=1)
        return np.where(mean > 0, std / np.where(mean > 0, mean, 1), 0.0)

    def avg_std_dev(self, node_of: np.ndarray, primary_of: np.ndarray) -> np.ndarray:
        loads = self.node_loads(node_of, primary_of)
        C = node_of.shape[0]
        out = np.zeros(C)
        fd_names, ud_names = sorted(set(self.fd)), sorted(set(self.ud))
        fd_up = np.array([any(self.up[i] and self.fd[i] == f for i in range(len(self.nodes))) for f in fd_names])
        ud_up = np.array([any(self.up[i] and self.ud[i] == u for i in range(len(self.nodes))) for u in ud_names])
        up_loads = loads * self.up[None, :, None]
        for m in range(len(self.metrics)):
            dev = self._cv(loads[:, :, m], self.metric_nodes[m])
            if self.defrag[m]:
                fd_l = np.stack([up_loads[:, [f == d for f in self.fd], m].sum(axis=1) for d in fd_names], axis=1)
                ud_l = np.stack([up_loads[:, [u == d for u in self.ud], m].sum(axis=1) for d in ud_names], axis=1)
                term = 1 - dev + DOMAIN_FACTOR * (self._cv(fd_l, fd_up) + self._cv(ud_l, ud_up))
            else:
                term = dev
            out += self.global_weight[m] * term
        for si in range(len(self.services)):
            if not self.local_weight[si].any():
                continue
            local = self.node_loads(node_of, primary_of, si)
            for m in range(len(self.metrics)):
                if self.local_weight[si, m]:
                    dev = self._cv(local[:, :, m], self.allowed[si])
                    out += self.local_weight[si, m] * ((1 - dev) if self.defrag[m] else dev)
        return out

    def movements(self, node_of: np.ndarray, primary_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(movements as throttles count them, SF's move cost) from the input placement."""
        moved = node_of != self.node0[None]
        swapped = (primary_of != self.primary0[None]) & (self.primary0[None] >= 0)
        count = moved.sum(axis=1) + swapped.sum(axis=1)
        cost = (moved * self.move_cost[None]).sum(axis=1) + self.swap_cost * swapped.sum(axis=1)
        return count, cost

    def energy(self, node_of: np.ndarray, primary_of: np.ndarray) -> np.ndarray:
        score = self.avg_std_dev(node_of, primary_of) + SMALL_VALUE
        _, cost = self.movements(node_of, primary_of)
        # SF's Score::CalculateEnergy: a move never lowers the energy, whatever the score's sign
        return score * (self.R + MOVE_COST_OFFSET) + np.abs(score) * cost

    def _spread_bad(self, labels: list[str], nodes: list[int], usable: np.ndarray) -> bool:
        """SF's domain distribution of one partition (flat domains): every usable domain holds
        floor(n/d) or floor(n/d)+1 of the replicas that are on usable nodes."""
        placed = [labels[n] for n in nodes if usable[n]]
        domains = sorted({labels[i] for i in range(len(labels)) if usable[i]})
        if len(placed) <= 1 or not domains:
            return False
        base = len(placed) // len(domains)
        return any(not base <= placed.count(d) <= base + 1 for d in domains)

    def partition_report(self, node_of: np.ndarray) -> dict[str, np.ndarray]:
        """[C, P] per partition: fault-domain and upgrade-domain spread broken; [C, R] misplaced."""
        C = node_of.shape[0]
        fd_bad, ud_bad = np.zeros((C, len(self.parts)), bool), np.zeros((C, len(self.parts)), bool)
        cache: dict = {}
        for p, (si, rows, _) in enumerate(self.parts):
            for c in range(C):
                key = (p, tuple(node_of[c, rows]))
                if key not in cache:
                    nodes = list(key[1])
                    cache[key] = (
                        self._spread_bad(self.fd, nodes, self.allowed[si]),
                        self._spread_bad(self.ud, nodes, self.allowed[si]),
                    )
                fd_bad[c, p], ud_bad[c, p] = cache[key]
        misplaced = ~self.allowed[self.rep_svc[None, :], node_of]
        return dict(fault_domain=fd_bad, upgrade_domain=ud_bad, placement=misplaced)

    def affinity_bad(self, node_of: np.ndarray, primary_of: np.ndarray) -> np.ndarray:
        """[C, R] child replicas away from their parent's replicas (aligned: primary with primary,
        secondary with secondary)."""
        bad = np.zeros(node_of.shape, bool)
        for r in range(self.R):
            si = self.rep_svc[r]
            if si not in self.affinity:
                continue
            pp, aligned = self.affinity[si]
            prow = self.parts[pp][1]
            own_part = self.rep_part[r]
            i_am_primary = primary_of[:, own_part] == r
            ok = np.zeros(node_of.shape[0], bool)
            for q in prow:
                here = node_of[:, q] == node_of[:, r]
                if aligned:
                    q_primary = primary_of[:, pp] == q
                    here &= q_primary == i_am_primary
                ok |= here
            bad[:, r] = ~ok
        return bad

    def violation_counts(self, node_of: np.ndarray, primary_of: np.ndarray, loads=None) -> np.ndarray:
        """[C, 2] violations of enforced constraints by SF priority: (hard, soft)."""
        loads = self.node_loads(node_of, primary_of) if loads is None else loads
        rep = self.partition_report(node_of)
        kinds = {
            "CapacityConstraintPriority": (loads > self.capacity[None] + 1e-6).sum(axis=(1, 2)),
            "PlacementConstraintPriority": rep["placement"].sum(axis=1),
            "FaultDomainConstraintPriority": rep["fault_domain"].sum(axis=1),
            "UpgradeDomainConstraintPriority": rep["upgrade_domain"].sum(axis=1),
            "AffinityConstraintPriority": self.affinity_bad(node_of, primary_of).sum(axis=1),
        }
        out = np.zeros((node_of.shape[0], 2), int)
        for name, count in kinds.items():
            if self.priority[name] in (0, 1):
                out[:, self.priority[name]] += count
        return out

    def in_violation(self) -> np.ndarray:
        """[R] replicas of the input in violation of an enforced constraint (what the constraint check moves)."""
        node_of, primary_of = self.node0[None], self.primary0[None]
        loads = self.node_loads(node_of, primary_of)[0]
        rep = self.partition_report(node_of)
        bad = np.zeros(self.R, bool)
        if self.priority["CapacityConstraintPriority"] >= 0:
            over = (loads > self.capacity + 1e-6).any(axis=1)
            bad |= over[self.node0]
        if self.priority["PlacementConstraintPriority"] >= 0:
            bad |= rep["placement"][0]
        if self.priority["AffinityConstraintPriority"] >= 0:
            bad |= self.affinity_bad(node_of, primary_of)[0]
        for key in ("fault_domain", "upgrade_domain"):
            if self.priority[f"{'FaultDomain' if key == 'fault_domain' else 'UpgradeDomain'}ConstraintPriority"] >= 0:
                bad |= rep[key][0][self.rep_part]
        return bad

    # ------------------------------------------------------------------ balancing trigger and scope

    def imbalanced_metrics(self) -> set[str]:
        loads = self.node_loads(self.node0[None], self.primary0[None])[0]
        out = set()
        for m, name in enumerate(self.metrics):
            values = loads[self.metric_nodes[m], m]
            if values.size == 0:
                continue
            hi, lo = values.max(), values.min()
            threshold = float(self.doc.get("MetricBalancingThresholds", {}).get(name, 1.0))
            activity = float(self.doc.get("MetricActivityThresholds", {}).get(name, 0.0))
            if self.metric_weight[m] <= 0 or threshold <= 0:
                continue
            if self.defrag[m]:
                trigger = hi > 0 and (threshold == 1 or (lo > 0 and hi / lo <= threshold))
            else:
                balanced = (
                    hi <= lo + 1
                    or (activity > 0 and hi <= activity)
                    or (threshold > 1 and lo > 0 and hi / lo <= threshold)
                )
                trigger = not balanced
            if trigger:
                out.add(name)
        return out

    def balancing_services(self, imbalanced: set[str]) -> set[int]:
        """Service domains (services linked by a shared metric) holding an imbalanced metric."""
        S = len(self.services)
        group = list(range(S))

        def find(x):
            while group[x] != x:
                x = group[x]
            return x

        for m in range(len(self.metrics)):
            users = np.flatnonzero(self.svc_uses[:, m])
            for u in users[1:]:
                group[find(u)] = find(users[0])
        hot = {
            find(si)
            for si in range(S)
            for m in range(len(self.metrics))
            if self.svc_uses[si, m] and self.metrics[m] in imbalanced
        }
        return {si for si in range(S) if find(si) in hot}

    def budget(self, phase: str) -> int:
        """Movements the phase may make: SF throttles balancing (GlobalMovementThrottleThreshold, 0 no
        limit; MaxPercentageToMove), never the constraint check."""
        if phase == "ConstraintCheck":
            return 10**9
        s = self.settings
        limits = []
        g = int(s.get("GlobalMovementThrottleThreshold", 1000))
        if g > 0:
            limits.append(g)
        if phase == "Balancing":
            p = float(s.get("MaxPercentageToMove", 0.3))
            if p > 0:
                limits.append(math.ceil(p * self.R))
        return min(limits, default=10**9)

    # ------------------------------------------------------------------ enumeration

    def enumerate(self, movable: np.ndarray, swappable: np.ndarray, budget: int) -> tuple[np.ndarray, np.ndarray]:
        """Every placement ([C, R] nodes, [C, P] primaries) that moves only `movable` replicas, each to a
        node its service may use, swaps
        only `swappable` partitions' primaries, keeps one replica per node and partition, and makes at
        most `budget` movements."""
        up = np.flatnonzero(self.up)
        combos = [(np.zeros((1, 0), int), np.zeros((1, 0), int), np.zeros(1, int))]
        nodes, prims, moves = combos[0]
        for p, (si, rows, stateful) in enumerate(self.parts):
            options = []
            # a replica that moves lands on a node its service may use (SF's placement subspace)
            usable = [n for n in up if self.allowed[si, n]]
            choices = [sorted({*usable, self.node0[r]}) if movable[r] else [self.node0[r]] for r in rows]
            primaries = rows if (stateful and swappable[p]) else [self.primary0[p]]
            for assign in itertools.product(*choices):
                if len(set(assign)) < len(assign) or self._cyclic(rows, assign):
                    continue
                moved = sum(a != self.node0[r] for a, r in zip(assign, rows))
                for prim in primaries:
                    count = moved + int(prim != self.primary0[p] and self.primary0[p] >= 0)
                    if count <= budget:
                        options.append((assign, prim, count))
            o_nodes = np.array([o[0] for o in options], int).reshape(len(options), len(rows))
            o_prim = np.array([o[1] for o in options], int)
            o_moves = np.array([o[2] for o in options], int)
            a = np.repeat(np.arange(len(moves)), len(options))
            b = np.tile(np.arange(len(options)), len(moves))
            keep = moves[a] + o_moves[b] <= budget
            a, b = a[keep], b[keep]
            nodes = np.concatenate([nodes[a], o_nodes[b]], axis=1)
            prims = np.concatenate([prims[a], o_prim[b, None]], axis=1)
            moves = moves[a] + o_moves[b]
        return nodes, prims

    def _cyclic(self, rows: list[int], assign: tuple) -> bool:
        """The partition's replicas trade nodes in a cycle (A onto B's node and B onto A's): no order
        of single moves reaches it, as one replica of a partition per node holds after every move."""
        start = {int(self.node0[r]): k for k, r in enumerate(rows)}
        for k in range(len(rows)):
            seen, j = set(), k
            while assign[j] != self.node0[rows[j]] and j not in seen:
                seen.add(j)
                j = start.get(int(assign[j]))
                if j is None:
                    break
                if j == k:
                    return True
        return False

    def state_of(self, doc_after: dict) -> tuple[np.ndarray, np.ndarray]:
        """A document's placement in the oracle's terms ([1, R], [1, P])."""
        node_ix = {n: i for i, n in enumerate(self.nodes)}
        where = {}
        for part in doc_after["Partitions"]:
            for rep in part["Replicas"]:
                where[str(rep["ReplicaId"])] = (rep.get("NodeName"), rep["Role"])
        node_of = np.array([node_ix[where[str(rid)][0]] for rid in self.rep_id], int)
        primary_of = np.array(
            [next((r for r in rows if where[str(self.rep_id[r])][1] == "Primary"), -1) for _, rows, _ in self.parts],
            int,
        )
        return node_of[None], primary_of[None]

    # ------------------------------------------------------------------ the expectation

    def expect(self, actions: list[dict]) -> str | None:
        """None if the plan's final state is optimal for the phase that runs, else what is wrong."""
        try:
            after = apply(self.doc, actions)
            node_f, prim_f = self.state_of(after)
        except (ValueError, KeyError, StopIteration) as exc:
            return f"apply: {exc}"
        if sorted(str(r["ReplicaId"]) for p in after["Partitions"] for r in p["Replicas"]) != sorted(
            map(str, self.rep_id)
        ):
            return "the plan adds or drops replicas"
        node0, prim0 = self.node0[None], self.primary0[None]
        v0 = self.violation_counts(node0, prim0)[0]
        vf = self.violation_counts(node_f, prim_f)[0]
        not_parent = np.array([self.rep_part[r] not in self.parent_parts for r in range(self.R)])
        if v0.any():  # the constraint check
            movable = self.in_violation() & not_parent
            swappable = np.zeros(len(self.parts), bool)
            swappable[self.rep_part[movable]] = True
            swappable[list(self.parent_parts)] = False
            nodes, prims = self.enumerate(movable, swappable, self.budget("ConstraintCheck"))
            counts = self.violation_counts(nodes, prims)
            best = min(map(tuple, counts))
            if tuple(vf) > best:
                i = next(i for i in range(len(counts)) if tuple(counts[i]) == best)
                return (
                    f"violations: plan ends with (hard, soft) {tuple(vf)}, the optimum {best} "
                    f"(from {tuple(v0)}; e.g. nodes {nodes[i].tolist()} primaries {prims[i].tolist()})"
                )
            return None
        if vf.any():
            return f"violations: the plan breaks {tuple(vf)} (none before)"
        imbalanced = self.imbalanced_metrics()
        services = self.balancing_services(imbalanced)
        if not imbalanced or not services or float(self.settings.get("MaxPercentageToMove", 0.3)) == 0:
            if actions:
                return f"needless moves: balancing should not run (imbalanced: {sorted(imbalanced)}) but the plan has {len(actions)} action(s)"
            return None
        movable = np.isin(self.rep_svc, list(services)) & not_parent
        swappable = np.array([si in services and p not in self.parent_parts for p, (si, _, _) in enumerate(self.parts)])
        nodes, prims = self.enumerate(movable, swappable, self.budget("Balancing"))
        counts = self.violation_counts(nodes, prims)
        ok = ~counts.any(axis=1)
        nodes, prims = nodes[ok], prims[ok]
        energies = self.energy(nodes, prims)
        i = int(np.argmin(energies))
        e_final = float(self.energy(node_f, prim_f)[0])
        e_best = float(energies[i])
        if e_final > e_best + 1e-5 * max(1.0, abs(e_best)):
            n_moves, _ = self.movements(node_f, prim_f)
            b_moves, _ = self.movements(nodes[i : i + 1], prims[i : i + 1])
            return (
                f"energy: plan {e_final:.6f} ({int(n_moves[0])} movement(s), nodes {node_f[0].tolist()} "
                f"primaries {prim_f[0].tolist()}, AvgStdDev {self.avg_std_dev(node_f, prim_f)[0]:.6f}) > optimum "
                f"{e_best:.6f} ({int(b_moves[0])} movement(s), nodes {nodes[i].tolist()} primaries "
                f"{prims[i].tolist()}, AvgStdDev {self.avg_std_dev(nodes[i : i + 1], prims[i : i + 1])[0]:.6f}); "
                f"input nodes {self.node0.tolist()} primaries {self.primary0.tolist()}, "
                f"energy {float(self.energy(node0, prim0)[0]):.6f}, budget {self.budget('Balancing')}"
            )
        return None

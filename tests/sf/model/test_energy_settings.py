"""SF's energy settings (`_encoding/energy_terms.py`): IgnoreCostInScoring, MoveCostOffset and the
defragmentation factors change the energy as SF's Score.cpp says, as numbers the search reads at
run time (one program whatever they are), and the incremental energy still equals recomputation."""

from __future__ import annotations

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import QUICK, cluster, model_check, searchable

from plbjax.sf import parse_state
from plbjax.sf._model import chain as S
from plbjax.sf._model import energy as E
from plbjax.sf._model.moves import DRAWS

DEFRAG_FACTORS = (
    "DefragmentationNodesStdDevFactor",
    "DefragmentationFdsStdDevFactor",
    "DefragmentationUdsStdDevFactor",
)
CUSTOM = {
    "IgnoreCostInScoring": False,
    "MoveCostOffset": 50,
    "DefragmentationNodesStdDevFactor": 2.0,
    "DefragmentationFdsStdDevFactor": 0.5,
    "DefragmentationUdsStdDevFactor": 0.25,
}


def _doc(**settings) -> dict:
    """A random test cluster with a defragmentation metric and `settings`."""
    doc = cluster(5)
    doc["DefragmentationMetrics"] = {"Metric1": True}
    doc["Settings"] = dict(doc.get("Settings", {})) | settings
    return doc


def _search(**settings):
    search, _ = searchable(parse_state(_doc(**settings)))
    return search


def _moved(search, k: int = 3) -> tuple[jax.Array, jax.Array]:
    """The search's origin with its first `k` movable replicas on the next open node."""
    node_of = np.asarray(search.scope.origin_node).copy()
    movable = np.asarray(search.scope.movable)[: int(search.scope.n_movable)]
    n = int(np.asarray(search.cluster.node_up).sum())
    for r in movable[:k]:
        node_of[r] = (node_of[r] + 1) % n
    return jnp.asarray(node_of), search.scope.origin_primary


def _parts(search, node_of, primary_of) -> tuple[float, float, float]:
    """(AvgStdDev, movement cost, violations' energy) of a placement."""
    problem = search.cluster
    loads = E.node_loads(problem, node_of, primary_of)
    return (
        float(E.avg_std_dev(problem, node_of, primary_of)),
        float(E.movement_cost(search, node_of, primary_of)),
        float(E.penalty_of(problem, node_of, primary_of, loads)),
    )


@pytest.mark.parametrize("offset", [1000, 50, 0])
def test_move_cost_offset_is_the_constant_of_sf_energy(offset):
    """Score.cpp:584: energy = (AvgStdDev + 0.001) x (cost + replicas + MoveCostOffset); the
    violations count in the same unit (replicas + MoveCostOffset) as at SF's default."""
    search = _search(MoveCostOffset=offset)
    node_of, primary_of = _moved(search)
    avg, cost, penalty = _parts(search, node_of, primary_of)
    assert cost > 0
    replicas = float(search.cluster.replica_count)
    want = (avg + 0.001) * (cost + replicas + offset) + penalty
    assert float(E.energy_of(search, node_of, primary_of)) == pytest.approx(want, rel=1e-5)
    default = _search()
    ratio = np.asarray(search.cluster.penalty) / np.asarray(default.cluster.penalty).clip(1e-9)
    on = np.asarray(default.cluster.penalty) > 0
    assert ratio[on] == pytest.approx((replicas + offset) / (replicas + 1000), rel=1e-6)


def test_ignore_cost_in_scoring_leaves_the_cost_out():
    """Score.cpp:577: with IgnoreCostInScoring the energy is AvgStdDev alone: moves cost nothing, so
    two placements compare by AvgStdDev (and violations) only (here in the unit replicas + 1000)."""
    search = _search(IgnoreCostInScoring=True)
    node_of, primary_of = _moved(search)
    avg, cost, penalty = _parts(search, node_of, primary_of)
    assert cost > 0
    unit = float(search.cluster.replica_count) + 1000.0
    assert float(E.energy_of(search, node_of, primary_of)) == pytest.approx((avg + 0.001) * unit + penalty, rel=1e-5)
    counted = _search()
    assert float(E.energy_of(counted, node_of, primary_of)) == pytest.approx(
        (avg + 0.001) * (unit + cost) + penalty, rel=1e-5
    )


def test_defragmentation_factors_weigh_sf_defragmentation_score():
    """Score.cpp:427-431: a defragmentation metric scores a - a x dev(nodes) + b x dev(fault domains)
    + c x dev(upgrade domains) (a, b, c: DefragmentationNodes/Fds/UdsStdDevFactor), so AvgStdDev is
    affine in the three factors: at (a, b, c) it is the score at (0, 0, 0) plus a, b and c times
    what each factor alone adds; and SF's defaults (1, 0.01, 0.01) are what plbjax scored before."""
    node_of, primary_of = _moved(_search())

    def avg(a: float, b: float, c: float) -> float:
        search = _search(**dict(zip(DEFRAG_FACTORS, (a, b, c))))
        return float(E.avg_std_dev(search.cluster, node_of, primary_of))

    base = avg(0, 0, 0)
    nodes, fds, uds = (avg(*unit) - base for unit in ((1, 0, 0), (0, 1, 0), (0, 0, 1)))
    assert nodes > 0 and fds > 0 and uds > 0
    for a, b, c in ((2.0, 0.5, 0.25), (1.0, 0.01, 0.01), (0.5, 0.0, 3.0)):
        assert avg(a, b, c) == pytest.approx(base + a * nodes + b * fds + c * uds, rel=1e-5, abs=1e-6)
    assert E.avg_std_dev(_search().cluster, node_of, primary_of) == pytest.approx(
        base + nodes + 0.01 * (fds + uds), rel=1e-5
    )


@functools.cache
def _program(settings_json: str) -> str:
    """The jaxpr of one step's proposals on the defragmentation cluster with these settings."""
    search = _search(**json.loads(settings_json))
    state = S.start(search)
    words = jnp.zeros((4, DRAWS), jnp.uint32)
    return str(jax.make_jaxpr(functools.partial(S.propose, swap_probability=0.3))(search, state, words))


@pytest.mark.parametrize("settings", [CUSTOM, {"IgnoreCostInScoring": True, "MoveCostOffset": 0}], ids=str)
def test_the_settings_are_numbers_the_same_program_reads(settings):
    """The settings are arrays read at run time, not static: the same program as SF's defaults."""
    assert _program(json.dumps({})) == _program(json.dumps(settings))


@pytest.mark.slow
@pytest.mark.parametrize("settings", [CUSTOM, {"IgnoreCostInScoring": True, "MoveCostOffset": 0}], ids=str)
def test_the_model_passes_the_model_check_with_other_energy_settings(settings):
    """Incremental statistics and energy equal recomputation under other energy settings."""
    search = _search(**settings)
    assert search.cluster.features.defrag
    report = model_check(
        search, QUICK.kernel, ("loads", "g_total", "local_score", "cost", "energy", "fd_total", "ud_total")
    )
    assert report.valid > 20 and report.kept >= 1

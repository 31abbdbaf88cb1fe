"""ROADEF/EURO 2012 machine reassignment on the plbjax engine, checked by an independent checker."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from paths import TESTS
from roadef_checker import check, load_model

from plbjax import anneal as A
from plbjax.roadef import _model as RS
from plbjax.roadef import costs, read_instance, read_solution, violations
from plbjax.roadef._generator import InstanceSpec, generate, write_instance
from plbjax.roadef._solver import search_config, solve

DATA = TESTS / "data" / "roadef"  # the challenge's official example, as published
EXAMPLE = [DATA / f for f in ("model_example.txt", "initial_solution_example.txt", "new_solution_example.txt")]


def _model(tmp_path, instance, name="model.txt"):
    path = tmp_path / name
    write_instance(path, instance)
    return load_model(path)


MODEL = RS.model(0.5)
EXACT = A.Tolerance(0.0, 0.0)


def _hot_steps(problem, keys, n: int):
    """n steps of several chains at a high temperature (many accepted moves)."""
    return A.hot_chains(MODEL, problem, A.KernelConfig(tries=4), keys, n, 1e5)


def test_official_example_costs():
    model = load_model(EXAMPLE[0])
    original, new = (read_ints_list(p) for p in EXAMPLE[1:])
    assert check(model, original, original)[:2] == (True, 4200)
    assert check(model, original, new)[:2] == (True, 2411)
    instance = read_instance(EXAMPLE[0])
    o, n = (read_solution(p, instance) for p in EXAMPLE[1:])
    assert costs(instance, o, o).total == 4200 and costs(instance, o, n).total == 2411
    assert violations(instance, o, n) == []


def read_ints_list(path):
    return [int(w) for w in Path(path).read_text().split()]


def test_solver_on_the_example_is_feasible_and_at_least_as_good_as_the_given_solution():
    instance = read_instance(EXAMPLE[0])
    original = read_solution(EXAMPLE[1], instance)
    config = search_config(instance)
    config = dataclasses.replace(
        config,
        kernel=dataclasses.replace(config.kernel, tries=8),
        schedule=dataclasses.replace(config.schedule, steps=20_000),
    )
    found = solve(instance, original, config)
    feasible, cost, _ = check(load_model(EXAMPLE[0]), list(original), list(found.assignment))
    assert feasible and cost == found.costs.total <= 2411


DEPENDENT = dict(machines=12, processes=60, services=20, neighborhoods=3, dependencies=15)  # many dependency rejections


@pytest.mark.parametrize("seed, shape", [(5, {}), (1, {}), (2, DEPENDENT)])  # 5 and 1: one shape, one compiled search
def test_proposals_are_valid_exactly_when_feasible_and_their_energy_is_the_cost(tmp_path, seed, shape):
    """Brute force: every proposal from a state reached by a hot search, applied on the host."""
    instance, original = generate(seed, InstanceSpec(**shape))
    model = _model(tmp_path, instance)
    with jax.enable_x64(True):
        problem = RS.encode(instance, original)
        chains = _hot_steps(problem, jax.random.split(jax.random.PRNGKey(seed), 2), 200)
        state = jax.tree.map(lambda x: x[0], chains.state)
        words = jax.random.bits(jax.random.PRNGKey(7), (400, RS.DRAWS), jnp.uint32)
        move, energy, valid, _ = jax.vmap(RS.propose, in_axes=(None, None, 0, None))(problem, state, words, 0.5)
    start = np.asarray(state.assignment)
    move, energy, valid = jax.tree.map(np.asarray, move), np.asarray(energy), np.asarray(valid)
    assert check(model, list(original), list(start))[0]
    degenerate = (move.a == move.b) | (move.moves_q & (move.c == move.b))  # a process 'moving' where it is
    assert not valid[degenerate].any()
    for n in np.nonzero(~degenerate)[0]:
        after = start.copy()
        after[move.p[n]] = move.b[n]
        if move.moves_q[n]:
            after[move.q[n]] = move.c[n]
        feasible, cost, _ = check(model, list(original), list(after))
        assert feasible == valid[n]
        if feasible:
            assert cost == energy[n]
    assert 20 < valid.sum() < len(valid)


def test_every_chain_state_is_feasible_and_its_running_energy_exact(tmp_path):
    instance, original = generate(3, InstanceSpec())
    model = _model(tmp_path, instance)
    with jax.enable_x64(True):
        chains = _hot_steps(RS.encode(instance, original), jax.random.split(jax.random.PRNGKey(0), 4), 500)
    assert int(chains.accepted.sum()) > 200
    for c in range(4):
        assignment = np.asarray(chains.state.assignment[c])
        feasible, cost, problems = check(model, list(original), list(assignment))
        assert feasible, problems
        assert cost == int(chains.state.energy[c])


def test_costs_past_two_to_the_31_stay_exact(tmp_path):
    instance, original = generate(4, InstanceSpec(scale=10**7))
    model = _model(tmp_path, instance)
    assert costs(instance, original, original).total > 2**31
    with jax.enable_x64(True):
        chains = _hot_steps(RS.encode(instance, original), jax.random.split(jax.random.PRNGKey(1), 2), 300)
    for c in range(2):
        assert check(model, list(original), list(np.asarray(chains.state.assignment[c])))[1] == int(
            chains.state.energy[c]
        )


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "plbjax.roadef.cli", *map(str, args)], capture_output=True, text=True)


def test_cli_writes_a_feasible_improvement_within_the_limit(tmp_path):
    """A feasible solution by the 15 s limit, better than the original when start-up and compilation
    left the search most of the limit and it finished (on a machine slow enough to spend the limit
    starting, the original or the best found so far stands: no assertion on how long anything took)."""
    instance, original = generate(5, InstanceSpec())
    write_instance(tmp_path / "model.txt", instance)
    (tmp_path / "original.txt").write_text(" ".join(map(str, original)))
    out = _cli(
        "-t",
        15,
        "-p",
        tmp_path / "model.txt",
        "-i",
        tmp_path / "original.txt",
        "-o",
        tmp_path / "new.txt",
        "-s",
        3,
        "--probe-factor",
        0.01,
        "--final-ratio",
        0.01,
    )
    assert out.returncode == 0, out.stderr
    new = [int(w) for w in (tmp_path / "new.txt").read_text().split()]
    feasible, cost, _ = check(load_model(tmp_path / "model.txt"), list(original), new)
    assert feasible, out.stderr
    split = re.search(r"start-up ([\d.]+) s, compilation ([\d.]+) s, search (still running)?", out.stderr)
    assert split, out.stderr
    if float(split[1]) + float(split[2]) < 15 / 2 and split[3] is None:  # it searched most of the limit
        assert cost < costs(instance, original, original).total, out.stderr


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda text: text.replace(text.split()[0], "x", 1), "'x' is not an integer"),
        (lambda text: " ".join(text.split()[:-2]), "ends early"),
    ],
)
def test_cli_bad_model_exits_2_with_one_line_and_leaves_the_input(tmp_path, damage, message):
    instance, original = generate(0, InstanceSpec())
    write_instance(tmp_path / "model.txt", instance)
    bad = damage((tmp_path / "model.txt").read_text())
    (tmp_path / "model.txt").write_text(bad)
    (tmp_path / "original.txt").write_text(" ".join(map(str, original)))
    out = _cli("-t", 5, "-p", tmp_path / "model.txt", "-i", tmp_path / "original.txt", "-o", tmp_path / "new.txt")
    assert out.returncode == 2 and message in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert (tmp_path / "model.txt").read_text() == bad and not (tmp_path / "new.txt").exists()


@pytest.mark.parametrize("flag", ["--probe-factor", "--final-ratio"])
def test_cli_rejects_a_temperature_setting_that_is_not_positive(tmp_path, flag):
    out = _cli(
        "-t", 5, "-p", tmp_path / "model.txt", "-i", tmp_path / "original.txt", "-o", tmp_path / "new.txt", flag, 0
    )
    assert out.returncode == 2 and flag in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_cli_never_writes_over_its_input(tmp_path):
    instance, original = generate(0, InstanceSpec())
    write_instance(tmp_path / "model.txt", instance)
    text = " ".join(map(str, original))
    (tmp_path / "original.txt").write_text(text)
    out = _cli("-t", 5, "-p", tmp_path / "model.txt", "-i", tmp_path / "original.txt", "-o", tmp_path / "original.txt")
    assert out.returncode == 2 and "would overwrite" in out.stderr and (tmp_path / "original.txt").read_text() == text


def test_cli_rejects_an_infeasible_original(tmp_path):
    instance, original = generate(0, InstanceSpec())
    write_instance(tmp_path / "model.txt", instance)
    crowded = np.zeros_like(original)  # every process on machine 0: conflicts
    (tmp_path / "original.txt").write_text(" ".join(map(str, crowded)))
    out = _cli("-t", 5, "-p", tmp_path / "model.txt", "-i", tmp_path / "original.txt", "-o", tmp_path / "new.txt")
    assert out.returncode == 2 and "infeasible" in out.stderr


@pytest.mark.parametrize("parallel", [False, True], ids=["first", "parallel"])
@pytest.mark.parametrize("seed, shape", [(6, dict(dependencies=3)), (7, dict(neighborhoods=3, dependencies=20))])
def test_the_model_passes_the_model_check(seed, shape, parallel):
    """Every field of a state equals its recomputation exactly (integers), a parallel step equals its
    kept moves applied one by one, the same key the same chain."""
    instance, original = generate(seed, InstanceSpec(machines=40, processes=120, services=40, **shape))
    config = A.KernelConfig(tries=16, parallel=True, room=16) if parallel else A.KernelConfig(tries=4)
    with jax.enable_x64(True):
        problem = RS.encode(instance, original)
        report = A.check_model(
            MODEL, problem, jax.random.PRNGKey(seed), config, steps=100, temperature=1e5, proposals=128, tolerance=EXACT
        )
    assert report.valid > 20 and report.kept >= (5 if parallel else 1)


def test_parallel_search_keeps_every_state_feasible(tmp_path):
    instance, original = generate(3, InstanceSpec())
    model = _model(tmp_path, instance)
    config = A.KernelConfig(tries=32, parallel=True, room=16)
    with jax.enable_x64(True):
        problem = RS.encode(instance, original)
        chains = A.hot_chains(MODEL, problem, config, jax.random.split(jax.random.PRNGKey(4), 2), 100, 1e5)
    assert int(chains.accepted.sum()) > 200
    for c in range(2):
        feasible, cost, problems = check(model, list(original), list(np.asarray(chains.state.assignment[c])))
        assert feasible, problems
        assert cost == int(chains.state.energy[c])

"""An independent check of ROADEF/EURO 2012 solutions, written from the challenge's rules with plain
Python loops (no code shared with plbjax.roadef): feasibility and the exact objective."""

from __future__ import annotations


def read_ints(path):
    return [int(w) for w in open(path).read().split()]


def load_model(path):
    v, i = read_ints(path), 0

    def take():
        nonlocal i
        i += 1
        return v[i - 1]

    m = {}
    n_res = take()
    m["res"] = [(take(), take()) for _ in range(n_res)]  # (transient, weight)
    n_mach = take()
    m["mach"] = []
    for _ in range(n_mach):
        hood, loc = take(), take()
        cap = [take() for _ in range(n_res)]
        safe = [take() for _ in range(n_res)]
        mmc = [take() for _ in range(n_mach)]
        m["mach"].append((hood, loc, cap, safe, mmc))
    m["serv"] = []
    for _ in range(take()):
        spread = take()
        deps = [take() for _ in range(take())]
        m["serv"].append((spread, deps))
    m["proc"] = []
    for _ in range(take()):
        s = take()
        req = [take() for _ in range(n_res)]
        m["proc"].append((s, req, take()))
    m["bal"] = [(take(), take(), take(), take()) for _ in range(take())]
    m["w"] = (take(), take(), take())
    assert i == len(v)
    return m


def check(m, original, new):
    """(feasible, cost, problems): problems lists every broken constraint."""
    res, mach, serv, proc = m["res"], m["mach"], m["serv"], m["proc"]
    problems = []
    used = [[0] * len(res) for _ in mach]
    for p, (s, req, _) in enumerate(proc):
        for r in range(len(res)):
            used[new[p]][r] += req[r]
    for mi, (_, _, cap, _, _) in enumerate(mach):
        for r, (transient, _) in enumerate(res):
            total = used[mi][r]
            if transient:
                total += sum(proc[p][1][r] for p in range(len(proc)) if original[p] == mi and new[p] != mi)
            if total > cap[r]:
                problems.append(("capacity", mi, r))
    seen = set()
    for p, (s, _, _) in enumerate(proc):
        if (s, new[p]) in seen:
            problems.append(("conflict", s, new[p]))
        seen.add((s, new[p]))
    for si, (spread, deps) in enumerate(serv):
        members = [p for p in range(len(proc)) if proc[p][0] == si]
        if len({mach[new[p]][1] for p in members}) < spread:
            problems.append(("spread", si))
        for d in deps:
            theirs = {mach[new[p]][0] for p in range(len(proc)) if proc[p][0] == d}
            for p in members:
                if mach[new[p]][0] not in theirs:
                    problems.append(("dependency", si, d))
    load = sum(w * max(0, used[mi][r] - mach[mi][3][r]) for mi in range(len(mach)) for r, (_, w) in enumerate(res))
    balance = 0
    for r1, r2, target, w in m["bal"]:
        for mi, (_, _, cap, _, _) in enumerate(mach):
            balance += w * max(0, target * (cap[r1] - used[mi][r1]) - (cap[r2] - used[mi][r2]))
    moved = [p for p in range(len(proc)) if new[p] != original[p]]
    pmc = sum(proc[p][2] for p in moved)
    smc = max([sum(1 for p in moved if proc[p][0] == si) for si in range(len(serv))] + [0])
    mmc = sum(mach[original[p]][4][new[p]] for p in range(len(proc)))
    wp, ws, wm = m["w"]
    return not problems, load + balance + wp * pmc + ws * smc + wm * mmc, problems

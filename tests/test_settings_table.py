"""docs/settings.md is the single list of PlacementAndLoadBalancing settings: a row for every setting
the state accepts, the modules named where one acts read it, and the refused ones are refused."""

from __future__ import annotations

import re

import pytest

from plbjax.errors import BadInput
from plbjax.sf._state.settings import PLB_SETTINGS, REFUSED, resolve_settings
from tests.paths import ROOT

STATUSES = {"Acts", "No effect", "Not modelled", "Refused"}
ROW = re.compile(r"^\| `(\w+)` \| [^|]* \| ([^|]+) \| ([^|]*) \|$")


def _rows() -> dict[str, tuple[str, str]]:
    found: dict[str, tuple[str, str]] = {}
    for line in (ROOT / "docs" / "settings.md").read_text().splitlines():
        match = ROW.match(line)
        if match:
            name, status, why = match.groups()
            assert name not in found, f"{name}: two rows"
            found[name] = (status.strip(), why.strip())
    return found


def test_every_setting_has_one_row_and_a_status():
    rows = _rows()
    assert set(rows) == set(PLB_SETTINGS)
    assert {status for status, _ in rows.values()} <= STATUSES
    assert all(why for _, why in rows.values()), [name for name, (_, why) in rows.items() if not why]


def test_a_setting_that_acts_is_read_where_its_row_says():
    for name, (status, why) in _rows().items():
        modules = re.findall(r"`(plbjax/[\w/]+\.py)`", why)
        assert (status == "Acts") == bool(modules), name
        for module in modules:
            assert f'"{name}"' in (ROOT / module).read_text(), f"{name}: not read in {module}"


def test_the_refused_rows_are_the_refused_settings():
    assert {name for name, (status, _) in _rows().items() if status == "Refused"} == REFUSED


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_refused_setting_takes_only_its_default(name):
    default = PLB_SETTINGS[name]
    assert resolve_settings({name: default})[name] == default
    assert isinstance(default, (bool, int, float))  # no refused setting is a string
    other = (not default) if isinstance(default, bool) else default + 1
    with pytest.raises(BadInput, match=rf"^Settings\.{name}: .* refused: plbjax models only SF's default"):
        resolve_settings({name: other})

"""What the simulator's gateway answers from: the stored responses and the live cluster."""

from __future__ import annotations

from dataclasses import dataclass, field

from plbjax.sf.live.simulator.cluster import Cluster
from plbjax.sf.live.simulator.records import ListedNode


@dataclass
class Served:
    """What the gateway answers from: the stored responses (dump layout) and the live cluster."""

    files: dict[str, object]
    cluster: Cluster
    node_items: dict[str, ListedNode]
    partition_items: dict[str, dict]
    service_partitions: dict[str, list[str]] = field(default_factory=dict)
    service_names: dict[str, str | None] = field(default_factory=dict)

    def items(self, rel: str) -> list:
        """The items of a stored paged list (one page, an array of pages or a bare array)."""
        value = self.files.get(rel)
        if value is None:
            raise KeyError(rel)
        pages = value if isinstance(value, list) else [value]
        return [i for page in pages for i in (page.get("Items", []) if isinstance(page, dict) else [page])]

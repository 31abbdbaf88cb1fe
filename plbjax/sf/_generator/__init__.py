"""Synthetic Service Fabric clusters: a state document from a few knobs (`ClusterSpec`).

    spec.py        ClusterSpec, checked, and the draws of nodes, services and loads
    placement.py   the initial placement: every replica on a node, under the hard rules
    clusters.py    generate: the spec drawn into a state document

Reads nothing else of plbjax.sf.
"""

from plbjax.sf._generator.clusters import generate
from plbjax.sf._generator.spec import ClusterSpec

__all__ = ["ClusterSpec", "generate"]

"""Pairwise edit-distance matrices across processes and machines (``torch.distributed``).

A thin layer over :func:`bedl_torch.pairwise_distances`: the matrix is cut into square tiles of
``tile_size`` objects a side (only the tiles on and above the diagonal where the matrix is
symmetric), the tiles are shared among the ranks of a process group, balanced by their dynamic
programming cells, and every tile is computed with the same code and the same symbol table as
the whole matrix would be. Every rank calls the functions here with the same arguments; without
an initialised process group they run in one process.

``pairwise_distances(..., out="D.npy")`` writes the matrix into one ``.npy`` file on a
filesystem the ranks share, tile by tile, so that a rank never holds more than one tile, and
records every finished tile in ``D.npy.tiles/``: ``resume=True`` finishes a killed run.
:func:`kneighbors` and :func:`radius_neighbors` run the search engine of
:mod:`bedl_torch.search` on each rank's share of the query rows (:mod:`.search`);
:class:`NeighborIndex` does so for queries against a collection prepared once.

Modules: :mod:`.tiles` (tiles and their assignment), :mod:`.group` (the process group),
:mod:`.problem` (the checked matrix and one tile's values, planned by the ops'
:class:`~bedl_torch.ops.pairwise.PairwisePlan`), :mod:`.matrix` (the functions below),
:mod:`.npy_file` (``out=`` and ``resume``), :mod:`.search` (nearest neighbours and range
search) and :mod:`.cli` (``python -m bedl_torch pairwise``, imported by the command line
alone).
"""
from .matrix import kneighbors, pairwise_distances, radius_neighbors
from .search import NeighborIndex
from .tiles import Tile, assign_tiles, plan_tiles

__all__ = ["pairwise_distances", "kneighbors", "radius_neighbors", "NeighborIndex", "Tile", "plan_tiles",
           "assign_tiles"]

"""A collection prepared once for many searches (:class:`NeighborIndex`): queries against it
reuse its flattened tables and their symbol codes instead of building them per call.
"""
from __future__ import annotations

from typing import Optional, Sequence

from ..costs import SymbolCost, UnitCost
from ..labels import check_collection, missing_labels
from ..ops.pairwise import problem_inputs
from .arguments import check_radius
from .knn import problem_kneighbors
from .radius import problem_radius_neighbors
from .problem import BOUNDS, PreparedCollection, SearchProblem

__all__ = ["NeighborIndex"]


class NeighborIndex:
    """Exact k-NN and range queries against one collection, prepared once.

    ``index = NeighborIndex(Y, cost)`` flattens ``Y`` (and, for trees, its traversal sequences)
    and encodes its labels under ``cost``; ``index.kneighbors(X, k=...)`` and
    ``index.radius_neighbors(X, radius=...)`` then give exactly the answers of
    :func:`bedl_torch.kneighbors` ``(X, Y, cost=index.cost)`` and
    :func:`bedl_torch.radius_neighbors`, and with ``X=None`` those of the collection against
    itself (each object left out of its own list). A call prepares only its queries, so many
    small calls (one object each) cost about their search (``docs/search.md``). The index keeps
    the objects of ``Y`` as given: a sequence changed in place afterwards is not seen.

    Args:
        Y: a list of trees or of sequences.
        cost: a :class:`~bedl_torch.SymbolCost`, fixed for the index (default: unit costs over
            the labels of ``Y``; a query with other labels extends them, as
            :func:`bedl_torch.kneighbors` would: under unit costs a label's name does not change
            any distance).
        unknown, rel_tol, chunk_size: as for :func:`bedl_torch.pairwise_distances`.
        bounds: a subset of ``("label", "traversal", "upper")`` (all by default).

    Raises:
        TypeError: ``Y`` not a collection of trees or sequences, a cost that is not a
            SymbolCost. ValueError: labels of ``Y`` missing from the cost's alphabet
            (``unknown="error"``), an unknown bound, ``chunk_size < 1``.
    """

    def __init__(self, Y: Sequence, cost: Optional[SymbolCost] = None, *, unknown: str = "error",
                 rel_tol: Optional[float] = None, chunk_size: Optional[int] = None,
                 bounds: Sequence[str] = BOUNDS):
        extend = cost is None  # the default unit costs grow with the queries' labels
        Y, _, cost, _ = problem_inputs(Y, None, cost, None)
        self.cost, self._extend_labels = cost, extend
        self._known = set(cost.alphabet) if extend else None  # (the labels queries extend)
        self._prepared = PreparedCollection(Y, "Y")
        self._options = dict(rel_tol=rel_tol, unknown=unknown, chunk_size=chunk_size, bounds=bounds)
        # check the options and the labels now (an empty search of Y against itself)
        SearchProblem(Y, None, cost, prepared=self._prepared, **self._options)

    @property
    def objects(self) -> list:
        """The collection's objects, as given."""
        return self._prepared.objects

    def __len__(self) -> int:
        return len(self.objects)

    def __getstate__(self):
        # the objects, cost and options; the tables (with their weak caches) are built again
        return {"objects": self.objects, "cost": self.cost, "extend": self._extend_labels,
                "options": self._options}

    def __setstate__(self, state):
        self.cost, self._options = state["cost"], state["options"]
        self._extend_labels = state["extend"]
        self._known = set(self.cost.alphabet) if self._extend_labels else None
        self._prepared = PreparedCollection(state["objects"], "Y")

    def _problem(self, X: Optional[Sequence]) -> SearchProblem:
        if X is None:
            return SearchProblem(self.objects, None, self.cost, prepared=self._prepared, **self._options)
        if self._extend_labels:  # (X checked here; else by the problem)
            X = check_collection(X, "X")
            missing = missing_labels(X, self._known)
            if missing:  # unit costs over the labels of X and Y, Y's codes kept in front
                extended = UnitCost(list(self.cost.alphabet) + missing)
                self._prepared.carry_codes(self.cost, extended, self._options["unknown"])
                self.cost = extended
                self._known.update(missing)
        return SearchProblem(X, self.objects, self.cost, prepared=self._prepared, **self._options)

    def kneighbors(self, X: Optional[Sequence] = None, *, k: int, block_size: Optional[int] = None,
                   return_stats: bool = False):
        """The ``k`` nearest objects of the collection for every object of ``X`` (of the
        collection itself when ``X`` is None): :func:`bedl_torch.kneighbors`' answer and
        stats."""
        return problem_kneighbors(self._problem(X), k, block_size, return_stats)

    def radius_neighbors(self, X: Optional[Sequence] = None, *, radius: float,
                         block_size: Optional[int] = None, return_stats: bool = False):
        """Every pair ``(i, j)`` with ``d(X[i], Y[j]) <= radius`` (the collection against itself
        when ``X`` is None, diagonal left out): :func:`bedl_torch.radius_neighbors`' answer."""
        radius = check_radius(radius)
        return problem_radius_neighbors(self._problem(X), radius, block_size, return_stats)

"""Cost modules: ``nn.Module``s that turn symbol indices into edit cost matrices.

One module per role: :mod:`.base` (:class:`SymbolCost` and the rules for its table
shortcuts), :mod:`.unit`, :mod:`.euclidean` (BEDL's learnable embedding), :mod:`.cosine` (word
vectors with a learned map) and :mod:`.matrix` (a fixed table, as GESL learns it).
Layer: costs (imports torch, numpy, :mod:`bedl_torch.labels` and :mod:`bedl_torch.validation`;
below the ops).
"""
from .base import SymbolCost, block_of, pair_costs_of, subtable_of, table_of
from .cosine import CosineCost
from .euclidean import EuclideanCost, simplex_embedding
from .matrix import MatrixCost
from .unit import UnitCost

__all__ = ["SymbolCost", "EuclideanCost", "UnitCost", "CosineCost", "MatrixCost",
           "simplex_embedding", "table_of", "subtable_of", "block_of", "pair_costs_of"]

"""Exact nearest-neighbour and range search over edit distances without the whole matrix.

:func:`kneighbors` and :func:`radius_neighbors` give the answers of sorting or thresholding
:func:`bedl_torch.pairwise_distances`, but compute exact distances only for the pairs that
bounds cannot decide. The bounds (:mod:`.bounds`) hold for any finite costs, negative ones
included: the label-multiset bound, the preorder/postorder sequence edit distance of trees,
and the costs of two trivial mappings as upper bounds. ``docs/search.md`` has the arguments
and the engine: :mod:`.knn` (rounds over blocks of rows), :mod:`.radius`, :mod:`.tiles` (the
matrix's own tiles, where no bound pays), :mod:`.merge` (each row's ``k`` best), over the
prepared :mod:`.problem`. Layer: above the ops (imports them, the cost modules and the trees).
"""
from .bounds import (FirstPairUpper, label_lower_bound, mapping_upper_bound, postorder_labels,
                     traversal_lower_bound)
from .label_bound import LabelBound
from .symbol_costs import SymbolCosts
from .knn import kneighbors, knn_block
from .problem import BOUNDS, SearchProblem, merge_stats
from .radius import radius_block, radius_neighbors
from .index import NeighborIndex

__all__ = ["kneighbors", "radius_neighbors", "NeighborIndex", "label_lower_bound", "traversal_lower_bound",
           "mapping_upper_bound", "postorder_labels", "SymbolCosts", "LabelBound",
           "FirstPairUpper", "SearchProblem", "knn_block", "radius_block", "merge_stats", "BOUNDS"]

"""Exact nearest-neighbour and range search over edit distances without the whole matrix.

:func:`kneighbors` and :func:`radius_neighbors` give the answers of sorting or thresholding
:func:`bedl_torch.pairwise_distances`, but compute exact distances only for the pairs that
bounds cannot decide. The bounds (:mod:`.bounds`) hold for any finite costs, negative ones
included: the label-multiset bound, the preorder/postorder sequence edit distance of trees,
and the costs of two trivial mappings as upper bounds. ``docs/search.md`` has the arguments
and the engine. Layer: above the ops (imports them, the cost modules and the trees).
"""
from .bounds import (FirstPairUpper, LabelBound, SymbolCosts, label_lower_bound,
                     mapping_upper_bound, postorder_labels, traversal_lower_bound)
from .engine import (BOUNDS, SearchProblem, kneighbors, knn_block, merge_stats, radius_block,
                     radius_neighbors)
from .index import NeighborIndex

__all__ = ["kneighbors", "radius_neighbors", "NeighborIndex", "label_lower_bound", "traversal_lower_bound",
           "mapping_upper_bound", "postorder_labels", "SymbolCosts", "LabelBound",
           "FirstPairUpper", "SearchProblem", "knn_block", "radius_block", "merge_stats", "BOUNDS"]

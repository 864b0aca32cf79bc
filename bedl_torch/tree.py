"""Ordered labeled trees in preorder layout, with readers and writers.

A :class:`Tree` with ``n`` nodes stores, for each node ``i = 0 .. n-1`` in preorder (depth first,
children left to right), its label and the ordered indices of its children. This is the format of
the edist library and of the JSON data files: ``Tree(['a', 'b', 'c'], [[1, 2], [], []])`` is the
tree ``a(b, c)``.

Because nodes are in preorder, the subtree of node ``i`` is the contiguous index range
``i .. i + subtree_sizes()[i] - 1``.

Readers and writers (in :mod:`bedl_torch.tree_io`): bracket strings (``{a{b}{c}}``), JSON dicts (``{"nodes": ..., "adj": ...}``),
Penn-treebank s-expressions (read only), Python source via :mod:`ast` (read only) and nested
tuples (``('a', ('b',), ('c',))``).

Sequences are not a class: use a plain ``str`` or a ``list``/``tuple`` of hashable labels.
"""
from __future__ import annotations

import array
import ast
import numbers
import os
from typing import Any, Hashable, Iterable, Sequence, Union

from .tree_io import (
    PTB_ESCAPES,
    parse_bracket,
    parse_json,
    parse_json_text,
    parse_ptb,
    parse_python,
    parse_tuple,
    ptb_root_label,
    to_bracket,
)

__all__ = ["Tree", "ptb_root_label", "PTB_ESCAPES"]


def _as_index(value: Any, node: int) -> int:
    """Return ``value`` as a Python int or raise TypeError (bools are rejected)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"child index {value!r} of node {node} is not an int (got {type(value).__name__})"
        )
    return int(value)


class Tree:
    """An ordered labeled tree whose nodes are numbered in preorder.

    Args:
        labels: sequence of ``n >= 1`` hashable node labels; ``labels[i]`` is the label of the
            i-th node in preorder. ``None`` marks an unlabeled node.
        children: sequence of ``n`` sequences of ints; ``children[i]`` lists the children of node
            ``i`` from left to right. Node 0 is the root.

    Raises:
        ValueError: the tree is empty, ``len(children) != len(labels)``, a child index is out of
            range, a node has two parents (or is listed twice), the root (node 0) has a parent, a
            node is its own descendant (cycle), a node is not reachable from the root, or the
            nodes are not numbered in preorder (the first child of node ``i`` must be ``i + 1``
            and each further child must start right after the subtree of the previous one).
        TypeError: a child index is not an int, ``children[i]`` is not a sequence, or a label is
            not hashable.

    Attributes:
        labels: tuple of the ``n`` labels.
        children: tuple of ``n`` tuples of child indices.

    Trees are immutable, hashable and compare equal when labels and children are equal.
    """

    __slots__ = ("_labels", "_children", "_sizes", "_parents", "_hash", "_sizes_bytes", "_distinct",
                 "_depths", "_post_labels")

    def __init__(self, labels: Sequence[Hashable], children: Sequence[Sequence[int]]):
        if isinstance(labels, (str, bytes)):
            raise TypeError("labels must be a sequence of labels, not a string")
        labels = tuple(labels)
        n = len(labels)
        if n == 0:
            raise ValueError("empty tree: a tree needs at least one node")
        if isinstance(children, (str, bytes)):
            raise TypeError("children must be a sequence of sequences of ints")
        children = list(children)
        if len(children) != n:
            raise ValueError(
                f"len(children) = {len(children)} does not match len(labels) = {n}"
            )
        for i, label in enumerate(labels):
            try:
                hash(label)
            except TypeError:
                raise TypeError(
                    f"label of node {i} is not hashable (got {type(label).__name__})"
                ) from None

        kids = []
        parent = [-1] * n
        for i, row in enumerate(children):
            if isinstance(row, (str, bytes)) or not isinstance(row, Iterable):
                raise TypeError(
                    f"children[{i}] must be a sequence of ints (got {type(row).__name__})"
                )
            row = tuple(_as_index(c, i) for c in row)
            for c in row:
                if c < 0 or c >= n:
                    raise ValueError(
                        f"child index {c} of node {i} is out of range for a tree of {n} nodes"
                    )
                if parent[c] != -1:
                    if parent[c] == i:
                        raise ValueError(f"node {c} is listed twice as a child of node {i}")
                    raise ValueError(
                        f"node {c} has two parents: nodes {parent[c]} and {i}"
                    )
                if c == i:
                    raise ValueError(f"cycle: node {i} is its own child")
                parent[c] = i
            kids.append(row)
        if parent[0] != -1:
            raise ValueError(f"the root (node 0) has a parent: node {parent[0]}")

        # Every non-root node has at most one parent and the root has none. Nodes that cannot be
        # reached from the root either lie on a cycle of parent links or hang below a node
        # without a parent.
        reached = [False] * n
        order = []
        stack = [0]
        while stack:
            v = stack.pop()
            reached[v] = True
            order.append(v)
            stack.extend(reversed(kids[v]))
        if len(order) != n:
            state = [0] * n  # 0 unknown, 1 on current path, 2 done
            for start in range(n):
                if reached[start] or state[start]:
                    continue
                path = []
                v = start
                while v != -1 and state[v] == 0 and not reached[v]:
                    state[v] = 1
                    path.append(v)
                    v = parent[v]
                if v != -1 and state[v] == 1:
                    cyc = path[path.index(v):]
                    raise ValueError(
                        "cycle: node %d is its own descendant (cycle through nodes %s)"
                        % (v, sorted(cyc))
                    )
                for u in path:
                    state[u] = 2
            missing = [v for v in range(n) if not reached[v]]
            shown = ", ".join(map(str, missing[:10])) + (", ..." if len(missing) > 10 else "")
            raise ValueError(f"nodes not reachable from the root (node 0): {shown}")
        for pos, v in enumerate(order):
            if v != pos:
                raise ValueError(
                    f"not in preorder: node {v} is visited at preorder position {pos}"
                    f" (child of node {parent[v]})"
                )

        sizes = [1] * n
        for i in range(n - 1, 0, -1):
            sizes[parent[i]] += sizes[i]
        self._labels = labels
        self._children = tuple(kids)
        self._sizes = tuple(sizes)
        self._parents = tuple(parent)
        self._hash = None
        self._sizes_bytes = None  # subtree sizes as int64 bytes, built on first use
        self._distinct = None     # distinct labels in order of first appearance, likewise
        self._depths = None       # depths and postorder labels, likewise
        self._post_labels = None

    # ------------------------------------------------------------------ basic accessors
    @property
    def labels(self) -> tuple:
        """Tuple of the ``n`` node labels in preorder."""
        return self._labels

    @property
    def children(self) -> tuple:
        """Tuple of ``n`` tuples: ``children[i]`` are node i's children, left to right."""
        return self._children

    def subtree_sizes(self) -> tuple:
        """Tuple of ``n`` ints: node i's subtree is nodes ``i .. i + size[i] - 1`` (cached)."""
        return self._sizes

    def subtree_sizes_bytes(self) -> bytes:
        """:meth:`subtree_sizes` as native int64 bytes (cached).

        The ops concatenate a collection's trees from these for the kernels, much faster than
        converting the ints of every tree again.
        """
        if self._sizes_bytes is None:
            self._sizes_bytes = array.array("q", self._sizes).tobytes()
        return self._sizes_bytes

    def distinct_labels(self) -> tuple:
        """The distinct labels in order of first appearance (cached; default alphabets are
        built from these)."""
        if self._distinct is None:
            self._distinct = tuple(dict.fromkeys(self._labels))
        return self._distinct

    def parents(self) -> tuple:
        """Tuple of ``n`` ints: the parent of each node, ``-1`` for the root."""
        return self._parents

    def depths(self) -> tuple:
        """Tuple of ``n`` ints: the number of edges from the root to each node (root: 0;
        cached)."""
        if self._depths is None:
            d = [0] * len(self._labels)
            for i in range(1, len(d)):
                d[i] = d[self._parents[i]] + 1
            self._depths = tuple(d)
        return self._depths

    def postorder_labels(self) -> tuple:
        """Tuple of the ``n`` labels in postorder (children left to right, then the node;
        cached). Node ``i`` comes at position ``i + size(i) - 1 - depth(i)``: before it are its
        ``size(i) - 1`` descendants and the ``i - depth(i)`` earlier nodes that are not its
        ancestors."""
        if self._post_labels is None:
            sizes, depths = self._sizes, self.depths()
            out = [None] * len(self._labels)
            for i, lab in enumerate(self._labels):
                out[i + sizes[i] - 1 - depths[i]] = lab
            self._post_labels = tuple(out)
        return self._post_labels

    def depth(self) -> int:
        """Height of the tree: edges on the longest root-to-leaf path (a single node: 0)."""
        return max(self.depths())

    def leaves(self) -> tuple:
        """Tuple of the indices of the leaves (nodes without children), in preorder."""
        return tuple(i for i, c in enumerate(self._children) if not c)

    def __len__(self) -> int:
        return len(self._labels)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Tree):
            return NotImplemented
        return self._children == other.children and self._labels == other.labels

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash((self._labels, self._children))
        return self._hash

    def __reduce__(self):
        return (Tree, (self._labels, self._children))

    def __repr__(self) -> str:
        if all(isinstance(label, str) and label for label in self._labels):
            return f"Tree.from_bracket({self.to_bracket()!r})"
        return f"Tree({list(self._labels)!r}, {[list(c) for c in self._children]!r})"

    # ------------------------------------------------------------------ bracket strings
    def to_bracket(self) -> str:
        """Bracket string such as ``'{a{b}{c}}'``.

        Labels are written with ``str``; ``{``, ``}`` and ``\\`` inside labels are escaped with a
        backslash. ``None`` labels are written as empty labels (``{}``), which
        :meth:`from_bracket` reads back as ``None``. Round trips are exact for trees whose labels
        are non-empty strings or ``None``.
        """
        return to_bracket(self._labels, self._sizes)

    @classmethod
    def from_bracket(cls, s: str) -> "Tree":
        """Parse a bracket string such as ``'{a{b}{c}}'`` (the tree a(b, c)).

        Each node is ``{label child child ...}``; the label runs up to the first unescaped ``{``
        or ``}`` and may contain any character (write ``\\{``, ``\\}``, ``\\\\`` for braces and
        backslashes). An empty label reads as ``None``. Whitespace around the whole string and
        between sibling nodes is ignored; labels are kept verbatim.

        Raises:
            ValueError: unbalanced braces, text outside a node, or trailing text.
            TypeError: ``s`` is not a string.
        """
        return cls(*parse_bracket(s))

    # ------------------------------------------------------------------ JSON
    def to_json(self) -> dict:
        """Return ``{"nodes": [labels], "adj": [[children], ...]}`` (lists; JSON-serializable
        when the labels are)."""
        return {"nodes": list(self._labels), "adj": [list(c) for c in self._children]}

    @classmethod
    def from_json(cls, data: Union[dict, str]) -> "Tree":
        """Build a tree from ``{"nodes": [...], "adj": [[...], ...]}`` (or its JSON text).

        ``nodes[i]`` is the label of node i, ``adj[i]`` its ordered children (preorder layout).
        List-valued labels (which JSON cannot tell from tuples) are converted to tuples.

        Raises:
            ValueError: missing keys or an invalid tree (see :class:`Tree`).
            TypeError: ``data`` is neither a dict nor a str.
        """
        return cls(*parse_json(data))

    @classmethod
    def load_json(cls, path: Union[str, os.PathLike]) -> "Tree":
        """Read one tree from a JSON file in the ``{"nodes", "adj"}`` format (UTF-8)."""
        with open(path, "r", encoding="utf-8") as f:
            return cls.from_json(parse_json_text(f, from_file=True))

    # ------------------------------------------------------------------ nested tuples
    def to_tuple(self) -> tuple:
        """Nested tuples ``(label, child_tuple, ...)``, e.g. ``('a', ('b',), ('c',))``."""
        built: list = [None] * len(self._labels)
        for i in range(len(self._labels) - 1, -1, -1):
            built[i] = (self._labels[i],) + tuple(built[c] for c in self._children[i])
        return built[0]

    @classmethod
    def from_tuple(cls, t: Sequence) -> "Tree":
        """Build a tree from nested tuples ``(label, child, child, ...)`` (lists also accepted).

        Raises:
            ValueError: a node is an empty tuple, or a list contains itself (a cycle).
            TypeError: a node is not a tuple or list.
        """
        return cls(*parse_tuple(t))

    # ------------------------------------------------------------------ Penn treebank
    @classmethod
    def from_ptb(
        cls, s: str, inner_labels: bool = False, lowercase: bool = False
    ) -> "Tree":
        """Parse one Penn-treebank s-expression, e.g. a line of the Stanford Sentiment Treebank.

        ``(l word)`` (a node whose only content is a token) becomes a leaf labeled ``word``; every
        other node ``(l child ...)`` becomes an inner node labeled ``None`` (unlabeled), or ``l``
        (a str; ``None`` when the node has no label token) if ``inner_labels`` is True. Words
        ``-LRB- -RRB- -LSB- -RSB- -LCB- -RCB-`` are mapped to ``( ) [ ] { }`` and then lowercased
        if ``lowercase`` is True.

        Example: ``Tree.from_ptb("(3 (2 It) (4 works))")`` is ``{{It}{works}}`` with an unlabeled
        root.

        Raises:
            ValueError: unbalanced parentheses, a bare token outside a node, several words in
                one leaf, an empty node ``()``, or trailing text.
        """
        return cls(*parse_ptb(s, inner_labels, lowercase))

    # ------------------------------------------------------------------ Python source
    @classmethod
    def from_python(
        cls, source: Union[str, ast.AST], include_identifiers: bool = False
    ) -> "Tree":
        """Abstract syntax tree of Python source code, via the standard :mod:`ast` module.

        Labels are the AST node class names (``'Module'``, ``'FunctionDef'``, ``'Name'``,
        ``'Load'``, ...), children in :func:`ast.iter_child_nodes` order. With
        ``include_identifiers=True``, nodes that carry an identifier are labeled
        ``'ClassName:identifier'``: ``Name`` (id), ``FunctionDef``/``AsyncFunctionDef``/
        ``ClassDef`` (name), ``arg`` (arg), ``Attribute`` (attr), ``alias`` (name),
        ``keyword`` (arg, if any) and ``Global``/``Nonlocal`` (comma-joined names).

        Args:
            source: Python source text, or an already parsed ``ast.AST``.

        Raises:
            SyntaxError: the source does not parse.
            ValueError: the source is nested deeper than Python's parser supports (it
                recurses; the limit follows ``sys.getrecursionlimit()``), or an ``ast.AST``
                contains itself.
        """
        return cls(*parse_python(source, include_identifiers))



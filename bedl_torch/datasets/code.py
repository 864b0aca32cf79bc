"""Python functions from installed packages as labelled syntax trees (built locally, no
download): a multi-class tree data set with a rich alphabet, the label being the package that
wrote the function.

Layer: trees and data (imports :mod:`bedl_torch.tree` and the standard library only).
"""
from __future__ import annotations

import ast
import importlib.util
import pathlib
import random
import warnings
import collections
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..tree import Tree

__all__ = ["python_functions", "DEFAULT_PACKAGES"]

#: six scientific Python packages (the default classes of :func:`python_functions`)
DEFAULT_PACKAGES = ("numpy", "scipy", "sklearn", "sympy", "torch", "networkx")

_TEST_DIRS = {"tests", "test", "testing"}


def _source_files(package: str, exclude_tests: bool) -> Tuple[List[pathlib.Path], pathlib.Path]:
    """The ``.py`` files of an installed package (or module), sorted by path, and the folder
    their names are given relative to."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is None or spec.origin in (None, "built-in", "frozen"):
        raise ValueError(f"package {package!r} is not installed as Python source")
    if spec.submodule_search_locations:
        roots = [pathlib.Path(p) for p in spec.submodule_search_locations]
        files = sorted({f for r in roots for f in r.rglob("*.py")})
        base = roots[0]
    else:
        files, base = [pathlib.Path(spec.origin)], pathlib.Path(spec.origin).parent
    if exclude_tests:
        def is_test(f: pathlib.Path) -> bool:
            parts = f.relative_to(base).parts if f.is_relative_to(base) else f.parts
            return (any(p in _TEST_DIRS for p in parts[:-1]) or f.name.startswith("test_")
                    or f.name in ("conftest.py", "setup.py"))
        files = [f for f in files if not is_test(f)]
    return files, base


def _functions(path: pathlib.Path) -> List[ast.AST]:
    """Every (async) function definition in a file, methods and nested ones included, in
    source order; nothing for a file that does not parse under this Python."""
    try:
        with warnings.catch_warnings():  # invalid escape sequences in old sources
            warnings.simplefilter("ignore")
            module = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError, RecursionError, MemoryError, OSError):
        return []
    found = [n for n in ast.walk(module) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def _keep_frequent_identifiers(X: List[Tree], n: int) -> List[Tree]:
    """``X`` with only the ``n`` identifier labels found in the most trees kept; the others
    cut to their node type (the part before ``':'``)."""
    counts = collections.Counter(lab for t in X for lab in set(t.labels) if ":" in lab)
    keep = {lab for lab, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:max(n, 0)]}
    return [Tree([lab if ":" not in lab or lab in keep else lab.split(":", 1)[0]
                  for lab in t.labels], t.children) for t in X]


def python_functions(
    packages: Sequence[str] = DEFAULT_PACKAGES,
    n_per_class: int = 300,
    *,
    min_nodes: int = 20,
    max_nodes: int = 60,
    max_per_file: int = 3,
    include_identifiers: bool = False,
    max_identifiers: Optional[int] = None,
    exclude_tests: bool = True,
    seed: int = 0,
    return_names: bool = False,
):
    """Syntax trees of Python functions from installed packages, labelled by package.

    Each class is one package (an installed distribution's top-level package, or a standard
    library package such as ``"email"`` or ``"asyncio"``). A function's tree is
    ``Tree.from_python`` of its ``FunctionDef`` node (node types as labels, ``Load``/``Store``
    contexts included; with ``include_identifiers`` also names, see ``Tree.from_python``).

    Sampling, per package: its source files (sorted; test files and directories left out
    with ``exclude_tests``) in an order shuffled by ``seed``; from each file at most
    ``max_per_file`` functions, drawn among those with ``min_nodes <= size <= max_nodes``
    whose tree was not taken before (from any package), until ``n_per_class`` are taken.
    Spreading the draw over files keeps near-copies from one file out of the set, so the
    task is the packages' style, not their files.

    ``max_identifiers`` (with ``include_identifiers``): only the labels ``'Type:identifier'``
    that occur in the most functions of the returned set (this many; ties by label) keep their
    identifier, the others become the bare node type. This bounds the alphabet (node types
    plus frequent names such as ``Name:np`` or ``Attribute:shape``) for costs with a dense
    symbol table. The counts ignore the classes. Deterministic for the same installed
    sources and ``seed``; other versions of a package give other trees (``return_names``
    records where each came from).

    Returns:
        ``(X, y)`` or ``(X, y, names)``: ``X`` a list of ``len(packages) * n_per_class``
        :class:`~bedl_torch.tree.Tree`, class by class in the order of ``packages``; ``y``
        int64 class indices into ``packages``; ``names`` ``"package/relative/path.py:line:name"``.

    Raises:
        ValueError: a package that is not installed as Python source, one with fewer than
            ``n_per_class`` functions that pass the filters, or bad sizes.
    """
    packages = list(packages)
    if len(set(packages)) != len(packages) or not packages:
        raise ValueError(f"packages must be distinct and not empty, got {packages!r}")
    n_per_class, min_nodes, max_nodes = int(n_per_class), int(min_nodes), int(max_nodes)
    if n_per_class < 1 or min_nodes < 1 or max_nodes < min_nodes or int(max_per_file) < 1:
        raise ValueError("need n_per_class >= 1, max_per_file >= 1 and 1 <= min_nodes <= "
                         f"max_nodes, got {n_per_class}, {max_per_file}, {min_nodes}, {max_nodes}")
    X: List[Tree] = []
    y: List[int] = []
    names: List[str] = []
    seen = set()
    for label, package in enumerate(packages):
        files, base = _source_files(package, exclude_tests)
        rng = random.Random(f"{seed}:{package}")
        rng.shuffle(files)
        taken = 0
        for path in files:
            if taken == n_per_class:
                break
            trees = []
            for node in _functions(path):
                try:
                    tree = Tree.from_python(node, include_identifiers=include_identifiers)
                except ValueError:
                    continue
                if min_nodes <= len(tree) <= max_nodes:
                    trees.append((node, tree))
            rng.shuffle(trees)
            from_file = 0
            for node, tree in trees:
                if from_file == int(max_per_file) or taken == n_per_class:
                    break
                key = tree.to_bracket()
                if key in seen:
                    continue
                seen.add(key)
                X.append(tree)
                y.append(label)
                rel = path.relative_to(base) if path.is_relative_to(base) else path.name
                names.append(f"{package}/{rel}:{node.lineno}:{node.name}")
                taken += 1
                from_file += 1
        if taken < n_per_class:
            raise ValueError(f"package {package!r} has only {taken} functions that pass the "
                             f"filters, need n_per_class = {n_per_class}")
    if include_identifiers and max_identifiers is not None:
        X = _keep_frequent_identifiers(X, int(max_identifiers))
    y_arr = np.asarray(y, dtype=np.int64)
    if return_names:
        return X, y_arr, names
    return X, y_arr

"""Readers and writers of :class:`~bedl_torch.tree.Tree`: bracket strings, JSON dicts,
Penn-treebank s-expressions, Python source (via :mod:`ast`) and nested tuples. The readers
return ``(labels, children)`` in preorder layout, which ``Tree`` checks and holds; the
``Tree`` methods (``Tree.from_bracket``, ...) are the documented interface.
"""
from __future__ import annotations

import ast
import json
import re
import sys
from typing import Optional, Sequence, Tuple, Union

__all__ = ["PTB_ESCAPES", "ptb_root_label", "to_bracket", "parse_bracket", "parse_json",
           "parse_json_text", "parse_tuple", "parse_ptb", "parse_python"]


#: Penn-treebank escape tokens and the brackets they stand for.
PTB_ESCAPES = {
    "-LRB-": "(",
    "-RRB-": ")",
    "-LSB-": "[",
    "-RSB-": "]",
    "-LCB-": "{",
    "-RCB-": "}",
}


def _escape(label: str) -> str:
    return label.replace("\\", "\\\\").replace("{", "\\{").replace("}", "\\}")


def to_bracket(labels: Sequence, sizes: Sequence[int]) -> str:
    """The bracket string of a tree given by its preorder labels and subtree sizes."""
    out = []
    closes = []  # preorder index at which each pending '}' is due
    for i, label in enumerate(labels):
        out.append("{")
        if label is not None:
            out.append(_escape(str(label)))
        closes.append(i + sizes[i])
        while closes and closes[-1] == i + 1:
            out.append("}")
            closes.pop()
    return "".join(out)


def parse_bracket(s: str) -> Tuple[list, list]:
    """``(labels, children)`` of a bracket string (see ``Tree.from_bracket``)."""
    if not isinstance(s, str):
        raise TypeError(f"from_bracket expects a str, got {type(s).__name__}")
    text = s.strip()
    if not text:
        raise ValueError("empty bracket string")
    labels: list = []
    children: list = []
    stack: list = []  # open node indices
    pos = 0
    n = len(text)
    done = False
    while pos < n:
        ch = text[pos]
        if done:
            raise ValueError(f"trailing text after the root node at position {pos}: {text[pos:pos+20]!r}")
        if ch == "{":
            idx = len(labels)
            if stack:
                children[stack[-1]].append(idx)
            stack.append(idx)
            children.append([])
            pos += 1
            buf = []
            while pos < n and text[pos] not in "{}":
                if text[pos] == "\\":
                    if pos + 1 >= n:
                        raise ValueError("bracket string ends with a lone backslash")
                    buf.append(text[pos + 1])
                    pos += 2
                else:
                    buf.append(text[pos])
                    pos += 1
            labels.append("".join(buf) if buf else None)
        elif ch == "}":
            if not stack:
                raise ValueError(f"unbalanced '}}' at position {pos}")
            stack.pop()
            pos += 1
            if not stack:
                done = True
        elif ch.isspace() and stack:
            pos += 1
        else:
            where = "before the root node" if not labels else "between nodes"
            raise ValueError(f"unexpected text {text[pos:pos+20]!r} {where} at position {pos}")
    if stack:
        raise ValueError(f"unbalanced bracket string: {len(stack)} '{{' not closed")
    return labels, children


def parse_json_text(text_or_file, from_file: bool = False):
    """The JSON value of a text (or an open file), input nested deeper than the recursive
    JSON decoder supports as a ValueError instead of a RecursionError."""
    return _parse_json(json.load if from_file else json.loads, text_or_file)


def parse_json(data: Union[dict, str]) -> Tuple[list, list]:
    """``(labels, children)`` of a ``{"nodes", "adj"}`` dict or its JSON text (see
    ``Tree.from_json``)."""
    if isinstance(data, str):
        data = _parse_json(json.loads, data)
    if not isinstance(data, dict):
        raise TypeError(f"from_json expects a dict or JSON string, got {type(data).__name__}")
    try:
        nodes, adj = data["nodes"], data["adj"]
    except KeyError as e:
        raise ValueError(f"tree JSON lacks the key {e.args[0]!r} (needs 'nodes' and 'adj')") from None
    nodes = [tuple(x) if isinstance(x, list) else x for x in nodes]
    return nodes, adj


def parse_tuple(t: Sequence) -> Tuple[list, list]:
    """``(labels, children)`` of nested tuples (see ``Tree.from_tuple``)."""
    labels: list = []
    children: list = []
    stack = [(t, -1, 0)]
    path = _Path()
    while stack:
        node, par, depth = stack.pop()
        path.enter(node, depth, "a list that contains itself is not a tree")
        if not isinstance(node, (tuple, list)):
            raise TypeError(
                f"tree node must be a tuple (label, children...), got {type(node).__name__}: {node!r}"
            )
        if len(node) == 0:
            raise ValueError("tree node must be a non-empty tuple (label, children...)")
        idx = len(labels)
        labels.append(node[0])
        children.append([])
        if par >= 0:
            children[par].append(idx)
        for child in reversed(node[1:]):
            stack.append((child, idx, depth + 1))
    return labels, children


def parse_ptb(s: str, inner_labels: bool = False, lowercase: bool = False) -> Tuple[list, list]:
    """``(labels, children)`` of a Penn-treebank s-expression (see ``Tree.from_ptb``)."""
    if not isinstance(s, str):
        raise TypeError(f"from_ptb expects a str, got {type(s).__name__}")
    tokens = _ptb_tokens(s)
    if not tokens:
        raise ValueError("empty PTB string")
    labels: list = []
    children: list = []
    # Each open node: [index, label token or None, words seen, has child nodes]
    stack: list = []
    pos = 0
    ntok = len(tokens)
    finished = False
    while pos < ntok:
        tok = tokens[pos]
        if finished:
            raise ValueError(f"trailing text after the root node: {tok!r}")
        if tok == "(":
            idx = len(labels)
            if stack:
                top = stack[-1]
                if top[2]:
                    raise ValueError(f"node mixes a word ({top[2][0]!r}) and child nodes")
                top[3] = True
                children[top[0]].append(idx)
            labels.append(None)
            children.append([])
            label = None
            if pos + 1 < ntok and tokens[pos + 1] not in "()":
                label = tokens[pos + 1]
                pos += 1
            stack.append([idx, label, [], False])
            pos += 1
        elif tok == ")":
            if not stack:
                raise ValueError("unbalanced ')' in PTB string")
            idx, label, words, has_kids = stack.pop()
            if words:
                if len(words) > 1:
                    raise ValueError(f"leaf has several words: {words!r}")
                word = PTB_ESCAPES.get(words[0], words[0])
                labels[idx] = word.lower() if lowercase else word
            elif has_kids:
                labels[idx] = label if inner_labels else None
            elif label is not None:
                # "(word)": a bare token in parentheses; read it as a leaf.
                word = PTB_ESCAPES.get(label, label)
                labels[idx] = word.lower() if lowercase else word
            else:
                raise ValueError("empty node '()' in PTB string")
            pos += 1
            if not stack:
                finished = True
        else:
            if not stack:
                raise ValueError(f"token {tok!r} outside of any node")
            top = stack[-1]
            if top[3]:
                raise ValueError(f"node mixes child nodes and a word ({tok!r})")
            top[2].append(tok)
            pos += 1
    if stack:
        raise ValueError(f"unbalanced PTB string: {len(stack)} '(' not closed")
    return labels, children


def parse_python(source: Union[str, ast.AST], include_identifiers: bool = False
                 ) -> Tuple[list, list]:
    """``(labels, children)`` of Python source's abstract syntax tree (see
    ``Tree.from_python``)."""
    if isinstance(source, str):
        try:
            root = ast.parse(source)
        except (RecursionError, MemoryError):  # 3.11's parser reports its stack as memory
            raise ValueError(
                "Python source nested too deeply for Python's parser (its depth limit "
                f"grows with sys.getrecursionlimit(), now {sys.getrecursionlimit()})"
            ) from None
    else:
        root = source
    if not isinstance(root, ast.AST):
        raise TypeError(f"from_python expects a str or ast.AST, got {type(source).__name__}")
    labels: list = []
    children: list = []
    stack = [(root, -1, 0)]
    path = _Path()
    while stack:
        node, par, depth = stack.pop()
        path.enter(node, depth, "an ast.AST that contains itself is not a tree")
        idx = len(labels)
        labels.append(_ast_label(node, include_identifiers))
        children.append([])
        if par >= 0:
            children[par].append(idx)
        kids = list(ast.iter_child_nodes(node))
        for child in reversed(kids):
            stack.append((child, idx, depth + 1))
    return labels, children


def _parse_json(parse, text_or_file):
    """``parse(text_or_file)`` (``json.loads`` or ``json.load``), with input nested deeper
    than the recursive JSON decoder supports as a ValueError instead of a RecursionError."""
    try:
        return parse(text_or_file)
    except RecursionError:
        raise ValueError(
            "JSON nested too deeply for Python's JSON decoder (its depth limit is about "
            f"sys.getrecursionlimit(), now {sys.getrecursionlimit()})"
        ) from None


class _Path:
    """The objects on the path from the root to the current node of an iterative preorder
    walk, to reject nested objects that contain themselves (which would never end)."""

    def __init__(self):
        self._ids: list = []
        self._on_path: set = set()

    def enter(self, node, depth: int, message: str) -> None:
        """Step to ``node`` at ``depth`` (the root is at 0); ValueError if it is its own
        ancestor."""
        for gone in self._ids[depth:]:
            self._on_path.discard(gone)
        del self._ids[depth:]
        if id(node) in self._on_path:
            raise ValueError(f"cycle: {message}")
        self._ids.append(id(node))
        self._on_path.add(id(node))


def _ast_label(node: ast.AST, include_identifiers: bool) -> str:
    name = type(node).__name__
    if not include_identifiers:
        return name
    ident: Optional[str] = None
    if isinstance(node, ast.Name):
        ident = node.id
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        ident = node.name
    elif isinstance(node, ast.arg):
        ident = node.arg
    elif isinstance(node, ast.Attribute):
        ident = node.attr
    elif isinstance(node, ast.alias):
        ident = node.name
    elif isinstance(node, ast.keyword):
        ident = node.arg
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        ident = ",".join(node.names)
    return name if ident is None else f"{name}:{ident}"


_PTB_TOKEN = re.compile(r"[()]|[^() \t\n\r\f\v]+")


def _ptb_tokens(s: str) -> list:
    """Split a PTB s-expression into '(', ')' and word tokens.

    Only ASCII whitespace separates tokens: SST has words with a no-break space inside
    (``8\xa01\\/2``), which stay one word.
    """
    return _PTB_TOKEN.findall(s)


def ptb_root_label(s: str) -> int:
    """The integer label of the outermost node of a PTB s-expression, e.g. ``3`` for
    ``"(3 (2 It) (4 works))"``.

    Raises:
        ValueError: the string does not start with ``(`` followed by an integer label.
    """
    tokens = _ptb_tokens(s)
    if len(tokens) < 2 or tokens[0] != "(" or tokens[1] in "()":
        raise ValueError(f"PTB string has no root label: {s[:40]!r}")
    try:
        return int(tokens[1])
    except ValueError:
        raise ValueError(f"PTB root label {tokens[1]!r} is not an integer") from None

"""Tests of bedl_torch.tree: the Tree class, its validation, readers and writers."""
import json
import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bedl_torch.tree import PTB_ESCAPES, Tree, ptb_root_label

# a(b(d, e), c)
ABC = Tree(["a", "b", "d", "e", "c"], [[1, 4], [2, 3], [], [], []])


# ---------------------------------------------------------------------------- basics
def test_basic_accessors():
    t = ABC
    assert len(t) == 5
    assert t.labels == ("a", "b", "d", "e", "c")
    assert t.children == ((1, 4), (2, 3), (), (), ())
    assert isinstance(t.labels, tuple) and all(isinstance(c, tuple) for c in t.children)
    assert t.subtree_sizes() == (5, 3, 1, 1, 1)
    assert t.parents() == (-1, 0, 1, 1, 0)
    assert t.depths() == (0, 1, 2, 2, 1)
    assert t.depth() == 2
    assert t.leaves() == (2, 3, 4)


def test_single_node_and_chain():
    t = Tree(["x"], [[]])
    assert len(t) == 1 and t.subtree_sizes() == (1,) and t.parents() == (-1,) and t.depth() == 0
    chain = Tree(list("abcd"), [[1], [2], [3], []])
    assert chain.subtree_sizes() == (4, 3, 2, 1)
    assert chain.depth() == 3


def test_inputs_are_copied_and_normalized():
    labels, children = ["a", "b"], [[1], []]
    t = Tree(labels, children)
    labels[0] = "z"
    children[0].append(5)
    assert t.labels == ("a", "b") and t.children == ((1,), ())


def test_numpy_ints_accepted():
    np = pytest.importorskip("numpy")
    t = Tree(["a", "b"], [np.array([1]), []])
    assert t.children == ((1,), ()) and type(t.children[0][0]) is int


def test_eq_hash_pickle():
    a = Tree(["a", "b", "c"], [[1, 2], [], []])
    b = Tree(("a", "b", "c"), ((1, 2), (), ()))
    c = Tree(["a", "b", "c"], [[1], [2], []])
    d = Tree(["a", "b", "x"], [[1, 2], [], []])
    assert a == b and hash(a) == hash(b)
    assert a != c and a != d
    assert a != "{a{b}{c}}"
    assert len({a, b, c, d}) == 3
    assert pickle.loads(pickle.dumps(a)) == a


def test_repr():
    assert repr(ABC) == "Tree.from_bracket('{a{b{d}{e}}{c}}')"
    assert eval(repr(ABC)) == ABC
    t = Tree([None, 1, "b"], [[1, 2], [], []])
    assert repr(t) == "Tree([None, 1, 'b'], [[1, 2], [], []])"
    assert eval(repr(t)) == t


def test_non_string_labels():
    t = Tree([None, 3, ("x", 1)], [[1, 2], [], []])
    assert t.labels == (None, 3, ("x", 1))
    assert Tree.from_tuple(t.to_tuple()) == t


# ---------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "labels, children, message",
    [
        ([], [], "empty tree"),
        (["a", "b"], [[1]], r"len\(children\) = 1 does not match len\(labels\) = 2"),
        (["a"], [[], []], r"len\(children\) = 2 does not match len\(labels\) = 1"),
        (["a", "b"], [[2], []], "child index 2 of node 0 is out of range"),
        (["a", "b"], [[-1], []], "child index -1 of node 0 is out of range"),
        (["a", "b", "c"], [[1, 2], [2], []], "node 2 has two parents: nodes 0 and 1"),
        (["a", "b"], [[1, 1], []], "node 1 is listed twice as a child of node 0"),
        (["a", "b"], [[1], [0]], r"root \(node 0\) has a parent: node 1"),
        (["a"], [[0]], "cycle: node 0 is its own child"),
        (["a", "b"], [[], [1]], "cycle: node 1 is its own child"),
        (["a", "b", "c"], [[], [2], [1]], r"cycle: node \d is its own descendant"),
        (["a", "b", "c", "d"], [[], [2], [3], [1]], r"cycle: node \d is its own descendant"),
        (["a", "b"], [[], []], r"not reachable from the root \(node 0\): 1"),
        (["a", "b", "c"], [[1], [], []], r"not reachable.*: 2"),
        (["a", "b", "c"], [[2, 1], [], []], "not in preorder"),
        (["a", "b", "c"], [[2], [], [1]], "not in preorder"),
        (["a", "b", "c", "d"], [[1, 3], [], [], [2]], "not in preorder"),
        (["a", "b", "c", "d"], [[1, 2], [3], [], []], "not in preorder"),
    ],
)
def test_validation_value_errors(labels, children, message):
    with pytest.raises(ValueError, match=message):
        Tree(labels, children)


@pytest.mark.parametrize(
    "labels, children, message",
    [
        (["a", "b"], [[1.0], []], r"child index 1.0 of node 0 is not an int"),
        (["a", "b"], [["1"], []], "is not an int"),
        (["a", "b"], [[True], []], "is not an int"),
        (["a", "b"], [[None], []], "is not an int"),
        (["a", "b"], [1, []], r"children\[0\] must be a sequence"),
        (["a", "b"], ["1", []], r"children\[0\] must be a sequence"),
        ([["unhashable"], "b"], [[1], []], "label of node 0 is not hashable"),
        ("ab", [[1], []], "not a string"),
    ],
)
def test_validation_type_errors(labels, children, message):
    with pytest.raises(TypeError, match=message):
        Tree(labels, children)


# ---------------------------------------------------------------------------- bracket
def test_bracket_read_write():
    t = Tree.from_bracket("{a{b}{c}}")
    assert t.labels == ("a", "b", "c") and t.children == ((1, 2), (), ())
    assert t.to_bracket() == "{a{b}{c}}"
    assert ABC.to_bracket() == "{a{b{d}{e}}{c}}"
    assert Tree.from_bracket(ABC.to_bracket()) == ABC
    assert Tree.from_bracket("{x}") == Tree(["x"], [[]])


def test_bracket_escapes():
    t = Tree(["a{", "}b", "c\\d", "{\\}"], [[1, 2, 3], [], [], []])
    s = t.to_bracket()
    assert s == "{a\\{{\\}b}{c\\\\d}{\\{\\\\\\}}}"
    assert Tree.from_bracket(s) == t


def test_bracket_whitespace_and_none():
    t = Tree.from_bracket("  {a {b} {c}\n}  ")
    assert t.labels == ("a ", "b", "c")  # labels are verbatim
    assert Tree.from_bracket("{{x}{y z}}").labels == (None, "x", "y z")
    u = Tree([None, "x"], [[1], []])
    assert u.to_bracket() == "{{x}}" and Tree.from_bracket("{{x}}") == u


def test_bracket_non_str_labels_written_with_str():
    assert Tree([1, 2.5], [[1], []]).to_bracket() == "{1{2.5}}"


@pytest.mark.parametrize(
    "s, message",
    [
        ("", "empty"),
        ("   ", "empty"),
        ("a{b}", "before the root"),
        ("{a{b}", "not closed"),
        ("{a}}", "trailing text"),
        ("{a}{b}", "trailing text"),
        ("}", "unbalanced"),
        ("{a{b}x{c}}", "between nodes"),
        ("{a\\", "lone backslash"),
    ],
)
def test_bracket_errors(s, message):
    with pytest.raises(ValueError, match=message):
        Tree.from_bracket(s)


def test_bracket_type_error():
    with pytest.raises(TypeError):
        Tree.from_bracket(b"{a}")


# ---------------------------------------------------------------------------- JSON
def test_json_round_trip(tmp_path):
    d = ABC.to_json()
    assert d == {"nodes": ["a", "b", "d", "e", "c"], "adj": [[1, 4], [2, 3], [], [], []]}
    assert Tree.from_json(d) == ABC
    assert Tree.from_json(json.dumps(d)) == ABC
    path = tmp_path / "t.json"
    path.write_text(json.dumps(d), encoding="utf-8")
    assert Tree.load_json(path) == ABC
    assert Tree.load_json(str(path)) == ABC


def test_json_list_labels_become_tuples():
    t = Tree.from_json({"nodes": [["x", 1], None], "adj": [[1], []]})
    assert t.labels == (("x", 1), None)


def test_json_errors():
    with pytest.raises(ValueError, match="'adj'"):
        Tree.from_json({"nodes": ["a"]})
    with pytest.raises(ValueError, match="'nodes'"):
        Tree.from_json({"adj": [[]]})
    with pytest.raises(TypeError):
        Tree.from_json([["a"], [[]]])
    with pytest.raises(ValueError, match="not in preorder"):
        Tree.from_json({"nodes": ["a", "b", "c"], "adj": [[2, 1], [], []]})


# ---------------------------------------------------------------------------- tuples
def test_tuple_round_trip():
    assert ABC.to_tuple() == ("a", ("b", ("d",), ("e",)), ("c",))
    assert Tree.from_tuple(("a", ("b",), ("c",))) == Tree.from_bracket("{a{b}{c}}")
    assert Tree.from_tuple(["a", ["b"], ["c"]]) == Tree.from_bracket("{a{b}{c}}")
    assert Tree.from_tuple(ABC.to_tuple()) == ABC
    assert Tree.from_tuple(("x",)).to_tuple() == ("x",)


def test_tuple_errors():
    with pytest.raises(ValueError, match="non-empty"):
        Tree.from_tuple(())
    with pytest.raises(ValueError, match="non-empty"):
        Tree.from_tuple(("a", ()))
    with pytest.raises(TypeError, match="must be a tuple"):
        Tree.from_tuple(("a", "b"))
    with pytest.raises(TypeError):
        Tree.from_tuple("a")


def test_deep_tree_no_recursion_limit():
    n = 5000
    chain = Tree(["x"] * n, [[i + 1] for i in range(n - 1)] + [[]])
    assert chain.depth() == n - 1
    assert Tree.from_bracket(chain.to_bracket()) == chain
    assert Tree.from_tuple(chain.to_tuple()) == chain
    assert Tree.from_json(chain.to_json()) == chain


# ---------------------------------------------------------------------------- PTB
SST_LINE = "(3 (2 It) (4 (4 (2 's) (3 (2 a) (4 lovely))) (2 .)))"


def test_ptb_sst_line():
    t = Tree.from_ptb(SST_LINE)
    assert t.labels == (None, "It", None, None, "'s", None, "a", "lovely", ".")
    assert t.children == ((1, 2), (), (3, 8), (4, 5), (), (6, 7), (), (), ())
    assert t.to_bracket() == "{{It}{{{'s}{{a}{lovely}}}{.}}}"
    assert ptb_root_label(SST_LINE) == 3


def test_ptb_options():
    t = Tree.from_ptb(SST_LINE, inner_labels=True, lowercase=True)
    assert t.labels == ("3", "it", "4", "4", "'s", "3", "a", "lovely", ".")
    assert Tree.from_ptb("(S (NP (DT The) (NN cat)) (VP (VBZ sits)))", inner_labels=True) == Tree.from_tuple(
        ("S", ("NP", ("The",), ("cat",)), ("VP", ("sits",)))
    )


def test_ptb_escapes_and_special_words():
    line = "(2 (2 -LRB-) (2 (2 -LSB-) (2 (2 -LCB-) (2 (2 X) (2 (2 -RCB-) (2 (2 -RSB-) (2 -RRB-)))))))"
    t = Tree.from_ptb(line, lowercase=True)
    words = [t.labels[i] for i in t.leaves()]
    assert words == ["(", "[", "{", "x", "}", "]", ")"]
    assert set(PTB_ESCAPES.values()) == set("()[]{}")
    # SST has a word with a no-break space inside; it stays one word
    t = Tree.from_ptb("(2 (2 9) (2 8\xa01\\/2))")
    assert t.labels == (None, "9", "8\xa01\\/2")


def test_ptb_single_leaf_and_whitespace():
    assert Tree.from_ptb("(2 word)").labels == ("word",)
    assert Tree.from_ptb("  (1\n  (2 a)\t(2 b) )\n") == Tree([None, "a", "b"], [[1, 2], [], []])
    # an unlabeled outer wrapper as in some PTB files
    t = Tree.from_ptb("( (S (NN x)))", inner_labels=True)
    assert t.labels == (None, "S", "x")


@pytest.mark.parametrize(
    "s, message",
    [
        ("", "empty"),
        ("(2 (2 a)", "not closed"),
        ("(2 a))", "trailing text"),
        ("(2 a) (2 b)", "trailing text"),
        (")", "unbalanced"),
        ("word", "outside of any node"),
        ("(2 a b)", "several words"),
        ("(2 (2 a) b)", "mixes child nodes and a word"),
        ("(2 b (2 a))", "mixes a word"),
        ("()", "empty node"),
    ],
)
def test_ptb_errors(s, message):
    with pytest.raises(ValueError, match=message):
        Tree.from_ptb(s)


def test_ptb_root_label_errors():
    assert ptb_root_label("  (0 (2 a) (1 b))") == 0
    with pytest.raises(ValueError, match="no root label"):
        ptb_root_label("((2 a))")
    with pytest.raises(ValueError, match="not an integer"):
        ptb_root_label("(S (NN a))")


# ---------------------------------------------------------------------------- Python AST
def test_from_python():
    t = Tree.from_python("x = 1")
    assert t.to_tuple() == ("Module", ("Assign", ("Name", ("Store",)), ("Constant",)))
    src = "def f(a):\n    return a + 1\n"
    t = Tree.from_python(src)
    assert t.to_bracket() == "{Module{FunctionDef{arguments{arg}}{Return{BinOp{Name{Load}}{Add}{Constant}}}}}"
    t = Tree.from_python(src, include_identifiers=True)
    assert t.labels == (
        "Module", "FunctionDef:f", "arguments", "arg:a", "Return", "BinOp", "Name:a", "Load", "Add", "Constant",
    )


def test_from_python_identifiers_more():
    src = "import os.path as p\nclass C:\n    def g(self):\n        global G\n        return self.x(k=1)\n"
    labels = Tree.from_python(src, include_identifiers=True).labels
    for expected in ("alias:os.path", "ClassDef:C", "FunctionDef:g", "arg:self", "Global:G",
                     "Attribute:x", "keyword:k", "Name:self"):
        assert expected in labels


def test_from_python_ast_input_and_syntax_error():
    import ast

    assert Tree.from_python(ast.parse("x")) == Tree.from_python("x")
    with pytest.raises(SyntaxError):
        Tree.from_python("def (:")
    with pytest.raises(TypeError):
        Tree.from_python(42)


# ---------------------------------------------------------------------------- random trees
LABEL_CHARS = st.sampled_from(["a", "b", "{", "}", "\\", " ", "x y", "\u00e9", "ab}{\\"])


@st.composite
def random_trees(draw, max_nodes=30):
    n = draw(st.integers(1, max_nodes))
    # random parent for each non-root node, then renumber in preorder
    parent = [-1] + [draw(st.integers(0, i - 1)) for i in range(1, n)]
    kids = [[] for _ in range(n)]
    for i in range(1, n):
        kids[parent[i]].append(i)
    for k in kids:
        perm = draw(st.permutations(k))
        k[:] = perm
    order, stack = [], [0]
    while stack:
        v = stack.pop()
        order.append(v)
        stack.extend(reversed(kids[v]))
    new = {v: i for i, v in enumerate(order)}
    labels = [draw(LABEL_CHARS) for _ in range(n)]
    children = [[new[c] for c in kids[v]] for v in order]
    return Tree(labels, children)


@settings(max_examples=150, deadline=None)
@given(random_trees())
def test_round_trips_random(t):
    assert Tree.from_bracket(t.to_bracket()) == t
    assert Tree.from_json(json.loads(json.dumps(t.to_json()))) == t
    assert Tree.from_tuple(t.to_tuple()) == t
    assert Tree(t.labels, t.children) == t
    # subtree sizes and parents are consistent with the preorder layout
    sizes, parents = t.subtree_sizes(), t.parents()
    for i, ch in enumerate(t.children):
        assert sizes[i] == 1 + sum(sizes[c] for c in ch)
        nxt = i + 1
        for c in ch:
            assert c == nxt and parents[c] == i
            nxt += sizes[c]
        assert nxt == i + sizes[i]


ENTRY = st.one_of(
    st.integers(-2, 8),
    st.integers(-2, 8),
    st.integers(-2, 8),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True),
    st.text(max_size=2),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 7),
    st.lists(st.one_of(st.lists(ENTRY, max_size=4), st.integers(), st.none(), st.text(max_size=2)), max_size=8),
)
def test_malformed_children_only_value_or_type_errors(n, children):
    labels = [str(i) for i in range(n)]
    try:
        t = Tree(labels, children)
    except (ValueError, TypeError):
        return
    # accepted input must describe a valid preorder tree
    assert len(t) == n == len(children)
    assert Tree.from_bracket(t.to_bracket()) == t
    assert sum(len(c) for c in t.children) == n - 1


@settings(max_examples=200, deadline=None)
@given(random_trees(max_nodes=12), st.data())
def test_mutated_children_only_value_or_type_errors(t, data):
    n = len(t)
    children = [list(c) for c in t.children]
    kind = data.draw(st.sampled_from(["set", "append", "remove", "move", "swap"]))
    i = data.draw(st.integers(0, n - 1))
    if kind == "set" and children[i]:
        j = data.draw(st.integers(0, len(children[i]) - 1))
        children[i][j] = data.draw(st.one_of(st.integers(-2, n + 1), st.floats(), st.text(max_size=1)))
    elif kind == "append":
        children[i].append(data.draw(st.integers(-1, n)))
    elif kind == "remove" and children[i]:
        children[i].pop(data.draw(st.integers(0, len(children[i]) - 1)))
    elif kind == "move" and children[i]:
        c = children[i].pop(0)
        children[data.draw(st.integers(0, n - 1))].append(c)
    elif kind == "swap" and len(children[i]) > 1:
        children[i][0], children[i][-1] = children[i][-1], children[i][0]
    try:
        u = Tree(t.labels, children)
    except (ValueError, TypeError):
        assert [list(c) for c in t.children] != children
        return
    assert u.children == tuple(tuple(c) for c in children)
    assert Tree.from_tuple(u.to_tuple()) == u


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="{}\\ab ", max_size=12))
def test_bracket_parser_only_value_errors(s):
    try:
        t = Tree.from_bracket(s)
    except ValueError:
        return
    assert Tree.from_bracket(t.to_bracket()) == t


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="() ab2", max_size=14))
def test_ptb_parser_only_value_errors(s):
    try:
        Tree.from_ptb(s)
    except ValueError:
        pass


# ---------------------------------------------------------------------------- shared data files
@pytest.mark.parametrize(
    "name, count", [("minipalindrome", 48), ("sorting", 64), ("cystic", 160), ("leukemia", 442)]
)
def test_shared_json_files_load(shared_data, name, count):
    files = sorted((shared_data / name).glob("*.json"))
    assert len(files) == count
    for path in files:
        raw = json.loads(path.read_text(encoding="utf-8"))
        t = Tree.load_json(path)
        assert t.to_json() == raw
        assert len(t) == len(raw["nodes"])
        assert Tree.from_bracket(t.to_bracket()) == t


def test_shared_sst_lines_parse(shared_data):
    lines = (shared_data / "sst" / "trees" / "dev.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1101
    roots = [ptb_root_label(line) for line in lines]
    assert sorted(set(roots)) == [0, 1, 2, 3, 4]
    for line in lines:
        t = Tree.from_ptb(line)
        # a binary tree: inner nodes have two children, words are at the leaves
        assert all(len(c) in (0, 2) for c in t.children)
        assert all((t.labels[i] is None) == bool(t.children[i]) for i in range(len(t)))

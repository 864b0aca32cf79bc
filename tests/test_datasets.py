"""Tests of bedl_torch.datasets: the packaged data, the Strings generator and the GloVe subset."""
import collections
import importlib.util
import json
import pathlib

import numpy as np
import pytest

from bedl_torch import datasets
from bedl_torch.tree import Tree, ptb_root_label

REPO = pathlib.Path(__file__).resolve().parents[1]

EXPECTED = {
    "strings": (200, [100, 100]),
    "minipalindrome": (48, [6] * 8),
    "sorting": (64, [35, 29]),
    "cystic": (160, [71, 89]),
    "leukemia": (442, [303, 139]),
    "sentiment": (9613, [4650, 4963]),
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_counts_and_classes(name):
    X, y = datasets.load(name)
    count, classes = EXPECTED[name]
    assert len(X) == count
    assert isinstance(y, np.ndarray) and y.dtype == np.int64 and y.shape == (count,)
    assert np.bincount(y).tolist() == classes
    if name == "strings":
        assert all(isinstance(x, str) for x in X)
    else:
        assert all(isinstance(x, Tree) for x in X)


def test_names_and_order():
    X, y, names = datasets.load("minipalindrome", return_names=True)
    assert names == sorted(names) and names[0] == "ImplAAA.json" and names[-1] == "ImplBBB5.json"
    classes = ["AAA", "AAB", "ABA", "ABB", "BAA", "BAB", "BBA", "BBB"]
    assert [classes[c] for c in y] == [n[4:7] for n in names]
    _, y, names = datasets.load("sorting", return_names=True)
    assert all((c == 0) == n.startswith("Bubble") for c, n in zip(y, names))
    for name in ("cystic", "leukemia"):
        _, y, names = datasets.load(name, return_names=True)
        assert names == sorted(names)
        assert all((c == 0) == n.startswith("-1_") for c, n in zip(y, names))
    _, _, names = datasets.load("sentiment", return_names=True)
    assert names[0] == "train.txt:1" and names[-1].startswith("test.txt:")
    assert collections.Counter(n.split(":")[0] for n in names) == {"train.txt": 6920, "dev.txt": 872, "test.txt": 1821}


def test_known_trees():
    X, _ = datasets.load("cystic")
    assert X[0].to_bracket() == "{AA_{GalNAc_1a{NeuAc_2a6{$}}}}"
    labels = {lab for t in X for lab in t.labels}
    assert len(labels) == 29
    X, _ = datasets.load("leukemia")
    assert len({lab for t in X for lab in t.labels}) == 57
    X, _ = datasets.load("minipalindrome")
    assert X[0].labels[0] == "compilation unit"
    assert len({lab for t in X for lab in t.labels}) == 27


def test_sentiment_trees():
    X, y = datasets.load("sentiment")
    t = X[0]
    words = [t.labels[i] for i in t.leaves()]
    assert words[:4] == ["the", "rock", "is", "destined"]
    for t in X[:500]:
        assert all((t.labels[i] is None) == bool(t.children[i]) for i in range(len(t)))
        assert all(lab is None or lab == lab.lower() for lab in t.labels)
    Xc, _ = datasets.load("sentiment", lowercase=False, inner_labels=True)
    assert Xc[0].labels[0] in ("3", "4") and y[0] == 1
    assert [Xc[0].labels[i] for i in Xc[0].leaves()][:2] == ["The", "Rock"]
    # fresh lists, shared immutable trees
    X2, _ = datasets.load("sentiment")
    assert X2 is not X and X2[0] is X[0]


def test_loaded_lists_are_fresh():
    X, y = datasets.load("cystic")
    X.clear()
    y[:] = 7
    X2, y2 = datasets.load("cystic")
    assert len(X2) == 160 and y2.max() == 1


def test_unknown_name():
    with pytest.raises(ValueError, match="unknown data set"):
        datasets.load("nope")
    with pytest.raises(ValueError, match="unknown data set"):
        datasets.describe("nope")


@pytest.mark.parametrize("name", list(EXPECTED) + ["glove"])
def test_describe(name):
    text = datasets.describe(name)
    assert isinstance(text, str) and len(text) > 200
    if name in ("minipalindrome", "sorting", "cystic", "leukemia"):
        assert "adversarial-edit-attacks" in text and "GPLv3" in text
    if name == "sentiment":
        assert "Socher" in text
    if name == "glove":
        assert "PDDL" in text


# ---------------------------------------------------------------------------- strings
def test_make_strings_properties():
    X, y = datasets.make_strings(200, seed=3)
    assert len(X) == 200 and np.bincount(y).tolist() == [100, 100]
    for s, c in zip(X, y):
        assert isinstance(s, str) and len(s) == 12
        pos = 6 if c == 0 else 5
        assert s[pos] in "cd"
        assert all(ch in "ab" for i, ch in enumerate(s) if i != pos)
    # all four symbols and both c/d occur
    assert set("".join(X)) == set("abcd")


def test_make_strings_seed():
    a = datasets.make_strings(50, seed=1)
    b = datasets.make_strings(50, seed=1)
    c = datasets.make_strings(50, seed=2)
    assert a[0] == b[0] and a[0] != c[0]
    assert np.array_equal(a[1], b[1])
    X, y = datasets.load("strings")
    assert X == datasets.make_strings(200, seed=0)[0]
    X, y = datasets.load("strings", n=7, seed=5)
    assert len(X) == 7 and y.tolist() == [0, 0, 0, 0, 1, 1, 1]
    assert datasets.make_strings(0, seed=0)[0] == []
    with pytest.raises(ValueError):
        datasets.make_strings(-1)


# ---------------------------------------------------------------------------- GloVe
def test_glove_subset():
    words, vectors = datasets.load_glove_subset()
    assert len(words) == 17756 and len(set(words)) == len(words)
    assert vectors.shape == (17756, 50) and vectors.dtype == np.float32
    the = vectors[words.index("the")]
    np.testing.assert_allclose(the[:6], [0.418, 0.24968, -0.41242, 0.1217, 0.34527, -0.044457], rtol=1e-6)
    assert np.isfinite(vectors).all()
    assert "(" in words and ")" in words
    vectors[0] = 0  # a copy: the cache is not changed
    assert datasets.load_glove_subset()[1][0].any()


def test_glove_covers_sentiment_words():
    words, _ = datasets.load_glove_subset()
    vocab = set(words)
    X, _ = datasets.load("sentiment")
    tokens = [t.labels[i] for t in X for i in t.leaves()]
    assert sum(w in vocab for w in tokens) / len(tokens) > 0.98


def test_package_data_size():
    total = sum(p.stat().st_size for p in datasets.DATA_DIR.iterdir() if p.is_file())
    assert total < 10 * 2**20


# ---------------------------------------------------------------------------- against ../shared
@pytest.mark.parametrize("name", ["minipalindrome", "sorting", "cystic", "leukemia"])
def test_packaged_trees_equal_shared_json(shared_data, name):
    X, _, names = datasets.load(name, return_names=True)
    files = sorted(p.name for p in (shared_data / name).glob("*.json"))
    assert names == files
    for t, fname in zip(X, names):
        raw = json.loads((shared_data / name / fname).read_text(encoding="utf-8"))
        assert t.to_json() == raw
        assert t == Tree.load_json(shared_data / name / fname)


def test_packaged_sentiment_equals_shared_ptb(shared_data):
    X, y, names = datasets.load("sentiment", return_names=True)
    expected = []
    for split in ("train", "dev", "test"):
        lines = (shared_data / "sst" / "trees" / f"{split}.txt").read_text(encoding="utf-8").splitlines()
        for k, line in enumerate(lines, start=1):
            root = ptb_root_label(line)
            if root != 2:
                expected.append((f"{split}.txt:{k}", int(root > 2), line))
    assert names == [e[0] for e in expected]
    assert y.tolist() == [e[1] for e in expected]
    for t, (_, _, line) in zip(X[::7], expected[::7]):
        assert t == Tree.from_ptb(line, lowercase=True)


def test_packaged_glove_equals_shared(shared_data):
    words, vectors = datasets.load_glove_subset()
    lines = (shared_data / "glove" / "glove.6B.50d.sst_vocab.txt").read_text(encoding="utf-8").splitlines()
    assert [line.split(" ", 1)[0] for line in lines] == words
    for k in (0, 1234, len(lines) - 1):
        np.testing.assert_array_equal(vectors[k], np.array(lines[k].split(" ")[1:], dtype=np.float32))


def test_pack_script_reproduces_shipped_files(shared_data, tmp_path):
    spec = importlib.util.spec_from_file_location("pack_datasets", REPO / "tools" / "pack_datasets.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.main(["--shared", str(shared_data), "--out", str(tmp_path)])
    shipped = sorted(p.name for p in datasets.DATA_DIR.iterdir() if p.is_file())
    assert sorted(p.name for p in tmp_path.iterdir()) == shipped
    for name in shipped:
        assert (tmp_path / name).read_bytes() == (datasets.DATA_DIR / name).read_bytes(), name


# -- python_functions: syntax trees of installed Python sources --------------------------


def test_python_functions_from_standard_library_packages():
    packages = ("email", "asyncio", "unittest")
    X, y, names = datasets.python_functions(packages, n_per_class=8, min_nodes=15, max_nodes=50,
                                            seed=3, return_names=True)
    assert len(X) == 24 and y.dtype == np.int64 and np.bincount(y).tolist() == [8, 8, 8]
    assert all(isinstance(t, Tree) and 15 <= len(t) <= 50 for t in X)
    assert all(t.labels[0] in ("FunctionDef", "AsyncFunctionDef") for t in X)
    assert all(n.split("/")[0] == packages[c] for n, c in zip(names, y))
    assert len({t.to_bracket() for t in X}) == 24  # no tree twice
    for c in range(3):  # at most max_per_file (3) functions of one file
        files = collections.Counter(n.rsplit(":", 2)[0] for n, k in zip(names, y) if k == c)
        assert max(files.values()) <= 3
    # deterministic for a seed; another seed draws others
    X2, y2 = datasets.python_functions(packages, n_per_class=8, min_nodes=15, max_nodes=50, seed=3)
    assert X2 == X and np.array_equal(y2, y)
    X3, _ = datasets.python_functions(packages, n_per_class=8, min_nodes=15, max_nodes=50, seed=4)
    assert X3 != X


def test_python_functions_identifiers_bounded():
    X, _ = datasets.python_functions(("email", "asyncio"), n_per_class=10, include_identifiers=True,
                                     max_identifiers=5)
    named = {lab for t in X for lab in t.labels if ":" in lab}
    assert 0 < len(named) <= 5
    full, _ = datasets.python_functions(("email", "asyncio"), n_per_class=10, include_identifiers=True)
    assert len({lab for t in full for lab in t.labels if ":" in lab}) > 5
    # the same trees, with rare names cut to their node type
    assert [t.children for t in X] == [t.children for t in full]
    assert all(a == b or b.split(":")[0] == a for t, u in zip(X, full)
               for a, b in zip(t.labels, u.labels))


def test_python_functions_errors():
    with pytest.raises(ValueError, match="not installed"):
        datasets.python_functions(("json", "no_such_package_xyz"), n_per_class=2)
    with pytest.raises(ValueError, match="only"):
        datasets.python_functions(("json", "email"), n_per_class=10 ** 5)
    with pytest.raises(ValueError):
        datasets.python_functions(("json", "json"), n_per_class=2)
    with pytest.raises(ValueError):
        datasets.python_functions(("json", "email"), n_per_class=2, min_nodes=30, max_nodes=20)

"""GloVe reader, PCA reduction and the cosine cost module."""
import io
import math

import pytest
import torch
import torch.nn.functional as Fn

from bedl_torch.ops import pairwise_distances
from bedl_torch.pretrained import CosineCost, load_glove, pca_reduce, to_embedding
from bedl_torch.tree import Tree

TINY = """the 0.5 1.0 -0.25
, 1 0 0

good 0.1 0.2 0.3
new york 1.5 -2 0.5
the 9 9 9
"""


def test_load_glove_tiny_file(tmp_path):
    path = tmp_path / "tiny.txt"
    path.write_text(TINY, encoding="utf-8")
    words, vecs = load_glove(path)
    assert words == ["the", ",", "good", "new york"]  # repeated word keeps its first vector
    assert vecs.dtype == torch.float32 and vecs.shape == (4, 3)
    assert vecs[0].tolist() == [0.5, 1.0, -0.25]
    assert vecs[3].tolist() == [1.5, -2.0, 0.5]
    # vocabulary filter, str path, open text and binary files
    w2, v2 = load_glove(str(path), vocab={"good", "absent", ","})
    assert w2 == [",", "good"] and v2.shape == (2, 3)
    with open(path, "r", encoding="utf-8") as f:
        assert load_glove(f)[0] == words
    with open(path, "rb") as f:
        assert load_glove(f)[0] == words
    assert load_glove(io.StringIO("2 3\na 1 2 3\nb 4 5 6\n"))[0] == ["a", "b"]  # header skipped


def test_load_glove_errors(tmp_path):
    with pytest.raises(ValueError, match="line 2"):
        load_glove(io.StringIO("a 1 2 3\nb 1 2\n"))
    with pytest.raises(ValueError, match="line 1"):
        load_glove(io.StringIO("a 1 x 3\n"))
    words, vecs = load_glove(io.StringIO(""))
    assert words == [] and vecs.numel() == 0


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e39", "-3.5e38"])
def test_load_glove_rejects_values_that_are_not_finite_in_float32(value):
    """Before, NaN and inf were read as such, and values beyond float32's range became inf."""
    with pytest.raises(ValueError, match=r"line 2: vector value that is NaN, inf or beyond float32's range \(word 'b'\)"):
        load_glove(io.StringIO(f"a 1 2\nb 1 {value}\n"))


def test_load_glove_keeps_the_largest_float32_values():
    words, vecs = load_glove(io.StringIO("a 3.4028235e38 -3.4028234e38\n"))
    assert words == ["a"] and bool(torch.isfinite(vecs).all())


def test_pca_reduce_rejects_non_finite_vectors():
    with pytest.raises(ValueError, match="vectors must be finite"):
        pca_reduce(torch.tensor([[math.nan, 1.0], [1.0, 2.0]]), 1)


def test_load_glove_shared_data(shared_data):
    path = shared_data / "glove" / "glove.6B.50d.sst_vocab.txt"
    if not path.is_file():
        pytest.skip("GloVe subset not available")
    words, vecs = load_glove(path, vocab=["the", "good", "bad", "movie", "zzzz-not-a-word"])
    assert sorted(words) == ["bad", "good", "movie", "the"]
    assert vecs.shape == (4, 50)
    the = vecs[words.index("the")]
    expected = [0.418, 0.24968, -0.41242, 0.1217, 0.34527, -0.044457]
    assert torch.allclose(the[:6], torch.tensor(expected), atol=1e-5)


def test_load_glove_full_shared_file_and_pca(shared_data):
    path = shared_data / "glove" / "glove.6B.50d.sst_vocab.txt"
    if not path.is_file():
        pytest.skip("GloVe subset not available")
    words, vecs = load_glove(path)
    assert len(words) == 17756 and vecs.shape == (17756, 50)
    reduced, comps = pca_reduce(vecs, 0.95)
    k = comps.shape[0]
    assert reduced.shape == (17756, k) and 1 <= k < 50
    X = vecs.double() - vecs.double().mean(0)
    total = (X * X).sum()
    kept = (reduced.double() ** 2).sum() / total
    assert kept >= 0.95
    # minimal: one component fewer keeps less than 95%
    assert (reduced.double()[:, : k - 1] ** 2).sum() / total < 0.95
    # orthonormal components
    assert torch.allclose(comps.double() @ comps.double().T, torch.eye(k, dtype=torch.float64), atol=1e-5)


def test_pca_reduce_small():
    gen = torch.Generator().manual_seed(0)
    base = torch.randn(200, 2, generator=gen, dtype=torch.float64)
    mix = torch.tensor([[3.0, 0.0, 1.0], [0.0, 1.0, 0.0]], dtype=torch.float64)
    vecs = base @ mix + 1e-3 * torch.randn(200, 3, generator=gen, dtype=torch.float64) + 5.0
    reduced, comps, mean = pca_reduce(vecs, 0.99, return_mean=True)
    assert comps.shape == (2, 3) and reduced.shape == (200, 2)
    assert torch.allclose(reduced, (vecs - mean) @ comps.T)
    assert torch.allclose(mean, vecs.mean(0))
    reduced1, comps1 = pca_reduce(vecs, 1)
    assert comps1.shape == (1, 3)
    assert torch.allclose(reduced1[:, 0], reduced[:, 0])
    with pytest.raises(ValueError):
        pca_reduce(vecs, 1.5)
    with pytest.raises(ValueError):
        pca_reduce(vecs, 0)


def test_to_embedding():
    words = ["a", "b", "c"]
    vecs = torch.arange(6, dtype=torch.float32).view(3, 2)
    emb, index = to_embedding(words, vecs)
    assert index == {"a": 0, "b": 1, "c": 2}
    assert torch.equal(emb(torch.tensor([index["c"]])), vecs[2:3])
    assert not emb.weight.requires_grad


def _cosine_cost(dtype=torch.float64):
    words = ["good", "great", "bad", "zero", "movie"]
    vecs = torch.tensor(
        [[1.0, 0.2, 0.0], [0.9, 0.3, 0.1], [-1.0, 0.1, 0.2], [0.0, 0.0, 0.0], [0.1, -0.5, 1.0]],
        dtype=dtype,
    )
    return CosineCost(words, vecs), words, vecs


def test_cosine_cost_identity_is_plain_cosine_distance():
    cost, words, vecs = _cosine_cost()
    assert cost.alphabet == words + [None]
    assert cost.gap_index == len(words) + 1
    assert torch.equal(cost.Omega.detach(), torch.eye(3, dtype=torch.float64))
    idx = torch.arange(len(words))[None]
    C = cost(idx, idx)[0]
    for i in range(len(words)):
        for j in range(len(words)):
            if i == j:
                expected = 0.0
            elif words[i] == "zero" or words[j] == "zero":
                expected = 0.5  # cos with a zero vector is 0
            else:
                expected = 0.5 - 0.5 * Fn.cosine_similarity(vecs[i], vecs[j], dim=0).item()
            assert C[i, j].item() == pytest.approx(expected, abs=1e-12)


def test_cosine_cost_gap_and_unlabeled_nodes():
    # default: gap and unlabeled nodes at the origin (||u - 0||^2 / 4 = 1/4 for a unit u)
    cost, words, _ = _cosine_cost()
    none, gap = len(words), len(words) + 1
    x = torch.tensor([[0, none, gap]])
    C = cost(x, x)[0]
    assert C.tolist() == [[0.0, 0.25, 0.25], [0.25, 0.0, 0.0], [0.25, 0.0, 0.0]]
    assert cost.gap_cost == 0.25
    assert cost.encode([None, "good", "unknown"], unknown="gap").tolist() == [none, 0, gap]
    # the word-word part is the squared chord / 4 of the unit vectors
    u = Fn.normalize(cost.vectors[[0, 2]], dim=1)
    c02 = cost(torch.tensor([[0]]), torch.tensor([[2]])).item()
    assert c02 == pytest.approx(((u[0] - u[1]) ** 2).sum().item() / 4)
    # the costs before issue #4 (every constant 1/2) and an explicit pair
    _, words, vecs = _cosine_cost()
    old = CosineCost(words, vecs, gap_cost=0.5, unlabeled=(0.5, 0.5))
    assert old(x, x)[0].tolist() == [[0.0, 0.5, 0.5], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0]]
    other = CosineCost(words, vecs, gap_cost=0.3, unlabeled=(1.0, 0.125))
    assert other(x, x)[0].tolist() == [[0.0, 1.0, 0.3], [1.0, 0.0, 0.125], [0.3, 0.125, 0.0]]
    assert "gap_cost=0.3" in repr(other)


def test_cosine_cost_bad_options():
    _, words, vecs = _cosine_cost()
    for kwargs in ({"unlabeled": "word"}, {"unlabeled": (0.5,)}, {"unlabeled": 0.5},
                   {"gap_cost": -0.1}, {"gap_cost": float("nan")},
                   {"unlabeled": (0.5, float("inf"))}):
        with pytest.raises(ValueError):
            CosineCost(words, vecs, **kwargs)


def _random_unlabeled_tree(gen, words, n_leaves):
    """A random binary tree (nested tuples) with unlabeled inner nodes and word leaves."""
    nodes = [(words[int(torch.randint(len(words), (1,), generator=gen))],)
             for _ in range(n_leaves)]
    while len(nodes) > 1:
        i = int(torch.randint(len(nodes) - 1, (1,), generator=gen))
        nodes[i:i + 2] = [(None, nodes[i], nodes[i + 1])]
    return nodes[0]


def test_cosine_cost_unlabeled_trees_reduce_to_leaf_sequences():
    # With unlabeled nodes at the origin (free to insert/delete) the tree edit distance of
    # SST-like trees is the sequence edit distance of their leaves; with the old constants
    # (1/2 for unlabeled nodes) the tree shape adds to it.
    cost, words, vecs = _cosine_cost()
    gen = torch.Generator().manual_seed(3)
    trees = [Tree.from_tuple(_random_unlabeled_tree(gen, words, n)) for n in (1, 2, 3, 4, 5, 6, 7)]
    leaves = [[t.labels[i] for i in t.leaves()] for t in trees]
    with torch.no_grad():
        D_tree = pairwise_distances(trees, None, cost)
        D_seq = pairwise_distances(leaves, None, cost)
        torch.testing.assert_close(D_tree, D_seq, rtol=0, atol=1e-12)
        old = CosineCost(words, vecs, gap_cost=0.5, unlabeled=(0.5, 0.5))
        D_old = pairwise_distances(trees, None, old)
        assert (D_old >= pairwise_distances(leaves, None, old) - 1e-12).all()
        assert D_old[0, 6] >= 0.5 * (len(trees[6]) - 1) - 1e-12  # 12 nodes to insert at least


def test_cosine_cost_state_dict_keeps_constant_costs():
    _, words, vecs = _cosine_cost()
    src = CosineCost(words, vecs, gap_cost=0.4, unlabeled=(0.6, 0.2))
    dst = CosineCost(words, vecs)
    dst.load_state_dict(src.state_dict())
    assert torch.equal(dst.special, src.special) and dst.gap_cost == pytest.approx(0.4)
    # a state dict saved before the constants were configurable loads the costs of that version
    legacy = {k: v for k, v in src.state_dict().items() if k != "special"}
    dst.load_state_dict(legacy)
    assert dst.special.tolist() == [[0.0, 0.5, 0.5], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0]]
    assert dst.to(torch.float32).special.dtype == torch.float32


def test_cosine_cost_gradients_nan_free():
    cost, words, _ = _cosine_cost()
    trees = [
        Tree.from_tuple((None, ("good",), (None, ("zero",), ("movie",)))),
        Tree.from_tuple((None, ("bad",), ("movie",))),
        Tree.from_tuple(("great",)),
        Tree.from_tuple((None, ("zero",), ("zero",))),
    ]
    D = pairwise_distances(trees, None, cost)
    assert torch.isfinite(D).all()
    (D.sum() + D[0, 1]).backward()
    assert torch.isfinite(cost.Omega.grad).all()
    assert cost.Omega.grad.abs().sum() > 0
    # a singular map sends vectors to 0: still finite values and gradients
    with torch.no_grad():
        cost.Omega.zero_()
    cost.Omega.grad = None
    D = pairwise_distances(trees, None, cost)
    D.sum().backward()
    assert torch.isfinite(D).all() and torch.isfinite(cost.Omega.grad).all()


def test_cosine_cost_sequences_and_float32():
    cost, _, _ = _cosine_cost(torch.float32)
    seqs = [["good", "movie"], ["bad", "movie"], ["great"], []]
    D = pairwise_distances(seqs, None, cost)
    assert D.dtype == torch.float32
    assert D[0, 0].item() == 0.0
    assert D[3, 2].item() == pytest.approx(0.25)  # insert one word (gap_cost)
    # good -> bad (opposite words) costs more than deleting one and inserting the other
    c = cost(torch.tensor([[0]]), torch.tensor([[2]]))[0, 0, 0].item()
    assert c > 0.5 and D[0, 1].item() == pytest.approx(min(c, 2 * cost.gap_cost))
    c = cost(torch.tensor([[0]]), torch.tensor([[1]]))[0, 0, 0].item()  # good -> great
    assert D[0, 2].item() == pytest.approx(min(c, 2 * cost.gap_cost) + cost.gap_cost)
    assert math.isfinite(D.sum().item())


def test_sst_words_are_covered_by_the_shipped_glove_subset():
    # Guards the tree reading against the GloVe vocabulary (GloVe 6B is uncased; PTB bracket
    # escapes must be mapped): at the time of writing 0.9% of the word tokens are missing.
    from bedl_torch import datasets

    X, y = datasets.load("sentiment")
    words, vectors = datasets.load_glove_subset()
    vocab = set(words)
    tokens = [t.labels[i] for t in X for i in t.leaves()]
    assert all(isinstance(w, str) for w in tokens)
    missing = sum(1 for w in tokens if w not in vocab)
    assert missing / len(tokens) < 0.02
    for w in ("(", ")", "n't", "'s", "good", "bad"):
        assert w in vocab
    assert vectors.shape == (len(words), 50)

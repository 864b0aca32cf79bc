"""The cache of flattened collections (ops.encoding.flat_table): repeated calls on the same
strings, tuples or trees share one table; collections holding lists never do, so changing a
list in place is seen; the encodings follow the cost module."""
import torch

import bedl_torch as bt
from bedl_torch.ops.encoding import flat_table


def test_same_strings_share_one_table_and_lists_do_not():
    X = ["abc", "abd", "bcd"]
    assert flat_table(X, "X") is flat_table(list(X), "X")
    assert flat_table(X, "X") is not flat_table(X, "Y")
    trees = [bt.Tree(["a", "b"], [[1], []]), bt.Tree(["c"], [[]])]
    assert flat_table(trees, "X") is flat_table([t for t in trees], "X")
    seqs = [["a", "b"], ["c"]]
    assert flat_table(seqs, "X") is not flat_table(seqs, "X")


def test_a_list_changed_in_place_gives_new_distances():
    X = [["a", "b", "c"], ["a", "b"]]
    cost = bt.UnitCost(list("abcd"))
    before = bt.pairwise_distances(X, cost=cost)
    X[1].append("d")  # the same list object, another sequence
    after = bt.pairwise_distances(X, cost=cost)
    assert before[0, 1] == 1 and after[0, 1] == 1 and after[1, 1] == 0
    X[1][2] = "c"
    assert bt.pairwise_distances(X, cost=cost)[0, 1] == 0


def test_encodings_follow_the_cost_module():
    X, Y = ["ab", "ba"], ["ab"]
    small = bt.UnitCost(["a", "b"])
    large = bt.EuclideanCost(["b", "a", "c"], embedding=torch.tensor(
        [[0.0, 2.0], [1.0, 0.0], [0.0, 0.0]], dtype=torch.float64))
    for _ in range(2):  # the second round reads the cached tables
        assert torch.equal(bt.pairwise_distances(X, Y, small),
                           torch.tensor([[0.0], [2.0]], dtype=torch.float64))
        # (PairBatch flattens its pairs anew)
        expected = bt.PairBatch(X, Y * 2).distances(large).detach().view(2, 1)
        assert torch.equal(bt.pairwise_distances(X, Y, large).detach(), expected)

"""The cache of flattened collections (ops.encoding.flat_table): repeated calls on the same
strings, tuples or trees share one table; collections holding lists never do, so changing a
list in place is seen; the encodings follow the cost module."""
import pytest
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


class _CachedTable(bt.UnitCost):
    """Unit costs whose table is one tensor kept across calls (as UnitCost's own)."""

    def symbol_table(self):
        if "_kept" not in self.__dict__:
            self.__dict__["_kept"] = super().symbol_table().clone()
        return self.__dict__["_kept"]


def test_a_kept_table_written_in_place_is_checked_again():
    X, Y = ["ab", "ba"], ["ab"]
    cost = _CachedTable(["a", "b"])
    for _ in range(2):  # the second call finds the table checked and unchanged
        assert torch.equal(bt.pairwise_distances(X, Y, cost), torch.tensor([[0.0], [2.0]], dtype=torch.float64))
    table = cost.symbol_table()
    table[0, 1] = table[1, 0] = 0.25  # a write advances the tensor's version counter
    assert torch.equal(bt.pairwise_distances(X, Y, cost), torch.tensor([[0.0], [0.5]], dtype=torch.float64))
    table[0, 1] = float("nan")
    with pytest.raises(ValueError, match=r"_CachedTable.symbol_table\(\) must be finite"):
        bt.pairwise_distances(X, Y, cost)


def test_a_forward_patched_after_calls_is_used():
    """The table shortcut is taken only while the class defining it also defines forward; a
    forward patched onto the class later is seen at the next call."""

    class Patched(bt.UnitCost):
        pass

    X, Y = ["ab", "ba"], ["ab"]
    cost = Patched(["a", "b"])
    assert torch.equal(bt.pairwise_distances(X, Y, cost), torch.tensor([[0.0], [2.0]], dtype=torch.float64))

    def doubled(self, x_idx, y_idx):
        return 2.0 * bt.UnitCost.forward(self, x_idx, y_idx)

    Patched.forward = doubled
    assert torch.equal(bt.pairwise_distances(X, Y, cost), torch.tensor([[0.0], [4.0]], dtype=torch.float64))


def test_alternating_cost_modules_and_unknown_modes_get_their_own_encodings():
    X, Y = ["abz", "ba"], ["ab"]
    small, other = bt.UnitCost(["a", "b"]), bt.UnitCost(["z", "b", "a"])
    for _ in range(2):
        # "z" is unknown to small: an error, or the gap with unknown="gap" (whose deletion
        # costs c(gap, gap) = 0)
        with pytest.raises(ValueError, match="'z'"):
            bt.pairwise_distances(X, Y, small)
        assert torch.equal(bt.pairwise_distances(X, Y, small, unknown="gap"),
                           torch.tensor([[0.0], [2.0]], dtype=torch.float64))
        assert torch.equal(bt.pairwise_distances(X, Y, other),
                           torch.tensor([[1.0], [2.0]], dtype=torch.float64))


def test_only_small_blocks_keep_their_pair_indices_and_batches(monkeypatch):
    """Repeated small calls share their pair indices and batch; a whole matrix's are built per
    call and dropped with it (caching them kept hundreds of MB after the call). Both give the
    same pairs: row-major, ``i <= j`` for a triangle."""
    from bedl_torch.ops import pairwise

    monkeypatch.setattr(pairwise, "_CACHED_PAIRS", 12)
    for rows, cols, tri in ((3, 4, False), (4, 4, True), (4, 5, False), (5, 5, True)):
        ii, jj = pairwise.pair_indices(rows, cols, tri)
        want = [(i, j) for i in range(rows) for j in range(cols) if not tri or i <= j]
        assert list(zip(ii.tolist(), jj.tolist())) == want
        again = pairwise.pair_indices(rows, cols, tri)
        assert (again[0] is ii) == (rows * cols <= 12)
    batches = []
    real = pairwise.PairBatch.from_tables
    monkeypatch.setattr(pairwise.PairBatch, "from_tables",
                        classmethod(lambda cls, *a: batches.append(len(a[2])) or real(*a)))
    small, large = ["ab", "b", "ba"], ["ab", "b", "ba", "abb", "a"]  # 6 and 15 pairs of i <= j
    cost = bt.EuclideanCost(["a", "b"], embedding=torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64))
    for X in (small, large):
        batches.clear()
        first, second = bt.pairwise_distances(X, cost=cost), bt.pairwise_distances(X, cost=cost)
        assert torch.equal(first, second)
        assert first[0, 2] == first[2, 0] == 2.0  # "ab" -> "ba": delete a, insert a (two swaps cost 2 sqrt 2)
        assert batches == ([6] if X is small else [15, 15])


def test_default_unit_costs_are_one_module_per_alphabet_and_keep_codes():
    """Calls without a cost on the same collections get one default module (Y's labels first),
    so a collection's codes are encoded once; a query with a new label gets another module; a
    module moved or grown in place is not handed out again. The answers are those of unit costs
    over the labels in X's order (the order changes no distance)."""
    from bedl_torch.ops.pairwise import default_unit_cost

    Y = [bt.Tree(["a", "b", "c"], [[1, 2], [], []]), bt.Tree(["b", "c"], [[1], []]), bt.Tree(["d"], [[]])]
    q, new = [bt.Tree(["c", "a"], [[1], []])], [bt.Tree(["e", "a"], [[1], []])]
    cost = default_unit_cost(q, Y)
    assert list(cost.alphabet) == ["a", "b", "c", "d"]
    assert default_unit_cost([bt.Tree(["d"], [[]])], Y) is cost
    other = default_unit_cost(new, Y)
    assert other is not cost and list(other.alphabet) == ["a", "b", "c", "d", "e"]
    table = flat_table(Y, "Y")
    codes = table.flat_labels(cost, "error")
    assert table.flat_labels(default_unit_cost(q, Y), "error") is codes  # not encoded again
    for X in (q, new):
        want = bt.pairwise_distances(X, Y, bt.UnitCost(bt.labels.alphabet_of(X, Y)))
        assert torch.equal(bt.pairwise_distances(X, Y), want)
        d, i = bt.kneighbors(X, Y, k=3)
        assert torch.equal(d, want.sort(dim=1, stable=True).values)
    cost.to(torch.float32)
    assert default_unit_cost(q, Y) is not cost
    grown = default_unit_cost(q, Y)
    grown.alphabet.append("z")
    fresh = default_unit_cost(q, Y)
    assert fresh is not grown and list(fresh.alphabet) == ["a", "b", "c", "d"]

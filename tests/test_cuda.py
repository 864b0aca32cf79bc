"""Costs on a CUDA device: results come back there, gradients flow into CUDA parameters.

The dynamic programs run on the CPU (one transfer per batch); these tests check that every
public op accepts CUDA costs and parameters and agrees with the same computation on the CPU.
They skip without a GPU.
"""
import random

import pytest
import torch

import bedl_torch
from oracles import random_tree

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _trees(count, seed):
    rng = random.Random(seed)
    return [bedl_torch.Tree(*random_tree(rng.randint(1, 15), "abcd", rng.randrange(10**6))) for _ in range(count)]


def _embedding(seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(4, 3, generator=gen, dtype=torch.float64)


def test_single_pair_ops_on_cuda_costs():
    x, y = _trees(2, 0)
    gen = torch.Generator().manual_seed(1)
    C = torch.rand(len(x) + 1, len(y) + 1, generator=gen, dtype=torch.float64)
    Cg = C.cuda().requires_grad_(True)
    d, P = bedl_torch.coopt_matrix(x, y, Cg)
    assert d.device.type == "cuda" and P.device.type == "cuda"
    d_cpu, P_cpu = bedl_torch.coopt_matrix(x, y, C)
    assert float(d) == float(d_cpu)
    assert torch.equal(P.cpu(), P_cpu)
    d.backward()
    assert Cg.grad.device.type == "cuda"
    assert torch.equal(Cg.grad.cpu(), P_cpu)
    pseudo = bedl_torch.pseudo_edit_distance(x, y, Cg, Cg.detach() * 2)
    assert pseudo.device.type == "cuda"


@pytest.mark.parametrize("mode", ["exact", "pseudo"])
def test_pairwise_distances_and_gradient_on_cuda(mode):
    trees = _trees(6, 2)
    emb = _embedding(3)
    cpu = bedl_torch.EuclideanCost(list("abcd"), emb)
    gpu = bedl_torch.EuclideanCost(list("abcd"), emb, device="cuda")
    D_cpu = bedl_torch.pairwise_distances(trees, cost=cpu, mode=mode)
    D_gpu = bedl_torch.pairwise_distances(trees, cost=gpu, mode=mode)
    assert D_gpu.device.type == "cuda"
    torch.testing.assert_close(D_gpu.cpu(), D_cpu, rtol=1e-12, atol=1e-12)
    D_cpu.sum().backward()
    D_gpu.sum().backward()
    assert gpu.embedding.grad.device.type == "cuda"
    torch.testing.assert_close(gpu.embedding.grad.cpu(), cpu.embedding.grad, rtol=1e-10, atol=1e-10)


def test_padded_batch_on_cuda_matches_cpu():
    trees = _trees(8, 4)
    batch = bedl_torch.PairBatch(trees[:4], trees[4:])
    cost = bedl_torch.EuclideanCost(list("abcd"), _embedding(5), device="cuda")
    costs = batch.costs(cost)
    assert costs.device.type == "cuda"
    d = batch.distances(costs)
    d.sum().backward()
    d_cpu = batch.distances(costs.detach().cpu())
    torch.testing.assert_close(d.cpu(), d_cpu, rtol=0, atol=0)
    assert cost.embedding.grad.device.type == "cuda"


def test_unit_cost_on_cuda():
    trees = _trees(5, 6)
    unit_gpu = bedl_torch.UnitCost(list("abcd"), device="cuda")
    D = bedl_torch.pairwise_distances(trees, cost=unit_gpu)
    assert D.device.type == "cuda"
    assert torch.equal(D.cpu(), bedl_torch.pairwise_distances(trees))


def test_cosine_cost_on_cuda():
    from bedl_torch.pretrained import CosineCost

    words = ["good", "bad", "film", None]
    gen = torch.Generator().manual_seed(7)
    vectors = torch.randn(3, 4, generator=gen, dtype=torch.float64)
    seqs = [["good", "film"], ["bad", None, "film"], ["film"]]
    cpu = CosineCost(words[:3], vectors)
    gpu = CosineCost(words[:3], vectors).to("cuda")
    D_cpu = bedl_torch.pairwise_distances(seqs, cost=cpu)
    D_gpu = bedl_torch.pairwise_distances(seqs, cost=gpu)
    assert D_gpu.device.type == "cuda"
    torch.testing.assert_close(D_gpu.cpu(), D_cpu, rtol=1e-12, atol=1e-12)
    D_gpu.sum().backward()
    D_cpu.sum().backward()
    grads = [p.grad for p in gpu.parameters() if p.grad is not None]
    assert grads and all(g.device.type == "cuda" and torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_training_loop_steps_on_cuda_match_cpu(kind, monkeypatch):
    """Several forward/backward steps, as in a training loop: the first backward recomputes
    the per-pair lists, later forwards keep them (the loss weights every pair), and a sparse
    loss after that recomputes again. Every step's gradient on CUDA matches the CPU's."""
    from bedl_torch import ops

    if kind == "tree":
        items = _trees(7, 8)
    else:
        rng = random.Random(9)
        items = [[rng.choice("abcd") for _ in range(rng.randint(1, 12))] for _ in range(7)]
    emb = _embedding(10)
    cpu = bedl_torch.EuclideanCost(list("abcd"), emb)
    gpu = bedl_torch.EuclideanCost(list("abcd"), emb, device="cuda")
    weights = torch.rand(7, 7, generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    sparse = torch.zeros(7, 7, dtype=torch.float64)
    sparse[:, 0] = 1.0
    from_lists = []
    real = bedl_torch._ext.weighted_pair_sums_cpu
    monkeypatch.setattr(bedl_torch._ext, "weighted_pair_sums_cpu", lambda *a: from_lists.append(1) or real(*a))
    for step, w in enumerate([weights, weights, weights, sparse]):
        results = []
        for cost in (cpu, gpu):
            cost.zero_grad()
            D = bedl_torch.pairwise_distances(items, cost=cost)
            (D * w.to(D.device)).sum().backward()
            assert D.device == cost.embedding.device and cost.embedding.grad.device == D.device
            results.append((D.detach().cpu(), cost.embedding.grad.cpu()))
        torch.testing.assert_close(results[1][0], results[0][0], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(results[1][1], results[0][1], rtol=1e-10, atol=1e-10)
        # each backward's share of nonzero weights decides whether the next forward keeps lists
        assert ops.batch.dense_backward[gpu] is (w is weights)
    assert len(from_lists) == 2 * 3  # steps 1, 2 and 3 backward from lists, on both devices

"""Command line: ``python -m bedl_torch pairwise`` (see :mod:`bedl_torch.__main__`)."""
from __future__ import annotations

import os
import sys
import time

import torch.distributed as dist

from ..tree import Tree
from .matrix import pairwise_distances
from .npy_file import finished_tiles

__all__ = ["add_cli_parser", "run_cli"]


def add_cli_parser(subparsers) -> None:
    """Add the ``pairwise`` subcommand to the ``python -m bedl_torch`` parser."""
    p = subparsers.add_parser(
        "pairwise", help="a pairwise distance matrix into a .npy file (torchrun for many ranks)",
        description="Write the edit-distance matrix of a data set into a .npy file, its tiles "
                    "shared among the processes that torchrun starts (gloo), or in one process "
                    "without torchrun. Ctrl-C leaves a file that --resume finishes.")
    p.add_argument("input", help="a data set name of bedl_torch.datasets.load (strings, "
                                 "minipalindrome, sorting, cystic, leukemia, sentiment) or a "
                                 "JSON-lines file with one tree (Tree.to_json()) per line")
    p.add_argument("--out", required=True, help="the .npy file (on a filesystem every rank "
                                                "shares)")
    p.add_argument("--cost", choices=("unit", "glove"), default="unit",
                   help="unit costs (default) or cosine costs on GloVe word vectors (PCA to 95%% "
                        "variance, as the experiment's initial sentiment metric); sentiment "
                        "trees then become their word sequences (equal distances)")
    p.add_argument("--resume", action="store_true",
                   help="keep the tiles a previous run of the same command finished")
    p.add_argument("--tile-size", type=int, default=None,
                   help="objects per tile side (default: about four tiles per rank a side, "
                        "100 to 1024)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _read_input(name: str) -> list:
    from .. import datasets

    if name.lower() in datasets.NAMES:
        X, _ = datasets.load(name)
        return list(X)
    if not os.path.isfile(name):
        raise ValueError(f"{name!r} is neither a data set ({', '.join(datasets.NAMES)}) nor a file")
    trees = []
    with open(name, "r", encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                trees.append(Tree.from_json(line))
            except (ValueError, TypeError, KeyError) as error:
                raise ValueError(f"{name}, line {number}: not a tree in the Tree.to_json() "
                                 f"format ({error})") from None
    return trees


def _glove_cost(X: list, sentiment: bool):
    """GloVe cosine costs over the objects' words, as the experiment's sentiment metric (its
    PCA fitted on all of them); SST trees are replaced by their word sequences."""
    from ..evaluation.protocol.data import SentimentCosts, leaf_sequence

    if sentiment:
        X = [leaf_sequence(t) for t in X]
    cost, _ = SentimentCosts().make(X, X)
    return X, cost


def run_cli(args) -> int:
    """``python -m bedl_torch pairwise``: under torchrun (``WORLD_SIZE`` set) a gloo process
    group from its environment, else one process. Exit code 130 after Ctrl-C."""
    own_group = False
    if "WORLD_SIZE" in os.environ and "RANK" in os.environ and not dist.is_initialized():
        dist.init_process_group(backend="gloo")
        own_group = True
    rank = dist.get_rank() if dist.is_initialized() else 0
    try:
        X = _read_input(args.input)
        cost = None
        if args.cost == "glove":
            X, cost = _glove_cost(X, args.input.lower() == "sentiment")
        start = time.perf_counter()
        D = pairwise_distances(X, cost=cost, out=args.out, resume=args.resume,
                               tile_size=args.tile_size, progress=not args.no_progress)
        if rank == 0:
            world = dist.get_world_size() if dist.is_initialized() else 1
            print(f"{args.out}: {D.shape[0]} x {D.shape[1]} {D.dtype} in "
                  f"{time.perf_counter() - start:.1f} s on {world} process(es)")
        return 0
    except (ValueError, TypeError, OSError) as error:
        print(f"python -m bedl_torch pairwise: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if rank == 0:
            done = len(finished_tiles(args.out))
            print(f"\ninterrupted: {done} tiles of {args.out} finished; run the same command with "
                  "--resume to finish it", file=sys.stderr)
        return 130
    finally:
        if own_group and dist.is_initialized():
            dist.destroy_process_group()

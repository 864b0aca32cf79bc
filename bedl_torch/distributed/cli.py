"""Command line: ``python -m bedl_torch pairwise`` and ``python -m bedl_torch neighbors`` (see
:mod:`bedl_torch.__main__`)."""
from __future__ import annotations

import os
import pickle
import sys
import time
from typing import Optional

import numpy as np
import torch.distributed as dist

from ..tree import Tree
from .matrix import kneighbors, pairwise_distances, radius_neighbors
from .npy_file import finished_tiles

__all__ = ["add_cli_parser", "run_cli"]

_INPUT_HELP = ("a data set name of bedl_torch.datasets.load (strings, minipalindrome, sorting, "
               "cystic, leukemia, sentiment) or a JSON-lines file with one tree (Tree.to_json()) "
               "per line")
_COST_HELP = ("unit costs (default) or cosine costs on GloVe word vectors (PCA to 95%% variance, "
              "as the experiment's initial sentiment metric); sentiment trees then become their "
              "word sequences (equal distances)")
_MODEL_HELP = ("the learned costs of a BEDL model saved with BEDL.save (instead of --cost): the "
               "distances of its pairwise_distances; labels not seen in training are an error "
               "unless it was fitted with unknown='origin'")


def _add_cost_arguments(p) -> None:
    costs = p.add_mutually_exclusive_group()
    costs.add_argument("--cost", choices=("unit", "glove"), default="unit", help=_COST_HELP)
    costs.add_argument("--model", metavar="PATH", help=_MODEL_HELP)


def add_cli_parser(subparsers) -> None:
    """Add the ``pairwise`` and ``neighbors`` subcommands to the ``python -m bedl_torch`` parser."""
    _add_pairwise_parser(subparsers)
    _add_neighbors_parser(subparsers)


def _add_neighbors_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "neighbors", help="exact k nearest neighbours or range search into a .npz file, without "
                          "the whole matrix (torchrun for many ranks)",
        description="Find every object's k nearest other objects (--k) or every pair within a "
                    "distance (--radius) of a data set, exactly, with the search engine of "
                    "bedl_torch.search (bounds prune the pairs; docs/search.md), its blocks of "
                    "query rows shared among the processes that torchrun starts (gloo), or in "
                    "one process without torchrun. Writes a .npz: distances and indices "
                    "(len(X), k) for --k; rows, cols and distances for --radius.")
    p.add_argument("input", help=_INPUT_HELP)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--k", type=int, help="neighbours per object (1 .. objects - 1)")
    what.add_argument("--radius", type=float, help="every pair at distance <= RADIUS")
    p.add_argument("--out", required=True, help="the .npz file that rank 0 writes")
    _add_cost_arguments(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_pairwise_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "pairwise", help="a pairwise distance matrix into a .npy file (torchrun for many ranks)",
        description="Write the edit-distance matrix of a data set into a .npy file, its tiles "
                    "shared among the processes that torchrun starts (gloo), or in one process "
                    "without torchrun. Ctrl-C leaves a file that --resume finishes.")
    p.add_argument("input", help=_INPUT_HELP)
    p.add_argument("--out", required=True, help="the .npy file (on a filesystem every rank "
                                                "shares)")
    _add_cost_arguments(p)
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


def _model_costs(path: str, X: list) -> dict:
    """``cost`` and ``unknown`` of the BEDL model saved at ``path`` for the objects X."""
    from ..learning.bedl import BEDL

    if not os.path.isfile(path):
        raise ValueError(f"--model {path!r}: no such file")
    try:
        model = BEDL.load(path)
    except (RuntimeError, ValueError, KeyError, EOFError, pickle.UnpicklingError) as error:
        # (torch.load's errors, and the state's own checks)
        raise ValueError(f"--model {path!r}: not a model saved with BEDL.save ({error})") from None
    return model.distance_kwargs(X)


def _out_problem(path: str) -> Optional[str]:
    """Why rank 0 could not write ``path`` later, or None: checked before a search of hours."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        return f"--out {path!r} is a folder"
    if not os.path.isdir(folder):
        return f"--out {path!r}: the folder {folder!r} does not exist"
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        return f"--out {path!r}: not writable"
    return None


def _check_out(path: str, rank: int) -> None:
    """ValueError on every rank where rank 0 could not write ``path`` (decided there and
    broadcast, so that no rank goes on into the search's collectives alone)."""
    problem = _out_problem(path) if rank == 0 else None
    if dist.is_initialized():
        box = [problem]
        dist.broadcast_object_list(box, src=0)
        problem = box[0]
    if problem is not None:
        raise ValueError(problem)


def _neighbors(args, X, costs: dict, rank: int, world: int) -> None:
    """``neighbors``: the search across the ranks; rank 0 writes the .npz and a summary line."""
    _check_out(args.out, rank)
    start = time.perf_counter()
    if args.k is not None:
        d, i, stats = kneighbors(X, k=args.k, progress=not args.no_progress, return_stats=True,
                                 **costs)
        arrays = dict(distances=d.numpy(), indices=i.numpy())
        what = f"{args.k} nearest of {len(X)} objects"
    else:
        r, c, v, stats = radius_neighbors(X, radius=args.radius, progress=not args.no_progress,
                                          return_stats=True, **costs)
        arrays = dict(rows=r.numpy(), cols=c.numpy(), distances=v.numpy())
        what = f"{len(r)} pairs within {args.radius:g} among {len(X)} objects"
    if rank == 0:
        with open(args.out, "wb") as f:  # keeps the name as given (np.savez would add .npz)
            np.savez(f, **arrays)
        share = stats["exact"] / max(stats["pairs"], 1)
        print(f"{args.out}: {what} in {time.perf_counter() - start:.1f} s on {world} "
              f"process(es); {share:.2%} of the {stats['pairs']} entries needed an exact distance")


def run_cli(args) -> int:
    """``python -m bedl_torch pairwise`` or ``neighbors``: under torchrun (``WORLD_SIZE`` set) a
    gloo process group from its environment, else one process. Exit code 130 after Ctrl-C."""
    own_group = False
    if "WORLD_SIZE" in os.environ and "RANK" in os.environ and not dist.is_initialized():
        dist.init_process_group(backend="gloo")
        own_group = True
    rank = dist.get_rank() if dist.is_initialized() else 0
    try:
        X = _read_input(args.input)
        costs = {}
        if args.model is not None:
            costs = _model_costs(args.model, X)
        elif args.cost == "glove":
            X, costs["cost"] = _glove_cost(X, args.input.lower() == "sentiment")
        world = dist.get_world_size() if dist.is_initialized() else 1
        if args.command == "neighbors":
            _neighbors(args, X, costs, rank, world)
            return 0
        start = time.perf_counter()
        D = pairwise_distances(X, out=args.out, resume=args.resume, tile_size=args.tile_size,
                               progress=not args.no_progress, **costs)
        if rank == 0:
            print(f"{args.out}: {D.shape[0]} x {D.shape[1]} {D.dtype} in "
                  f"{time.perf_counter() - start:.1f} s on {world} process(es)")
        return 0
    except (ValueError, TypeError, OSError) as error:
        print(f"python -m bedl_torch {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if args.command == "neighbors":
            return 130
        if rank == 0:
            done = len(finished_tiles(args.out))
            print(f"\ninterrupted: {done} tiles of {args.out} finished; run the same command with "
                  "--resume to finish it", file=sys.stderr)
        return 130
    finally:
        if own_group and dist.is_initialized():
            dist.destroy_process_group()

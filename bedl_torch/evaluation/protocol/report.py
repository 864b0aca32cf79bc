"""Reporting of the protocol: the result record and its summary, the paper-shaped Markdown
table, results.json, the embedding plot and the progress display."""
from __future__ import annotations

import json
import math
import pathlib
import platform
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from .config import METRIC_TITLES

__all__ = ["ExperimentResult", "format_table", "write_results", "embedding_of",
           "embedding_pca", "save_embedding_plot", "Progress"]


@dataclass
class ExperimentResult:
    """Everything a run produced: one record per data set, classifier, metric and fold (test
    error, runtime, chosen hyper-parameter), notes, per-fold information, the last learned
    embedding (for the plot) and the environment (machine, commit, sessions of the run)."""

    config: dict
    records: List[dict] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    folds_done: int = 0
    interrupted: bool = False
    embedding: Optional[dict] = None  # {"labels": [...], "vectors": ndarray, "title": str}
    fold_info: List[dict] = field(default_factory=list)
    environment: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict) -> "ExperimentResult":
        """The result that :meth:`to_json` (results.json) describes, without the embedding.

        Raises:
            ValueError: ``data`` lacks one of config, records, folds_done.
        """
        missing = [k for k in ("config", "records", "folds_done") if k not in data]
        if missing:
            raise ValueError(f"not an experiment's results.json: no {', '.join(missing)}")
        return cls(config=dict(data["config"]), records=list(data["records"]),
                   notes=list(data.get("notes", [])), folds_done=int(data["folds_done"]),
                   interrupted=bool(data.get("interrupted", False)),
                   fold_info=list(data.get("fold_info", [])),
                   environment=dict(data.get("environment") or {}))

    def summary(self) -> Dict[str, Dict[str, dict]]:
        """``{classifier or "runtime": {metric: {"mean", "std", "n"}}}``; errors in %."""
        out: Dict[str, Dict[str, dict]] = {}
        metrics = self.config["metrics"]
        for clf in self.config["classifiers"]:
            out[clf] = {}
            for m in metrics:
                vals = [100.0 * r["error"] for r in self.records
                        if r["classifier"] == clf and r["metric"] == m and r["error"] is not None]
                out[clf][m] = _stats(vals)
        out["runtime"] = {}
        for m in metrics:
            seen = {}
            for r in self.records:
                if r["metric"] == m and r["runtime_s"] is not None:
                    seen[r["fold"]] = r["runtime_s"]
            out["runtime"][m] = _stats(list(seen.values()))
        return out

    def table(self) -> str:
        """:func:`format_table` of this result."""
        return format_table(self)

    def to_json(self) -> dict:
        """The content of results.json (numpy values still to be converted)."""
        return {"dataset": self.config["dataset"], "config": self.config, "notes": self.notes,
                "folds_done": self.folds_done, "interrupted": self.interrupted,
                "summary": self.summary(), "table": self.table(), "fold_info": self.fold_info,
                "records": self.records,
                "environment": {"python": sys.version.split()[0],
                                "platform": platform.platform(), **self.environment}}


def _stats(vals):
    if not vals:
        return {"mean": None, "std": None, "n": 0}
    v = np.asarray(vals, dtype=float)
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
            "n": int(len(v))}


def format_table(result: ExperimentResult) -> str:
    """Markdown table shaped like the paper's: rows = classifiers and the metric-learning
    runtime, columns = metrics; test error in % as mean +- std over the folds."""
    summ = result.summary()
    metrics = result.config["metrics"]
    head = "| " + result.config["dataset"] + " | " + " | ".join(
        METRIC_TITLES[m] for m in metrics) + " |"
    lines = [head, "|---" * (len(metrics) + 1) + "|"]
    for clf in result.config["classifiers"]:
        cells = []
        for m in metrics:
            s = summ[clf][m]
            cells.append("-" if s["n"] == 0 else f"{s['mean']:.1f} +- {s['std']:.1f}")
        lines.append(f"| {clf} | " + " | ".join(cells) + " |")
    cells = []
    for m in metrics:
        s = summ["runtime"][m]
        if m == "initial" or s["n"] == 0:
            cells.append("-")
        else:
            cells.append(f"{s['mean']:.3g} +- {s['std']:.2g}")
    lines.append("| runtime [s] | " + " | ".join(cells) + " |")
    return "\n".join(lines)


class Progress:
    """tqdm when installed (and wanted), else one line per step on stderr."""

    def __init__(self, total, desc, enabled=True, done=0):
        self.enabled = enabled
        self.bar = None
        self.n = done
        self.total = total
        self.desc = desc
        if enabled:
            try:  # optional dependency: without it, plain lines on stderr
                from tqdm.auto import tqdm

                self.bar = tqdm(total=total, desc=desc, file=sys.stderr, leave=True,
                                initial=done)
            except ImportError:
                self.bar = None

    def stage(self, text):
        """Show what the current fold is doing."""
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=True)
        else:
            print(f"[{self.desc}] fold {self.n + 1}/{self.total}: {text}", file=sys.stderr,
                  flush=True)

    def step(self):
        """One fold done."""
        self.n += 1
        if self.bar is not None:
            self.bar.update(1)
        elif self.enabled:
            print(f"[{self.desc}] fold {self.n}/{self.total} done", file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def embedding_of(model, metric, fold) -> Optional[dict]:
    """Symbol vectors of a fitted BEDL model's cost, for the PCA plot (``None`` for a cost
    module without vectors)."""
    cost = getattr(model, "cost_", None)
    if cost is None:
        return None
    if hasattr(cost, "embedding"):
        V = cost.embedding.detach().cpu().double().numpy()
        V = np.vstack([V, np.zeros((1, V.shape[1]))])
        labels = [str(s) for s in cost.alphabet] + ["(gap)"]
    elif hasattr(cost, "mapped_vectors"):
        V = cost.mapped_vectors().detach().cpu().double().numpy()[:cost.n_words]
        labels = [str(s) for s in cost.alphabet[:cost.n_words]]
    else:
        return None
    return {"labels": labels, "vectors": V, "title": f"{metric}, fold {fold}"}


def embedding_pca(vectors: np.ndarray, n_components: int = 2) -> np.ndarray:
    """Project rows onto their first principal components (SVD of the centred matrix)."""
    V = np.asarray(vectors, dtype=np.float64)
    Vc = V - V.mean(0, keepdims=True)
    if Vc.shape[1] == 0 or not np.any(Vc):
        return np.zeros((len(V), n_components))
    _, _, Wt = np.linalg.svd(Vc, full_matrices=False)
    out = Vc @ Wt[:n_components].T
    if out.shape[1] < n_components:
        out = np.hstack([out, np.zeros((len(V), n_components - out.shape[1]))])
    return out


def save_embedding_plot(embedding: dict, path, max_points: int = 400, seed: int = 0) -> None:
    """PNG of the 2-D PCA of the learned symbol vectors (matplotlib, Agg backend)."""
    import matplotlib  # optional and slow to import: only when a plot is written

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    V, labels = embedding["vectors"], embedding["labels"]
    idx = np.arange(len(V))
    if len(idx) > max_points:
        idx = np.sort(np.random.default_rng(seed).choice(idx, max_points, replace=False))
    xy = embedding_pca(V[idx])
    fig, ax = plt.subplots(figsize=(6, 5))
    ax.scatter(xy[:, 0], xy[:, 1], s=18, alpha=0.7)
    if len(idx) <= 80:
        # points that coincide (e.g. symbols the metric merged) share one annotation
        scale = max(float(np.abs(xy).max()), 1e-12)
        groups: Dict[tuple, list] = {}
        for (px, py), k in zip(xy, idx):
            key = (round(px / scale, 3), round(py / scale, 3))
            groups.setdefault(key, [px, py, []])[2].append(str(labels[k]))
        for px, py, names in groups.values():
            ax.annotate(", ".join(names), (px, py), fontsize=8, xytext=(3, 3),
                        textcoords="offset points")
    ax.set_xlabel("PC 1")
    ax.set_ylabel("PC 2")
    ax.set_title(f"PCA of the learned embedding ({embedding.get('title', '')})")
    # bbox_inches="tight" instead of tight_layout(): the latter warns for figures
    # with long symbol labels and then does nothing.
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def write_results(result: ExperimentResult, out_dir) -> dict:
    """Write ``results.json`` (and ``embedding.png`` when there is an embedding) into
    ``out_dir`` (created); returns ``{"results": path, "embedding": path}``. The JSON file is
    replaced atomically, so an interrupted run never leaves half a file."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = result.to_json()
    paths = {"results": str(out / "results.json")}
    if result.embedding is not None:
        try:
            save_embedding_plot(result.embedding, out / "embedding.png")
            paths["embedding"] = str(out / "embedding.png")
        except Exception as exc:  # a plot must not lose the results
            result.notes.append(f"embedding plot failed: {type(exc).__name__}: {exc}")
            data = result.to_json()
    tmp = out / "results.json.tmp"
    tmp.write_text(json.dumps(_jsonable(data), indent=1))
    tmp.replace(out / "results.json")
    return paths


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        v = float(obj)
        return v if math.isfinite(v) else None
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    return obj

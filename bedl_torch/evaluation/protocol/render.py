"""The paper table in Markdown, rendered from the compact results of :mod:`.export`: per data
set the command, machine, wall-clock time and folds done, bedl_torch's test errors beside the
paper's, the chosen hyper-parameters, the cells that differ from the paper by more than the
paper's standard deviation, and hand-written explanations read from a notes file (kept across
renders; the rendered table itself is never edited)."""
from __future__ import annotations

import re
from collections import Counter
from typing import Dict, List, Optional, Tuple

import numpy as np

from .config import CLASSIFIERS, METRIC_TITLES, PAPER_FOLDS, ExperimentConfig, full_grid, quick_grid
from .paper import PAPER_CITATION, PAPER_RUNTIME_S, paper_error, paper_metric_of

__all__ = ["DATASET_TITLES", "cell_stats", "runtime_stats", "flagged_cells", "command_for",
           "parse_notes", "render_paper_table"]

DATASET_TITLES = {"strings": "Strings", "minipalindrome": "MiniPalindrome",
                  "sorting": "Sorting", "cystic": "Cystic", "leukemia": "Leukemia",
                  "sentiment": "Sentiment"}
PAPER_TITLES = {"initial": "paper initial", "gesl": "paper GESL", "bedl": "paper BEDL"}
#: the hyper-parameter rows of the chosen-values table
PARAM_TITLES = {"KNN": "KNN: neighbours", "MGLVQ": "MGLVQ: prototypes per class K",
                "SVM": "SVM: bandwidth", "goodness": "goodness: lambda"}


# --------------------------------------------------------------------------- statistics
def _stats(values) -> Optional[Tuple[float, float, int]]:
    """(mean, sample std, n) of the values, None for none."""
    if not values:
        return None
    v = np.asarray(values, dtype=float)
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0, len(v)


def cell_stats(run: dict, classifier: str, metric: str) -> Optional[Tuple[float, float, int]]:
    """Test error in % of one classifier on one metric: (mean, std, folds) over the folds with
    a result, None when there is none."""
    return _stats([100.0 * r["error"] for r in run["records"]
                   if r["classifier"] == classifier and r["metric"] == metric
                   and r.get("error") is not None])


def runtime_stats(run: dict, metric: str) -> Optional[Tuple[float, float, int]]:
    """Metric-learning seconds per fold: (mean, std, folds), None when there is none."""
    per_fold = {r["fold"]: r["runtime_s"] for r in run["records"]
                if r["metric"] == metric and r.get("runtime_s") is not None}
    return _stats(list(per_fold.values()))


def flagged_cells(dataset: str, run: dict) -> List[dict]:
    """The cells whose mean differs from the paper's mean by more than the paper's std:
    ``{"classifier", "metric", "ours": (mean, std, n), "paper": (mean, std), "difference"}``
    in table order."""
    out = []
    for clf in _classifiers(run):
        for metric in run["config"]["metrics"]:
            paper = paper_error(dataset, clf, metric)
            ours = cell_stats(run, clf, metric)
            if paper is None or ours is None:
                continue
            diff = ours[0] - paper[0]
            if abs(diff) > paper[1] + 1e-9:
                out.append({"classifier": clf, "metric": metric, "ours": ours, "paper": paper,
                            "difference": diff})
    return out


def _classifiers(run: dict) -> List[str]:
    return [c for c in CLASSIFIERS if c in run["config"]["classifiers"]]


# --------------------------------------------------------------------------- text pieces
def _pm(stats, digits=1) -> str:
    if stats is None:
        return "-"
    return f"{stats[0]:.{digits}f} +- {stats[1]:.{digits}f}"


def _seconds(stats) -> str:
    if stats is None:
        return "-"
    return f"{stats[0]:.3g} +- {stats[1]:.2g}"


def _duration(seconds) -> str:
    if seconds is None:
        return "unknown (no end recorded)"
    seconds = float(seconds)
    if seconds >= 3600:
        return f"{seconds:.0f} s ({seconds / 3600:.2f} h)"
    if seconds >= 60:
        return f"{seconds:.0f} s ({seconds / 60:.1f} min)"
    return f"{seconds:.1f} s"


def _value(v) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def command_for(config: dict) -> str:
    """The ``python -m bedl_torch experiment`` command that computes what ``config`` (a
    resolved configuration as in results.json) computes; what no option can say is added as
    a remark in parentheses."""
    ds = config["dataset"]
    default = ExperimentConfig(ds, quick=bool(config.get("quick"))).resolved()
    parts = ["python -m bedl_torch experiment", ds]
    remarks = []
    if config.get("folds") != default.folds:
        parts.append(f"--folds {config['folds']}")
    if config.get("inner_folds") != default.inner_folds:
        parts.append(f"--inner-folds {config['inner_folds']}")
    if config.get("quick"):
        parts.append("--quick")
    if config.get("seed", 0) != 0:
        parts.append(f"--seed {config['seed']}")
    if list(config.get("metrics", [])) != list(default.metrics):
        parts.append("--metrics " + " ".join(config["metrics"]))
    if list(config.get("classifiers", [])) != list(default.classifiers):
        parts.append("--classifiers " + " ".join(config["classifiers"]))
    if config.get("train_sample") != default.train_sample:
        if config.get("train_sample") is None:
            remarks.append("no training sample")
        else:
            parts.append(f"--train-sample {config['train_sample']}")
    grid = config.get("grid") or {}
    base = (quick_grid() if config.get("quick") else full_grid()).__dict__
    options = {"beta_factor": "--beta-factors", "gesl_factor": "--gesl-factors",
               "bandwidth": "--bandwidths"}
    for key, values in grid.items():
        if list(values) == list(base.get(key, [])):
            continue
        if key in options:
            parts.append(options[key] + " " + " ".join(f"{v:g}" for v in values))
        else:
            remarks.append(f"grid {key} {values}")
    bedl_options = dict(config.get("bedl_options") or {})
    if "prototype_candidates" in bedl_options:
        parts.append(f"--prototype-candidates {bedl_options.pop('prototype_candidates')}")
    if bedl_options != (default.bedl_options or {}):
        remarks.append(f"BEDL options {bedl_options}")
    if ds == "sentiment" and config.get("sentiment_leaves") is False:
        parts.append("--trees")
    if config.get("max_items") is not None:
        parts.append(f"--max-items {config['max_items']}")
    if int(config.get("n_jobs") or 1) > 1:
        parts.append(f"--jobs {config['n_jobs']}")
    text = " ".join(parts)
    return text + (f" (and {'; '.join(remarks)})" if remarks else "")


def parse_notes(text: Optional[str]) -> Tuple[str, Dict[str, str]]:
    """``(general, {dataset: text})`` from a notes file: a ``## Name`` heading whose first
    word is a data set's name (any case) starts that data set's notes; what comes before the
    first such heading, without a leading ``# title`` line, is general. HTML comments are
    left out."""
    if not text:
        return "", {}
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)  # comments are for the notes' editors
    general: List[str] = []
    sections: Dict[str, List[str]] = {}
    current = general
    lines = text.splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    names = {ds.lower(): ds for ds in PAPER_FOLDS}
    for line in lines:
        m = re.match(r"^##\s+(\w+)", line)
        if m and not line.startswith("###") and m.group(1).lower() in names:
            current = sections.setdefault(names[m.group(1).lower()], [])
            continue
        current.append(line)
    return "\n".join(general).strip(), {k: "\n".join(v).strip() for k, v in sections.items()}


def _short_commit(commit: str) -> str:
    """A git hash shortened to 12 digits (keeping a ``+dirty`` mark), other text as it is."""
    head, plus, rest = commit.partition("+")
    if re.fullmatch(r"[0-9a-f]{40}", head):
        return head[:12] + plus + rest
    return commit


def _machine(env: dict) -> str:
    sessions = env.get("sessions") or []
    commits = [s.get("commit") for s in sessions if s.get("commit")] or \
        ([env["commit"]] if env.get("commit") else [])
    cpu = env.get("cpu_model") or "unknown processor"
    nproc = env.get("nproc")
    text = cpu + (f", nproc {nproc}" if nproc else "")
    if env.get("platform"):
        text += f", {env['platform']}"
    if env.get("python"):
        text += f", Python {env['python']}"
    if env.get("torch"):
        text += f", torch {env['torch']}"
    unique = list(dict.fromkeys(_short_commit(c) for c in commits))
    if unique:
        text += "; commit " + ", ".join(f"`{c}`" for c in unique)
    return text


def _numeric_paths(env: dict) -> str:
    """The numerical libraries' paths and threads the run's sessions recorded (``numerics``):
    the variables that held them, or that the run predates the record."""
    texts = []
    for s in env.get("sessions") or [{}]:
        paths = s.get("numeric_paths")
        if not paths:
            text = ("not recorded (a run from before the protocol held the numerical libraries to "
                    "fixed paths: each library chose its own on that machine)")
        elif paths.get("mode") == "avx2":
            held = ", ".join(f"{k}={v}" for k, v in (paths.get("environment") or {}).items()
                             if k != "NPY_DISABLE_CPU_FEATURES")
            text = f"held to fixed paths ({held})"
        else:
            text = "native (each library chose its own: `--native-paths`)"
        if s.get("threads"):
            text += f", {s['threads']} threads"
        texts.append(text)
    return "; ".join(dict.fromkeys(texts))


def _loads(values) -> str:
    return ", ".join(f"{v:g}" for v in values) if values else "not recorded"


def _wall_clock(env: dict) -> List[str]:
    """The wall-clock lines: total, start and end, load averages; one line per session when
    the results come from several (a resumed run)."""
    sessions = env.get("sessions") or []

    def one(s):
        end = s.get("end")
        text = (f"{_duration(s.get('wall_s'))}, {s.get('start') or '?'} to {end}" if end else
                f"no end recorded (started {s.get('start') or '?'})")
        if "folds_after" in s and len(sessions) > 1:
            text += f", folds {s.get('folds_before', 0)} to {s['folds_after']}"
        return (text + f"; load averages (1/5/15 min) at start {_loads(s.get('load_start'))}, "
                f"at end {_loads(s.get('load_end'))}")

    if not sessions:
        return [f"- Wall-clock time: {_duration(env.get('wall_s'))}"]
    if len(sessions) == 1:
        return [f"- Wall-clock time: {one(sessions[0])}"]
    return [f"- Wall-clock time: {_duration(env.get('wall_s'))} in {len(sessions)} sessions:"] + \
        [f"  - {one(s)}" for s in sessions]


def _hyper_parameters(run: dict) -> List[str]:
    """Chosen hyper-parameters: per classifier and metric, and the metric learners' factor,
    as ``value (number of folds)`` sorted by value."""
    metrics = run["config"]["metrics"]
    head = "| chosen value (folds) | " + " | ".join(METRIC_TITLES[m] for m in metrics) + " |"
    lines = [head, "|---" * (len(metrics) + 1) + "|"]

    def cell(values):
        if not values:
            return "-"
        counts = Counter(values)
        return ", ".join(f"{_value(v)} ({n})" for v, n in sorted(counts.items()))

    for clf in _classifiers(run):
        cells = [cell([r["value"] for r in run["records"] if r["classifier"] == clf
                       and r["metric"] == m and r.get("value") is not None]) for m in metrics]
        lines.append(f"| {PARAM_TITLES[clf]} | " + " | ".join(cells) + " |")
    per_metric = []
    for m in metrics:
        factors = [info[m]["factor"] for info in run.get("fold_info", [])
                   if isinstance(info.get(m), dict) and "factor" in info[m]]
        per_metric.append(cell(factors) if m != "initial" else "-")
    if any(c != "-" for c in per_metric):
        lines.append("| metric learner: f in lambda or beta = 2 K m f | "
                     + " | ".join(per_metric) + " |")
    return lines


def _table(dataset: str, run: dict, flags: List[dict]) -> List[str]:
    """Errors per classifier and metric beside the paper's, and the runtime row."""
    metrics = list(run["config"]["metrics"])
    flagged = {(f["classifier"], f["metric"]) for f in flags}
    folds_done = run["folds_done"]
    columns: List[Tuple[str, Optional[str]]] = []  # (our metric, None) or (None, paper metric)
    for i, m in enumerate(metrics):
        columns.append((m, None))
        nxt = metrics[i + 1] if i + 1 < len(metrics) else None
        if nxt is None or paper_metric_of(nxt) != paper_metric_of(m):
            columns.append((None, paper_metric_of(m)))
    titles = [METRIC_TITLES[m] if m else PAPER_TITLES[p] for m, p in columns]
    lines = ["| classifier | " + " | ".join(titles) + " |",
             "|---" * (len(columns) + 1) + "|"]
    for clf in _classifiers(run):
        cells = []
        for m, p in columns:
            if m is not None:
                s = cell_stats(run, clf, m)
                text = _pm(s)
                if s is not None and s[2] < folds_done:
                    text += f" ({s[2]} folds)"
                if (clf, m) in flagged:
                    text += " (!)"
            else:
                paper = paper_error(dataset, clf, p)
                text = "-" if paper is None else _pm(paper)
            cells.append(text)
        lines.append(f"| {clf} | " + " | ".join(cells) + " |")
    cells = []
    for m, p in columns:
        if m is not None:
            cells.append("-" if m == "initial" else _seconds(runtime_stats(run, m)))
        else:
            paper = PAPER_RUNTIME_S.get(dataset, {}).get(p)
            cells.append("-" if paper is None else f"{paper[0]:.3g} +- {paper[1]:.2g}")
    lines.append("| runtime [s] | " + " | ".join(cells) + " |")
    return lines


def _folds_text(run: dict) -> str:
    cfg = run["config"]
    done, total = run["folds_done"], cfg["folds"]
    text = f"{done} of {total} folds"
    if done < total:
        text += " (partial: means and stds are over the completed folds)"
    return text


# --------------------------------------------------------------------------- the page
def render_paper_table(runs: Dict[str, dict], notes: Optional[str] = None,
                       command: Optional[str] = None, notes_name: str = "the notes file") -> str:
    """The Markdown page for ``{dataset: compact results}`` (see :func:`~.export.load_runs`);
    ``notes`` is the notes file's text (see :func:`parse_notes`), ``command`` the command that
    renders the page (printed at its top)."""
    general, per_dataset = parse_notes(notes)
    flags = {ds: flagged_cells(ds, run) for ds, run in runs.items()}
    out = ["# The paper's table, reproduced with bedl_torch", ""]
    generated = "Generated"
    if command:
        generated += f" by `{command}`"
    out += [generated + " from the per-fold results; do not edit this file by hand: "
            f"explanations go into {notes_name}, which the renderer includes.", "",
            f"Paper: {PAPER_CITATION}, table of test errors and metric-learning runtimes. "
            "Cells: test error in %, mean +- standard deviation over the outer folds "
            "(bedl_torch: sample std over the folds done); `runtime [s]`: metric-learning "
            "seconds per fold (the final fit on the training fold, without the nested "
            "search). The paper's BEDL column is BEDL trained in pseudo mode; both of "
            "bedl_torch's modes are compared with it. `(!)`: the mean differs from the paper's "
            "by more than the paper's standard deviation. `(n folds)`: fewer folds than done "
            "have a result (a metric failed on the others).", ""]
    out += ["## Overview", ""]
    if runs:
        out += ["| data set | folds | wall-clock | cells beyond the paper's std |",
                "|---|---|---|---|"]
    for ds, run in runs.items():
        env = run.get("environment") or {}
        out.append(f"| [{DATASET_TITLES.get(ds, ds)}](#{DATASET_TITLES.get(ds, ds).lower()}) | "
                   f"{run['folds_done']} of {run['config']['folds']} | "
                   f"{_duration(env.get('wall_s'))} | {len(flags[ds])} |")
    missing = [DATASET_TITLES[ds] for ds in PAPER_FOLDS if ds not in runs]
    if missing:
        out += ["" if runs else None, "No results yet: " + ", ".join(missing) + "."]
        out = [line for line in out if line is not None]
    out += [""]
    if general:
        out += ["## Notes on the comparison", "", general, ""]
    out += ["## Differences from the paper beyond its standard deviation", ""]
    any_flag = False
    for ds, run in runs.items():
        for f in flags[ds]:
            any_flag = True
            out.append(f"- {DATASET_TITLES.get(ds, ds)}, {f['classifier']}, "
                       f"{METRIC_TITLES[f['metric']]}: {_pm(f['ours'])} over {f['ours'][2]} "
                       f"fold{'s' if f['ours'][2] != 1 else ''} vs paper {_pm(f['paper'])} ({f['difference']:+.1f} points)")
    if not any_flag:
        out.append("None." if runs else "No results to compare.")
    out.append("")
    for ds, run in runs.items():
        env = run.get("environment") or {}
        title = DATASET_TITLES.get(ds, ds)
        out += [f"## {title}", "",
                f"- Command: `{command_for(run['config'])}`",
                f"- Folds: {_folds_text(run)}" + (" (interrupted)" if run.get("interrupted")
                                                   else ""),
                f"- Machine: {_machine(env)}", f"- Numerical paths: {_numeric_paths(env)}",
                *_wall_clock(env)]
        out += ["", *_table(ds, run, flags[ds]), "", "Chosen hyper-parameters:", "",
                *_hyper_parameters(run), ""]
        if run.get("notes"):
            out += ["Notes of the run:", ""] + [f"- {n}" for n in run["notes"]] + [""]
        if flags[ds]:
            out += [f"Cells beyond the paper's std: {len(flags[ds])} (listed above)."]
        if per_dataset.get(ds):
            out += ["", "### Explanations", "", per_dataset[ds], ""]
        elif flags[ds]:
            out += [f"No explanation yet in {notes_name}.", ""]
    return "\n".join(out).rstrip() + "\n"

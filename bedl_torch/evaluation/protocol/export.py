"""Compact results: per data set one small JSON file (configuration, environment, notes, one
line per fold's information and per record), made from a run's ``results.json`` (and the
``meta.txt`` a run script may have left beside it), and read back for the paper table."""
from __future__ import annotations

import json
import math
import pathlib
from typing import Dict, Optional

from .config import PAPER_FOLDS
from .runs import read_meta_txt

__all__ = ["COMPACT_FORMAT", "compact_results", "dump_compact", "load_run", "load_runs",
           "export_runs"]

#: the ``format`` entry of a compact results file
COMPACT_FORMAT = "bedl_torch-experiment-compact/1"
#: significant digits of the floats of records, fold information and environment
DIGITS = 6
#: record entries kept (``dataset`` is the file's, ``param`` follows from the classifier,
#: ``n_train``/``n_test`` are the fold's)
RECORD_KEYS = ("fold", "classifier", "metric", "error", "value", "runtime_s", "metric_param",
               "failed")


def _round(obj, digits: int = DIGITS):
    """Floats to ``digits`` significant digits, recursively (integers and text unchanged)."""
    if isinstance(obj, dict):
        return {k: _round(v, digits) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_round(v, digits) for v in obj]
    if isinstance(obj, float):
        if not math.isfinite(obj):
            return None
        return float(f"{obj:.{digits}g}")
    return obj


def compact_results(raw: dict, meta: Optional[dict] = None) -> dict:
    """The compact form of a results.json's content ``raw``; ``meta`` (see
    :func:`~.runs.read_meta_txt`) stands in for the session record when the results have
    none. Only the complete folds are kept (``folds_done``; an interrupted run may hold part
    of the next). The configuration is kept exactly (its grid is what the command line says);
    the table text and the summary are left out (both follow from the records).

    Raises:
        ValueError: ``raw`` is not an experiment's results.
    """
    missing = [k for k in ("config", "records", "folds_done") if k not in raw]
    if missing:
        raise ValueError(f"not an experiment's results.json: no {', '.join(missing)}")
    config = {k: v for k, v in raw["config"].items() if k != "progress"}
    env = dict(raw.get("environment") or {})
    if not env.get("sessions") and meta is not None:
        session = dict(meta)
        session.setdefault("folds_after", raw["folds_done"])
        env["sessions"] = [session]
        for key in ("commit", "cpu_model", "nproc"):
            if key in session:
                env.setdefault(key, session[key])
        env.setdefault("start", session.get("start"))
        env.setdefault("end", session.get("end"))
        env.setdefault("wall_s", session.get("wall_s"))
    done = int(raw["folds_done"])
    # a fold that an interrupt cut off half-way is not part of the results
    records = [{k: r[k] for k in RECORD_KEYS if k in r} for r in raw["records"]
               if r["fold"] < done]
    # results of earlier versions may record a classifier both with its error and as failed
    # (when a later classifier of the same metric failed): the error stands
    measured = {(r["fold"], r["classifier"], r["metric"]) for r in records
                if r.get("error") is not None}
    records = [r for r in records if r.get("error") is not None
               or (r["fold"], r["classifier"], r["metric"]) not in measured]
    fold_info = [i for i in raw.get("fold_info", []) if i.get("fold", 0) < done]
    return {"format": COMPACT_FORMAT, "dataset": raw.get("dataset", config.get("dataset")),
            "folds_done": int(raw["folds_done"]), "interrupted": bool(raw.get("interrupted")),
            "config": config, "environment": _round(env), "notes": list(raw.get("notes", [])),
            "fold_info": _round(fold_info), "records": _round(records)}


def _dump(value, indent: int) -> str:
    """The top level and its dicts key by key, a list element by element unless it is a short
    list of numbers or text, anything deeper on one line."""
    one_line = json.dumps(value, ensure_ascii=False)
    pad = " " * (indent + 1)
    if isinstance(value, dict) and indent < 2 and len(one_line) > 100:
        body = [f"{pad}{json.dumps(k)}: {_dump(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(body) + "\n" + " " * indent + "}"
    if isinstance(value, list) and indent < 2 and len(one_line) > 100:
        return "[\n" + ",\n".join(pad + json.dumps(v, ensure_ascii=False) for v in value) + \
            "\n" + " " * indent + "]"
    return one_line


def dump_compact(data: dict) -> str:
    """JSON text with one line per record, per fold and per note (small diffs in git)."""
    return _dump(data, 0) + "\n"


def load_run(path) -> dict:
    """A data set's results in compact form from a compact file (``DATASET.json``) or a run's
    folder or results.json (with its ``meta.txt``, if any).

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file holds neither form.
    """
    path = pathlib.Path(path)
    if path.is_dir():
        path = path / "results.json"
    data = json.loads(path.read_text())
    if data.get("format") == COMPACT_FORMAT:
        return data
    if "format" in data:
        raise ValueError(f"{path}: unknown results format {data['format']!r}")
    return compact_results(data, read_meta_txt(path.parent / "meta.txt"))


def load_runs(folder) -> Dict[str, dict]:
    """``{dataset: compact results}`` for the data sets found in ``folder``, in the paper's
    order: ``folder/DATASET.json`` (compact) or else ``folder/DATASET/results.json`` (a run's
    output).

    Raises:
        FileNotFoundError: ``folder`` is not a folder.
    """
    folder = pathlib.Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"no results folder {folder}")
    runs = {}
    for ds in PAPER_FOLDS:
        for path in (folder / f"{ds}.json", folder / ds / "results.json"):
            if path.is_file():
                runs[ds] = load_run(path)
                break
    return runs


def export_runs(results_dir, out_dir) -> Dict[str, str]:
    """Write ``out_dir/DATASET.json`` (compact) for every ``results_dir/DATASET/results.json``;
    returns ``{dataset: path written}``.

    Raises:
        FileNotFoundError: no run's results in ``results_dir``.
    """
    results_dir, out_dir = pathlib.Path(results_dir), pathlib.Path(out_dir)
    found = {ds: results_dir / ds for ds in PAPER_FOLDS
             if (results_dir / ds / "results.json").is_file()}
    if not found:
        raise FileNotFoundError(f"no DATASET/results.json in {results_dir} (data sets: "
                                f"{', '.join(PAPER_FOLDS)})")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for ds, folder in found.items():
        path = out_dir / f"{ds}.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(dump_compact(load_run(folder)))
        tmp.replace(path)
        written[ds] = str(path)
    return written

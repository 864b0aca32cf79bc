"""Runs on disk: resumable runs of the protocol into ``OUT/results.json`` and what a run
records about itself (commit, machine, start and end, wall-clock time, load averages)."""
from __future__ import annotations

import datetime
import json
import os
import pathlib
import platform
import subprocess
import time
from typing import List, Optional, Tuple

import torch

from .config import ExperimentConfig, config_differences
from .folds import run_experiment
from .numerics import describe as describe_paths
from .report import ExperimentResult, write_results

__all__ = ["ConfigMismatchError", "ResultsFileError", "machine_info", "read_meta_txt", "load_previous",
           "run_dataset"]


class ConfigMismatchError(ValueError):
    """Results on disk were computed with another configuration than the one asked for."""


class ResultsFileError(ValueError):
    """A results.json to continue cannot be read as an experiment's results."""


# --------------------------------------------------------------------------- the machine
def _package_dir() -> pathlib.Path:
    return pathlib.Path(__file__).resolve().parents[2]


def git_commit() -> Optional[str]:
    """The commit of the git checkout the package is imported from (``+dirty`` when tracked
    files differ from it), or None when the package is not a checkout's own."""
    root = _package_dir().parent
    try:
        top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, timeout=10)
        if top.returncode != 0 or pathlib.Path(top.stdout.strip()).resolve() != root:
            return None
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "diff", "--quiet", "HEAD", "--"],
                               capture_output=True, timeout=30).returncode != 0
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty else "")


def cpu_model() -> str:
    """The processor's model name (/proc/cpuinfo on Linux, else the platform's word)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def load_average() -> Optional[List[float]]:
    """The 1-, 5- and 15-minute load averages, or None where the platform has none."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def machine_info() -> dict:
    """Commit (git, else ``bedl_torch VERSION``), processor, usable cores, torch version."""
    import torch

    from ... import __version__

    try:
        nproc = len(os.sched_getaffinity(0))
    except AttributeError:
        nproc = os.cpu_count()
    return {"commit": git_commit() or f"bedl_torch {__version__}", "cpu_model": cpu_model(),
            "nproc": nproc, "torch": torch.__version__}


def _utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_meta_txt(path) -> Optional[dict]:
    """A session record from a run script's ``meta.txt`` (lines ``commit HASH``, ``start DATE``,
    ``load A B C ...``, ``model name : CPU``, ``end DATE``, ``rc N``, ``wall_s N``,
    ``load_end A B C ...``; dates as ``date -u`` prints them), or None when there is none."""
    path = pathlib.Path(path)
    if not path.is_file():
        return None
    out: dict = {"source": path.name}
    for line in path.read_text().splitlines():
        key, _, value = line.strip().partition(" ")
        value = value.strip()
        if line.lower().startswith("model name"):
            out["cpu_model"] = line.split(":", 1)[1].strip()
        elif key in ("start", "end"):
            out[key] = _iso_date(value)
        elif key in ("load", "load_end"):
            try:
                out["load_start" if key == "load" else "load_end"] = \
                    [float(v) for v in value.split()[:3]]
            except ValueError:
                pass
        elif key == "commit":
            out["commit"] = value
        elif key in ("wall_s", "rc", "nproc"):
            try:
                out[key] = int(value)
            except ValueError:
                pass
    return out


def _iso_date(text: str) -> str:
    """``date -u``'s ``Thu Nov 26 14:39:42 UTC 2026`` as ``2026-11-26T14:39:42Z`` (other text
    as it is)."""
    try:
        when = datetime.datetime.strptime(text, "%a %b %d %H:%M:%S UTC %Y")
    except ValueError:
        return text
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


# --------------------------------------------------------------------------- resumable runs
def load_previous(out_dir, config: ExperimentConfig, restart: bool = False) -> ExperimentResult:
    """The result to continue in ``out_dir``: the complete folds of its results.json when its
    configuration computes what ``config`` computes, a fresh result when there is none (or
    with ``restart``).

    Raises:
        ConfigMismatchError: results.json holds complete folds of another configuration, or
            computed on other numerical paths (the message names the differing fields).
        ResultsFileError: results.json is not an experiment's results.
    """
    path = pathlib.Path(out_dir) / "results.json"
    if restart or not path.is_file():
        return ExperimentResult(config={})
    try:
        previous = ExperimentResult.from_json(json.loads(path.read_text()))
    except ValueError as exc:  # also JSONDecodeError
        raise ResultsFileError(f"{path}: {exc}; pass --restart to replace it") from exc
    if previous.folds_done == 0:
        return ExperimentResult(config={})
    diff = config_differences(previous.config, config.resolved().to_dict())
    if diff:
        raise ConfigMismatchError(
            f"{path} holds {previous.folds_done} complete folds of another configuration ("
            + "; ".join(diff) + "); pass --restart to replace them, or another --out")
    diff = paths_differences(previous.environment.get("sessions") or [], describe_paths())
    if diff:
        raise ConfigMismatchError(
            f"{path} holds {previous.folds_done} complete folds computed on other numerical paths ("
            + "; ".join(diff) + "); folds from two paths do not reproduce as one run: pass "
            "--restart to replace them, another --out, or run on their paths")
    if not previous.environment.get("sessions"):
        meta = read_meta_txt(pathlib.Path(out_dir) / "meta.txt")
        if meta is not None:
            meta["folds_after"] = previous.folds_done
            previous.environment["sessions"] = [meta]
    return previous


def _paths_key(paths: dict) -> dict:
    """What decides a session's numerical paths: the mode and the variables that held them."""
    return {"mode": paths.get("mode"), **(paths.get("environment") or {})}


def paths_differences(sessions, current: dict) -> List[str]:
    """``"name: recorded -> current"`` for each difference between the numerical paths of the
    last session that recorded them and ``current`` (:func:`numerics.describe`); none where
    no session recorded paths (runs from before the record)."""
    recorded = [s["numeric_paths"] for s in sessions if s.get("numeric_paths")]
    if not recorded:
        return []
    before, now = _paths_key(recorded[-1]), _paths_key(current)
    return [f"{k}: {before.get(k, 'unset')} -> {now.get(k, 'unset')}"
            for k in sorted(set(before) | set(now), key=lambda k: (k != "mode", k))
            if before.get(k) != now.get(k)]


def _summarise_sessions(env: dict) -> None:
    """Top-level commit, machine, start, end and total wall-clock time from the sessions."""
    sessions = env.get("sessions") or []
    if not sessions:
        return
    last = sessions[-1]
    for key in ("commit", "cpu_model", "nproc", "torch"):
        if last.get(key) is not None:
            env[key] = last[key]
    env["start"] = sessions[0].get("start")
    env["end"] = last.get("end")
    walls = [s.get("wall_s") for s in sessions]
    env["wall_s"] = sum(walls) if all(w is not None for w in walls) else None


def run_dataset(config: ExperimentConfig, out_dir, restart: bool = False,
                command: Optional[str] = None) -> Tuple[ExperimentResult, bool]:
    """Run (or continue, see :func:`load_previous`) one data set into ``out_dir``:
    results.json is rewritten after every fold, with this session (``command``, commit,
    machine, start, end, wall-clock seconds, load averages, folds before and after) appended
    to ``environment["sessions"]``. Ctrl-C writes the complete folds and returns. Returns
    ``(result, interrupted)``.

    Raises:
        ConfigMismatchError, ResultsFileError: see :func:`load_previous`.
    """
    result = load_previous(out_dir, config, restart)
    cfg = config.resolved()
    target = min(cfg.folds, cfg.max_folds or cfg.folds)
    session = None
    if result.folds_done < target:
        session = {"command": command, **machine_info(), "numeric_paths": describe_paths(),
                   "threads": torch.get_num_threads(), "start": _utc_now(), "end": None,
                   "wall_s": 0.0, "load_start": load_average(), "load_end": None,
                   "folds_before": result.folds_done, "folds_after": result.folds_done}
        result.environment.setdefault("sessions", []).append(session)
    t0 = time.monotonic()

    def save(res: ExperimentResult) -> None:
        if session is not None:
            session.update(end=_utc_now(), wall_s=round(time.monotonic() - t0, 3),
                           load_end=load_average(), folds_after=res.folds_done)
        _summarise_sessions(res.environment)
        write_results(res, out_dir)

    interrupted = False
    try:
        run_experiment(config, result, on_fold=save)
    except KeyboardInterrupt:
        interrupted = True
    if session is not None or not (pathlib.Path(out_dir) / "results.json").is_file():
        save(result)
    return result, interrupted

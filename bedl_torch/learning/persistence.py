"""BEDL's state dicts: a fitted model as plain data (tensors, str, numbers, lists, dicts).

Plain data loads with ``torch.load(path, weights_only=True)``: no pickled code. The cost module
is stored by class name and ``state_dict()``; :class:`~bedl_torch.costs.EuclideanCost` and
:class:`~bedl_torch.costs.CosineCost` are rebuilt from it, other modules need ``cost=``.
"""
from __future__ import annotations

import copy

import numpy as np
import torch

from ..costs import CosineCost, EuclideanCost, SymbolCost
from ..tree import Tree

__all__ = ["bedl_state", "load_bedl_state", "dtype_name", "DTYPES"]

FORMAT = "bedl_torch.BEDL"
FORMAT_VERSION = 1
#: the dtypes a model can have, by the name its state dict stores
DTYPES = {"float64": torch.float64, "float32": torch.float32}


def dtype_name(dtype) -> str:
    """``"float64"`` or ``"float32"``.

    Raises:
        ValueError: any other dtype.
    """
    for name, dt in DTYPES.items():
        if dt == dtype:
            return name
    raise ValueError(f"dtype must be torch.float64 or torch.float32, got {dtype!r}")


def _encode_object(x) -> dict:
    if isinstance(x, Tree):
        return {"kind": "tree", "tree": x.to_json()}
    if isinstance(x, str):
        return {"kind": "str", "seq": x}
    return {"kind": "seq", "seq": list(x)}


def _decode_object(d: dict):
    kind = d["kind"]
    if kind == "tree":
        return Tree.from_json(d["tree"])
    if kind == "str":
        return d["seq"]
    return list(d["seq"])


def _plain(value):
    """numpy scalars -> Python scalars (for ``torch.load(weights_only=True)``)."""
    if isinstance(value, np.generic):
        return value.item()
    return value


def bedl_state(model) -> dict:
    """The state dict of a fitted :class:`~bedl_torch.learning.BEDL` (see the module
    docstring); tensors are copied to the CPU."""
    params = model.get_params(deep=False)
    if callable(params["phi"]):
        params["phi"] = None  # a callable cannot be stored as data
    params["cost"] = None
    if not isinstance(params.get("process_group"), (str, type(None))):
        params["process_group"] = None  # a process group belongs to the running processes
    params["dtype"] = dtype_name(model.dtype)
    params["device"] = None if model.device is None else str(model.device)
    params = {k: _plain(v) for k, v in params.items()}
    cost = model.cost_
    extra = {"scale": float(model.scale_)} if hasattr(model, "scale_") else {}
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "hyperparameters": params,
        "cost_class": type(cost).__module__ + "." + type(cost).__qualname__,
        "cost_state": {k: v.detach().cpu().clone() for k, v in cost.state_dict().items()},
        "alphabet": [_plain(a) for a in model.alphabet_],
        "classes": [_plain(c) for c in model.classes_.tolist()],
        "prototypes": [_encode_object(p) for p in model.prototypes_],
        "prototype_indices": [int(i) for i in model.prototype_indices_],
        "prototype_labels": [_plain(c) for c in model.prototype_labels_.tolist()],
        "loss_history": [float(v) for v in model.loss_history_],
        "n_evals": [int(v) for v in model.n_evals_],
        "n_rounds": int(model.n_rounds_),
        **extra,
    }


# what every state of this format holds (bedl_state writes them all)
_REQUIRED_KEYS = ("hyperparameters", "cost_class", "cost_state", "alphabet", "classes", "prototypes",
                  "prototype_indices", "prototype_labels", "loss_history", "n_evals", "n_rounds")


def load_bedl_state(model, state: dict, cost=None):
    """Restore ``model`` (a :class:`~bedl_torch.learning.BEDL`) from :func:`bedl_state`'s
    dict: its parameters, cost module and fitted attributes. The cost module goes to the
    model's device where the model was given one (``BEDL(device=...)``), else to the saved one.
    ``cost``: a ``SymbolCost`` (or a factory ``cost(alphabet)``) to load a custom module's
    state into. Returns ``model``.

    Raises:
        ValueError: not a BEDL state dict (or one that lacks an entry), a newer format version, a
            custom cost module without ``cost=``, or a ``cost`` whose alphabet differs from the
            saved one.
    """
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ValueError(f"not a BEDL state dict (got {type(state).__name__}"
                         f"{'' if not isinstance(state, dict) else ' without its format mark'})")
    if int(state.get("version", 0)) > FORMAT_VERSION:
        raise ValueError(f"BEDL state version {state['version']} is newer than this library")
    missing = [key for key in _REQUIRED_KEYS if key not in state]
    if missing:
        raise ValueError(f"BEDL state dict lacks {', '.join(map(repr, missing))}")
    hp = dict(state["hyperparameters"])
    hp["dtype"] = DTYPES[hp["dtype"]]
    if hp.get("phi") is None:
        hp["phi"] = "log4" if not callable(model.phi) else model.phi
    hp["cost"] = cost
    if model.device is not None:  # a device the model was given wins over the saved one
        hp["device"] = model.device
    names = model.get_params(deep=False)
    model.set_params(**{k: v for k, v in hp.items() if k in names})
    alphabet = list(state["alphabet"])
    cs = state["cost_state"]
    cls_name = state["cost_class"]
    if cost is not None:
        module = copy.deepcopy(cost) if isinstance(cost, SymbolCost) else cost(alphabet)
        if list(module.alphabet) != alphabet:
            raise ValueError("the given cost module's alphabet differs from the saved one")
    elif cls_name.endswith(".EuclideanCost"):
        module = EuclideanCost(alphabet, embedding=cs["embedding"])
    elif cls_name.endswith(".CosineCost"):
        module = CosineCost(alphabet[:-1], cs["vectors"], omega=cs["Omega"])
    else:
        raise ValueError(f"pass cost= to restore a model with a custom cost ({cls_name})")
    module.load_state_dict(cs)
    device = torch.device(model.device) if model.device is not None else torch.device("cpu")
    model.cost_ = module.to(device=device, dtype=model.dtype)
    model.alphabet_ = list(module.alphabet)
    model.classes_ = np.asarray(state["classes"])
    model.prototypes_ = [_decode_object(p) for p in state["prototypes"]]
    model.prototype_indices_ = np.asarray(state["prototype_indices"], dtype=np.int64)
    model.prototype_labels_ = np.asarray(state["prototype_labels"])
    model.loss_history_ = list(state["loss_history"])
    model.n_evals_ = list(state["n_evals"])
    model.n_rounds_ = int(state["n_rounds"])
    if "scale" in state:  # loss="nca": the softmax's scale
        model.scale_ = float(state["scale"])
    elif hasattr(model, "scale_"):
        del model.scale_
    return model

"""Checkpoints: safetensors for every tensor, a JSON sidecar for everything else.

A checkpoint is a directory ``<run>/checkpoints/step-00000042/`` holding

- ``model.safetensors``: the model's state dict (tied weights stored once, their
  aliases listed in the sidecar);
- ``optimizer.safetensors``: the optimizer's per-parameter tensors (``state.<i>.<name>``);
- ``state.json``: step, resolved configs, optimizer hyper-parameters, scheduler, RNG and
  data-sampler states, the SHA-256 of both tensor files, and the SHA-256 ``digest`` of the
  sidecar itself (see :mod:`tokengeo.train.sidecar`).

It is written into a hidden temporary directory that is renamed into place only when
complete, so a crash never leaves a half-written checkpoint. Loading never unpickles:
tensors come from safetensors, the rest from JSON; a missing file, a checksum mismatch
(tensor files or sidecar), a sidecar field of the wrong type or an unknown one, a step that
is not the directory's, or a model/config/optimizer mismatch raises
:class:`~tokengeo.errors.CheckpointError`, and no refusal changes a file. The ``keep``
newest checkpoints are kept (2 by default), so a corrupt latest one leaves a good one to
resume from (:func:`last_good`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from tokengeo.errors import CheckpointError, ConfigError
from tokengeo.io import (
    atomic_dir,
    follow_umask,
    parse_json,
    read_small,
    remove_temporaries,
    write_json,
)
from tokengeo.train import sidecar as sc

FORMAT = "tokengeo-checkpoint/2"
MODEL_FILE, OPTIM_FILE, STATE_FILE = "model.safetensors", "optimizer.safetensors", "state.json"
SIDECAR_LIMIT = 64 << 20  # a sidecar holds the optimizer's scalars: far below this
_STEP_DIR = re.compile(r"^step-(\d+)$")


@dataclass
class Checkpoint:
    path: Path
    state: dict[str, Any]  # the JSON sidecar
    model_tensors: dict[str, torch.Tensor]
    optim_tensors: dict[str, torch.Tensor]

    @property
    def step(self) -> int:
        return int(self.state["step"])


# ---- writing -------------------------------------------------------------------------


def save_checkpoint(
    root: Path, step: int, model: nn.Module, optimizer: torch.optim.Optimizer,
    state: dict[str, Any], keep: int = 2,
) -> Path:
    """Write ``root/step-<step>`` atomically and keep only the ``keep`` newest checkpoints."""
    final = step_dir(root, step)
    with atomic_dir(final) as tmp:  # hidden .tmp-step-<N>-*, renamed once complete
        weights, aliases = unique_state_dict(model)
        optim_tensors, optim_meta = split_optimizer_state(optimizer.state_dict())
        _save_tensors(weights, tmp / MODEL_FILE)
        _save_tensors(optim_tensors, tmp / OPTIM_FILE)
        for name in (MODEL_FILE, OPTIM_FILE):  # save_file writes 0600: a shared folder reads
            follow_umask(tmp / name)
        sidecar = {
            "format": FORMAT, "step": step, **state, "aliases": aliases, "optimizer": optim_meta,
            "sha256": {name: _sha256(tmp / name) for name in (MODEL_FILE, OPTIM_FILE)},
        }
        sidecar["digest"] = sc.digest(sidecar)
        write_json(tmp / STATE_FILE, sidecar, indent=1)
    prune_checkpoints(root, keep)
    return final


def _save_tensors(tensors: dict[str, torch.Tensor], path: Path) -> None:
    """``save_file``, whose I/O errors (a full disk) surface as ``SafetensorError`` with the
    OS error inside its text: raised again as the ``OSError`` it is (the CLI names the path
    in one line), or as a CheckpointError when no OS error code is given."""
    try:
        save_file(tensors, path)
    except SafetensorError as exc:
        code = re.search(r"(?:os error|code:) (\d+)", str(exc))
        if code is None:
            raise CheckpointError(f"cannot write checkpoint file {path}: {str(exc)[:200]}"
                                  ) from None
        errno_ = int(code.group(1))
        raise OSError(errno_, os.strerror(errno_), str(path)) from None


def step_dir(root: Path, step: int) -> Path:
    return root / f"step-{step:08d}"


def unique_state_dict(model: nn.Module) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """(tensors with each storage once, {alias name: stored name}) — e.g. tied LM heads."""
    tensors: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    seen: dict[tuple, str] = {}
    for name, t in model.state_dict().items():
        key = (t.data_ptr(), t.dtype, tuple(t.shape), tuple(t.stride()))
        if t.numel() and key in seen:
            aliases[name] = seen[key]
            continue
        seen[key] = name
        tensors[name] = t.detach().cpu().contiguous()
    return tensors, aliases


def split_optimizer_state(sd: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Optimizer state dict -> (tensors ``state.<i>.<key>``, JSON-able rest)."""
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for idx, per_param in sd["state"].items():
        for key, value in per_param.items():
            if isinstance(value, torch.Tensor):
                tensors[f"state.{idx}.{key}"] = value.detach().cpu().contiguous()
            else:
                scalars.setdefault(str(idx), {})[key] = value
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def prune_checkpoints(root: Path, keep: int) -> None:
    for path in list_checkpoints(root)[:-keep]:
        shutil.rmtree(path)


def remove_after(root: Path, step: int) -> None:
    """Delete the checkpoints of steps after ``step`` (a run continued from ``step``)."""
    for path in list_checkpoints(root):
        if step_of(path) > step:
            shutil.rmtree(path)


def remove_partial(root: Path) -> None:
    """Delete temporary directories left by a write that was interrupted."""
    remove_temporaries(root)


def _sha256(path: Path) -> str:
    from tokengeo.io import open_binary

    h = hashlib.sha256()
    with open_binary(path) as f:  # a FIFO planted in a checkpoint: refused, not waited on
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ---- reading -------------------------------------------------------------------------


def list_checkpoints(root: Path) -> list[Path]:
    """Complete checkpoint directories under ``root``, oldest first."""
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _STEP_DIR.match(p.name))]
    return [p for _, p in sorted(found)]


def latest_checkpoint(root: Path) -> Path | None:
    found = list_checkpoints(root)
    return found[-1] if found else None


_GROUP = sc.record({"params": sc.list_of(sc.integer)}, rest=sc.scalar)
FIELDS: dict[str, sc.Spec] = {  # the sidecar fields every checkpoint has
    "format": sc.string,
    "step": sc.integer,
    "aliases": sc.map_of(sc.string),
    "optimizer": sc.record({"param_groups": sc.list_of(_GROUP),
                            "scalars": sc.map_of(sc.map_of(sc.scalar))}),
    "sha256": sc.record({MODEL_FILE: sc.hex64, OPTIM_FILE: sc.hex64}),
    "digest": sc.hex64,
}


def load_checkpoint(path: Path, fields: dict[str, sc.Spec] | None = None) -> Checkpoint:
    """Read and verify a checkpoint directory: files present, sidecar digest and field
    types, step, tensor checksums. ``fields``: the caller's sidecar fields; with them the
    sidecar must hold exactly those and :data:`FIELDS` (without, other fields pass)."""
    state = verify_checkpoint(path, fields)
    try:
        return Checkpoint(path, state, load_file(path / MODEL_FILE), load_file(path / OPTIM_FILE))
    except SafetensorError as exc:
        raise CheckpointError(f"checkpoint {path} has an unreadable tensor file: {exc}") from None


def verify_checkpoint(path: Path, fields: dict[str, sc.Spec] | None = None) -> dict[str, Any]:
    """The verified sidecar of ``path`` (everything :func:`load_checkpoint` checks but the
    tensors' contents); CheckpointError naming the first problem."""
    state = _read_sidecar(path, fields)
    for name in (MODEL_FILE, OPTIM_FILE):
        if not (path / name).is_file():
            raise CheckpointError(f"checkpoint {path} is incomplete: {name} is missing")
        if _sha256(path / name) != state["sha256"][name]:
            raise CheckpointError(
                f"checkpoint {path} is corrupt: {name} does not match its recorded SHA-256"
            )
    return state


def _read_sidecar(path: Path, fields: dict[str, sc.Spec] | None) -> dict[str, Any]:
    file = path / STATE_FILE
    try:
        state = parse_json(read_small(file, SIDECAR_LIMIT), str(file), allow_nan=True)
    except ConfigError as exc:  # not a regular file, far larger than a sidecar, not JSON
        if not file.exists() and not file.is_symlink():
            raise CheckpointError(f"checkpoint {path} is incomplete: {STATE_FILE} is "
                                  "missing") from None
        raise CheckpointError(f"checkpoint {file}: {exc}") from None
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {path} is incomplete: {STATE_FILE} is missing") from None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"checkpoint {file} is not valid JSON: {exc}") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint {file} is not a {FORMAT} sidecar")
    if state.get("digest") != sc.digest(state):
        raise CheckpointError(f"checkpoint {file} is corrupt or was edited: it does not match "
                              "its recorded digest")
    schema = {**FIELDS, **(fields or {})}
    try:
        sc.record(schema, rest=None if fields else sc.anything)(state, "")
    except sc.SidecarError as exc:
        raise CheckpointError(f"checkpoint {file} is malformed: {exc}") from None
    if path.name != step_dir(path.parent, state["step"]).name:
        raise CheckpointError(f"checkpoint {file} records step {state['step']} but lies in "
                              f"{path.name}; it was moved or edited")
    return state


def last_good(root: Path, before: Path, fields: dict[str, sc.Spec] | None = None) -> Path | None:
    """The newest checkpoint under ``root`` older than ``before`` that verifies (or None)."""
    older = [p for p in list_checkpoints(root) if p.name < before.name]
    for path in reversed(older):
        try:
            verify_checkpoint(path, fields)
        except CheckpointError:
            continue
        return path
    return None


def step_of(path: Path) -> int:
    return int(_STEP_DIR.match(path.name).group(1))  # type: ignore[union-attr]


def restore_model(model: nn.Module, ckpt: Checkpoint) -> None:
    """Load weights after checking names and shapes (one-line error naming the mismatch)."""
    tensors = dict(ckpt.model_tensors)
    for alias, name in ckpt.state["aliases"].items():
        tensors[alias] = tensors[name]
    expected = model.state_dict()
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    shapes = [f"{k} {tuple(tensors[k].shape)} vs {tuple(v.shape)}"
              for k, v in expected.items() if k in tensors and tensors[k].shape != v.shape]
    if missing or unexpected or shapes:
        raise CheckpointError(
            f"checkpoint {ckpt.path} does not fit the model: missing {missing[:3]}, "
            f"unexpected {unexpected[:3]}, shape mismatches {shapes[:3]}"
        )
    model.load_state_dict(tensors, strict=True)


def restore_optimizer(optimizer: torch.optim.Optimizer, ckpt: Checkpoint) -> None:
    """Load the optimizer state after checking that every hyper-parameter both the saved and
    this optimizer's groups have (lr, betas, eps, weight_decay, ...) agrees, so a changed
    setting is refused rather than silently loaded. Set this run's lr to the saved step's
    first (the schedule does; see ``Trainer.restore``)."""
    meta = ckpt.state["optimizer"]
    per_param: dict[int, dict[str, Any]] = {}
    for key, tensor in ckpt.optim_tensors.items():
        _, idx, name = key.split(".", 2)
        per_param.setdefault(int(idx), {})[name] = tensor
    for idx, values in meta["scalars"].items():
        per_param.setdefault(int(idx), {}).update(values)
    groups = meta["param_groups"]
    if [len(g["params"]) for g in groups] != [len(g["params"]) for g in optimizer.param_groups]:
        raise CheckpointError(
            f"checkpoint {ckpt.path} optimizer has parameter groups of sizes "
            f"{[len(g['params']) for g in groups]}, this run "
            f"{[len(g['params']) for g in optimizer.param_groups]}"
        )
    _check_hyperparameters(groups, optimizer.param_groups, ckpt.path)
    try:
        optimizer.load_state_dict({"state": per_param, "param_groups": groups})
    except (ValueError, KeyError, RuntimeError) as exc:
        msg = f"checkpoint {ckpt.path} optimizer state does not fit: {exc}"
        raise CheckpointError(msg) from None


def _check_hyperparameters(saved: list[dict[str, Any]], current: list[dict[str, Any]],
                           path: Path) -> None:
    """Keys of both (another torch version may add some) must hold equal values."""
    for i, (old, new) in enumerate(zip(saved, current, strict=True)):
        for key in sorted((set(old) & set(new)) - {"params"}):
            a, b = old[key], new[key]
            a, b = (list(a), list(b)) if isinstance(a, list | tuple) else (a, b)
            if a != b:
                raise CheckpointError(
                    f"checkpoint {path} optimizer group {i} has {key}={old[key]!r} but this "
                    f"run has {key}={new[key]!r}; resume with the saved settings"
                )

"""The training loop: AdamW + warmup/cosine, clipping, evaluation, checkpoints, DDP.

>>> from tokengeo.train import TrainConfig, Trainer
>>> summary = Trainer(TrainConfig(model="vit-tiny", data="fashion-mnist", steps=300,
...                               out="runs/vit")).fit()

Step ``s`` (1-based) is the ``s``-th optimiser update. Everything a step depends on, the
weights, optimiser moments, learning rate (a function of the step), the data sampler
(seeded by ``(seed, step)``) and the RNG states, is in the checkpoint, so a resumed run
continues bit for bit (on the same device and thread count).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tokengeo.errors import CheckpointError, ConfigError, TokengeoError
from tokengeo.io import write_json
from tokengeo.models.registry import build_model
from tokengeo.train import checkpoint as ckpt
from tokengeo.train import sidecar as sc
from tokengeo.train.config import TrainConfig, check_training_memory
from tokengeo.train.curves import plot_curves
from tokengeo.train.distributed import (
    DistEnv,
    all_gather_json,
    all_reduce_sum,
    barrier,
    init_distributed,
    wrap_model,
)
from tokengeo.train.loggers import MetricLogger, close_loggers, open_loggers
from tokengeo.train.progress import Progress, bar_wanted
from tokengeo.train.rng import rng_state, seed_everything, set_rng_state
from tokengeo.train.rundir import RunDir, config_changes
from tokengeo.train.schedule import WarmupCosine
from tokengeo.train.tasks import Batch, Task, build_task, data_options

# The trainer's sidecar fields and their types (besides checkpoint.FIELDS); values are
# further compared with this run's (config, model, schedule, world size, sampler position).
SIDECAR_FIELDS: dict[str, sc.Spec] = {
    "config": sc.map_of(sc.anything),
    "model": sc.record({"name": sc.string, "config": sc.map_of(sc.anything)}),
    "data": sc.string,
    "schedule": sc.record({"lr": sc.number, "min_lr": sc.number, "warmup": sc.integer,
                           "steps": sc.integer}),
    "sampler": sc.map_of(sc.int_or_bool),
    "scaler": sc.maybe(sc.map_of(sc.scalar)),
    "rng": sc.list_of(sc.map_of(sc.anything)),  # parsed, and refused if malformed, on restore
    "world_size": sc.integer,
    "wall_s": sc.number,
}


class NonFiniteLossError(TokengeoError):
    """The loss (or gradient norm) became NaN or infinite; the run stopped."""


@dataclass
class StepResult:
    loss: float  # mean over the global batch
    lr: float
    grad_norm: float  # before clipping (nan when clipping is off)
    items: int  # examples or tokens in the global batch


def resolve_precision(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype (None = full fp32). ``auto``: bf16 on GPUs that support it."""
    if precision == "auto":
        cuda_bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
        return torch.bfloat16 if cuda_bf16 else None
    if precision == "fp16" and device.type != "cuda":
        raise ConfigError("precision='fp16' needs a CUDA device; use bf16 or fp32 on the CPU")
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def build_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW with decoupled weight decay on matrices/embeddings (dim >= 2) only."""
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2))


def load_data(cfg: TrainConfig) -> Any:
    from tokengeo.data import load_dataset

    return load_dataset(cfg.data, **data_options(cfg))  # hf: models add their tokenizer


class Trainer:
    """One training run of ``cfg`` in ``cfg.out`` (``resume=True``: continue it from its
    latest checkpoint, or from step ``resume_from``, whose later checkpoints are removed).

    ``data`` skips loading ``cfg.data`` (a bundle already in memory); ``env`` is the
    data-parallel environment (default: from torchrun's variables); ``progress`` forces
    the bar on or off (default: on a terminal outside CI); ``root``: the folder written,
    when not ``cfg.out`` (an ``--overwrite`` builds the run beside its ``--out``).
    """

    _callback: Callable[[Trainer], None] | None = None  # set by fit
    _callback_every = 0

    def __init__(self, cfg: TrainConfig, *, resume: bool = False, data: Any = None,
                 env: DistEnv | None = None, progress: bool | None = None,
                 resume_from: int | None = None, root: str | Path | None = None) -> None:
        self.cfg = cfg.validated()  # not again when the caller validated it
        self.resume_from = resume_from
        resume = resume or resume_from is not None
        self.env = env or init_distributed(cfg.device)
        self.run = RunDir(cfg.out if root is None else root)  # root: where it is built
        saved_config = self._check_run_dir(resume)
        self.autocast_dtype = resolve_precision(cfg.precision, self.env.device)
        seed_everything(cfg.seed)
        self.data = load_data(cfg) if data is None else data
        self.task, self.model = self._build_task_and_model()
        self.optimizer = build_optimizer(self.model, cfg)
        self.notes: list[str] = []  # said when training starts, kept in summary.json
        self.schedule = WarmupCosine(cfg.lr, cfg.min_lr, self._warmup(),
                                     cfg.decay_steps or cfg.steps)  # min_lr after decay_steps
        self.sampler = self.task.sampler(cfg.batch_size, cfg.seed, self.env.rank,
                                         self.env.world_size)
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.autocast_dtype == torch.float16)
        self.step, self.wall_before, self.saved_step = 0, 0.0, None
        self._t0 = time.perf_counter()
        self._start_run_dir(saved_config)
        self.ddp_model = wrap_model(self.model, self.env)
        if cfg.compile:  # the step runs compiled; weights and checkpoints stay the model's
            self.ddp_model = torch.compile(self.ddp_model)
        self._show_progress = progress
        self.loggers: list[MetricLogger] = []

    # ---- set-up --------------------------------------------------------------------

    def _check_run_dir(self, resume: bool) -> dict[str, Any] | None:
        """Every rank checks before rank 0 writes anything (then they all agree)."""
        saved = self.run.check_resumable() if resume else self.run.check_new()
        if saved is not None:
            changes = config_changes(saved, self.cfg.to_dict())
            if changes:
                raise CheckpointError(
                    f"the config differs from the run in {str(self.run.root)!r}: "
                    f"{'; '.join(changes)}; resume with the saved settings"
                )
        barrier(self.env)
        return saved

    def _warmup(self) -> int:
        """The warmup, clamped to the run: a warmup longer than ``steps`` never reaches ``lr``."""
        cfg = self.cfg
        if cfg.warmup <= cfg.steps:
            return cfg.warmup
        self.notes.append(f"warmup={cfg.warmup} is longer than the run (steps={cfg.steps}); "
                          f"the warmup is clamped to {cfg.steps} steps")
        return cfg.steps

    def _build_task_and_model(self) -> tuple[Task, nn.Module]:
        """The task on the data, and its model built from the task's model config as it is
        (the one build of the run), wrapped by the task (DINO: student + teacher)."""
        task = build_task(self.cfg, self.data)
        check_training_memory(self.cfg, task.model_config)
        model = build_model(self.cfg.model, task.model_config, device=self.env.device)
        return task, task.wrap_model(model, self.cfg.steps)

    def _start_run_dir(self, saved_config: dict[str, Any] | None) -> None:
        """Fresh run: create the directory. Resume: restore the latest checkpoint."""
        if saved_config is None:
            if self.env.is_main:
                self.run.create(self.cfg.to_dict())
        else:
            found = self._resume_checkpoint()
            if found is not None:
                self.restore(found)
            if self.env.is_main:  # only now, after every check, files change
                ckpt.remove_partial(self.run.checkpoints)
                ckpt.remove_after(self.run.checkpoints, self.step)
                self.run.truncate_metrics(self.step)
                write_json(self.run.config, self.cfg.to_dict())
        barrier(self.env)

    def _resume_checkpoint(self) -> ckpt.Checkpoint | None:
        """The verified checkpoint to continue from: ``resume_from``'s, else the latest (a
        corrupt latest one is refused naming the last good one)."""
        root = self.run.checkpoints
        found = ckpt.list_checkpoints(root)
        if self.resume_from is not None:
            path = ckpt.step_dir(root, self.resume_from)
            if path not in found:
                raise ConfigError(f"--resume-from {self.resume_from}: {str(root)!r} holds no "
                                  f"checkpoint of that step; it has steps "
                                  f"{[ckpt.step_of(p) for p in found]}")
            return ckpt.load_checkpoint(path, SIDECAR_FIELDS)
        if not found:
            return None
        try:
            return ckpt.load_checkpoint(found[-1], SIDECAR_FIELDS)
        except CheckpointError as exc:
            good = ckpt.last_good(root, found[-1], SIDECAR_FIELDS)
            hint = ("no earlier checkpoint is intact; start a new run" if good is None else
                    f"the last good checkpoint is {good}: continue from it with "
                    f"--resume-from {ckpt.step_of(good)}")
            raise CheckpointError(f"{exc}; {hint}") from None

    # ---- checkpoints ---------------------------------------------------------------

    def checkpoint_state(self) -> dict[str, Any]:
        """The JSON sidecar content besides tensors (gathered from every rank)."""
        return {
            "config": self.cfg.to_dict(),
            "model": {"name": self.cfg.model, "config": _jsonable(self.model.config)},
            "data": str(getattr(self.data, "name", self.cfg.data)),
            "schedule": self.schedule.state_dict(),
            "sampler": self.sampler.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler.is_enabled() else None,
            "rng": all_gather_json(rng_state(), self.env),
            "world_size": self.env.world_size,
            "wall_s": self.wall_s(),
        }

    def save(self) -> None:
        state = self.checkpoint_state()  # collective: every rank takes part
        if self.env.is_main:
            self.run.sync_metrics()
            ckpt.save_checkpoint(self.run.checkpoints, self.step, self.model, self.optimizer,
                                 state, keep=self.cfg.keep_checkpoints)
        self.saved_step = self.step
        barrier(self.env)

    def restore(self, c: ckpt.Checkpoint) -> None:
        """Continue from checkpoint ``c``: weights, optimiser, sampler, scaler, RNG, step."""
        self._check_compatible(c)
        s = c.state
        ckpt.restore_model(self.model, c)
        if c.step > 0:
            self.schedule.apply(self.optimizer, c.step - 1)  # the lr of the saved step
        ckpt.restore_optimizer(self.optimizer, c)
        self.sampler.load_state_dict(s["sampler"])
        after = getattr(self.sampler, "state_after", None)  # its state is a function of step
        if after is not None and self.sampler.state_dict() != after(c.step):
            raise CheckpointError(f"checkpoint {c.path} has sampler state {s['sampler']}, but "
                                  f"{c.step} steps leave it at {after(c.step)}; it was edited")
        if s["scaler"]:
            self.scaler.load_state_dict(s["scaler"])
        set_rng_state(s["rng"][self.env.rank])
        self.step, self.wall_before, self.saved_step = c.step, float(s["wall_s"]), c.step

    def _check_compatible(self, c: ckpt.Checkpoint) -> None:
        s = c.state  # its fields have the types of SIDECAR_FIELDS (load_checkpoint)
        if s["world_size"] != self.env.world_size:
            raise CheckpointError(f"checkpoint {c.path} was written by {s['world_size']} "
                                  f"processes, this run has {self.env.world_size}; use as many")
        if len(s["rng"]) != s["world_size"]:
            raise CheckpointError(f"checkpoint {c.path} holds {len(s['rng'])} RNG states for "
                                  f"{s['world_size']} processes; it was edited")
        changes = config_changes(s["config"], self.cfg.to_dict())
        changes += config_changes(s["model"].get("config", {}), _jsonable(self.model.config))
        if s["model"].get("name") != self.cfg.model or changes:
            raise CheckpointError(f"checkpoint {c.path} holds model {s['model'].get('name')!r} "
                                  f"trained with other settings: {'; '.join(changes)}")
        try:
            self.schedule.check_state(s["schedule"])
        except CheckpointError as exc:
            raise CheckpointError(f"checkpoint {c.path}: {exc}") from None

    # ---- one step ------------------------------------------------------------------

    def _autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.env.device.type, dtype=self.autocast_dtype)

    def forward(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        with self._autocast():
            return model(batch.inputs, attention_mask=batch.attention_mask)

    def train_step(self) -> StepResult:
        """One update on the next global batch; raises before updating on a non-finite loss."""
        self.model.train()
        lr = self.schedule.apply(self.optimizer, self.step)
        batch = self.task.batch("train", next(self.sampler)).to(self.env.device)
        loss = self.task.loss(self.forward(self.ddp_model, batch), batch)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()  # DDP averages gradients over ranks here
        global_loss = self._global_mean(loss.detach())
        self._check_finite("loss", global_loss)
        grad_norm = self._clip_gradients()
        self.task.before_update(self.model)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.task.after_update(self.model)
        items = self.task.items(batch) * self.env.world_size
        return StepResult(global_loss, lr, grad_norm, items)

    def _global_mean(self, value: torch.Tensor) -> float:
        total = all_reduce_sum(value.double().reshape(1), self.env)
        return float(total.item()) / self.env.world_size

    def _clip_gradients(self) -> float:
        if not self.cfg.grad_clip:
            return math.nan
        self.scaler.unscale_(self.optimizer)
        norm = float(nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip))
        if not self.scaler.is_enabled():  # fp16: the scaler skips the step on inf itself
            self._check_finite("gradient norm", norm)
        return norm

    def _check_finite(self, what: str, value: float) -> None:
        if math.isfinite(value):
            return
        kept = "no checkpoint was written yet"
        if self.saved_step is not None:
            last = ckpt.step_dir(self.run.checkpoints, self.saved_step)
            kept = f"the last good checkpoint is {last}"
        raise NonFiniteLossError(
            f"non-finite {what} ({value}) at step {self.step + 1}; training stopped and "
            f"{kept}; start a new run with a lower lr or a longer warmup"
        )

    # ---- evaluation ----------------------------------------------------------------

    @torch.no_grad()
    def evaluate(self, split: str, max_examples: int = 0, final: bool = False
                 ) -> dict[str, float]:
        """Metrics of the fixed evaluation examples of ``split``, sharded over ranks
        (``final``: with a bar over its batches where the training bar shows)."""
        self.model.eval()
        own = self.task.evaluate(self.model, split, max_examples, self.cfg.batch_size)
        if own is not None:
            return own
        idx = self.task.eval_indices(split, max_examples)  # (N,)
        sums = torch.zeros(len(self.task.stat_names), dtype=torch.float64, device=self.env.device)
        for chunk in self._eval_batches(torch.split(idx, self.cfg.batch_size), split, final):
            mine = torch.tensor_split(chunk, self.env.world_size)[self.env.rank]
            if len(mine):
                batch = self.task.batch(split, mine).to(self.env.device)
                sums += self.task.stats(self.forward(self.model, batch), batch)
        return self.task.metrics(all_reduce_sum(sums, self.env).cpu(), split)

    def _eval_batches(self, chunks, split: str, final: bool):
        """``chunks``, under a bar when this is the final evaluation and bars show."""
        show = bar_wanted(self.env.is_main) if self._show_progress is None \
            else self._show_progress and self.env.is_main
        if not final or not show:
            return chunks
        from tqdm.auto import tqdm

        return tqdm(chunks, desc=f"final evaluation ({split})", unit="batch", leave=False,
                    dynamic_ncols=True, file=sys.stderr)

    # ---- the loop ------------------------------------------------------------------

    def wall_s(self) -> float:
        return self.wall_before + time.perf_counter() - self._t0

    def _due(self, every: int) -> bool:
        return every > 0 and self.step % every == 0

    def _log(self, record: dict[str, Any]) -> None:
        if self.env.is_main:
            self.run.append(record)
            for logger in self.loggers:
                logger.log(record)

    def _log_step(self, r: StepResult) -> None:
        if self._due(self.cfg.log_every) or self.step == self.cfg.steps:
            self._log({"step": self.step, "split": "train", "loss": r.loss, "lr": r.lr,
                       "grad_norm": r.grad_norm, "wall_s": round(self.wall_s(), 3),
                       "throughput": round(r.items / max(self._step_time, 1e-9), 1)})

    def _log_eval(self, split: str, max_examples: int, final: bool = False) -> dict[str, float]:
        if final:
            size = (f"at most {max_examples} examples" if max_examples else
                    "the whole split; --final-eval-batches N bounds it")
            self.progress.write(f"final evaluation of {split} ({size})")
        metrics = self.evaluate(split, max_examples, final=final)
        flag = {"final": True} if final else {}
        self._log({"step": self.step, "split": split, **metrics, **flag})
        shown = " ".join(f"{k}={v:.4f}" for k, v in metrics.items() if isinstance(v, float))
        self.progress.write(f"step {self.step} {split}: {shown}")
        return metrics

    def fit(self, callback: Callable[[Trainer], None] | None = None,
            every: int = 0) -> dict[str, Any]:
        """Train to ``cfg.steps``, evaluate, write the last checkpoint and summary.json.

        ``callback(trainer)`` runs after every ``every``-th step before the last (a learning
        curve of any measurement; the model is put back in training mode by the next step)."""
        self._callback, self._callback_every = callback, every
        self._t0 = time.perf_counter()
        self.progress = Progress(self.cfg.steps, self.step, self.task.unit,
                                 is_main=self.env.is_main, enabled=self._show_progress)
        for note in self.notes:
            self.progress.write(f"note: {note}")
        self.loggers = self._open_loggers()
        try:
            try:
                self._loop()
            finally:
                self.progress.close()
            return self.finish()
        finally:
            close_loggers(self.loggers)
            self.loggers = []

    def _loop(self) -> None:
        cfg = self.cfg
        while self.step < cfg.steps:
            t = time.perf_counter()
            result = self.train_step()
            self.step += 1
            self._step_time = time.perf_counter() - t
            self._log_step(result)
            self.progress.update(result.loss, result.items)
            if self._due(cfg.eval_every) and self.step < cfg.steps:
                self._log_eval("val", cfg.eval_batches * cfg.batch_size)
            if (self._callback is not None and self._due(self._callback_every)
                    and self.step < cfg.steps):
                self._callback(self)
            if self._due(cfg.checkpoint_every) and self.step < cfg.steps:
                self.save()

    def _open_loggers(self) -> list[MetricLogger]:
        if not self.env.is_main:
            return []
        return open_loggers(self.cfg.loggers, self.run.root, self.cfg.to_dict(),
                            self.run.read_metrics(), self.step)

    def _curves(self) -> dict[str, Any]:
        """curves.png of the whole run (rank 0), or why it was skipped."""
        if not self.env.is_main:
            return {}
        title = f"{self.cfg.model} on {self.cfg.data} ({Path(self.cfg.out).name})"
        curves = plot_curves(self.run.read_metrics(), self.run.root / "curves.png", title=title)
        if curves.skipped:
            self.progress.write(f"curves.png skipped: {curves.skipped}")
        return {"curves": {"path": curves.path, "skipped": curves.skipped}}

    def finish(self) -> dict[str, Any]:
        """Final checkpoint, evaluation of every split of the task, summary.json."""
        if self.saved_step != self.step:
            self.save()
        limit = self.cfg.final_eval_batches * self.cfg.batch_size
        final = {s: self._log_eval(s, limit, final=True) for s in self.task.eval_splits}
        summary = {**self.summary(final), **self._curves()}
        if self.env.is_main:
            write_json(self.run.summary, summary)
        barrier(self.env)
        return summary

    def summary(self, final: dict[str, dict[str, float]]) -> dict[str, Any]:
        extras = self.task.summary_extras(self.model, final)
        return {
            "step": self.step,
            "final": final,
            "parameters": {"total": self.model.num_parameters(),
                           "encoder": self.model.num_parameters(only_blocks=True)},
            "wall_time_s": round(self.wall_s(), 3),
            "world_size": self.env.world_size,
            "model": {"name": self.cfg.model, "family": self.model.family,
                      "config": _jsonable(self.model.config)},
            "data": {"name": getattr(self.data, "name", self.cfg.data), "kind": self.data.kind},
            "task": self.task.name,
            "config": self.cfg.to_dict(),
            **extras,
            "warnings": self.notes + extras.get("warnings", []),
        }


def _jsonable(config: Any) -> dict[str, Any]:
    """A dataclass config as it reads back from JSON (int dict keys become strings)."""
    return json.loads(json.dumps(dataclasses.asdict(config)))


def train(cfg: TrainConfig, *, resume: bool = False, **kwargs: Any) -> dict[str, Any]:
    """Run (or resume) ``cfg`` and return its summary (``resume_from=STEP``: see Trainer)."""
    return Trainer(cfg, resume=resume, **kwargs).fit()

"""Trainer overhead: data loading + logging + checkpointing as a fraction of step time.

Claim: at the tiny sizes the trainer adds <= 5% to the time of a bare step.

In one process, alternating ``--repeats`` times, this times

- ``trainer``: ``Trainer.fit`` for ``--steps`` steps (batches drawn by the resumable sampler
  and built by the task, a metrics.jsonl record every step, a checkpoint every
  ``--checkpoint-every`` steps and at the end; no evaluation, no progress bar), and
- ``bare``: the same model, optimiser, schedule and clipping on batches built beforehand,
  nothing else,

and reports ``overhead = (trainer - bare) / trainer`` (of the median per-step times, and the
median over adjacent pairs). Because a shared machine's load drifts between runs, it also
times the overhead *inside* each trainer run (seconds in the sampler and batch building,
metrics logging and checkpointing, over the loop's time): ``in_run_fraction``. Prints one
JSON object. Run: ``tokengeo bench trainer`` (or ``python benchmarks/trainer.py --case gpt``).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from tokengeo.train.config import TrainConfig
from tokengeo.train.trainer import Trainer, build_optimizer

CASES = {
    "vit": dict(model="vit-tiny", data="fashion-mnist", batch_size=64),
    "gpt": dict(model="gpt-tiny", data="shakespeare-char", batch_size=16,
                model_overrides={"block_size": 128}),
}


@dataclass
class TrainerBenchConfig:
    case: str = field(default="all", metadata={"choices": ("vit", "gpt", "all")})
    steps: int = 60
    checkpoint_every: int = 30
    repeats: int = 3
    threads: int = 1  # 1 avoids oversubscription on shared CPUs


class Clock:
    """Seconds spent in named parts of the trainer (wrapped callables)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def wrap(self, fn, part: str):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[part] = self.seconds.get(part, 0.0) + time.perf_counter() - start

        return timed


class TimedSampler:
    """The trainer's sampler, timed (``next`` is looked up on the type, so wrap the object)."""

    def __init__(self, inner, clock: Clock) -> None:
        self.inner, self._next = inner, clock.wrap(inner.__next__, "data")

    def __next__(self):
        return self._next()

    def state_dict(self):
        return self.inner.state_dict()


class LoopOnly(Trainer):
    """The trainer without the final evaluation (not overhead: work the user asked for),
    with its data loading, logging, progress and checkpointing timed."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.clock = Clock()
        self.sampler = TimedSampler(self.sampler, self.clock)
        self.task.batch = self.clock.wrap(self.task.batch, "data")
        self.run.append = self.clock.wrap(self.run.append, "logging")
        self.save = self.clock.wrap(self.save, "checkpointing")

    def fit(self) -> dict:
        start = time.perf_counter()
        super().fit()
        return {"loop_s": time.perf_counter() - start, **self.clock.seconds}

    def finish(self) -> dict:
        if self.saved_step != self.step:
            self.save()
        return {}


def trainer_seconds(cfg: TrainConfig, data) -> dict[str, float]:
    return LoopOnly(cfg, data=data, progress=False).fit()


def bare_seconds(cfg: TrainConfig, data) -> float:
    """Forward, backward, clip and AdamW step on pre-built batches, same model and rates."""
    setup = Trainer(cfg, data=data, progress=False)  # builds model/task; writes only config
    model, task, schedule = setup.model, setup.task, setup.schedule
    optimizer = build_optimizer(model, cfg)
    batches = [task.batch("train", next(setup.sampler)) for _ in range(cfg.steps)]
    model.train()
    start = time.perf_counter()
    for step, batch in enumerate(batches):
        schedule.apply(optimizer, step)
        loss = task.loss(model(batch.inputs, attention_mask=batch.attention_mask), batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        loss.item()  # the trainer reads the loss every step too
    return time.perf_counter() - start


def measure(case: str, steps: int, checkpoint_every: int, repeats: int) -> dict:
    from tokengeo.train.trainer import load_data

    with tempfile.TemporaryDirectory() as tmp:
        def config(tag: str, r: int) -> TrainConfig:
            return TrainConfig(**CASES[case], steps=steps, warmup=steps // 10, eval_every=0,
                               checkpoint_every=checkpoint_every, out=f"{tmp}/{tag}{r}")

        data = load_data(config("warm", 0))
        bare_seconds(config("warm", 1), data)  # warm-up: allocator, kernels, imports
        runs, bare_t = [], []
        for r in range(repeats):  # alternate, so both see the same machine load
            runs.append(trainer_seconds(config("trainer", r), data))
            bare_t.append(bare_seconds(config("bare", r), data) / steps)
        checkpoint_mb = sum(f.stat().st_size for f in Path(tmp, "trainer0").rglob("*.safetensors"))
    trainer_t = [run["loop_s"] / steps for run in runs]
    paired = [(t - b) / t for t, b in zip(trainer_t, bare_t, strict=True)]
    parts = {p: statistics.median(run.get(p, 0.0) / run["loop_s"] for run in runs)
             for p in ("data", "logging", "checkpointing")}
    trainer_med, bare_med = statistics.median(trainer_t), statistics.median(bare_t)
    return {
        "case": f"{CASES[case]['model']}/{CASES[case]['data']}",
        "batch_size": CASES[case]["batch_size"], "steps": steps,
        "checkpoint_every": checkpoint_every, "repeats": repeats,
        "trainer_step_ms_median": round(1e3 * trainer_med, 3),
        "bare_step_ms_median": round(1e3 * bare_med, 3),
        "overhead_fraction_of_medians": round((trainer_med - bare_med) / trainer_med, 4),
        "overhead_fraction_paired_median": round(statistics.median(paired), 4),
        "in_run_fraction": {p: round(v, 4) for p, v in parts.items()},
        "in_run_fraction_total": round(sum(parts.values()), 4),
        "trainer_step_ms": [round(1e3 * t, 3) for t in trainer_t],
        "bare_step_ms": [round(1e3 * t, 3) for t in bare_t],
        "checkpoint_mb": round(checkpoint_mb / 2**20, 2),
    }


def run(cfg: TrainerBenchConfig) -> dict:
    """The overhead of every case (``cfg.case``: a name of ``CASES`` or ``"all"``)."""
    torch.set_num_threads(cfg.threads)
    cases = list(CASES) if cfg.case == "all" else [cfg.case]
    results = [measure(c, cfg.steps, cfg.checkpoint_every, cfg.repeats) for c in cases]
    return {
        "claim": "trainer overhead (data, logging, checkpointing) <= 5% of step time",
        "target_fraction": 0.05,
        "max_in_run_fraction": max(r["in_run_fraction_total"] for r in results),
        "cases": results,
        "torch": torch.__version__, "threads": torch.get_num_threads(),
    }

"""Trainer overhead: data loading + logging + checkpointing as a fraction of step time.

Claim (issue 3): at the tiny sizes the trainer adds <= 5% to the time of a bare step.

In one process, alternating ``--repeats`` times, this times

- ``trainer``: ``Trainer.fit`` for ``--steps`` steps (batches drawn by the resumable sampler
  and built by the task, a metrics.jsonl record every step, a checkpoint every
  ``--checkpoint-every`` steps and at the end; no evaluation, no progress bar), and
- ``bare``: the same model, optimiser, schedule and clipping on batches built beforehand,
  nothing else,

and reports ``overhead = (trainer - bare) / trainer`` of the median per-step times. Prints one
JSON object. Run: ``python benchmarks/trainer_overhead.py [--case vit|gpt|all] [--threads 1]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

from tokengeo.train.config import TrainConfig
from tokengeo.train.trainer import Trainer, build_optimizer

CASES = {
    "vit": dict(model="vit-tiny", data="fashion-mnist", batch_size=64),
    "gpt": dict(model="gpt-tiny", data="shakespeare-char", batch_size=16,
                model_overrides={"block_size": 128}),
}


class LoopOnly(Trainer):
    """The trainer without the final evaluation (not overhead: work the user asked for)."""

    def finish(self) -> dict:
        if self.saved_step != self.step:
            self.save()
        return {}


def trainer_seconds(cfg: TrainConfig, data) -> float:
    trainer = LoopOnly(cfg, data=data, progress=False)
    start = time.perf_counter()
    trainer.fit()
    return time.perf_counter() - start


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
        trainer_t, bare_t = [], []
        for r in range(repeats):
            trainer_t.append(trainer_seconds(config("trainer", r), data) / steps)
            bare_t.append(bare_seconds(config("bare", r), data) / steps)
        checkpoint_mb = sum(f.stat().st_size for f in Path(tmp, "trainer0").rglob("*.safetensors"))
    trainer_med, bare_med = statistics.median(trainer_t), statistics.median(bare_t)
    return {
        "case": f"{CASES[case]['model']}/{CASES[case]['data']}",
        "batch_size": CASES[case]["batch_size"], "steps": steps,
        "checkpoint_every": checkpoint_every, "repeats": repeats,
        "trainer_step_ms_median": round(1e3 * trainer_med, 3),
        "bare_step_ms_median": round(1e3 * bare_med, 3),
        "overhead_fraction": round((trainer_med - bare_med) / trainer_med, 4),
        "trainer_step_ms": [round(1e3 * t, 3) for t in trainer_t],
        "bare_step_ms": [round(1e3 * t, 3) for t in bare_t],
        "checkpoint_mb": round(checkpoint_mb / 2**20, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--case", choices=[*CASES, "all"], default="all")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--checkpoint-every", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1 avoids oversubscription on shared CPUs)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cases = list(CASES) if args.case == "all" else [args.case]
    results = [measure(c, args.steps, args.checkpoint_every, args.repeats) for c in cases]
    print(json.dumps({
        "claim": "trainer overhead (data, logging, checkpointing) <= 5% of step time",
        "target_fraction": 0.05,
        "max_overhead_fraction": max(r["overhead_fraction"] for r in results),
        "cases": results,
        "torch": torch.__version__, "threads": torch.get_num_threads(),
    }))


if __name__ == "__main__":
    main()

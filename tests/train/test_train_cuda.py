"""The trainer on CUDA (skipped where there is none): a few bf16-autocast steps of a tiny
ViT and GPT with Laplacian heads, checked against the same weights run in fp32 on the CPU."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from tokengeo.train import TrainConfig, Trainer

pytestmark = pytest.mark.cuda

CASES = {
    "vit": dict(model="vit-tiny", data="digits", model_overrides={
        "d_model": 32, "n_layers": 2, "n_heads": 4, "patch_size": 2}),
    "gpt": dict(model="gpt-tiny", data="shakespeare-char", model_overrides={
        "d_model": 32, "n_layers": 2, "n_heads": 4, "block_size": 32}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_trainer_runs_bf16_on_cuda_like_the_cpu_reference(case, tmp_path, require_source):
    from tokengeo.data import sources

    if case == "gpt":  # a GPU machine may lack the Shakespeare package (the H200 run did)
        require_source(sources.SHAKESPEARE)
    cfg = TrainConfig(**CASES[case], n_laplacian=2, steps=4, batch_size=16, warmup=1,
                      eval_every=0, final_eval_batches=1, checkpoint_every=2,
                      precision="bf16", device="cuda", out=str(tmp_path / "run"))
    trainer = Trainer(cfg, progress=False)
    summary = trainer.fit()
    assert trainer.autocast_dtype == torch.bfloat16
    assert all(p.device.type == "cuda" and p.dtype == torch.float32
               for p in trainer.model.parameters())
    losses = [m["loss"] for m in summary["final"].values()]
    assert all(math.isfinite(v) for v in losses), summary["final"]

    # the same weights on one batch: CUDA bf16 autocast against the CPU in fp32
    batch = trainer.task.batch("val" if case == "gpt" else "test", torch.arange(8))
    with torch.no_grad():
        got = trainer.forward(trainer.model.eval(), batch.to(trainer.env.device)).float().cpu()
        reference = copy.deepcopy(trainer.model).cpu().float().eval()
        want = reference(batch.inputs, attention_mask=batch.attention_mask)
    scale = want.abs().max().item()
    assert (got - want).abs().max().item() <= 0.05 * scale + 0.05  # bf16: ~3 digits
    assert got.argmax(-1).eq(want.argmax(-1)).float().mean() >= 0.9

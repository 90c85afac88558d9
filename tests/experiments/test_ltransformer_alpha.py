"""The learnable α of the L-Transformer's positional code is trained: it is in the
optimizer (no weight decay, the run's learning rate) and AdamW steps move it."""

import torch

import tokengeo
from tokengeo.train.config import TrainConfig
from tokengeo.train.trainer import build_optimizer


def test_the_learnable_alpha_is_in_the_optimizer_and_moves():
    torch.manual_seed(0)
    model = tokengeo.create_model("ltransformer-tiny", alpha="learnable")
    log_alpha = model.pos_enc.log_alpha
    opt = build_optimizer(model, TrainConfig(lr=1e-2, weight_decay=0.1))
    group = next(g for g in opt.param_groups if any(p is log_alpha for p in g["params"]))
    assert group["weight_decay"] == 0.0 and group["lr"] == 1e-2
    start = log_alpha.detach().clone()
    x = torch.randint(0, 100, (4, 16))
    for _ in range(5):
        opt.zero_grad()
        out = model(x)
        (out if torch.is_tensor(out) else out[0]).float().pow(2).mean().backward()
        opt.step()
    assert log_alpha.grad is not None and log_alpha.grad.abs().sum() > 0
    assert not torch.equal(log_alpha.detach(), start)  # α = exp(β) left its start at 1

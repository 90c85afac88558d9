"""The learnable α of the L-Transformer's positional code is trained: it is in the
optimizer (no weight decay, the run's learning rate) and AdamW steps move it."""

import pytest
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


# ---------------------------------------------------------------- reported by the cell


def test_learned_alpha_reports_exp_beta_and_the_group_that_trains_it():
    from tokengeo.experiments.training import learned_alpha

    model = tokengeo.create_model("ltransformer-tiny", alpha="learnable")
    with torch.no_grad():
        model.pos_enc.log_alpha.copy_(torch.tensor([0.0, 0.5, -0.5, 1.0]))
    rec = learned_alpha(model, build_optimizer(model, TrainConfig(lr=3e-3)), 3e-3)
    assert rec["alpha"] == pytest.approx([1.0, 1.6487213, 0.6065307, 2.7182818])
    assert rec["group"] == 1 and rec["lr"] == 3e-3 and rec["weight_decay"] == 0.0
    fixed = tokengeo.create_model("ltransformer-tiny", alpha="linear")
    assert learned_alpha(fixed, build_optimizer(fixed, TrainConfig()), 1e-3) is None


def test_an_untrained_learnable_alpha_is_an_error_not_a_report():
    from tokengeo.experiments.training import learned_alpha

    model = tokengeo.create_model("ltransformer-tiny", alpha="learnable")
    others = [p for p in model.parameters() if p is not model.pos_enc.log_alpha]
    with pytest.raises(RuntimeError, match="learnable α is not trained"):
        learned_alpha(model, torch.optim.AdamW(others, lr=1e-3), 1e-3)  # β in no group
    with pytest.raises(RuntimeError, match="peak lr 0"):
        learned_alpha(model, build_optimizer(model, TrainConfig()), 0.0)


@pytest.mark.slow
def test_a_training_cell_returns_the_trained_alpha(tmp_path):
    from tokengeo.experiments.training import train_cell
    from tokengeo.train.loading import load_model

    config = {"model": "ltransformer-tiny", "data": "rotten-tomatoes", "steps": 3,
              "batch_size": 8, "lr": 1e-2, "warmup": 1, "eval_every": 0,
              "data_options": {"max_len": 32},
              "model_overrides": {"d_model": 32, "p": 4, "n_heads": 1, "n_layers": 1,
                                  "alpha": "learnable"}}
    out = train_cell(str(tmp_path / "run"), config)
    rec = out["learned_alpha"]
    saved = load_model(tmp_path / "run").pos_enc.alphas()
    assert rec["alpha"] == pytest.approx(saved.tolist())  # the final checkpoint's α
    assert any(abs(a - 1.0) > 1e-4 for a in rec["alpha"])  # trained away from its start
    assert rec["lr"] == 1e-2 and rec["weight_decay"] == 0.0

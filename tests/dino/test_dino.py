"""DINO: loss, EMA teacher, centering, augmentations, k-NN / probe, IoU, collapse, resume."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from tokengeo.dino.augment import (
    CropConfig,
    gaussian_blur,
    intensity_jitter,
    multi_crop,
    random_resized_crop,
    solarize,
)
from tokengeo.dino.evaluate import (
    collapse_warning,
    embedding_spread,
    evaluate_backbone,
    knn_predict,
    linear_probe,
)
from tokengeo.dino.head import DINOHead
from tokengeo.dino.model import DINO, DINOConfig, cosine_momentum, dino_loss
from tokengeo.dino.segmentation import foreground_masks, iou, pca_iou, save_pca_figure
from tokengeo.errors import ConfigError
from tokengeo.models.registry import create_model
from tokengeo.train.config import TrainConfig
from tokengeo.train.trainer import Trainer

TINY_VIT = {"d_model": 32, "n_layers": 2, "n_heads": 4, "mlp_ratio": 2.0}
SMALL_HEAD = {"out_dim": 64, "hidden_dim": 32, "bottleneck_dim": 16, "knn_bank": 300,
              "crops": {"local_size": 4, "n_local": 2}}


pytestmark = pytest.mark.usefixtures("one_thread")


def dino_config(out, **kw) -> TrainConfig:
    base = dict(model="vit-tiny", data="digits", task="dino", steps=6, batch_size=16, warmup=2,
                eval_every=3, eval_batches=4, checkpoint_every=3, out=str(out),
                model_overrides=TINY_VIT, task_options=SMALL_HEAD)
    return TrainConfig(**{**base, **kw})


def tiny_dino(total_steps: int = 10, **options) -> DINO:
    backbone = create_model("vit-tiny", **TINY_VIT, image_size=8, num_classes=10)
    cfg = DINOConfig.from_options({**SMALL_HEAD, **options})
    return DINO(backbone, cfg, total_steps)


# ---- loss, teacher, centre ----------------------------------------------------------


def test_dino_loss_matches_the_pairwise_cross_entropy_by_hand():
    B, K, V = 3, 5, 4
    s, t = torch.randn(V * B, K), torch.randn(2 * B, K)
    c = torch.randn(1, K)
    got = dino_loss(s, t, c, 2, student_temp=0.1, teacher_temp=0.04)
    terms = []
    for a in range(2):
        for b in range(V):
            if a != b:
                p_t = torch.softmax((t[a * B:(a + 1) * B] - c) / 0.04, -1)
                logp_s = torch.log_softmax(s[b * B:(b + 1) * B] / 0.1, -1)
                terms.extend((-(p_t * logp_s).sum(-1)).tolist())
    assert got.item() == pytest.approx(sum(terms) / len(terms), rel=1e-5)


def test_teacher_update_is_the_ema_of_the_student_by_hand():
    model = tiny_dino(total_steps=10, teacher_momentum=0.9)
    with torch.no_grad():
        for p in model.student.parameters():
            p.add_(torch.randn_like(p))
    teacher_before = {k: v.clone() for k, v in model.teacher.state_dict().items()}
    student = model.student.state_dict()
    lam = model.update_teacher()
    assert lam == pytest.approx(0.9)  # cosine schedule starts at the base momentum
    for name, value in model.teacher.state_dict().items():
        expected = 0.9 * teacher_before[name] + 0.1 * student[name]
        assert torch.allclose(value, expected, atol=1e-6), name
    assert int(model.updates) == 1
    assert cosine_momentum(10, 10, 0.9) == pytest.approx(1.0)
    assert cosine_momentum(5, 10, 0.9) == pytest.approx(0.95)


def test_teacher_has_no_gradients_and_starts_equal_to_the_student():
    model = tiny_dino()
    assert all(not p.requires_grad for p in model.teacher.parameters())
    for (n, a), (_, b) in zip(model.student.state_dict().items(),
                              model.teacher.state_dict().items(), strict=True):
        assert torch.equal(a, b), n


def test_centering_makes_the_teacher_batch_mean_zero():
    model = tiny_dino(center_momentum=0.0)  # the centre becomes the batch mean
    t = torch.randn(12, 64) * 3 + 5
    model.update_center(t)
    assert (t - model.center).mean(0).abs().max() < 1e-5
    model = tiny_dino(center_momentum=0.9)
    model.update_center(t)
    assert torch.allclose(model.center, 0.1 * t.mean(0, keepdim=True), atol=1e-6)


def test_head_last_layer_rows_have_unit_norm():
    head = DINOHead(8, 20, hidden_dim=16, bottleneck_dim=6)
    assert torch.allclose(head.last_weight().norm(dim=1), torch.ones(20))
    assert not head.last_gain.requires_grad
    assert head(torch.randn(4, 8)).shape == (4, 20)


def test_frozen_last_layer_gets_no_update_in_the_first_steps():
    model = tiny_dino(freeze_last_layer=1)
    views = (torch.randn(4, 1, 8, 8), torch.randn(4, 1, 4, 4))
    model(views).backward()
    assert model.student_head.last_direction.grad is not None
    model.cancel_last_layer_gradients()
    assert model.student_head.last_direction.grad is None


# ---- augmentations ------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(b=st.integers(1, 4), c=st.sampled_from([1, 3]), size=st.sampled_from([8, 12, 16]),
       seed=st.integers(0, 1000))
def test_augmentations_keep_shapes_and_the_unit_range(b, c, size, seed):
    torch.manual_seed(seed)
    x = torch.rand(b, c, 16, 16)
    cfg = CropConfig(global_size=size, local_size=4, n_local=3)
    g, loc = multi_crop(x, cfg)
    assert g.shape == (2 * b, c, size, size) and loc.shape == (3 * b, c, 4, 4)
    for v in (g, loc, intensity_jitter(x, 1.0, 0.4, 0.4, 0.2), gaussian_blur(x, 1.0, (0.1, 1.0)),
              solarize(x, 1.0)):
        assert v.min() >= 0 and v.max() <= 1 + 1e-6


def test_full_crop_without_flip_is_the_identity_and_operations_are_exact():
    x = torch.rand(3, 1, 12, 12)
    same = random_resized_crop(x, 12, (1.0, 1.0), (1.0, 1.0), flip=False)
    assert torch.allclose(same, x, atol=1e-6)
    assert torch.equal(gaussian_blur(x, 0.0, (0.5, 1.0)), x)  # p = 0: untouched
    blurred = gaussian_blur(x, 1.0, (1.0, 1.0))
    assert blurred.mean().item() == pytest.approx(x.mean().item(), abs=0.02)
    assert blurred.std() < x.std()
    assert torch.equal(solarize(x, 1.0), torch.where(x >= 0.5, 1 - x, x))
    flips = [random_resized_crop(x, 12, (1.0, 1.0), (1.0, 1.0)) for _ in range(20)]
    assert any(torch.allclose(f, x.flip(-1), atol=1e-6) for f in flips)


def test_vit_accepts_other_square_sizes_through_interpolated_positions():
    vit = create_model("vit-tiny", **TINY_VIT)
    assert torch.equal(vit.position_embedding(7), vit.pos_embed)
    assert vit.forward_features(torch.randn(2, 1, 16, 16)).shape == (2, 17, 32)
    with pytest.raises(ConfigError, match="divisible by patch_size"):
        vit(torch.randn(2, 1, 18, 18))


# ---- evaluation -----------------------------------------------------------------------


def test_knn_matches_a_slow_reference():
    train, labels = torch.randn(40, 6), torch.randint(0, 3, (40,))
    query = torch.randn(9, 6)
    got = knn_predict(train, labels, query, 3, k=5, temperature=0.1)
    for i, q in enumerate(query):
        sims = [float(F.cosine_similarity(q, t, dim=0)) for t in train]
        top = sorted(range(40), key=lambda j: -sims[j])[:5]
        votes = [sum(math.exp(sims[j] / 0.1) for j in top if labels[j] == c) for c in range(3)]
        assert got[i] == max(range(3), key=lambda c: votes[c])


def test_linear_probe_separates_separable_classes():
    centres = torch.randn(4, 10) * 4
    y = torch.arange(200) % 4
    x = centres[y] + torch.randn(200, 10) * 0.3
    probe = linear_probe(x[:120], y[:120], x[120:160], y[120:160], x[160:], y[160:], 4)
    assert probe.accuracy == 1.0 and probe.val_accuracy == 1.0


def test_collapse_is_detected():
    same = torch.randn(1, 8).expand(10, 8)
    assert embedding_spread(same) < 1e-6
    assert "collapse" in collapse_warning(embedding_spread(same))
    assert collapse_warning(embedding_spread(torch.randn(10, 8))) is None


def test_iou_on_hand_made_masks():
    a = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0], [1, 0, 1, 0]], dtype=torch.bool)
    b = torch.tensor([[1, 0, 0, 0], [0, 0, 0, 0], [0, 1, 0, 1]], dtype=torch.bool)
    assert iou(a, b).tolist() == [0.5, 1.0, 0.0]
    images = torch.zeros(1, 1, 4, 4, dtype=torch.uint8)
    images[0, 0, :2, :2] = 200  # the top-left 2x2 patch is the object
    images[0, 0, 2, 2] = 9  # one bright pixel in the bottom-right patch: a quarter, not more
    assert foreground_masks(images, 2).tolist() == [[True, False, False, False]]


def test_pca_iou_finds_a_planted_foreground_with_either_sign():
    masks = torch.rand(5, 16) < 0.4
    fg, bg = torch.randn(8), torch.randn(8)
    tokens = torch.where(masks[..., None], fg, bg) + 0.01 * torch.randn(5, 16, 8)
    assert torch.allclose(pca_iou(tokens, masks), torch.ones(5))
    assert torch.allclose(pca_iou(-tokens, masks), torch.ones(5))


def test_backbone_evaluation_and_pca_figure_on_real_digits(tmp_path):
    from tokengeo.data import load_dataset

    data = load_dataset("digits")
    vit = create_model("vit-tiny", **TINY_VIT, image_size=8, num_classes=10)
    ev = evaluate_backbone(vit, data, n_train=300, n_test=100)
    assert 0.1 < ev.knn_accuracy <= 1 and 0 <= ev.iou <= 1
    assert 0 <= ev.seg_chance_miou <= 1 and 0 <= ev.seg_miou <= 1
    assert 1 <= ev.patch_components_99 <= 32 and ev.n_test == 100
    images, _ = data.split("test")[torch.arange(4)]
    patches = vit.patch_tokens(vit.forward_features(data.normalize(images))).detach()
    path = save_pca_figure(images, {"k=0": patches, "k=4": patches}, 2, tmp_path / "pca.png")
    assert path.stat().st_size > 1000


# ---- training through the trainer --------------------------------------------------------


def _train_losses(run) -> list[float]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r["loss"] for r in rows if r["split"] == "train"]


def test_dino_micro_run_loss_is_finite_and_decreases(tmp_path):
    # With the teacher and the centre held fixed (momenta 1) the DINO loss is a fixed
    # objective of the student, so the student's optimisation must lower it. (Under the full
    # dynamics the loss first rises towards ln K while the centre catches up with the teacher:
    # Caron et al. 2021, Sec. 5.3; that run is checked for finiteness below.)
    frozen = {**SMALL_HEAD, "teacher_momentum": 1.0, "center_momentum": 1.0}
    cfg = dino_config(tmp_path / "frozen", steps=40, eval_every=0, checkpoint_every=0, lr=3e-3,
                      warmup=5, task_options=frozen)
    Trainer(cfg, progress=False).fit()
    losses = _train_losses(tmp_path / "frozen")
    assert all(math.isfinite(v) for v in losses)
    assert sum(losses[-10:]) / 10 < 0.8 * losses[0]

    cfg = dino_config(tmp_path / "run", steps=40, eval_every=0, checkpoint_every=0, lr=3e-3,
                      warmup=5)
    summary = Trainer(cfg, progress=False).fit()
    assert all(math.isfinite(v) for v in _train_losses(tmp_path / "run"))
    assert summary["task"] == "dino"
    assert summary["knn_accuracy"] == summary["final"]["test"]["knn_accuracy"]
    assert summary["teacher_updates"] == 40


def test_dino_resume_matches_the_uninterrupted_run(tmp_path, monkeypatch):
    full = Trainer(dino_config(tmp_path / "full"), progress=False)
    full.fit()
    cfg = dino_config(tmp_path / "cut")
    original = Trainer.train_step

    def dying(self):
        if self.step + 1 == 5:
            raise KeyboardInterrupt
        return original(self)

    with monkeypatch.context() as m:
        m.setattr(Trainer, "train_step", dying)
        with pytest.raises(KeyboardInterrupt):
            Trainer(cfg, progress=False).fit()
    resumed = Trainer(cfg, resume=True, progress=False)
    resumed.fit()
    a, b = full.model.state_dict(), resumed.model.state_dict()
    assert a.keys() == b.keys() and any(k.startswith("teacher.") for k in a)
    for name in a:
        assert torch.equal(a[name], b[name]), name
    finals = [json.loads((tmp_path / d / "summary.json").read_text())["final"]
              for d in ("full", "cut")]
    assert finals[0] == finals[1]


def test_collapsed_backbone_gives_a_summary_warning(tmp_path):
    trainer = Trainer(dino_config(tmp_path / "run"), progress=False)
    with torch.no_grad():  # a teacher whose features are all equal
        trainer.model.teacher.ln_final.weight.zero_()
        trainer.model.teacher.ln_final.bias.fill_(1.0)
    final = {"test": trainer.task.evaluate(trainer.model, "test", 64, 16)}
    extras = trainer.task.summary_extras(trainer.model, final)
    assert final["test"]["embedding_spread"] < 1e-6
    assert len(extras["warnings"]) == 1 and "collapse" in extras["warnings"][0]


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"task_options": {"out_dimm": 3}}, "unknown DINO task option"),
        ({"task_options": {"crops": {"local_size": 5}}}, "not a multiple of patch_size"),
        ({"task_options": {"teacher_momentum": 1.5}}, "teacher_momentum"),
        ({"task": "auto", "task_options": {"out_dim": 3}}, "need an explicit --task"),
        ({"task": "dino-v2", "task_options": {}}, r"unknown task 'dino-v2'.*'dino'"),
        ({"data": "shakespeare-char", "model": "gpt-tiny", "model_overrides": {}},
         "cannot do|needs image-classification"),
    ],
)
def test_bad_dino_settings_are_refused(tmp_path, kw, match):
    with pytest.raises(ConfigError, match=match):
        Trainer(dino_config(tmp_path / "run", **kw), progress=False)
    assert not (tmp_path / "run").exists()


def test_cli_dino_bad_option_exits_2(tmp_path, capsys):
    from tokengeo.cli import main

    code = main(["train", "--task", "dino", "--data", "digits", "--out", str(tmp_path / "r"),
                 "--set", "task_options.knn_k=0"])
    assert code == 2
    err = capsys.readouterr().err
    assert "knn_k" in err and "Traceback" not in err


def test_probe_command_scores_a_dino_run(tmp_path, capsys):
    from tokengeo.cli import main

    Trainer(dino_config(tmp_path / "run", eval_every=0, checkpoint_every=0),
            progress=False).fit()
    capsys.readouterr()
    assert main(["probe", str(tmp_path / "run"), "--examples", "50"]) == 0
    probe = json.loads((tmp_path / "run" / "probe.json").read_text())["backbone"]
    assert 0 <= probe["knn_accuracy"] <= 1 and probe["n_test"] == 50
    assert (tmp_path / "run" / "pca_patch_tokens.png").exists()
    assert "knn_accuracy" in capsys.readouterr().out

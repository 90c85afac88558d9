"""W_2 between token clouds on the sphere (tokengeo.flows.transport) on hand cases."""

import math

import pytest
import torch

from tokengeo.errors import ConfigError
from tokengeo.flows.transport import late_movement, sphere_w2


def _circle(angles):
    a = torch.tensor(angles, dtype=torch.float64)
    return torch.stack([a.cos(), a.sin(), torch.zeros_like(a)], dim=-1)  # (n, 3)


def test_a_cloud_and_its_relabelling_are_zero_apart():
    x = _circle([0.0, 1.0, 2.5, 4.0])
    assert sphere_w2(x, x[[2, 0, 3, 1]]) == pytest.approx(0.0, abs=1e-7)


def test_a_rotated_cloud_is_the_rotation_angle_apart():
    angles = [0.0, 2.0, 4.0]
    assert sphere_w2(_circle(angles), _circle([a + 0.3 for a in angles])) == pytest.approx(
        0.3, rel=1e-9)


def test_the_optimal_plan_is_found_not_the_labels():
    # x = {0, pi}, y = {pi + 0.1, 0.1}: the labelled pairing moves pi - 0.1, the plan 0.1
    x, y = _circle([0.0, math.pi]), _circle([math.pi + 0.1, 0.1])
    assert sphere_w2(x, y) == pytest.approx(0.1, rel=1e-9)


def test_half_the_points_moving_gives_the_root_mean_square():
    x, y = _circle([0.0, 3.0]), _circle([0.0, 3.4])
    assert sphere_w2(x, y) == pytest.approx(math.sqrt(0.4**2 / 2), rel=1e-9)


def test_late_movement_compares_the_record_nearest_half_time_with_the_last():
    t = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0])
    frames = torch.stack([_circle([0.1 * k, 2 + 0.1 * k]) for k in range(5)])  # (R, n, 3)
    moved = late_movement(t, frames[None])  # record 2 (t = 2) against record 4
    assert moved == pytest.approx([0.2], rel=1e-9)


def test_bad_shapes_are_refused():
    with pytest.raises(ConfigError, match="one shape"):
        sphere_w2(_circle([0.0]), _circle([0.0, 1.0]))
    with pytest.raises(ConfigError, match="trajectory"):
        late_movement(torch.zeros(3), torch.zeros(3, 2, 3))

"""The CFM targets of ``mara_agents/forecast/matcher.py``, recomputed by hand."""

from __future__ import annotations

import pytest
import torch

from mara_agents.forecast.matcher import ConditionalFlowMatcher


def test_targets_by_hand():
    """x_t = (1 - (1 - s) t) x0 + t x1 and u_t = x1 - (1 - s) x0 with s = 0.1:

    row 0, t = 0.25: x_t = 0.775 * [1, 2] + 0.25 * [3, 4] = [1.525, 2.55],
                     u_t = [3, 4] - 0.9 * [1, 2] = [2.1, 2.2];
    row 1, t = 1:    x_t = 0.1 * [0, -1] + [1, 1] = [1, 0.9],
                     u_t = [1, 1] - 0.9 * [0, -1] = [1, 1.9].
    """
    x0 = torch.tensor([[1.0, 2.0], [0.0, -1.0]])
    x1 = torch.tensor([[3.0, 4.0], [1.0, 1.0]])
    t = torch.tensor([0.25, 1.0])
    t_out, xt, ut = ConditionalFlowMatcher(sigma_min=0.1).sample_location_and_conditional_flow(
        x0, x1, t)
    assert torch.equal(t_out, t)
    torch.testing.assert_close(xt, torch.tensor([[1.525, 2.55], [1.0, 0.9]]))
    torch.testing.assert_close(ut, torch.tensor([[2.1, 2.2], [1.0, 1.9]]))


def test_ut_is_the_time_derivative_of_xt():
    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(5, 7, generator=g, dtype=torch.float64)
    x1 = torch.randn(5, 7, generator=g, dtype=torch.float64)
    t = torch.rand(5, generator=g, dtype=torch.float64) * 0.9
    m = ConditionalFlowMatcher(sigma_min=0.05)
    h = 1e-6
    fd = (m.compute_xt(x0, x1, t + h) - m.compute_xt(x0, x1, t - h)) / (2 * h)
    torch.testing.assert_close(fd, m.compute_ut(x0, x1, t), rtol=1e-6, atol=1e-6)
    # end points: t = 0 is the noise, t = 1 is the data up to sigma_min * x0
    torch.testing.assert_close(m.compute_xt(x0, x1, torch.zeros(5, dtype=torch.float64)), x0)
    torch.testing.assert_close(m.compute_xt(x0, x1, torch.ones(5, dtype=torch.float64)),
                               x1 + 0.05 * x0)


def test_sampled_times_come_from_the_generator():
    m = ConditionalFlowMatcher()
    x = torch.zeros(64, 3)
    t1, *_ = m.sample_location_and_conditional_flow(x, x, generator=torch.Generator()
                                                    .manual_seed(1))
    t2, *_ = m.sample_location_and_conditional_flow(x, x, generator=torch.Generator()
                                                    .manual_seed(1))
    t3, *_ = m.sample_location_and_conditional_flow(x, x, generator=torch.Generator()
                                                    .manual_seed(2))
    assert torch.equal(t1, t2) and not torch.equal(t1, t3)
    assert t1.shape == (64,) and bool((t1 >= 0).all() and (t1 < 1).all())


def test_bad_input():
    m = ConditionalFlowMatcher()
    with pytest.raises(ValueError, match="equal shapes"):
        m.sample_location_and_conditional_flow(torch.zeros(2, 3), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="t: expected shape"):
        m.sample_location_and_conditional_flow(torch.zeros(2, 3), torch.zeros(2, 3),
                                               torch.zeros(3))
    with pytest.raises(ValueError, match="sigma_min"):
        ConditionalFlowMatcher(sigma_min=1.0)

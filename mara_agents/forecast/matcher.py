"""Conditional flow matching targets: (t, x_t, u_t) for the optimal-transport path.

The matcher knows nothing about the network (as torchcfm's ``ConditionalFlowMatcher``): it
turns a batch of noise ``x0``, data ``x1`` and times ``t`` into the point ``x_t`` on the
conditional path and the conditional velocity ``u_t`` there, which the network regresses.

Optimal-transport (straight) conditional path of Lipman et al. 2023, "Flow Matching for
Generative Modeling", Sec. 4.1, with ``x0 ~ N(0, I)`` and a small end width ``sigma_min``:

* eq. 20: ``mu_t(x1) = t x1``, ``sigma_t = 1 - (1 - sigma_min) t``;
* eq. 22: the flow ``psi_t(x0) = (1 - (1 - sigma_min) t) x0 + t x1``;
* eq. 21 evaluated at ``x = psi_t(x0)``: ``u_t = d psi_t(x0) / dt = x1 - (1 - sigma_min) x0``;
* eq. 23: the CFM loss ``E_{t, x1, x0} || v_theta(t, psi_t(x0)) - (x1 - (1 - sigma_min) x0) ||^2``,
  with ``t ~ U[0, 1]``.

With ``sigma_min = 0`` this is the independent-coupling CFM (I-CFM with sigma = 0) of Tong
et al. 2023, "Improving and generalizing flow-based generative models with minibatch optimal
transport". Here the data ``x1`` are future log-loss trajectories and the network is
conditioned on the observed prefix; conditioning does not change the targets.

Subclasses change the path by overriding :meth:`compute_xt` and :meth:`compute_ut`.
"""

from __future__ import annotations

import torch
from torch import Tensor


class ConditionalFlowMatcher:
    """Builds the CFM regression targets of the straight path (Lipman et al. 2023 eq. 20-23).

    Args:
        sigma_min: width of the conditional path at ``t = 1``, in [0, 1).
    """

    def __init__(self, sigma_min: float = 1e-4) -> None:
        if not (isinstance(sigma_min, (int, float)) and 0.0 <= sigma_min < 1.0):
            raise ValueError(f"sigma_min: expected a number in [0, 1), got {sigma_min!r}")
        self.sigma_min = float(sigma_min)

    def sample_t(self, batch_size: int, generator: torch.Generator | None = None,
                 device: torch.device | str | None = None) -> Tensor:
        """Draw times ``t ~ U[0, 1)``.

        Args:
            batch_size: B.
            generator: the source of randomness (``None``: torch's global generator; the
                training code always passes one).
            device: where to put the result.

        Returns:
            float32[B] times.
        """
        if batch_size < 0:
            raise ValueError(f"batch_size: expected >= 0, got {batch_size}")
        return torch.rand(batch_size, generator=generator, device=device)

    def compute_xt(self, x0: Tensor, x1: Tensor, t: Tensor) -> Tensor:
        """The point on the path, ``x_t = (1 - (1 - sigma_min) t) x0 + t x1`` (eq. 22).

        Args:
            x0: float[B, H] noise.
            x1: float[B, H] data.
            t: float[B] times.

        Returns:
            float[B, H].
        """
        tt = t.reshape(-1, *([1] * (x0.dim() - 1)))
        return (1.0 - (1.0 - self.sigma_min) * tt) * x0 + tt * x1

    def compute_ut(self, x0: Tensor, x1: Tensor, t: Tensor) -> Tensor:
        """The conditional velocity ``u_t = x1 - (1 - sigma_min) x0`` (eq. 21 at x_t, eq. 23).

        Args:
            x0: float[B, H] noise.
            x1: float[B, H] data.
            t: float[B] times (unused by the straight path; kept for subclasses).

        Returns:
            float[B, H].
        """
        del t
        return x1 - (1.0 - self.sigma_min) * x0

    def sample_location_and_conditional_flow(
            self, x0: Tensor, x1: Tensor, t: Tensor | None = None,
            generator: torch.Generator | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Sample (or take) times and return the regression targets.

        Args:
            x0: float[B, H] noise samples.
            x1: float[B, H] data samples (paired row by row with ``x0``).
            t: float[B] times in [0, 1], or ``None`` to draw them with :meth:`sample_t`.
            generator: used only when ``t`` is ``None``.

        Returns:
            ``(t, x_t, u_t)``: float[B], float[B, H], float[B, H].

        Raises:
            ValueError: if the shapes do not agree.
        """
        if x0.shape != x1.shape or x0.dim() < 1:
            raise ValueError(f"x0, x1: expected equal shapes [B, ...], got {tuple(x0.shape)} "
                             f"and {tuple(x1.shape)}")
        if t is None:
            t = self.sample_t(x0.shape[0], generator=generator, device=x0.device)
        if t.shape != (x0.shape[0],):
            raise ValueError(f"t: expected shape ({x0.shape[0]},), got {tuple(t.shape)}")
        t = t.to(x0.dtype)
        return t, self.compute_xt(x0, x1, t), self.compute_ut(x0, x1, t)

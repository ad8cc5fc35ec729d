"""The loss-curve families and their mixes: the parameter ranges behind every synthetic
curve, and which real curve banks a real mix replays (SPEC §6).

A mix (:data:`MIXES`) is a tuple of (family, weight) pairs: a :class:`FamilyParams` gives the
ranges a synthetic family's parameters are drawn from, a :class:`RealFamily` names a split of
a shipped curve bank (:mod:`core_env.banks`). :mod:`core_env.curves` draws and tabulates the
curves (and re-exports these names)::

    [p.family for p, _ in MIXES["train"]]   # ['supervised', 'rl', 'vision']
"""

from __future__ import annotations

from dataclasses import dataclass

from core_env.banks import REAL_FAMILIES

FAMILIES = ("supervised", "rl", "vision") + REAL_FAMILIES
"""Family names; a task's ``family`` is an index into this tuple. The first three are
synthetic; the others replay real curves from the shipped banks (:mod:`core_env.banks`)."""

SUPERVISED_SHAPES = ("pow3", "weibull", "mmf", "ilog")


@dataclass(frozen=True)
class FamilyParams:
    """Parameter ranges of one curve family in one mix. Ranges are (low, high)."""

    family: str
    """One of :data:`FAMILIES`."""
    exponent: tuple[float, float]
    """Shape exponent k (uniform)."""
    scale_frac: tuple[float, float]
    """Curve scale as a fraction of the required work s* (log-uniform): small values put
    the target late on the curve, where it flattens."""
    initial_loss: tuple[float, float]
    """l_0 (uniform)."""
    floor_frac: tuple[float, float]
    """l_inf / l_0 (uniform)."""
    noise_sigma: float
    """Std of the correlated noise component (log-loss units)."""
    white_sigma: float
    """Std of the white noise component (log-loss units)."""
    stages: tuple[int, int] = (1, 1)
    """rl: number of plateau stages; vision: number of learning-rate drops (inclusive)."""
    drop_factor: tuple[float, float] = (0.4, 0.7)
    """vision: factor applied to the loss above the floor at each learning-rate drop."""
    regression_prob: float = 0.0
    """rl: probability that a task has a regression bump."""
    regression_size: tuple[float, float] = (0.05, 0.3)
    """rl: height of the regression bump (log-loss units)."""


@dataclass(frozen=True)
class RealFamily:
    """A real family in a mix: its tasks replay curves of one split of its bank."""

    family: str
    """One of :data:`core_env.banks.REAL_FAMILIES`."""
    split: str
    """One of :data:`core_env.banks.SPLITS`."""


def _real_mix(split: str) -> tuple[tuple[RealFamily, float], ...]:
    """The real families in the proportions of the paper's workloads: in-distribution
    supervised (lcdb) 0.4, reinforcement learning 0.3, vision 0.3 (scan and real-vision)."""
    weights = {"lcdb": 0.4, "sb3-rl": 0.3, "scan": 0.15, "real-vision": 0.15}
    return tuple((RealFamily(f, split), w) for f, w in weights.items())


MIXES: dict[str, tuple[tuple[FamilyParams | RealFamily, float], ...]] = {
    "train": (
        (FamilyParams("supervised", exponent=(0.6, 1.6), scale_frac=(0.03, 1.0),
                      initial_loss=(1.0, 3.0), floor_frac=(0.02, 0.3),
                      noise_sigma=0.02, white_sigma=0.006), 0.4),
        (FamilyParams("rl", exponent=(0.6, 1.2), scale_frac=(0.05, 0.8),
                      initial_loss=(0.8, 1.0), floor_frac=(0.05, 0.4),
                      noise_sigma=0.03, white_sigma=0.03, stages=(1, 2),
                      regression_prob=0.4), 0.3),
        (FamilyParams("vision", exponent=(0.3, 0.8), scale_frac=(0.02, 0.5),
                      initial_loss=(2.0, 4.6), floor_frac=(0.05, 0.2),
                      noise_sigma=0.015, white_sigma=0.01, stages=(1, 2)), 0.3),
    ),
    "held-out": (
        (FamilyParams("supervised", exponent=(0.3, 0.7), scale_frac=(0.01, 0.3),
                      initial_loss=(1.0, 3.0), floor_frac=(0.2, 0.5),
                      noise_sigma=0.035, white_sigma=0.01), 0.3),
        (FamilyParams("rl", exponent=(0.5, 1.0), scale_frac=(0.05, 0.5),
                      initial_loss=(0.8, 1.0), floor_frac=(0.02, 0.2),
                      noise_sigma=0.05, white_sigma=0.05, stages=(2, 3),
                      regression_prob=0.7, regression_size=(0.1, 0.4)), 0.4),
        (FamilyParams("vision", exponent=(0.2, 0.5), scale_frac=(0.01, 0.3),
                      initial_loss=(2.0, 6.9), floor_frac=(0.1, 0.3),
                      noise_sigma=0.02, white_sigma=0.015, stages=(2, 3),
                      drop_factor=(0.3, 0.6)), 0.3),
    ),
    "real-train": _real_mix("train"),
    "real-held-out": _real_mix("held-out"),
    "real-fit": _real_mix("fit"),
    "real-calibration": _real_mix("calibration"),
}
"""Named task-family mixes: (family, weight) pairs; weights sum to 1. ``train`` and
``held-out`` are synthetic; ``real-train`` and ``real-held-out`` replay the train and the
held-out split of the real curve banks; ``real-fit`` and ``real-calibration`` the two parts of
the train split (:data:`core_env.banks.SPLITS`) that a learned forecaster is fitted and
calibrated on."""

_NO_PARAMS = FamilyParams("supervised", exponent=(1.0, 1.0), scale_frac=(1.0, 1.0),
                          initial_loss=(1.0, 1.0), floor_frac=(0.0, 0.0), noise_sigma=0.0,
                          white_sigma=0.0)
"""Stand-in parameter ranges of a real family (its synthetic parameters are not used)."""


def _params(p: FamilyParams | RealFamily) -> FamilyParams:
    return _NO_PARAMS if isinstance(p, RealFamily) else p


MAX_STAGES = max(_params(p).stages[1] for entries in MIXES.values() for p, _ in entries)
"""Largest number of rl plateau stages / vision drops of any mix (width of stage arrays)."""

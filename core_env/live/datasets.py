"""The data sets of the built-in job kinds and of the ``real-vision`` curve bank (numpy only).

Each function returns ``(x_train, y_train, x_val, y_val)`` as float64 inputs (one row per
example) and int64 labels, built once per process and copied for every caller, so callers
may cast, reshape or modify them. scikit-learn and ``mnist1d`` (the ``live`` extra) are
imported when a data set is first asked for::

    x, y, xv, yv = digits_split()            # 1,257 + 540 rows of 64 pixels in [0, 1]
"""

from __future__ import annotations

import functools
import random

import numpy as np

Split = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""``(x_train, y_train, x_val, y_val)``."""

MNIST1D_VARIANTS: tuple[str, ...] = ("mnist1d", "mnist1d-noisy", "mnist1d-shuffled")
"""The MNIST-1D variants of :func:`mnist1d_split`."""


def _missing(package: str, error: ImportError) -> ImportError:
    return ImportError(f"{package} is missing: the built-in job kinds' data sets need the "
                       f"'live' extra (pip install -e '.[live]'); {error}")


def digits_split() -> Split:
    """scikit-learn's bundled digits (8x8 images flattened to 64 pixels scaled to [0, 1], 10
    classes), split 70/30 stratified with ``random_state=0``."""
    return tuple(a.copy() for a in _digits())  # type: ignore[return-value]


def mnist1d_split(variant: str = "mnist1d") -> Split:
    """MNIST-1D (Greydanus 2020: signals of length 40, 10 classes) built offline by
    ``mnist1d.data.make_dataset`` with its own 80/20 split (4,000 + 1,000 signals).

    ``variant`` is ``"mnist1d"`` (the default arguments), ``"mnist1d-noisy"`` (correlated
    noise 0.4 instead of 0.25, i.i.d. noise 0.1 instead of 0.02, shear 1.0 instead of 0.75,
    seed 7) or ``"mnist1d-shuffled"`` (default arguments, a fixed permutation of the 40
    positions). ``make_dataset`` reseeds the global ``random`` and ``numpy`` generators;
    their states are restored afterwards.

    Raises:
        ValueError: an unknown variant.
    """
    if variant not in MNIST1D_VARIANTS:
        raise ValueError(f"variant: expected one of {MNIST1D_VARIANTS}, got {variant!r}")
    return tuple(a.copy() for a in _mnist1d(variant))  # type: ignore[return-value]


@functools.lru_cache(maxsize=1)
def _digits() -> Split:
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError as e:  # pragma: no cover - the live extra installs it
        raise _missing("scikit-learn", e) from e
    x, y = load_digits(return_X_y=True)
    xt, xv, yt, yv = train_test_split(x / 16.0, y.astype(np.int64), test_size=0.3,
                                      random_state=0, stratify=y)
    return xt, yt, xv, yv


@functools.lru_cache(maxsize=None)
def _mnist1d(variant: str) -> Split:
    try:
        from mnist1d.data import get_dataset_args, make_dataset
    except ImportError as e:  # pragma: no cover - the live extra installs it
        raise _missing("mnist1d", e) from e
    args = get_dataset_args()
    if variant == "mnist1d-noisy":
        args.corr_noise_scale = 0.4
        args.iid_noise_scale = 0.1
        args.shear_scale = 1.0
        args.seed = 7
    elif variant == "mnist1d-shuffled":
        args.shuffle_seq = True
    py_state, np_state = random.getstate(), np.random.get_state()
    try:
        d = make_dataset(args)
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)
    return (d["x"].astype(np.float64), d["y"].astype(np.int64),
            d["x_test"].astype(np.float64), d["y_test"].astype(np.int64))

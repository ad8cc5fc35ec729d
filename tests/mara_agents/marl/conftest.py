"""Fixtures the MARL adapter tests share."""

from __future__ import annotations

import pytest


@pytest.fixture
def one_torch_thread():
    """torch on one thread for the test (training runs are then the same on every machine's
    thread count), restored afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)

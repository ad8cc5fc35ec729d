"""Job kinds for the live runtime's tests (imported by the workers by name)."""

from __future__ import annotations

import json
import math
import os
import time


class CounterJob:
    """Deterministic and instant: work += units * nodes * rate; loss = 1 / (1 + work)."""

    def __init__(self, rate: float = 1.0) -> None:
        self.rate = rate

    def setup(self, seed: int) -> None:
        self.work, self.seed = 0.0, seed

    def train(self, units: int, nodes: int) -> float:
        self.work += units * nodes * self.rate
        return 1.0 / (1.0 + self.work + self.seed)

    def save(self) -> bytes:
        return json.dumps({"work": self.work, "seed": self.seed, "pid": os.getpid(),
                           "threads": os.environ.get("OMP_NUM_THREADS")}).encode()

    def load(self, blob: bytes) -> None:
        state = json.loads(blob)
        self.work, self.seed = state["work"], state["seed"]


class SleepJob(CounterJob):
    """A counter that sleeps ``seconds`` per call of train."""

    def __init__(self, seconds: float = 5.0) -> None:
        super().__init__()
        self.seconds = seconds

    def train(self, units: int, nodes: int) -> float:
        time.sleep(self.seconds)
        return super().train(units, nodes)


class RaisingJob(CounterJob):
    def train(self, units: int, nodes: int) -> float:
        raise RuntimeError("diverged")


class NaNJob(CounterJob):
    def train(self, units: int, nodes: int) -> float:
        return math.nan


class SpinJob(CounterJob):
    """A counter that keeps a CPU busy for ``seconds`` per call of train and appends
    ``name start end`` (perf_counter) to the file ``log``."""

    def __init__(self, name: str = "", log: str = "", seconds: float = 0.3) -> None:
        super().__init__()
        self.name, self.log, self.seconds = name, log, seconds

    def train(self, units: int, nodes: int) -> float:
        start = time.perf_counter()
        while time.perf_counter() - start < self.seconds:
            pass
        with open(self.log, "a") as f:
            f.write(f"{self.name} {start} {time.perf_counter()}\n")
        return super().train(units, nodes)


class GlobalRandomJob:
    """A job that draws from Python's process-wide ``random`` generator (as a job using
    torch's default generator for dropout would); its ``save``/``load`` keep that generator's
    state, so training it alone in one process is reproducible."""

    def setup(self, seed: int) -> None:
        import random

        random.seed(seed)
        self.total = 0.0

    def train(self, units: int, nodes: int) -> float:
        import random

        for _ in range(units * nodes):
            self.total += random.random()
        return 1.0 / (1.0 + self.total)

    def save(self) -> bytes:
        import pickle
        import random

        return pickle.dumps((self.total, random.getstate()))

    def load(self, blob: bytes) -> None:
        import pickle
        import random

        self.total, state = pickle.loads(blob)
        random.setstate(state)


class DictStateJob(CounterJob):
    """A job whose ``save`` returns a dict, not bytes."""

    def save(self):
        return {"work": self.work}


class NoneStateJob(CounterJob):
    """A job whose ``save`` returns None."""

    def save(self):
        return None


class ForgetfulJob(CounterJob):
    """A job whose ``load`` ignores the saved state."""

    def load(self, blob: bytes) -> None:
        self.work = 0.0


class SlowLoadJob(SleepJob):
    """A sleeping counter whose ``load`` (a restore) takes ``load_seconds``."""

    def __init__(self, seconds: float = 0.05, load_seconds: float = 0.3) -> None:
        super().__init__(seconds)
        self.load_seconds = load_seconds

    def load(self, blob: bytes) -> None:
        time.sleep(self.load_seconds)
        super().load(blob)


class ScaledCounterJob(CounterJob):
    """A counter whose class states its kind's default scaling exponent."""

    ALPHA = 0.8

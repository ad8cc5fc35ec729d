"""What the MARL trainers share: the model file, the learning-curve recorder, the shared
per-node actor and the policy that runs it.

**Model files** (format ``"mara-marl/1"``) are checked ``.pt`` dicts written by
:func:`mara_agents.safe_io.save` (an integrity record, verified on load, no pickled
objects): ``algorithm``, ``preset``, ``seed``, ``env_steps`` (the budget trained for),
``wall_seconds``, ``library`` (name and version), ``config`` (the algorithm's settings),
``layout`` (``n_nodes``, ``n_actions``, ``obs_dim``, ``state_dim``), ``curve`` (the training
episodes' completion rate against env steps, stored as tensors and loaded as lists; ``steps``,
the env steps actually taken: the libraries round the budget up to whole batches; and
``updates``, each PPO update's statistics) and the weights. A library's own save format
(SB3's zip, RLlib's checkpoint folders) unpickles objects on load, so it is not what the
benchmark loads.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch
from pettingzoo.utils.wrappers import BaseParallelWrapper

from core_env.utils.checks import check_int
from mara_agents import safe_io
from mara_agents.marl.networks import (  # noqa: F401  (re-exported: their old home)
    ACTIVATIONS,
    SharedTableMLP,
    SlotSharedActor,
    actor_network,
    mlp,
)

MODEL_FORMAT = "mara-marl/1"
"""Format tag of the MARL model files."""

CURVE_TENSORS = {"env_steps": torch.int64, "completion_rate": torch.float64}
"""The curve's per-episode entries, stored as tensors (a long run's hundreds of thousands of
numbers load and check in milliseconds as one tensor, in seconds as a list) and given back
as lists by :func:`load_model`."""

MODEL_SCHEMA = {"algorithm": str, "preset": str, "seed": int, "env_steps": int,
                "wall_seconds": float, "library": dict, "config": dict, "layout": dict,
                "curve": dict}
"""Entries every MARL model file has, with their types (plus the weights)."""


def env_layout(env: Any) -> dict[str, int]:
    """``n_nodes``, ``n_actions`` (K + 1), ``obs_dim`` and ``state_dim`` of a parallel env."""
    base = env.unwrapped
    agent = base.possible_agents[0]
    return {"n_nodes": len(base.possible_agents),
            "n_actions": int(base.action_space(agent).n),
            "obs_dim": int(base.observation_space(agent)["observation"].shape[0]),
            "state_dim": int(base.state_space.shape[0])}


def save_model(path: str | Path, algorithm: str, preset: str, seed: int, env_steps: int,
               started: float, library: str, config: dict[str, Any], layout: dict[str, int],
               curve: "CurveLog", weights: dict[str, Any]) -> Path:
    """Write a model file (see the module docstring); ``started`` is the
    ``time.perf_counter()`` at the start of training."""
    import importlib.metadata

    curve_d = curve.as_dict()
    for key, dtype in CURVE_TENSORS.items():  # long runs: ~170k episodes at 10M env steps
        curve_d[key] = torch.tensor(curve_d[key], dtype=dtype)
    blob = {"format": MODEL_FORMAT, "algorithm": algorithm, "preset": preset, "seed": seed,
            "env_steps": env_steps, "wall_seconds": time.perf_counter() - started,
            "library": {"name": library, "version": importlib.metadata.version(library)},
            "config": config, "layout": layout, "curve": curve_d, **weights}
    safe_io.save(path, blob)
    return Path(path)


def load_model(path: str | Path, algorithm: str | None = None) -> dict[str, Any]:
    """A verified model file.

    Raises:
        ValueError: ``"<path>: ..."``: unreadable, corrupted, not a MARL model, or a model of
            another algorithm than ``algorithm``.
    """
    blob = safe_io.load(path, "MARL model")
    if blob.get("format") != MODEL_FORMAT:
        raise ValueError(f"{path}: not a MARL model: expected format {MODEL_FORMAT!r}, got "
                         f"{blob.get('format')!r}")
    for key, typ in MODEL_SCHEMA.items():
        if not isinstance(blob.get(key), typ):
            raise ValueError(f"{path}: MARL model entry {key!r}: expected {typ.__name__}, got "
                             f"{type(blob.get(key)).__name__}")
    if algorithm is not None and blob["algorithm"] != algorithm:
        raise ValueError(f"{path}: a {blob['algorithm']} model, expected {algorithm}")
    for key in CURVE_TENSORS:  # lists, as CurveLog.as_dict gives them (older files: lists)
        if isinstance(blob["curve"].get(key), torch.Tensor):
            blob["curve"][key] = blob["curve"][key].tolist()
    return blob


def check_layout(blob: dict[str, Any], env: Any, path: str | Path) -> None:
    """Refuse an env whose sizes differ from the model's (naming them)."""
    want, got = blob["layout"], env_layout(env)
    diff = {k: (want.get(k), got[k]) for k in got if want.get(k) != got[k]}
    if diff:
        raise ValueError(f"{path}: trained for another layout: " + ", ".join(
            f"{k} {a} (model) vs {b} (env)" for k, (a, b) in diff.items()))


@dataclasses.dataclass(frozen=True)
class PPOSettings:
    """The settings every adapter's PPO shares, in the project's vocabulary (each adapter
    translates them to its library's names where it calls it; ``gamma = 1``, as every learner
    on this env should use)."""

    steps_per_update: int = 2048
    """Env steps (slots) collected per update."""
    minibatch_size: int = 256
    """Env steps per minibatch."""
    epochs: int = 4
    """Passes over each batch."""
    lr: float = 3e-4
    """Adam learning rate."""
    hidden: tuple[int, ...] = (128, 128)
    """Hidden layer widths of the networks."""
    ent_coef: float = 0.01
    """Entropy bonus."""
    gamma: float = 1.0
    """Discount (1: the shaped return equals the completions)."""
    gae_lambda: float = 0.95
    """GAE lambda."""

    def __post_init__(self) -> None:
        if self.steps_per_update % self.minibatch_size:
            raise ValueError(f"minibatch_size: expected a divisor of steps_per_update "
                             f"({self.steps_per_update}), got {self.minibatch_size}")


@dataclasses.dataclass(frozen=True)
class BatchedPPOSettings(PPOSettings):
    """:class:`PPOSettings` of an adapter that trains on the batched simulator
    (:mod:`mara_agents.marl.vector`)."""

    num_envs: int = 64
    """Envs stepped together; each collects ``steps_per_update // num_envs`` steps per
    update (env b plays the episodes of seed ``seed + b``). 0: the single env through the
    library's own wrapper (``gymnasium.make``, ``PettingZooWrapper``), the reference path
    that trained the earlier models, one step at a time. 64 (32 steps per env and update):
    MaskablePPO trains ~18% faster than with 16 (its forward passes cost per call, not per
    env); MAPPO and IPPO run at the same speed with either
    (``experiments/scripts/marl_throughput.py``)."""

    fused_adam: bool = True
    """Adam's fused CPU kernel (``torch.optim.Adam(..., fused=True)``: the same update in one
    kernel over all parameters, about 7% of MaskablePPO's time per env step on CoRE-v0);
    False: the per-tensor loop the libraries use by default."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("num_envs", self.num_envs, 0, self.steps_per_update, exact=True)
        if self.num_envs and self.steps_per_update % self.num_envs:
            raise ValueError(f"num_envs: expected a divisor of steps_per_update "
                             f"({self.steps_per_update}), got {self.num_envs}")

    @property
    def steps_per_env(self) -> int:
        """Steps each env collects per update."""
        return self.steps_per_update // max(self.num_envs, 1)


UPDATE_KEYS = ("entropy", "value_loss", "approx_kl", "explained_variance",
               "normalised_entropy")
"""What :meth:`CurveLog.update` records after every PPO update (means over its
minibatches): ``entropy`` per node (nats: a node's masked action distribution), the
critic's ``value_loss`` (SB3: mean squared error; TorchRL: its smooth L1 loss), the
``approx_kl`` between the policy before and after the update, and the critic's
``explained_variance`` on the batch; ``normalised_entropy``, each node's entropy divided by
the log of its legal actions (mean over the nodes with a choice; 1 is uniform), which
compares across steps with 1 to K + 1 legal actions."""


class CurveLog:
    """The completion rate of every finished training episode, against the env steps
    (slots) trained so far: the learning curve of a run; and the statistics of every PPO
    update (:data:`UPDATE_KEYS`), the evidence of whether and how the run learned."""

    def __init__(self) -> None:
        self.steps = 0
        self.env_steps: list[int] = []
        self.completion_rate: list[float] = []
        self.updates: dict[str, list[float]] = {"env_steps": [],
                                                **{k: [] for k in UPDATE_KEYS}}

    def update(self, **stats: float) -> None:
        """Record one PPO update's statistics at the env steps taken so far; a key of
        :data:`UPDATE_KEYS` the library does not report is NaN.

        Raises:
            ValueError: a key that is not in :data:`UPDATE_KEYS`.
        """
        unknown = set(stats) - set(UPDATE_KEYS)
        if unknown:
            raise ValueError(f"update statistics: unknown keys {sorted(unknown)}; expected "
                             f"some of {list(UPDATE_KEYS)}")
        self.updates["env_steps"].append(self.steps)
        for k in UPDATE_KEYS:
            self.updates[k].append(float(stats.get(k, float("nan"))))

    def step(self, infos: Any) -> None:
        """Count one env step; ``infos`` is the step's info dict (Gymnasium) or dict of
        them (PettingZoo); an ``"episode"`` entry ends an episode."""
        self.steps += 1
        for info in (infos.values() if infos and "episode" not in infos else [infos]):
            if isinstance(info, dict) and "episode" in info:
                self.env_steps.append(self.steps)
                self.completion_rate.append(float(info["episode"]["completion_rate"]))
                return

    def step_batch(self, num_envs: int, episode: dict[str, np.ndarray]) -> None:
        """Count one step of ``num_envs`` envs stepped together; ``episode`` is the step's
        ``info["episode"]`` of :meth:`core_env.batched.BatchedCoreEnv.step` (arrays over the
        envs that finished), whose episodes all end at the new count."""
        self.steps += num_envs
        rates = [float(x) for x in episode["completion_rate"]]
        self.env_steps.extend([self.steps] * len(rates))
        self.completion_rate.extend(rates)

    def as_dict(self) -> dict[str, Any]:
        """``env_steps`` and ``completion_rate`` per finished episode, ``steps`` (every
        env step taken: a library rounds the budget up to whole batches) and ``updates``
        (``env_steps`` and :data:`UPDATE_KEYS` per PPO update; absent from model files
        written before it was recorded)."""
        return {"env_steps": list(self.env_steps),
                "completion_rate": list(self.completion_rate), "steps": self.steps,
                "updates": {k: list(v) for k, v in self.updates.items()}}


class RecordParallel(BaseParallelWrapper):
    """A parallel env that feeds every step's infos to a :class:`CurveLog`."""

    def __init__(self, env: Any, log: CurveLog) -> None:
        super().__init__(env)
        self.log = log

    def step(self, actions: dict):
        out = self.env.step(actions)
        self.log.step(out[4])
        return out


class RecordGym(gymnasium.Wrapper):
    """A Gymnasium env that feeds every step's info to a :class:`CurveLog`."""

    def __init__(self, env: gymnasium.Env, log: CurveLog) -> None:
        super().__init__(env)
        self.log = log

    def step(self, action):
        out = self.env.step(action)
        self.log.step(out[4])
        return out

    def action_masks(self) -> np.ndarray:
        central: Any = self.env.unwrapped  # a CentralCoreEnv
        return central.action_masks()


class SharedActorPolicy:
    """A trained parameter-shared actor as a :class:`~mara_agents.policy.Policy`: each node's
    logits from its own features (one network for all), decoded as the model was trained
    (its config's ``decoding``). ``"sequential"``: node by node under sequential masks
    (:func:`~mara_agents.marl.decoding.decode`), greedy by default (each node's most
    probable action among those left). ``"simultaneous"`` (models without the entry): each
    node from its own mask, sampled by default from a generator seeded by :meth:`reset`
    (the nodes see nearly the same observation, and a greedy simultaneous policy sends them
    all to the same task). ``deterministic`` overrides the default.

    The model file holds ``actor`` (``sizes``, ``activation``) and ``actor_state`` (the
    :func:`mlp`'s ``state_dict``).
    """

    def __init__(self, env: Any, path: str | Path, algorithm: str,
                 deterministic: bool | None = None) -> None:
        blob = load_model(path, algorithm)
        check_layout(blob, env, path)
        spec = blob["config"].get("actor")
        if not isinstance(spec, dict) or "actor_state" not in blob:
            raise ValueError(f"{path}: a {algorithm} model without an actor")
        self.net = actor_network(spec)
        try:
            self.net.load_state_dict(blob["actor_state"])
        except RuntimeError as e:
            raise ValueError(f"{path}: actor weights do not fit its sizes ({e})") from e
        self.net.eval()
        from mara_agents.marl.decoding import check_decoding

        self.decoding = check_decoding(blob["config"].get("decoding", "simultaneous"))
        sequential = self.decoding == "sequential"
        self.deterministic = sequential if deterministic is None else bool(deterministic)
        self.agents = list(env.unwrapped.possible_agents)
        self.layout = (blob["layout"]["n_nodes"], blob["layout"]["n_actions"] - 1)
        self.gen = torch.Generator().manual_seed(0)

    def reset(self, seed: int | None = None) -> None:
        self.gen = torch.Generator().manual_seed(0 if seed is None else int(seed))

    def act(self, observations: dict[str, dict[str, np.ndarray]]) -> dict[str, int]:
        agents = [a for a in self.agents if a in observations]
        obs = torch.as_tensor(np.stack([observations[a]["observation"] for a in agents]))
        mask = torch.as_tensor(np.stack([observations[a]["action_mask"] for a in agents])
                               ).bool()
        with torch.no_grad():
            raw = self.net(obs)
            if self.decoding == "sequential":
                from mara_agents.marl.decoding import decode, observation_capacity

                cap = observation_capacity(obs[None].numpy(), *self.layout)
                acts, _ = decode(raw[None], mask[None], cap, greedy=self.deterministic,
                                 generator=self.gen)
                return {a: int(x) for a, x in zip(agents, acts[0], strict=True)}
            logits = raw.masked_fill(~mask, float("-inf"))
            if self.deterministic:
                actions = logits.argmax(-1)
            else:
                probs = torch.softmax(logits, -1)
                actions = torch.multinomial(probs, 1, generator=self.gen).squeeze(-1)
        return {a: int(x) for a, x in zip(agents, actions, strict=False)}

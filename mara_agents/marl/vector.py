"""The batched simulator (:func:`core_env.make_batched`) behind the MARL libraries' own env
interfaces, so that they train at the simulator's speed instead of one PettingZoo step at a
time.

* :class:`CoreVecEnv`: a stable-baselines3 ``VecEnv`` of the centralised view
  (:class:`core_env.central.CentralCoreEnv`'s spaces, ``action_masks()`` for sb3-contrib's
  MaskablePPO).
* :class:`CoreTorchEnv`: a TorchRL ``EnvBase`` with ``batch_size=[B]`` and the keys and
  specs ``PettingZooWrapper(env, return_state=True, categorical_actions=True)`` gives the
  PettingZoo env (one group ``"node"``), for TorchRL's MAPPO/IPPO.

Both are bit-identical to the single env for the same seeds: env b, seeded ``s_b``, plays the
episodes of ``reset(seed=s_b)`` followed by ``reset()`` calls (seeded ``seed``, env b gets
``s_b = seed + b``, SB3's ``VecEnv.seed`` convention). Each one records the completion rate
of every finished episode into a :class:`~mara_agents.marl.common.CurveLog` if given one.

**Auto-reset.** The batched simulator resets a finished env inside ``step``: what ``step``
returns for it is the next episode's first observation, and the episode's final observation
is gone (it cannot be recovered without changing ``core_env``). For a terminated episode
nothing is lost (its final state has no value to bootstrap from). A truncated one would be
bootstrapped from the wrong state, or not at all; but no episode truncates unless
``max_steps`` is set below its default (``arrival_slots`` + the longest deadline window + 1,
after every deadline, so every episode has terminated by then). Measured under a uniformly
random legal policy, 1000 episodes of each: CoRE-Small-v0 (max_steps 81, lengths 40..79) and
CoRE-v0 (max_steps 351, lengths 232..349) all terminated, none truncated.

There is no Gymnasium ``VectorEnv``: its same-step auto-reset mode promises the final
observation in ``info["final_obs"]``, which is gone, and its next-step mode would cost a
step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from core_env import make_batched
from core_env.central import CentralCoreEnv
from core_env.dynamics import EPISODE_KEYS
from core_env.env import CoreSchedulerEnv
from mara_agents.marl.common import CurveLog


def _missing(extra: str) -> type:
    """A stand-in base class for a library that is not installed: constructing a subclass
    raises ``ImportError`` naming the extra that installs it."""

    class Missing:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise ImportError(f"{type(self).__name__} needs the {extra} extra "
                              f"(pip install -e \".[{extra}]\")")

    return Missing


# each adapter needs only its own library's extra
try:
    from stable_baselines3.common.vec_env import VecEnv
except ImportError:
    VecEnv = _missing("sb3")  # type: ignore[misc, assignment]  # a stand-in class
try:
    from tensordict import TensorDict, TensorDictBase
    from torchrl.data import Bounded, Categorical, Composite, Unbounded
    from torchrl.envs import EnvBase
except ImportError:
    EnvBase = _missing("torchrl")

GROUP = "node"
"""TorchRL's group of the agents ``node_0 .. node_{N-1}`` (as ``PettingZooWrapper`` names
it)."""

DONE_KEYS = ("done", "terminated", "truncated")
"""TorchRL's done entries, at the root (the env's) and in the group (each node's)."""


def _seeds(seed: int | None, num_envs: int) -> list[int] | None:
    """``seed + b`` for env b (None: fresh entropy)."""
    return None if seed is None else [seed + b for b in range(num_envs)]


class CoreVecEnv(VecEnv):
    """B environments of the centralised view as one stable-baselines3 ``VecEnv``.

    Observations are ``{"state": float32[B, S], "action_mask": int8[B, N, K + 1]}``, actions
    int[B, N] (``MultiDiscrete([K + 1] * N)`` per env), rewards float32[B] (the team reward),
    as a ``DummyVecEnv`` of :class:`~core_env.central.CentralCoreEnv` gives them.
    :meth:`action_masks` is bool[B, N * (K + 1)]; sb3-contrib reads it through
    ``env_method("action_masks")`` (one row per env).

    Auto-reset (see the module docstring): a finished env's observation is the next
    episode's first. Its info holds ``"episode"``: the episode's statistics (the keys of
    the PettingZoo env's ``info["episode"]`` but ``groups``) plus ``"r"`` (return) and
    ``"l"`` (length), the entries SB3's logger reads; and ``"TimeLimit.truncated"``. There
    is no ``"terminal_observation"`` (the final observation is gone), so SB3 does not
    bootstrap a truncated episode (the presets never truncate).

    ``reset()`` starts every env: env b from seed ``seed + b`` after ``seed(seed)`` (which
    SB3 calls with the model's seed) or the constructor's ``seed``, else from fresh entropy
    (a second unseeded ``reset()`` draws new episodes, where a ``DummyVecEnv`` would go on).

    Args:
        preset: the preset id (``"CoRE-v0"``).
        num_envs: B.
        seed: seeds of the first :meth:`reset` (env b: ``seed + b``); None: fresh entropy.
        log: a :class:`~mara_agents.marl.common.CurveLog` fed every step, or None.
        **overrides: config overrides, as for :func:`core_env.make_batched`.

    Raises:
        ValueError: an unknown preset or override, or ``num_envs`` out of range.
    """

    def __init__(self, preset: str = "CoRE-v0", num_envs: int = 64, seed: int | None = None,
                 log: CurveLog | None = None, **overrides: Any) -> None:
        central = CentralCoreEnv(preset=preset, **overrides)
        self.benv = make_batched(preset, num_envs, copy=False, observations="blocks",
                                 **overrides)
        self.log = log
        self.render_mode = None
        self.n_nodes, self.n_actions = central.n_nodes, central.n_actions
        self._mask = np.ones((num_envs, self.n_nodes, self.n_actions), dtype=np.int8)
        self._actions: np.ndarray | None = None
        super().__init__(num_envs, central.observation_space, central.action_space)
        if seed is not None:
            self.seed(seed)

    def reset(self) -> dict[str, np.ndarray]:
        """Start a new episode in every env; returns the observations.

        Raises:
            ValueError: reset options were set (``set_options``), or seeds for some envs only.
        """
        if any(self._options):
            raise ValueError("options: CoreVecEnv takes no reset options, got "
                             f"{self._options}")
        given = [s is not None for s in self._seeds]
        if any(given) and not all(given):
            raise ValueError(f"seed: expected a seed for every env or none, got {self._seeds}")
        _, mask = self.benv.reset(seed=[int(s) for s in self._seeds if s is not None]
                                  if all(given) else None)
        self._reset_seeds()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return self._observe(mask)

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray,
                                 list[dict[str, Any]]]:
        """One step of every env (the actions of :meth:`step_async`).

        Raises:
            ValueError: actions of the wrong shape or type, or out of range (naming the
                env and node).
        """
        actions, self._actions = self._actions, None
        if actions is None:
            raise RuntimeError("step_wait: call step_async(actions) first")
        _, mask, reward, done, info = self.benv.step(np.asarray(actions))
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        episode = info["episode"]
        for row, b in enumerate(episode["env"].tolist()):
            stats = {key: episode[key][row].item() for key in EPISODE_KEYS}
            infos[b] = {"episode": {**stats, "r": stats["return"], "l": stats["length"]},
                        "TimeLimit.truncated": bool(info["truncated"][b])}
        if self.log is not None:
            self.log.step_batch(self.num_envs, episode)
        return self._observe(mask), reward.astype(np.float32), done, infos

    def action_masks(self) -> np.ndarray:
        """bool[B, N * (K + 1)]: each env's per-node masks concatenated (MaskablePPO's
        format)."""
        return self._mask.reshape(self.num_envs, -1).astype(bool)

    def env_method(self, method_name: str, *method_args: Any, indices: Any = None,
                   **method_kwargs: Any) -> list[Any]:
        """``action_masks`` of the envs ``indices``: one bool[N * (K + 1)] each (the only
        per-env method; sb3-contrib's ``get_action_masks`` calls it).

        Raises:
            AttributeError: another method.
        """
        if method_name != "action_masks":
            raise AttributeError(f"method_name: CoreVecEnv's envs have only 'action_masks', "
                                 f"got {method_name!r}")
        masks = self.action_masks()
        return [masks[i] for i in self._get_indices(indices)]

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        """The attribute ``attr_name``, which every env shares, once per env of ``indices``.

        Raises:
            AttributeError: no such attribute.
        """
        value = getattr(self, attr_name)
        return [value for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        """Refused: the envs are rows of one simulator, without attributes of their own.

        Raises:
            AttributeError: always.
        """
        raise AttributeError(f"attr_name: CoreVecEnv's envs share one simulator; cannot set "
                             f"{attr_name!r} per env")

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]

    def close(self) -> None:
        pass

    def _observe(self, mask: np.ndarray) -> dict[str, np.ndarray]:
        self._mask = mask.copy()
        return {"state": self.benv.states(), "action_mask": self._mask.copy()}


class CoreTorchEnv(EnvBase):
    """B environments as one TorchRL env (``batch_size=[B]``) with one agent group,
    ``"node"``: the keys and specs of ``PettingZooWrapper(core_env.parallel_env(...),
    return_state=True, categorical_actions=True)`` with a leading env dimension:
    ``("node", "observation", "observation")`` float32[B, N, D], ``("node", "action_mask")``
    bool[B, N, K + 1], ``"state"`` float32[B, S], ``("node", "action")`` int64[B, N],
    ``("node", "reward")`` float32[B, N, 1] (the team reward, for every node) and ``done``,
    ``terminated``, ``truncated`` bool[B, 1] at the root and bool[B, N, 1] in the group.

    Auto-reset (see the module docstring): the step that ends env b's episode returns, as
    ``"next"``, the next episode's first observation, with the ending step's reward and done
    flags. TorchRL then calls ``reset`` with a ``"_reset"`` mask (a collector's
    ``step_and_maybe_reset``); that returns the same observation for the rows the last step
    finished, without resetting anything again, so the episodes stay those of
    :func:`core_env.make_batched`. A GAE then cuts every finished episode and bootstraps
    none but truncated ones (from the next episode's first state: the presets never
    truncate). A ``reset`` without ``"_reset"`` restarts every env from its seed.

    Args:
        preset: the preset id (``"CoRE-v0"``).
        num_envs: B.
        seed: seeds of a full :meth:`reset` (env b: ``seed + b``; also ``set_seed``);
            None: fresh entropy.
        log: a :class:`~mara_agents.marl.common.CurveLog` fed every step, or None.
        **overrides: config overrides, as for :func:`core_env.make_batched`.

    Raises:
        ValueError: an unknown preset or override, ``num_envs`` out of range; in ``step``,
            bad actions (naming the env and node); in ``reset``, a ``"_reset"`` row whose
            episode did not just end (one env cannot be reset alone).
    """

    def __init__(self, preset: str = "CoRE-v0", num_envs: int = 64, seed: int | None = None,
                 log: CurveLog | None = None, **overrides: Any) -> None:
        super().__init__(batch_size=torch.Size([num_envs]))  # no device, as PettingZooWrapper
        par = CoreSchedulerEnv(preset=preset, **overrides)
        self.benv = make_batched(preset, num_envs, copy=False, **overrides)
        self.log = log
        self._seeds = _seeds(seed, num_envs)
        b, n, k1 = num_envs, self.benv.n_nodes, self.benv.n_actions
        space: Any = par.observation_space(par.possible_agents[0])
        space = space["observation"]
        d = space.shape[0]

        def bounded(box: Any, shape: tuple[int, ...]) -> Bounded:
            return Bounded(low=torch.as_tensor(np.broadcast_to(box.low, shape).copy()),
                           high=torch.as_tensor(np.broadcast_to(box.high, shape).copy()),
                           shape=shape, dtype=torch.float32)

        def group(entries: dict[str, Any]) -> Composite:
            return Composite(entries, shape=(b, n))

        self.full_observation_spec = Composite({
            GROUP: group({"observation": group({"observation": bounded(space, (b, n, d))}),
                          "action_mask": Categorical(2, shape=(b, n, k1), dtype=torch.bool)}),
            "state": bounded(par.state_space, (b, par.state_space.shape[0]))}, shape=(b,))
        self.full_action_spec = Composite({GROUP: group({"action": Categorical(
            k1, shape=(b, n), dtype=torch.int64)})}, shape=(b,))
        self.full_reward_spec = Composite({GROUP: group({"reward": Unbounded(
            shape=(b, n, 1), dtype=torch.float32)})}, shape=(b,))
        self.full_done_spec = Composite({
            **{key: Categorical(2, shape=(b, 1), dtype=torch.bool) for key in DONE_KEYS},
            GROUP: group({key: Categorical(2, shape=(b, n, 1), dtype=torch.bool)
                          for key in DONE_KEYS})}, shape=(b,))
        self._done = np.zeros(b, dtype=bool)
        self._last: TensorDict | None = None

    def _set_seed(self, seed: int | None) -> None:
        self._seeds = _seeds(seed, self.benv.num_envs)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDict:
        reset = self._reset_rows(tensordict)
        if reset is None or self._last is None:
            obs, mask = self.benv.reset(seed=self._seeds)
            assert isinstance(obs, np.ndarray), "the full observation, not blocks"
            self._done[:] = False
            self._last = self._observation(obs, mask)
        else:
            stale = np.flatnonzero(reset & ~self._done)
            if stale.size:
                raise ValueError(f"_reset: env {int(stale[0])}'s episode did not just end: the "
                                 f"batched simulator resets a finished env itself and cannot "
                                 f"reset one env alone (reset() without '_reset' restarts all)")
        out = self._last.clone()
        out.update(self._done_entries(np.zeros(self.benv.num_envs, dtype=bool),
                                      np.zeros(self.benv.num_envs, dtype=bool)))
        return out

    def _step(self, tensordict: TensorDictBase) -> TensorDict:
        actions = tensordict.get((GROUP, "action")).numpy()
        obs, mask, reward, done, info = self.benv.step(actions)
        assert isinstance(obs, np.ndarray), "the full observation, not blocks"
        self._done = done
        if self.log is not None:
            self.log.step_batch(self.benv.num_envs, info["episode"])
        self._last = self._observation(obs, mask)
        out = self._last.clone(recurse=False)
        b, n = self.benv.num_envs, self.benv.n_nodes
        out.set((GROUP, "reward"), torch.from_numpy(reward.astype(np.float32))[:, None, None]
                .expand(b, n, 1).clone())
        out.update(self._done_entries(info["terminated"], info["truncated"]))
        return out

    def _reset_rows(self, tensordict: TensorDictBase | None) -> np.ndarray | None:
        """bool[B]: the rows a ``"_reset"`` entry (root or group) asks to reset; None when
        there is none (a full reset)."""
        if tensordict is None:
            return None
        masks = [tensordict.get(key) for key in ("_reset", (GROUP, "_reset"))
                 if key in tensordict.keys(True)]
        if not masks:
            return None
        return np.logical_or.reduce([m.reshape(self.benv.num_envs, -1).any(-1).numpy()
                                     for m in masks])

    def _observation(self, obs: np.ndarray, mask: np.ndarray) -> TensorDict:
        b, n = self.benv.num_envs, self.benv.n_nodes
        return TensorDict({
            GROUP: TensorDict({"observation": TensorDict({"observation": torch.tensor(obs)},
                                                         batch_size=(b, n)),
                               "action_mask": torch.from_numpy(mask.astype(bool))},
                              batch_size=(b, n)),
            "state": torch.from_numpy(self.benv.states())}, batch_size=(b,))

    def _done_entries(self, terminated: np.ndarray, truncated: np.ndarray) -> TensorDict:
        b, n = self.benv.num_envs, self.benv.n_nodes
        flags = {"done": terminated | truncated, "terminated": terminated,
                 "truncated": truncated}
        root = {key: torch.from_numpy(np.array(v, dtype=bool))[:, None]
                for key, v in flags.items()}
        return TensorDict({**root, GROUP: TensorDict(
            {key: v[:, None].expand(b, n, 1).clone() for key, v in root.items()},
            batch_size=(b, n))}, batch_size=(b,))

"""The CoRE presets as a BenchMARL task (``benchmarl`` extra, in its own environment).

BenchMARL 1.5.2 pins ``torchrl>=0.10,<0.12``, older than the ``torchrl`` extra's, so it is
installed into ``.venv-benchmarl`` (``make .venv-benchmarl/.installed``; ``make
test-benchmarl`` runs its test). One task per preset, :class:`CoreTask` (``CoreTask.CORE_V0``,
``CoreTask.CORE_SMALL_V0``, ... : the preset id upper-cased, ``-`` as ``_``), built the way
BenchMARL's docs add a new environment (a :class:`benchmarl.environments.Task` enum and its
:class:`benchmarl.environments.TaskClass`)::

    from benchmarl.algorithms import MappoConfig
    from benchmarl.experiment import Experiment, ExperimentConfig
    from benchmarl.models import MlpConfig
    from mara_agents.marl.benchmarl_task import CoreTask

    Experiment(task=CoreTask.CORE_SMALL_V0.get_task(), algorithm_config=MappoConfig.get_from_yaml(),
               model_config=MlpConfig.get_from_yaml(), critic_model_config=MlpConfig.get_from_yaml(),
               seed=0, config=ExperimentConfig.get_from_yaml()).run()

or :func:`make_experiment` / ``python -m mara_agents.marl.benchmarl_task`` (``make
marl-benchmarl``) with small defaults, CSV logs and no wandb.

The env has one group, ``"node"`` (``node_0 .. node_{N-1}``), discrete actions only,
the keys of ``PettingZooWrapper(core_env.parallel_env(preset), return_state=True,
categorical_actions=True)``: ``("node", "observation", "observation")``, the per-node action
masks ``("node", "action_mask")`` (BenchMARL's actors then sample from a masked
categorical: no node picks an empty slot) and the env's ``state()`` as ``"state"`` (MAPPO's
centralised critic reads it). The task's config:

* ``preset``: the preset id (set by the enum member).
* ``batched`` (default True): the batched simulator, :class:`mara_agents.marl.vector.CoreTorchEnv`
  with ``batch_size=[num_envs]`` (BenchMARL steps all envs at once; its auto-reset is
  described there, CPU only); False: one ``PettingZooWrapper`` per env, which BenchMARL
  runs in a ``SerialEnv`` (the PettingZoo env itself, about an order of magnitude slower).
* ``overrides``: config overrides, as for :func:`core_env.make_config` (``{"switch_cost": 0.3}``).

The module imports without BenchMARL (or torch); :class:`CoreTask`, :class:`CoreTaskClass` and
:class:`TrainingLog` are built on first use and raise ``ImportError`` where it is missing.
"""

from __future__ import annotations

import argparse
import copy
import math
import time
from pathlib import Path
from typing import Any

from core_env.presets import PRESETS, make_config

GROUP = "node"
"""The agent group (as ``PettingZooWrapper`` names it)."""

MISSING_MESSAGE = ("mara_agents.marl.benchmarl_task needs BenchMARL (torchrl<0.12), which lives "
                   "in its own environment: `make .venv-benchmarl/.installed` (or pip install "
                   "-e \".[benchmarl]\" into a venv without the torchrl extra), then run it "
                   "with .venv-benchmarl/bin/python")


def task_name(preset: str) -> str:
    """The :class:`CoreTask` member of a preset: ``"CoRE-Small-v0"`` -> ``"CORE_SMALL_V0"``."""
    return preset.upper().replace("-", "_")


TASK_PRESETS = {task_name(p): p for p in PRESETS}
"""Member name -> preset id, one per preset in :data:`core_env.PRESETS`."""


def _benchmarl() -> None:
    try:
        import benchmarl  # noqa: F401
    except ImportError as err:
        raise ImportError(MISSING_MESSAGE) from err


def _build() -> dict[str, Any]:
    """The BenchMARL classes (imported here so that the module imports without it)."""
    _benchmarl()
    from benchmarl.environments.common import Task, TaskClass
    from benchmarl.experiment.callback import Callback
    from torchrl.envs import EnvBase, PettingZooWrapper

    import core_env

    class CoreTaskClass(TaskClass):
        """One CoRE preset (``config["preset"]``) as a BenchMARL task; see the module
        docstring for its config."""

        def _preset(self) -> str:
            return self.config.get("preset", TASK_PRESETS.get(self.name, "CoRE-v0"))

        def _overrides(self) -> dict[str, Any]:
            return dict(self.config.get("overrides") or {})

        def get_env_fun(self, num_envs: int, continuous_actions: bool, seed: int | None,
                        device: Any) -> Any:
            preset, overrides = self._preset(), self._overrides()
            make_config(preset, **overrides)  # unknown presets and overrides fail here
            if continuous_actions:
                raise ValueError("CoRE tasks have discrete actions only")
            if self.config.get("batched", True):
                if device is not None and str(device) != "cpu":
                    raise ValueError(f"the batched CoRE env steps on the CPU: set "
                                     f"sampling_device='cpu' (train_device may differ), got "
                                     f"{device!r}; or batched=False")
                from mara_agents.marl.vector import CoreTorchEnv

                return lambda: CoreTorchEnv(preset, num_envs=num_envs, seed=seed, **overrides)
            return lambda: PettingZooWrapper(
                core_env.parallel_env(preset=preset, **overrides), return_state=True,
                categorical_actions=True, use_mask=False, seed=seed, device=device)

        def supports_continuous_actions(self) -> bool:
            return False

        def supports_discrete_actions(self) -> bool:
            return True

        def has_state(self) -> bool:
            return True

        def has_render(self, env: EnvBase) -> bool:
            return False

        def max_steps(self, env: EnvBase) -> int:
            # every episode has terminated by then (mara_agents.marl.vector's docstring)
            return make_config(self._preset(), **self._overrides()).max_steps

        def group_map(self, env: EnvBase) -> dict[str, list[str]]:
            n = make_config(self._preset(), **self._overrides()).cluster.n_nodes
            return {GROUP: [f"node_{i}" for i in range(n)]}

        def _obs(self, env: EnvBase) -> Any:
            return env.full_observation_spec_unbatched.clone()

        def _group_entry(self, env: EnvBase, keep: str) -> Any:
            """The observation spec with only the group's entry ``keep``."""
            spec = self._obs(env)
            for key in list(spec[GROUP].keys()):
                if key != keep:
                    del spec[(GROUP, key)]
            del spec["state"]
            return spec

        def observation_spec(self, env: EnvBase) -> Any:
            return self._group_entry(env, "observation")

        def action_mask_spec(self, env: EnvBase) -> Any:
            return self._group_entry(env, "action_mask")

        def state_spec(self, env: EnvBase) -> Any:
            from torchrl.data import Composite

            return Composite({"state": self._obs(env)["state"]})

        def info_spec(self, env: EnvBase) -> None:
            return None

        def action_spec(self, env: EnvBase) -> Any:
            return env.full_action_spec_unbatched.clone()

        @staticmethod
        def env_name() -> str:
            return "core"

    class CoreTaskBase(Task):
        """The methods of :class:`CoreTask` (an enum with members cannot be subclassed, so
        the members are added by the functional API below)."""

        @staticmethod
        def associated_class() -> type:
            return CoreTaskClass

        def get_task(self, config: dict[str, Any] | None = None) -> Any:
            full = {"preset": TASK_PRESETS[self.name], "batched": True, "overrides": {}}
            full.update(copy.deepcopy(config or {}))
            return CoreTaskClass(name=self.name, config=full)

        def get_from_yaml(self, path: str | None = None) -> Any:
            if path is None:
                return self.get_task()
            from benchmarl.utils import _read_yaml_config

            return self.get_task(_read_yaml_config(path))

    # one member per preset; get_task() gives its CoreTaskClass with the default config
    # (BenchMARL's own tasks read theirs from its yaml files; these have none),
    # get_task(config) with yours (preset filled in)
    CoreTask = CoreTaskBase("CoreTask", list(TASK_PRESETS), module=__name__,
                            qualname="CoreTask")

    class TrainingLog(Callback):
        """Records, per iteration, the frames collected, how many node actions the masks
        forbade (0 when the masks reach the policy), the fraction of (node, action) pairs the
        masks forbid, the mean team reward per step and the mean of each loss term;
        :attr:`rows` holds them."""

        def __init__(self) -> None:
            super().__init__()
            self.rows: list[dict[str, float]] = []
            self._row: dict[str, float] = {}

        def on_batch_collected(self, batch: Any) -> None:
            import torch

            action = batch.get((GROUP, "action"))
            mask = batch.get((GROUP, "action_mask"))
            allowed = mask.gather(-1, action.unsqueeze(-1)).squeeze(-1)
            self._row = {"frames": float(batch.numel()),
                         "node_actions": float(action.numel()),
                         "forbidden_actions": float((~allowed).sum().item()),
                         "masked_fraction": float((~mask).float().mean().item()),
                         "reward": float(batch.get(("next", GROUP, "reward"))
                                         .to(torch.float64).mean().item())}

        def on_train_end(self, training_td: Any, group: str) -> None:
            row = dict(self._row, time=time.time())
            for key, value in training_td.items():
                if key.startswith("loss"):
                    row[key] = float(value.detach().to(float).mean().item())
            self.rows.append(row)

    built: dict[str, Any] = {"CoreTaskClass": CoreTaskClass, "CoreTaskBase": CoreTaskBase, "CoreTask": CoreTask,
             "TrainingLog": TrainingLog}
    for name, cls in built.items():  # picklable (BenchMARL pickles the task) by these names
        cls.__module__, cls.__qualname__ = __name__, name
    return built


_BUILT: dict[str, Any] = {}


def __getattr__(name: str) -> Any:
    if name in ("CoreTask", "CoreTaskBase", "CoreTaskClass", "TrainingLog"):
        if not _BUILT:
            _BUILT.update(_build())
        return _BUILT[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


ALGORITHMS = ("mappo", "ippo")
"""The algorithms :func:`make_experiment` sets up (BenchMARL has more: pass your own)."""


def make_experiment(algorithm: str = "mappo", preset: str = "CoRE-Small-v0", frames: int = 6000,
                    seed: int = 0, frames_per_batch: int = 2000, n_envs: int = 10,
                    minibatch_size: int = 500, epochs: int = 4, lr: float = 3e-4,
                    folder: str | Path | None = None, loggers: tuple[str, ...] = ("csv",),
                    evaluation_episodes: int = 0, batched: bool = True,
                    overrides: dict[str, Any] | None = None,
                    callbacks: list[Any] | None = None) -> Any:
    """A BenchMARL ``Experiment`` of ``algorithm`` on ``preset`` for ``frames`` env steps
    (each collects ``frames_per_batch`` steps over ``n_envs`` envs, then ``epochs`` passes of
    minibatches of ``minibatch_size``), CPU, an MLP actor and critic (BenchMARL's defaults),
    ``loggers`` (BenchMARL's names; csv by default, never wandb unless asked) writing into
    ``folder`` (a new folder in the current one if None); ``evaluation_episodes`` > 0
    evaluates at the first and last iterations. Call ``.run()`` on it.

    Raises:
        ImportError: BenchMARL is not installed.
        ValueError: an unknown algorithm or preset, or sizes that do not divide.
    """
    _benchmarl()
    from benchmarl.algorithms import IppoConfig, MappoConfig
    from benchmarl.experiment import Experiment, ExperimentConfig
    from benchmarl.models.mlp import MlpConfig

    configs = {"mappo": MappoConfig, "ippo": IppoConfig}
    if algorithm not in configs:
        raise ValueError(f"algorithm: expected one of {ALGORITHMS}, got {algorithm!r}")
    if preset not in PRESETS:
        raise ValueError(f"preset: expected one of {list(PRESETS)}, got {preset!r}")
    if frames_per_batch % n_envs or frames_per_batch % minibatch_size:
        raise ValueError(f"frames_per_batch {frames_per_batch} must be a multiple of n_envs "
                         f"{n_envs} and of minibatch_size {minibatch_size}")
    iters = max(1, math.ceil(frames / frames_per_batch))
    config = ExperimentConfig.get_from_yaml()
    config.sampling_device = config.train_device = config.buffer_device = "cpu"
    config.lr = lr
    config.max_n_frames = iters * frames_per_batch
    config.max_n_iters = None
    config.on_policy_collected_frames_per_batch = frames_per_batch
    config.on_policy_n_envs_per_worker = n_envs
    config.on_policy_minibatch_size = minibatch_size
    config.on_policy_n_minibatch_iters = epochs
    config.loggers = list(loggers)
    config.create_json = False
    config.render = False
    config.evaluation = evaluation_episodes > 0
    config.evaluation_episodes = max(1, evaluation_episodes)
    config.evaluation_interval = (iters - 1) * frames_per_batch or frames_per_batch
    config.checkpoint_interval = 0
    config.checkpoint_at_end = False
    if folder is None:
        folder = Path(f"benchmarl-{algorithm}-{preset}-seed{seed}")
    Path(folder).mkdir(parents=True, exist_ok=True)
    config.save_folder = str(folder)
    task = __getattr__("CoreTask")[task_name(preset)].get_task(
        {"batched": batched, "overrides": dict(overrides or {})})
    return Experiment(task=task, algorithm_config=configs[algorithm].get_from_yaml(),
                      model_config=MlpConfig.get_from_yaml(),
                      critic_model_config=MlpConfig.get_from_yaml(), seed=seed, config=config,
                      callbacks=callbacks)


def main(argv: list[str] | None = None) -> None:
    """``python -m mara_agents.marl.benchmarl_task``: one experiment, its per-iteration log
    printed (frames, forbidden actions, mean reward, losses)."""
    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("--algorithm", choices=ALGORITHMS, default="mappo")
    p.add_argument("--preset", default="CoRE-Small-v0", choices=list(PRESETS))
    p.add_argument("--frames", type=int, default=60000)
    p.add_argument("--frames-per-batch", type=int, default=6000)
    p.add_argument("--n-envs", type=int, default=30)
    p.add_argument("--minibatch-size", type=int, default=1000)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--evaluation-episodes", type=int, default=10)
    p.add_argument("--folder", type=Path, default=Path("results/benchmarl"))
    p.add_argument("--serial", action="store_true",
                   help="one PettingZooWrapper per env instead of the batched simulator")
    a = p.parse_args(argv)
    log = __getattr__("TrainingLog")()
    exp = make_experiment(a.algorithm, a.preset, a.frames, a.seed, a.frames_per_batch, a.n_envs,
                          a.minibatch_size, a.epochs, folder=a.folder,
                          evaluation_episodes=a.evaluation_episodes, batched=not a.serial,
                          callbacks=[log])
    start = time.time()
    exp.run()
    for i, row in enumerate(log.rows):
        losses = " ".join(f"{k}={v:.4g}" for k, v in row.items() if k.startswith("loss"))
        print(f"iter {i}: frames {row['frames']:.0f} forbidden {row['forbidden_actions']:.0f} "
              f"reward/step {row['reward']:.4f} {losses}")
    print(f"{a.algorithm} on {a.preset}: {exp.total_frames} frames in {time.time() - start:.1f}s; "
          f"logs in {exp.folder_name}")


if __name__ == "__main__":
    main()

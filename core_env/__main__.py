"""``python -m core_env``: check an installation in a few seconds.

Runs the compliance checks of :func:`core_env.testing.check_env` on ``CoRE-Small-v0``, one
episode of every preset with a masked random policy and a short batched rollout, then
prints the versions, the portable-math backend and whether torch was imported (it never is:
``core_env`` needs numpy, gymnasium, pettingzoo and scipy only). ``--require-no-torch``
fails if torch is installed at all (what CI checks after a plain ``pip install -e .``).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time

import numpy as np


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core_env", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--require-no-torch", action="store_true",
                        help="exit 1 if torch is installed (a core-only installation)")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    import core_env
    from core_env import pmath
    from core_env.testing import check_env

    report = check_env(lambda: core_env.parallel_env(preset="CoRE-Small-v0"))
    print(f"check_env(CoRE-Small-v0): passed ({report.episodes} episodes, {report.steps} steps)")
    for preset in sorted(core_env.PRESETS):
        env = core_env.parallel_env(preset=preset)
        rng = np.random.default_rng(0)
        obs, infos = env.reset(seed=0)
        while env.agents:
            obs, _, _, _, infos = env.step({
                a: int(rng.choice(np.flatnonzero(obs[a]["action_mask"]))) for a in env.agents})
        stats = next(iter(infos.values()))["episode"]
        print(f"{preset}: random policy completes {stats['completion_rate']:.3f} "
              f"({stats['completed']} of {stats['arrived']} tasks, {stats['length']} slots)")
    envs = core_env.make_batched("CoRE-v0", num_envs=8, seed=0)
    _, mask = envs.reset()
    for _ in range(50):
        _, mask, _, _, _ = envs.step((rng.random(mask.shape) * mask).argmax(axis=-1))
    print("make_batched(CoRE-v0, 8): 50 steps")
    import gymnasium
    import pettingzoo

    print(f"core_env {core_env.__version__}, numpy {np.__version__}, gymnasium "
          f"{gymnasium.__version__}, pettingzoo {pettingzoo.__version__}; portable math: "
          f"{pmath.BACKEND} kernels; {time.perf_counter() - t0:.1f} s")
    imported = "torch" in sys.modules
    installed = importlib.util.find_spec("torch") is not None
    print(f"torch imported: {'yes' if imported else 'no'}; installed: "
          f"{'yes' if installed else 'no'}")
    if imported:
        print("error: importing core_env imported torch", file=sys.stderr)
        return 1
    if args.require_no_torch and installed:
        print("error: torch is installed (expected a core-only installation)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

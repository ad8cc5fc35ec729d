"""Glue for third-party learners; each module imports its library and needs its extra
(``core_env`` itself never imports them): :mod:`core_env.integrations.sb3` (SuperSuit and
Stable-Baselines3, the ``sb3`` extra)."""

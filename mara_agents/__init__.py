"""MARA: the agent suite for the CoRE-Learning scheduling environment (``core_env``).

Subpackages include :mod:`mara_agents.forecast` (the flow-matching loss-curve forecaster).
"""

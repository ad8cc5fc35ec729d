"""Generic helpers shared by every floor of the project (``core_env``, ``mara_agents``,
``benchmarks``): argument checks with one message format, the dataclass command line and
the CPUs this process may use. Nothing here knows about scheduling."""

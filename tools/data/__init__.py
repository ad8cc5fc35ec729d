"""Scripts that build the shipped real-data files in ``core_env/data/`` (``make data``)."""

"""The type of the keyword options the compiled kernels pass to ``numba.njit``.

The modules keep their options in one dict (``@njit(**_JIT)``); typing it as this
:class:`~typing.TypedDict` lets a type checker match the unpacked keys against ``njit``'s
parameters (a plain ``dict[str, object]`` matches none of its overloads).
"""

from __future__ import annotations

from typing import Literal, TypedDict


class JitOptions(TypedDict, total=False):
    """Options of ``numba.njit`` used by the kernels."""

    cache: bool
    error_model: Literal["python", "numpy"]
    boundscheck: bool | None
    inline: Literal["never", "always"]

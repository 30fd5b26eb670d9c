"""Outside attack (attack4) on the session settings from Python: a lease or a busy wait that is
negative, NaN, fractional, a bool or past 2**63 must be refused with ``invalid_argument`` naming the
setting, never accepted, never a bare parse error. (Was a hole: fixed in the core's config decoding.)"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import ambit

BAD: list[tuple[dict[str, Any], str]] = [
    ({"lease_ms": -1}, "lease_ms"),
    ({"lease_ms": 2**63}, "lease_ms"),
    ({"lease_ms": 2**64 - 1}, "lease_ms"),
    ({"lease_ms": float("nan")}, "lease_ms"),
    ({"lease_ms": 1.5}, "lease_ms"),
    ({"lease_ms": True}, "lease_ms"),
    ({"busy_wait_ms": -5}, "busy_wait_ms"),
    ({"busy_wait_ms": float("nan")}, "busy_wait_ms"),
    ({"busy_wait_ms": float("inf")}, "busy_wait_ms"),
]


@pytest.mark.parametrize("kwargs,named", BAD, ids=[f"{k}={v!r}" for d, _ in BAD for k, v in d.items()])
def test_a_bad_lease_or_busy_wait_is_a_typed_error_naming_it(tmp_path: Path, kwargs: dict[str, Any],
                                                                 named: str) -> None:
    """Was a HOLE (low; 2**63 and up: high, see core attack4_sessions::a_huge_lease_is_refused...):
    values past 2**63 were accepted (the lease wrapped negative in the core); the others were refused
    with a serde message that did not name the setting."""
    async def attempt() -> None:
        with pytest.raises(ambit.AmbitError) as info:
            await ambit.Sessions.open(f"sqlite://{tmp_path}/s.db", **kwargs)
        assert info.value.code == "invalid_argument", info.value
        assert named in str(info.value), info.value
    asyncio.run(attempt())


def test_good_lease_and_busy_wait_open(tmp_path: Path) -> None:
    """Negative control: in-range whole numbers (and None) open the store."""
    async def attempt() -> None:
        for kwargs in ({"lease_ms": 30_000, "busy_wait_ms": 0}, {"lease_ms": 86_400_000}, {"lease_ms": None}):
            await ambit.Sessions.open(f"sqlite://{tmp_path}/s.db", **kwargs)
    asyncio.run(attempt())

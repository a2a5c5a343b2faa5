"""Smaller read buffers for TLS connections: asyncio gives each one 256 KiB.

asyncio's ``SSLProtocol`` allocates a zero-filled read buffer of ``max_size`` (256 KiB) for
every TLS connection, resident for the connection's life. kube-nudge keeps one connection per
watch, its Lease, the Events' two and, after a burst of writes, the pool's idle ones: in the
memory scenario about 17 at steady state (4.4 MiB of these buffers under tracemalloc), and as
many as the workers during a fan-out. 64 KiB still takes four TLS records (16 KiB at most
each) per read, and aiohttp reads in chunks of 64 KiB anyway.
"""

from __future__ import annotations

from asyncio import sslproto

__all__ = ["TLS_READ_BUFFER", "use_small_tls_buffers"]

TLS_READ_BUFFER = 64 * 1024


def use_small_tls_buffers() -> None:
    """Make TLS connections opened from now on use ``TLS_READ_BUFFER`` (process-wide)."""
    sslproto.SSLProtocol.max_size = TLS_READ_BUFFER

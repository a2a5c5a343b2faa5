"""Progress lines: ``[bench +MM:SS] message``, flushed at once."""

from __future__ import annotations

import time

_STARTED = time.monotonic()


def say(message: str) -> None:
    """Print one progress line with the time since the run began."""
    elapsed = int(time.monotonic() - _STARTED)
    print(f"[bench +{elapsed // 60:02d}:{elapsed % 60:02d}] {message}", flush=True)

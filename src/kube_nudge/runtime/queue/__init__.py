"""A de-duplicating, delaying asyncio work queue of keys, with debounce windows and per-key
backoff: client-go's workqueue semantics, in client-go's layers:

- ``delaying.DedupQueue``: keys ready to be worked on. A key is queued at most once, never
  handed to a second worker while one processes it (re-added meanwhile, it comes back at
  ``done``), and a key that becomes ready wakes one waiting worker, not all of them.
- ``model.debounce``: why a key is queued and so when it is due (pure data, in the model):
  a change's window, which further changes join and a quiet window extends; the key's own
  events, which open no window; immediate looks and retries, which no window holds back.
- ``delaying.DelayingQueue``: keys due later, on one timer for the earliest while a worker
  waits; each goes down to the ready queue when due. A key taken early inside a change's
  window leaves the window open (``window_open``) and comes back at its end.
- ``retrying``: ``WorkQueue``, what the controller uses: a failed key comes back after its
  per-key exponential backoff (``runtime.backoff``), reset by a success or ``forget``.

One pass over a key serves every reason it was queued for (reconciles are
level-triggered), and it is due at the earliest of them.
"""

from kube_nudge.runtime.queue.retrying import WorkQueue

__all__ = ["WorkQueue"]

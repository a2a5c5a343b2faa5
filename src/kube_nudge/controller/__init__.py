"""The controller loop: caches of projections, reverse index, work queue, reconcile."""

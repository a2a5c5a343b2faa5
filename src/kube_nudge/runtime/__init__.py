"""Runtime: work queue with backoff, reverse index, clock, leader election, metrics,
background Events, the HTTP server and the manager of runnables."""

"""Notifications to chat and webhook receivers, one subsystem in two layers.

- ``model``: what is announced, the receivers' payloads and their configuration. Pure (no
  I/O, no clock), so strategies and the controller build notifications without loading an
  HTTP client; import-linter holds it to the model's purity contract.
- ``delivery``: the ``Notifier`` that sends them in the background (aiohttp, retries,
  backoff), and loading the receiver configuration from a file or the environment.

This package imports neither: importing ``kube_nudge.notifications.model`` never loads
``delivery``.
"""

"""Peer tools for the benchmark (Stakater Reloader, Wave), built from the Go module proxy."""

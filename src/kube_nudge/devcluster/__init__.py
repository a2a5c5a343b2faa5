"""The local development/test control plane (build, PKI, processes, cluster)."""

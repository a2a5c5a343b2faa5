"""Strategies that apply a desired config hash to a workload."""

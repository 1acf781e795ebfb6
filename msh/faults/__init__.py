"""Fault injection for the demo and the integration tests (a lossy network between two MSHs)."""

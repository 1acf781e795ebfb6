"""Test support that ships with the MSH: the in-process test network (:mod:`msh.testing.network`)."""

"""The project's sample ebXML messages (``msh demo --codec`` reads them; ``scripts/make_samples.py`` rebuilds them).

This folder is installed as the data package ``msh.sample_messages`` (see ``pyproject.toml``), so the codec
demo finds the messages through :mod:`importlib.resources` in a wheel installed without the source tree too.
"""

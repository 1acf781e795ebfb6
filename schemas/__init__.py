"""The project's own XML schemas (ebMS 2.0 header, SOAP 1.1 envelope, XML-DSig, CPP/A 2.0, xml, xlink).

This folder is installed as the data package ``msh.schemas`` (see ``pyproject.toml``); code finds the
files through :mod:`msh.resources`, never by a path relative to the checkout.
"""

"""The transport (docs/design.md §2): how messages leave and reach the MSH.

:mod:`msh.transport.port` is the port (:class:`~msh.transport.port.Transport`, its requests, answers and
failures), :mod:`msh.transport.http` the aiohttp adapter and :mod:`msh.transport.memory` its in-memory
twin; :mod:`msh.transport.asgi` is the inbound endpoint, :mod:`msh.transport.server` serves it on uvicorn
with the limits at the door, :mod:`msh.transport.tls` builds the TLS contexts from the agreements.
"""

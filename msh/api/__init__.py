"""The application interfaces: how business applications elsewhere hand messages to the MSH and take
them from it (issue 15; the HTTPR specification, Certified HTTP, the AMQP 1.0 broker-behaviour paper,
SOA-Rity for HTTP).

An adapter above the runtime (:mod:`msh.runtime`), served by ``msh serve`` on its own port when
``api.enabled`` (:mod:`msh.api.server`):

* REST (:mod:`msh.api.app`, FastAPI, OpenAPI 3.1 at ``{api.path}/openapi.json``): exactly-once submission
  (:mod:`msh.api.soarity`, :mod:`msh.api.submitting`), message status, the inbox with leases, release,
  reject, long polls, filters, priorities and the TTL report (:mod:`msh.api.inbox_ops`), pull batches
  (:mod:`msh.api.rest_batches`);
* SOAP 1.1 with its WSDL 1.1 (:mod:`msh.api.soap`): the same operations for WSDL-driven applications;
* webhooks (:mod:`msh.api.webhooks`).

Every refusal is an RFC 9457 problem document (:mod:`msh.api.problems`); applications authenticate with
bearer tokens or client certificates (:mod:`msh.api.auth`).
"""

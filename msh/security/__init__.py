"""Message security in the ebMS 2.0 profile (ebMS2 §4.1): XML-DSig signatures over the envelope and the
payload parts, signed receipts, payload encryption (XML Encryption), keys; run by python-xmlsec
(libxmlsec1), see :mod:`msh.security.library`."""

"""The API's wire types: what the HTTP API accepts (``bodies``) and returns (``views``).

The server (``phalanx.control``) and the client (``phalanx.client``) both import these
models, and neither is imported here: the one contract between the two sides is this
package. Write schemas forbid unknown fields; read schemas ignore them.
"""

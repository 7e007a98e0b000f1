"""API bodies. Write schemas forbid unknown fields; read schemas ignore them."""

"""The inference gateway: routes (``routes``) and the ASGI proxy (``proxy``)."""

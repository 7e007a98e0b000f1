"""The web console, served by the control plane at ``/ui``.

Server-rendered pages (Jinja2 templates) whose every datum comes from the API through
``phalanx.client`` with the visitor's own token; a little hand-written JavaScript
refreshes parts of a page in place. One module per view in ``views/``; the session
cookie in ``session``, CSRF in ``csrf``; templates and static files ship in the package.
"""

from __future__ import annotations

from phalanx.web.app import close_console, create_console

__all__ = ["close_console", "create_console"]

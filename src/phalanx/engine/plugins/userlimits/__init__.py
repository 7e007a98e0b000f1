"""userlimits: what each user of a queue may hold and run at once, and use per period.

One package, one concern a module:

- ``plugin``: ``UserLimitsPlugin``, its extension points and the rules they keep;
- ``holdings``: each user's limits, running jobs and held resources in a session;
- ``budgets``: whether a user's or a queue's budget is spent in the current period.
"""

from phalanx.engine.plugins.userlimits.plugin import UserLimitsPlugin

__all__ = ["UserLimitsPlugin"]

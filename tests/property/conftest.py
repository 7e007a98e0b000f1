"""The Hypothesis profile of the property suite: derandomized, no wall-time limits.

CI runs the same examples every time (``derandomize``); nothing is written to an
example database; no deadline, so a slow or busy machine cannot make a test flaky.
The profile is not loaded globally (other suites keep their own settings): each
property test takes it as the parent of its ``settings`` and sets ``max_examples``
so that the suite stays well under a minute on two cores.
"""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "phalanx-property",
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=False,
    suppress_health_check=(HealthCheck.too_slow, HealthCheck.data_too_large),
)

"""``python -m phalanx.examples.pipelines``: print the folder of the example documents."""

from phalanx.examples.pipelines import DIRECTORY

print(DIRECTORY)

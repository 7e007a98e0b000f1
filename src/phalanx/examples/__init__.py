"""Small programs that run as phalanx tasks (the demo's training job among them)."""

"""Built-in serving runtimes: programs an Inference predictor runs as its replicas."""

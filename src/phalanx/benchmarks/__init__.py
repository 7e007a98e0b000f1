"""In-process benchmarks behind ``phalanx bench``; each returns a JSON-ready dict."""

"""Datasets: remote data by URL, cached on the nodes that read it."""

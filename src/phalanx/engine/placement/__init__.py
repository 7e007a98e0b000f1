"""Placement: putting pending tasks on nodes, and saying why they do not fit.

``jobs`` places a job's tasks as one gang (``try_job``); ``tasks`` places the tasks
of one class vectorized (predicates once, scores kept per class, runs a node keeps
winning placed at once); ``confined`` places a gang inside the node masks a plugin
confines it to (a network topology group); ``gangs`` decides whether a gang fits and
words its failure; ``shortage`` says why no node takes a task; ``eviction`` makes room
for a waiting gang (preempt, reclaim, an elastic job's growth taken back) and then
places it, while placing never evicts. Actions use it; the framework (session,
statement, extension points) does not.
"""

"""Example documents shared by the spec tests: DESIGN.md section 6 and Volcano's own."""

from __future__ import annotations

DESIGN_EXAMPLES = """\
apiVersion: phalanx/v1
kind: Queue
metadata: {name: nlp}
spec:
  parent: team-a            # omitted: a child of the root
  weight: 2
  guarantee: {gpu: 16}      # never lent away
  deserved: {gpu: 32}       # fair share under contention (computed from weight when omitted)
  capability: {gpu: 64, cpu: 512}
  reclaimable: true
  overcommit: false
---
apiVersion: phalanx/v1
kind: Job
metadata: {name: bert-pretrain}
spec:
  queue: nlp
  priority: 100
  minAvailable: 3           # gang size; default: all replicas
  maxRetry: 3
  walltime: 8h
  roles:
  - name: master
    replicas: 1
    resources: {cpu: 8, memory: 32Gi, gpu: 8}
    command: ["torchrun", "--nnodes", "3", "train.py"]   # a list, or one shell string
  - name: worker
    replicas: 2
    dependsOn: [{role: master, phase: Running}]
    resources: {cpu: 8, memory: 32Gi, gpu: 8, rdma/hca: 1}
    command: "torchrun --nnodes 3 train.py"
---
apiVersion: phalanx/v1
kind: Cluster
metadata: {name: lab}
spec:
  nodeGroups:
  - name: dgx               # nodes dgx-0 .. dgx-31
    count: 32
    resources: {cpu: 128, memory: 1Ti, rdma/hca: 8}
    gpus: {count: 8, model: A100-SXM4-80GB, memory: 80Gi, topology: dgx-a100}
    network: {tor: "tor-{index // 16}"}
---
apiVersion: phalanx/v1
kind: SchedulerConfig
metadata: {name: default}
spec:
  actions: [enqueue, allocate, reclaim, preempt, backfill]
  tiers:
  - plugins: [{name: priority}, {name: gang}]
  - plugins: [{name: drf}, {name: predicates}, {name: capacity}, {name: binpack, args: {gpu: 5, cpu: 1}}]
"""

# A vcjob as Volcano's own examples write it, with fields phalanx does not model.
VOLCANO_JOB = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: tf-dist
  namespace: team-a
  labels: {app: tf}
spec:
  minAvailable: 3
  schedulerName: volcano
  queue: nlp
  priorityClassName: prio-1000
  maxRetry: 5
  policies:
  - {event: PodEvicted, action: RestartJob}
  plugins: {env: [], svc: []}
  tasks:
  - replicas: 1
    name: ps
    template:
      spec:
        nodeSelector: {zone: a}
        tolerations:
        - {key: dedicated, operator: Equal, value: gpu, effect: NoSchedule, tolerationSeconds: 30}
        containers:
        - name: tensorflow
          image: tf:2
          command: ["sh", "-c"]
          args: ["python ps.py"]
          resources:
            requests: {cpu: 500m, memory: 1Gi}
            limits: {cpu: "1", memory: 2Gi}
        - name: sidecar
          image: busybox
          resources:
            limits: {cpu: 250m, memory: 512Mi}
        restartPolicy: Never
  - replicas: 2
    name: worker
    dependsOn: {name: [ps]}
    template:
      spec:
        containers:
        - name: tensorflow
          image: tf:2
          resources:
            limits: {nvidia.com/gpu: 1, cpu: 4}
"""

VOLCANO_QUEUE = """\
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: nlp}
spec:
  weight: 4
  reclaimable: false
  parent: research
  capability: {cpu: "100", memory: 200Gi, nvidia.com/gpu: 16}
  deserved: {nvidia.com/gpu: 8}
  guarantee:
    resource: {nvidia.com/gpu: 4}
status: {state: Open}
"""

MINIMAL_JOB = """\
apiVersion: phalanx/v1
kind: Job
metadata: {name: bert}
spec:
  roles:
  - name: master
    replicas: 1
    resources: {cpu: 8, memory: 32Gi}
"""

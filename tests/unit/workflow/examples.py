"""Pipeline documents the workflow tests share."""

from __future__ import annotations

#: The issue's example, as written: it must load.
TRI = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: tri}
spec:
  params: {lr: 0.01}
  defaults: {queue: wf, resources: {cpu: 1, memory: 256Mi}}
  steps:
    prep:
      command: ["sh", "-c", "python prep.py > {{outputs.data}}"]
      outputs: {artifacts: [data]}
    train:
      dependsOn: [prep]
      inputs: {artifacts: {data: "{{steps.prep.outputs.data}}"}}
      command: ["sh", "-c", "python train.py --lr {{params.lr}} {{inputs.data}} {{outputs.model}}"]
      outputs: {artifacts: [model]}
    validate:
      inputs: {artifacts: {model: "{{steps.train.outputs.model}}"}}
      command: ["sh", "-c", "python validate.py {{inputs.model}}"]
"""

#: Every feature at once: typed params, components, fan-out, conditions, a job step,
#: output params, retry, cache, finally, schedule.
FULL = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: sweep}
spec:
  params:
    lrs: [0.1, 0.01, 0.001]
    threshold: {type: float, default: 0.9, description: promote above this}
    tag: {type: string, default: nightly}
    dry: false
  defaults:
    queue: wf
    resources: {cpu: 1, memory: 1Gi}
    image: localhost/train:1.0
    env: {LOG: info}
    retry: {maxAttempts: 3, on: [preempted, nodeLost], backoff: {initial: 5s, factor: 2, max: 1m}}
    timeout: 1h
    cache: {enabled: true, ttl: 7d, files: [train.py], excludeParams: [dry]}
  components:
    trainer:
      command: "python train.py --lr {{item}} --out {{outputs.model}} --metrics {{outputs.metrics}}"
      resources: {cpu: 2, memory: 4Gi, gpu: 1}
      outputs:
        artifacts: [model, metrics]
        params: {accuracy: {type: float, fromArtifact: metrics, key: eval.accuracy}}
  steps:
    data:
      command: ["python", "gen.py", "{{outputs.shards}}"]
      outputs: {params: {shards: {type: list}}}
    train:
      uses: trainer
      foreach: {items: "{{params.lrs}}", maxItems: 100, maxParallel: 2}
      inputs: {params: {shards: "{{steps.data.outputs.shards}}"}}
    best:
      command: ["python", "best.py", "{{steps.train.outputs.accuracy}}", "{{outputs.score}}"]
      outputs: {params: {score: {type: float}}}
    promote:
      when: "{{steps.best.outputs.score}} >= {{params.threshold}} and not {{params.dry}}"
      command: ["python", "promote.py", "--tag", "{{params.tag}}"]
    shard:
      dependsOn: [data]
      foreach: {items: [{name: a, size: 1}, {name: b, size: 2}], maxItems: 2}
      command: ["echo", "{{item.name}}", "{{run.id}}"]
      retry: {maxAttempts: 1}
      cache: {enabled: false}
    dist:
      dependsOn: [best]
      job:
        minAvailable: 2
        roles:
        - name: master
          replicas: 1
          resources: {cpu: 1, memory: 1Gi}
          command: ["torchrun", "--lr", "{{params.threshold}}"]
        - name: worker
          replicas: 1
          resources: {cpu: 1, memory: 1Gi}
          command: "torchrun --tag {{params.tag}}"
  finally:
    notify:
      command: ["sh", "-c", "echo done {{run.id}}"]
      resources: {cpu: 100m, memory: 64Mi}
  onFailure: continue
  concurrency: 4
  schedule: {cron: "0 3 * * mon-fri", concurrencyPolicy: skip}
"""

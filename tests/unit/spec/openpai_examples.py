"""OpenPAI job protocol examples from OpenPAI's own repository, as published."""

from __future__ import annotations

# https://github.com/microsoft/pai/blob/master/marketplace-v2/tensorflow-cifar10.yaml
# (verbatim but for the description blocks, shortened to their first lines)
TENSORFLOW_CIFAR10 = """\
protocolVersion: 2
name: tensorflow_cifar10
type: job
version: 1.0
contributor: OpenPAI
description: |
  # TensorFlow Distributed Training
  This example runs TensorFlow Distributed Training on OpenPAI using CIFAR10.

parameters:
  model: resnet20
  batchsize: 32

prerequisites:
  - protocolVersion: 2
    name: tf_example
    type: dockerimage
    version: 1.0-r1.4
    contributor: OpenPAI
    description: |
      This is an [example TensorFlow Docker image on OpenPAI](https://github.com/Microsoft/pai/tree/master/examples/tensorflow).
    uri: openpai/pai.example.tensorflow
  - protocolVersion: 2
    name: tensorflow_cifar10_model
    type: output
    version: 1.0
    contributor: OpenPAI
    description: |
      Output directory for CIFAR10 training on HDFS, contains pre-trained models.
    uri: hdfs://192.168.0.1:9000/core/cifar10_model
  - protocolVersion: 2
    name: tensorflow_cnnbenchmarks
    type: script
    version: 84820935288cab696c9c2ac409cbd46a1f24723d
    contributor: MaggieQi
    description: |
      # TensorFlow benchmarks
    uri: https://github.com/MaggieQi/benchmarks
  - protocolVersion: 2
    name: cifar10
    type: data
    version: latest
    contributor: OpenPAI
    description: |
      # The CIFAR10 dataset
    uri:
      - https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz

taskRoles:
  worker:
    instances: 1
    completion:
      minSucceededInstances: 1
    dockerImage: tf_example
    data: cifar10
    output: tensorflow_cifar10_model
    script: tensorflow_cnnbenchmarks
    resourcePerInstance:
      cpu: 2
      memoryMB: 16384
      gpu: 4
    commands:
      - cd script_<% $script.name %>/scripts/tf_cnn_benchmarks
      - >
        python tf_cnn_benchmarks.py --job_name=worker
        --local_parameter_device=gpu
        --variable_update=parameter_server
        --ps_hosts=$PAI_TASK_ROLE_psserver_HOST_LIST
        --worker_hosts=$PAI_TASK_ROLE_worker_HOST_LIST
        --task_index=$PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX
        --data_name=<% $data.name %>
        --data_dir=$PAI_WORK_DIR/data_<% $data.name %>
        --train_dir=$PAI_WORK_DIR/output_<% $output.name %>
        --model=<% $parameters.model %>
        --batch_size=<% $parameters.batchsize %>
  psserver:
    instances: 1
    completion:
      minSucceededInstances: 1
    dockerImage: tf_example
    data: cifar10
    output: tensorflow_cifar10_model
    script: tensorflow_cnnbenchmarks
    resourcePerInstance:
      cpu: 2
      memoryMB: 16384
      gpu: 1
    commands:
      - cd script_<% $script.name %>/scripts/tf_cnn_benchmarks
      - >
        python tf_cnn_benchmarks.py --job_name=ps
        --local_parameter_device=gpu
        --variable_update=parameter_server
        --ps_hosts=$PAI_TASK_ROLE_psserver_HOST_LIST
        --worker_hosts=$PAI_TASK_ROLE_worker_HOST_LIST
        --task_index=$PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX
        --data_dir=$PAI_WORK_DIR/data_<% $data.name %>
        --data_name=<% $data.name %>
        --train_dir=$PAI_WORK_DIR/output_<% $output.name %>
        --model=<% $parameters.model %>
        --batch_size=<% $parameters.batchsize %>

deployments:
  - name: tf_example
    taskRoles:
      worker:
        preCommands:
          - wget -qO- <% $data.uri[0] %> | tar xvz && mv cifar-10-batches-py data_<% $data.name %>
          - >
            git clone <% $script.uri %> script_<% $script.name %> &&
            cd script_<% $script.name %> && git checkout <% $script.version %> && cd ..
      psserver:
        preCommands:
          - wget -qO- <% $data.uri[0] %> | tar xvz && mv cifar-10-batches-py data_<% $data.name %>
          - >
            git clone <% $script.uri %> script_<% $script.name %> &&
            cd script_<% $script.name %> && git checkout <% $script.version %> && cd ..
        postCommands:
          - echo "Uploading data ..." # && hdfs dfs -cp output_<% $output.name %> <% $output.uri %>

defaults:
  deployment: tf_example
"""

# https://github.com/microsoft/pai/blob/master/examples/Distributed-example/cifar10-single-mul-DDP-nccl.yaml
# (linked from docs/manual/cluster-user/how-to-run-distributed-job.md; verbatim)
PYTORCH_DDP_NCCL = """\
protocolVersion: 2
name: cifar10-single-mul-DDP-nccl-1
type: job
jobRetryCount: 0
prerequisites:
  - type: dockerimage
    uri: 'openpai/standard:python_3.6-pytorch_1.2.0-gpu'
    name: docker_image_0
taskRoles:
  worker:
    instances: 2
    completion:
      minFailedInstances: 1
    taskRetryCount: 0
    dockerImage: docker_image_0
    resourcePerInstance:
      gpu: 2
      cpu: 8
      memoryMB: 16384
      ports:
        SynPort: 1
    commands:
      - 'git clone https://github.com/NVIDIA/apex'
      - cd apex
      - python setup.py install
      - cd ..
      - >-
        wget
        https://raw.githubusercontent.com/vvfreesoul/pai/master/examples/Distributed-example/cifar10-single-mul-DDP-nccl-gloo.py
      - >-
        python  cifar10-single-mul-DDP-nccl-gloo.py -n 2 -g 2 --epochs 2
        --dist-backend nccl
defaults:
  virtualCluster: default
extras:
  com.microsoft.pai.runtimeplugin:
    - plugin: ssh
      parameters:
        jobssh: true
        userssh: {}
  hivedScheduler:
    taskRoles:
      worker:
        skuNum: 1
        skuType: null
"""

# A small job of our own for the edits of the error tests.
SMALL = """\
protocolVersion: 2
name: small_job
type: job
prerequisites:
  - {type: dockerimage, name: image, uri: 'ubuntu:22.04'}
parameters:
  steps: 100
taskRoles:
  worker:
    instances: 2
    dockerImage: image
    resourcePerInstance: {cpu: 4, memoryMB: 8192, gpu: 1}
    commands:
      - python train.py --steps <% $parameters.steps %>
"""

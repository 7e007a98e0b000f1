"""Kubeflow training-operator documents as users write them (after the operator's own
examples: pytorch-simple, dist-mnist, tensorflow-benchmarks), with a few fields that
phalanx reads but does not honour."""

PYTORCH_JOB = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: pytorch-simple
  namespace: kubeflow
  labels: {team: nlp}
spec:
  runPolicy:
    backoffLimit: 2
    activeDeadlineSeconds: 3600
    cleanPodPolicy: None
    schedulingPolicy:
      queue: nlp
      minAvailable: 3
      priorityClass: prio-500
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727
              command: ["python3", "/opt/pytorch-mnist/mnist.py"]
              args: ["--epochs=1"]
              resources:
                limits: {nvidia.com/gpu: 1, cpu: "4", memory: 8Gi}
                requests: {cpu: "2"}
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        metadata:
          annotations: {sidecar.istio.io/inject: "false"}
        spec:
          nodeSelector: {gpu: a100}
          tolerations:
            - {key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}
          volumes:
            - {name: data, emptyDir: {}}
          containers:
            - name: pytorch
              image: docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727
              imagePullPolicy: Always
              command: ["python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1"]
              ports:
                - {name: pytorchjob-port, containerPort: 23456}
              env:
                - {name: LOGLEVEL, value: INFO}
                - name: WANDB_KEY
                  valueFrom: {secretKeyRef: {name: wandb, key: key}}
              resources:
                limits: {nvidia.com/gpu: 1, memory: 8Gi}
            - name: logger
              image: busybox
status:
  conditions: []
"""

TF_JOB = """\
apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: dist-mnist
spec:
  tfReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers:
            - name: tensorflow
              image: kubeflow/tf-dist-mnist-test:1.0
              command: ["python", "/var/tf_dist_mnist/dist_mnist.py", "--train_steps=100"]
              resources:
                limits: {aliyun.com/gpu-mem: 3}
    PS:
      replicas: 1
      template:
        spec:
          containers:
            - name: tensorflow
              image: kubeflow/tf-dist-mnist-test:1.0
              command: ["python", "/var/tf_dist_mnist/dist_mnist.py"]
              resources:
                requests: {cpu: 500m, memory: 1Gi}
    Chief:
      replicas: 1
      template:
        spec:
          containers:
            - name: tensorflow
              image: kubeflow/tf-dist-mnist-test:1.0
              command: ["python", "/var/tf_dist_mnist/dist_mnist.py"]
"""

MPI_JOB = """\
apiVersion: kubeflow.org/v1
kind: MPIJob
metadata:
  name: tensorflow-benchmarks
spec:
  slotsPerWorker: 2
  runPolicy:
    cleanPodPolicy: Running
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
            - image: mpioperator/tensorflow-benchmarks:latest
              name: tensorflow-benchmarks
              command: ["mpirun", "--allow-run-as-root", "-np", "4", "python", "tf_cnn_benchmarks.py"]
    Worker:
      replicas: 2
      template:
        spec:
          containers:
            - image: mpioperator/tensorflow-benchmarks:latest
              name: tensorflow-benchmarks
              command: ["sleep", "infinity"]
              resources:
                limits: {nvidia.com/gpu: 2}
"""

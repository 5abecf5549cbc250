"""A real Kubernetes control plane on this machine, for the kube tests and for ``pykueue dev-cluster``.

    controlplane  etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
                  (fake nodes) as child processes, built by hack/kube-binaries
    kinds         the job kinds' own controllers (JobSet, LWS, KubeRay, ...), built by
                  hack/kind-controllers, with their CRDs and webhooks
    running       pykueue's controller and webhooks in-process, registered by URL

Nothing here is used by the controller that runs in a real cluster.
"""

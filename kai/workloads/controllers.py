"""What each workload controller creates, written from each project's public behaviour.

Each function takes a workload object and the budget of objects its expansion may
create (`kai.workloads.budget`, which also reads every count), and returns the objects
its controller would create, owners before the objects they own: intermediate objects (a
JobSet's Jobs, a Deployment's ReplicaSet, an LWS's StatefulSets) and the pods,
with the labels and annotations the grouper and the definitions read. Names
follow each controller's scheme; random suffixes become stable hashes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kai.workloads.budget import ExpansionBudget
from kai.workloads.objects import labels_of, name_of, object_uid
from kai.workloads.synth import (
    distinct_suffixes,
    owned_object,
    pod_from_template,
    short_hash,
    template_with_labels,
)

Objects = list[dict[str, Any]]
Controller = Callable[[Mapping[str, Any], ExpansionBudget], Objects]


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def replicaset_pods(rs: Mapping[str, Any], budget: ExpansionBudget) -> Objects:
    return _replicaset_pods(rs, budget.copies(_spec(rs).get("replicas"), 1, "spec.replicas"))


def _replicaset_pods(rs: Mapping[str, Any], copies: range) -> Objects:
    template = _spec(rs).get("template") or {}
    name = name_of(rs)
    suffixes = distinct_suffixes(len(copies), name)
    return [pod_from_template(template, f"{name}-{suffix}", rs) for suffix in suffixes]


def deployment(deploy: Mapping[str, Any], budget: ExpansionBudget) -> Objects:
    return _deployment(deploy, budget.copies(_spec(deploy).get("replicas"), 1, "spec.replicas"))


def _deployment(deploy: Mapping[str, Any], copies: range) -> Objects:
    """The ReplicaSet and its pods, `copies` counted (and reserved) from wherever they are set."""
    template = _spec(deploy).get("template") or {}
    template_hash = short_hash(name_of(deploy), repr(template), length=10)
    stamped = template_with_labels(template, {"pod-template-hash": template_hash})
    rs_spec = {"replicas": len(copies), "template": stamped}
    rs = owned_object(
        "apps/v1",
        "ReplicaSet",
        f"{name_of(deploy)}-{template_hash}",
        deploy,
        rs_spec,
        labels={**labels_of(deploy), "pod-template-hash": template_hash},
    )
    return [rs, *_replicaset_pods(rs, copies)]


def statefulset(sts: Mapping[str, Any], budget: ExpansionBudget) -> Objects:
    template = _spec(sts).get("template") or {}
    name = name_of(sts)
    return [
        pod_from_template(
            template,
            f"{name}-{ordinal}",
            sts,
            labels={
                "statefulset.kubernetes.io/pod-name": f"{name}-{ordinal}",
                "apps.kubernetes.io/pod-index": str(ordinal),
            },
        )
        for ordinal in budget.copies(_spec(sts).get("replicas"), 1, "spec.replicas")
    ]


def job(job_obj: Mapping[str, Any], budget: ExpansionBudget) -> Objects:
    spec = _spec(job_obj)
    if spec.get("suspend") is True:
        return []
    parallelism = budget.number(spec.get("parallelism"), 1, "spec.parallelism")
    completions = budget.number(spec.get("completions"), parallelism, "spec.completions")
    active = min(parallelism, completions)
    name = name_of(job_obj)
    uid = object_uid(job_obj)
    controller_labels = {
        "batch.kubernetes.io/job-name": name,
        "job-name": name,
        "batch.kubernetes.io/controller-uid": uid,
        "controller-uid": uid,
    }
    indexed = spec.get("completionMode") == "Indexed"
    pods = []
    indices = budget.spend(active, "spec.parallelism")
    suffixes = [] if indexed else distinct_suffixes(len(indices), name)
    for index in indices:
        extra = dict(controller_labels)
        annotations = {}
        if indexed:
            extra["batch.kubernetes.io/job-completion-index"] = str(index)
            annotations["batch.kubernetes.io/job-completion-index"] = str(index)
            pod_name = f"{name}-{index}-{short_hash(name, str(index))}"
        else:
            pod_name = f"{name}-{suffixes[index]}"
        pods.append(
            pod_from_template(spec.get("template") or {}, pod_name, job_obj, extra, annotations)
        )
    return pods


def cronjob(cron: Mapping[str, Any], budget: ExpansionBudget) -> Objects:
    if _spec(cron).get("suspend") is True:
        return []
    template = _spec(cron).get("jobTemplate") or {}
    meta = template.get("metadata") or {}
    child = owned_object(
        "batch/v1",
        "Job",
        f"{name_of(cron)}-{short_hash(name_of(cron), length=8)}",
        cron,
        template.get("spec") or {},
        labels=meta.get("labels"),
        annotations=meta.get("annotations"),
    )
    return [child, *job(child, budget.within("spec.jobTemplate"))]


def jobset(js: Mapping[str, Any], budget: ExpansionBudget) -> Objects:
    objects: Objects = []
    name = name_of(js)
    for position, replicated in enumerate(_spec(js).get("replicatedJobs") or []):
        at = budget.within(f"spec.replicatedJobs[{position}]")
        rj_name = str(replicated.get("name"))
        replicas = at.number(replicated.get("replicas"), 1, "replicas")
        template = replicated.get("template") or {}
        for index in at.spend(replicas, "replicas"):
            jobset_labels = {
                "jobset.sigs.k8s.io/jobset-name": name,
                "jobset.sigs.k8s.io/replicatedjob-name": rj_name,
                "jobset.sigs.k8s.io/replicatedjob-replicas": str(replicas),
                "jobset.sigs.k8s.io/job-index": str(index),
            }
            job_spec = dict(template.get("spec") or {})
            job_spec["template"] = template_with_labels(
                job_spec.get("template") or {}, jobset_labels
            )
            meta = template.get("metadata") or {}
            child = owned_object(
                "batch/v1",
                "Job",
                f"{name}-{rj_name}-{index}",
                js,
                job_spec,
                labels={**(meta.get("labels") or {}), **jobset_labels},
                annotations=meta.get("annotations"),
            )
            objects.extend([child, *job(child, at.within("template"))])
    return objects


_TRAINING_SPECS = {
    "PyTorchJob": ("pytorchReplicaSpecs", "pytorchjob-controller"),
    "TFJob": ("tfReplicaSpecs", "tfjob-controller"),
    "XGBoostJob": ("xgbReplicaSpecs", "xgboostjob-controller"),
    "JAXJob": ("jaxReplicaSpecs", "jaxjob-controller"),
}


def training_job(job_obj: Mapping[str, Any], budget: ExpansionBudget) -> Objects:
    """Kubeflow training operator: pods `<job>-<role>-<i>` created directly under the job."""
    specs_field, operator = _TRAINING_SPECS[str(job_obj.get("kind"))]
    name = name_of(job_obj)
    pods = []
    for role, replica_spec in (_spec(job_obj).get(specs_field) or {}).items():
        field = f"spec.{specs_field}.{role}.replicas"
        for index in budget.copies(replica_spec.get("replicas"), 1, field):
            pods.append(
                pod_from_template(
                    replica_spec.get("template") or {},
                    f"{name}-{role.lower()}-{index}",
                    job_obj,
                    labels={
                        "training.kubeflow.org/job-name": name,
                        "training.kubeflow.org/operator-name": operator,
                        "training.kubeflow.org/replica-type": role.lower(),
                        "training.kubeflow.org/replica-index": str(index),
                    },
                )
            )
    return pods


def mpijob(mpi: Mapping[str, Any], budget: ExpansionBudget) -> Objects:
    """MPI operator v2: a launcher batch Job `<job>-launcher` and worker pods `<job>-worker-<i>`."""
    name = name_of(mpi)
    specs = _spec(mpi).get("mpiReplicaSpecs") or {}

    def role_labels(role: str) -> dict[str, str]:
        return {
            "training.kubeflow.org/job-name": name,
            "training.kubeflow.org/operator-name": "mpi-operator",
            "training.kubeflow.org/job-role": role,
        }

    objects: Objects = []
    workers = specs.get("Worker") or {}
    workers_field = "spec.mpiReplicaSpecs.Worker.replicas"
    for index in budget.copies(workers.get("replicas"), 1, workers_field):
        objects.append(
            pod_from_template(
                workers.get("template") or {},
                f"{name}-worker-{index}",
                mpi,
                labels={**role_labels("worker"), "training.kubeflow.org/replica-index": str(index)},
            )
        )
    launcher = specs.get("Launcher")
    if launcher:
        template = template_with_labels(launcher.get("template") or {}, role_labels("launcher"))
        launcher_job = owned_object(
            "batch/v1",
            "Job",
            f"{name}-launcher",
            mpi,
            {"template": template},
            labels=role_labels("launcher"),
        )
        launcher_at = budget.within("spec.mpiReplicaSpecs.Launcher")
        objects[:0] = [launcher_job, *job(launcher_job, launcher_at)]
    return objects


def raycluster(cluster: Mapping[str, Any], budget: ExpansionBudget) -> Objects:
    return _ray_pods(cluster, budget.within("spec"))


def _ray_pods(cluster: Mapping[str, Any], spec_at: ExpansionBudget) -> Objects:
    """The head and worker pods; `spec_at` names fields from the cluster spec's place."""
    name = name_of(cluster)
    spec = _spec(cluster)
    if spec.get("suspend") is True:
        return []
    common = {"ray.io/cluster": name, "ray.io/is-ray-node": "yes"}
    head = spec.get("headGroupSpec") or {}
    pods = [
        pod_from_template(
            head.get("template") or {},
            f"{name}-head-{short_hash(name, 'head')}",
            cluster,
            labels={**common, "ray.io/node-type": "head", "ray.io/group": "headgroup"},
        )
    ]
    for position, group in enumerate(spec.get("workerGroupSpecs") or []):
        at = spec_at.within(f"workerGroupSpecs[{position}]")
        group_name = str(group.get("groupName"))
        hosts = at.number(group.get("replicas"), 1, "replicas") * at.number(
            group.get("numOfHosts"), 1, "numOfHosts"
        )
        for suffix in distinct_suffixes(len(at.spend(hosts, "replicas")), name, group_name):
            pods.append(
                pod_from_template(
                    group.get("template") or {},
                    f"{name}-{group_name}-worker-{suffix}",
                    cluster,
                    labels={**common, "ray.io/node-type": "worker", "ray.io/group": group_name},
                )
            )
    return pods


def _ray_owner_of_cluster(spec_field: str, infix: str) -> Controller:
    def expand(owner: Mapping[str, Any], budget: ExpansionBudget) -> Objects:
        cluster_spec = _spec(owner).get(spec_field) or {}
        name = f"{name_of(owner)}{infix}-{short_hash(name_of(owner))}"
        cluster = owned_object(
            "ray.io/v1", "RayCluster", name, owner, cluster_spec, labels_of(owner)
        )
        return [cluster, *_ray_pods(cluster, budget.within(f"spec.{spec_field}"))]

    return expand


rayjob = _ray_owner_of_cluster("rayClusterSpec", "")
rayservice = _ray_owner_of_cluster("rayClusterConfig", "-raycluster")


def leaderworkerset(lws: Mapping[str, Any], budget: ExpansionBudget) -> Objects:
    """LWS: a leader StatefulSet `<lws>`; each leader pod owns a worker StatefulSet `<lws>-<g>`."""
    name = name_of(lws)
    template = _spec(lws).get("leaderWorkerTemplate") or {}
    size_field = "spec.leaderWorkerTemplate.size"
    size = budget.number(template.get("size"), 1, size_field)
    worker_template = template.get("workerTemplate") or {}
    leader_template = template.get("leaderTemplate") or worker_template
    leaders = owned_object("apps/v1", "StatefulSet", name, lws, {"template": leader_template})
    objects: Objects = [leaders]
    for group in budget.copies(_spec(lws).get("replicas"), 1, "spec.replicas"):
        group_labels = {
            "leaderworkerset.sigs.k8s.io/name": name,
            "leaderworkerset.sigs.k8s.io/group-index": str(group),
            "leaderworkerset.sigs.k8s.io/group-key": short_hash(name, str(group), length=40),
        }
        leader = pod_from_template(
            leader_template,
            f"{name}-{group}",
            leaders,
            labels={**group_labels, "leaderworkerset.sigs.k8s.io/worker-index": "0"},
            annotations={"leaderworkerset.sigs.k8s.io/size": str(size)},
        )
        objects.append(leader)
        if size < 2:
            continue
        workers = owned_object(
            "apps/v1", "StatefulSet", f"{name}-{group}", leader, {"template": worker_template}
        )
        objects.append(workers)
        budget.spend(size - 1, size_field)
        for worker in range(1, size):
            objects.append(
                pod_from_template(
                    worker_template,
                    f"{name}-{group}-{worker}",
                    workers,
                    labels={
                        **group_labels,
                        "leaderworkerset.sigs.k8s.io/worker-index": str(worker),
                    },
                    annotations={
                        "leaderworkerset.sigs.k8s.io/size": str(size),
                        "leaderworkerset.sigs.k8s.io/leader-name": f"{name}-{group}",
                    },
                )
            )
    return objects


def knative_service(service: Mapping[str, Any], budget: ExpansionBudget) -> Objects:
    """Knative: Service -> Configuration -> Revision `<svc>-00001` -> Deployment -> pods."""
    name = name_of(service)
    template = _spec(service).get("template") or {}
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    revision_name = f"{name}-00001"
    knative_labels = {
        "serving.knative.dev/service": name,
        "serving.knative.dev/configuration": name,
        "serving.knative.dev/revision": revision_name,
    }
    configuration = owned_object(
        "serving.knative.dev/v1", "Configuration", name, service, {"template": template}
    )
    revision = owned_object(
        "serving.knative.dev/v1",
        "Revision",
        revision_name,
        configuration,
        template.get("spec") or {},
        labels=knative_labels,
        annotations=annotations,
    )
    min_scale = "autoscaling.knative.dev/min-scale"
    min_scale_field = f'spec.template.metadata.annotations["{min_scale}"]'
    replicas = budget.number(annotations.get(min_scale), 1, min_scale_field) or 1
    deploy = owned_object(
        "apps/v1",
        "Deployment",
        f"{revision_name}-deployment",
        revision,
        {"replicas": replicas, "template": template_with_labels(template, knative_labels)},
        labels=knative_labels,
    )
    return [
        configuration,
        revision,
        deploy,
        *_deployment(deploy, budget.spend(replicas, min_scale_field)),
    ]


def podcliqueset(pcs: Mapping[str, Any], budget: ExpansionBudget) -> Objects:
    """Grove: one PodClique `<pcs>-<replica>-<clique>` per clique and replica, then its pods."""
    name = name_of(pcs)
    template = _spec(pcs).get("template") or {}
    objects: Objects = []
    for replica in budget.copies(_spec(pcs).get("replicas"), 1, "spec.replicas"):
        for position, clique in enumerate(template.get("cliques") or []):
            clique_name = f"{name}-{replica}-{clique.get('name')}"
            clique_spec = clique.get("spec") or {}
            grove_labels = {
                "app.kubernetes.io/part-of": name,
                "grove.io/podcliqueset-replica-index": str(replica),
                "grove.io/podclique": clique_name,
            }
            clique_obj = owned_object(
                "grove.io/v1alpha1", "PodClique", clique_name, pcs, clique_spec, grove_labels
            )
            objects.append(clique_obj)
            pod_template = {
                "metadata": {
                    "labels": clique.get("labels") or {},
                    "annotations": clique.get("annotations") or {},
                },
                "spec": clique_spec.get("podSpec") or {},
            }
            field = f"spec.template.cliques[{position}].spec.replicas"
            count = len(budget.copies(clique_spec.get("replicas"), 1, field))
            for suffix in distinct_suffixes(count, clique_name):
                objects.append(
                    pod_from_template(
                        pod_template,
                        f"{clique_name}-{suffix}",
                        clique_obj,
                        grove_labels,
                    )
                )
    return objects


CONTROLLERS: dict[tuple[str, str], Controller] = {
    ("apps", "ReplicaSet"): replicaset_pods,
    ("apps", "Deployment"): deployment,
    ("apps", "StatefulSet"): statefulset,
    ("batch", "Job"): job,
    ("batch", "CronJob"): cronjob,
    ("jobset.x-k8s.io", "JobSet"): jobset,
    ("kubeflow.org", "PyTorchJob"): training_job,
    ("kubeflow.org", "TFJob"): training_job,
    ("kubeflow.org", "XGBoostJob"): training_job,
    ("kubeflow.org", "JAXJob"): training_job,
    ("kubeflow.org", "MPIJob"): mpijob,
    ("ray.io", "RayCluster"): raycluster,
    ("ray.io", "RayJob"): rayjob,
    ("ray.io", "RayService"): rayservice,
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): leaderworkerset,
    ("serving.knative.dev", "Service"): knative_service,
    ("grove.io", "PodCliqueSet"): podcliqueset,
}
"""Controllers by (group, kind): their behaviour is the same across the versions kai reads."""

"""`pykueue validate`: one line per problem, exit 1; a summary and exit 0 when all is well."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml
from typer.testing import CliRunner

from pykueue.cli.main import app

QUEUES = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: all}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: research}
spec:
  cohortName: all
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 10}]
    - name: default
      resources: [{name: cpu, nominalQuota: 10}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: main, namespace: team-a}
spec: {clusterQueue: research}
"""

runner = CliRunner()


def test_problems_are_listed_one_per_line_and_exit_1(tmp_path: Path) -> None:
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    result = runner.invoke(app, ["validate", "-f", str(path)])
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        f"{path}#3 ClusterQueue/research spec.resourceGroups[0].flavors[1].name: "
        "duplicate value 'default': flavor listed twice"
    ]


def test_ok_summary_and_exit_0(tmp_path: Path) -> None:
    path = tmp_path / "queues.yaml"
    path.write_text(
        QUEUES.replace("    - name: default\n      resources: [{name: cpu, nominalQuota: 10}]\n", "", 1)
    )
    result = runner.invoke(app, ["validate", "-f", str(path)])
    assert result.exit_code == 0, result.stdout
    assert result.stdout.strip() == (
        "OK: 4 objects in 1 file (1 ClusterQueue, 1 Cohort, 1 LocalQueue, 1 ResourceFlavor)"
    )


def test_directories_and_several_files(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "rf.yaml").write_text(
        yaml.safe_dump(
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "x"}}
        )
    )
    (tmp_path / "ns.json").write_text(
        '{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}'
    )
    result = runner.invoke(
        app, ["validate", "-f", str(tmp_path / "a"), "--filename", str(tmp_path / "ns.json")]
    )
    assert result.exit_code == 0, result.stdout
    assert "OK: 2 objects in 2 files" in result.stdout


def test_malformed_yaml_and_missing_files_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: [unclosed\n")
    result = runner.invoke(app, ["validate", "-f", str(bad), "-f", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{bad}: line 2, column 1: not valid YAML")
    assert lines[1] == f"{tmp_path / 'nope.yaml'}: no such file or directory"


def test_empty_directory_is_an_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", "-f", str(tmp_path)])
    assert result.exit_code == 1
    assert "no manifest files" in result.stdout


def test_installed_command_runs_as_a_process(tmp_path: Path) -> None:
    path = tmp_path / "queues.yaml"
    path.write_text("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Bogus\nmetadata: {name: x}\n")
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "pykueue"), "validate", "-f", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert "unknown kind 'Bogus'" in proc.stdout
    assert "Traceback" not in proc.stderr


UPSTREAM_STYLE = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {a: b}
---
apiVersion: batch/v1
kind: Job
metadata:
  generateName: sample-job-
  labels: {kueue.x-k8s.io/queue-name: user-queue}
spec:
  parallelism: 3
  completions: 3
  suspend: true
  template:
    spec:
      containers:
      - name: dummy-job
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        resources: {requests: {cpu: 1, memory: "200Mi"}}
      restartPolicy: Never
"""


def test_generate_name_validates_and_other_kinds_are_passed_over(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(UPSTREAM_STYLE)
    result = runner.invoke(app, ["validate", "-f", str(path)])
    assert result.exit_code == 0, result.stdout
    lines = result.stdout.splitlines()
    assert lines[0] == f"{path}#1 ConfigMap/settings: passed over: pykueue does not manage v1 ConfigMap"
    assert lines[-1] == "OK: 1 objects in 1 file (1 Job); 1 passed over"


def test_job_problems_name_the_job_and_field(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    bad = UPSTREAM_STYLE.replace("generateName: sample-job-", "generateName: Sample_Job-").replace(
        "queue-name: user-queue", "queue-name: Not_A_Queue"
    )
    path.write_text(bad)
    result = runner.invoke(app, ["validate", "-f", str(path)])
    assert result.exit_code == 1
    assert f"{path}#2 Job metadata.generateName: invalid value 'Sample_Job-'" in result.stdout


def test_an_unknown_kind_in_kueues_group_is_still_an_error(tmp_path: Path) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueu\nmetadata: {name: a}\n")
    result = runner.invoke(app, ["validate", "-f", str(path)])
    assert result.exit_code == 1
    assert "unknown kind 'ClusterQueu'" in result.stdout


TYPOS = """\
apiVersion: batch/v1
kind: Job
metadata: {name: typo, labels: {kueue.x-k8s.io/queue-name: main}}
spec:
  backofLimit: 2
  parallelizm: 2
  template:
    spec:
      restartPolicy: Never
      tolerations: [{key: gpu, operator: Exists, efect: NoSchedule}]
      volumes: [{name: scratch, emptyDir: {sizeLimt: 1Gi}}]
      containers:
      - name: main
        image: busybox
        comand: [sh, -c, "echo hi"]
        env: [{name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
---
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: ddp, labels: {kueue.x-k8s.io/queue-name: main}}
spec:
  replicatedJobs:
  - name: workers
    template:
      spec:
        completion: 1
        template:
          spec:
            containers: [{name: c, image: x, agrs: [a]}]
"""


def test_typos_inside_a_job_or_jobset_are_named_with_their_path(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(TYPOS)
    result = runner.invoke(app, ["validate", "-f", str(path)])
    assert result.exit_code == 1
    job, jobset = f"{path}#1 Job/default/typo", f"{path}#2 JobSet/default/ddp"
    assert result.stdout.splitlines() == [
        f"{job} spec.backofLimit: unknown field (did you mean backoffLimit?)",
        f"{job} spec.parallelizm: unknown field (did you mean parallelism?)",
        f"{job} spec.template.spec.tolerations[0].efect: unknown field (did you mean effect?)",
        f"{job} spec.template.spec.volumes[0].emptyDir.sizeLimt: unknown field (did you mean sizeLimit?)",
        f"{job} spec.template.spec.containers[0].comand: unknown field (did you mean command?)",
        f"{jobset} spec.replicatedJobs[0].template.spec.completion: unknown field (did you mean completions?)",
        f"{jobset} spec.replicatedJobs[0].template.spec.template.spec.containers[0].agrs: "
        "unknown field (did you mean args?)",
    ]

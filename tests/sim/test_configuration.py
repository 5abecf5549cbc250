"""A design's Kueue Configuration: fair sharing on and off changes the schedule, weights are noted."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykueue.errors import InputError
from pykueue.sim import driver, trace
from pykueue.sim.design import Design

QUEUES = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: pool}
spec:
  cohortName: lab
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: "8"}]}]
"""
TEAM = """\
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
  cohortName: lab
  namespaceSelector: {{}}
  fairSharing: {{weight: "{weight}"}}
  preemption: {{reclaimWithinCohort: Any}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{{name: default, resources: [{{name: cpu, nominalQuota: "0"}}]}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: main, namespace: {name}}}
spec: {{clusterQueue: {name}}}
"""
FAIR_ON = """\
---
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
fairSharing: {enable: true}
"""
# Two teams with no quota of their own borrow the pool's 8 CPUs; 12 one-CPU jobs each at once.
TRACE = "name,submit,queue,runtime,requests\n" + "".join(
    f"{team}-{i},0,{team}/main,100,cpu=1\n" for i in range(12) for team in ("alpha", "beta")
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def teams(beta_weight: str = "3") -> str:
    return QUEUES + TEAM.format(name="alpha", weight="1") + TEAM.format(name="beta", weight=beta_weight)


def first_wave(design: Design) -> dict[str, int]:
    """CPUs each team holds once the scheduler settled at t=0."""
    jobs = design.check(trace.parse_csv(TRACE, "trace.csv"))
    rec = driver.simulate(design, jobs).recorder
    return {team: rec.queues[team].used[0] // 1000 for team in ("alpha", "beta")}


def test_fair_sharing_weights_take_effect_only_when_the_configuration_enables_it(tmp_path: Path):
    off = Design.load(write(tmp_path, "off", teams()))
    on = Design.load(write(tmp_path, "on", teams() + FAIR_ON))
    assert not off.fair_sharing and on.fair_sharing
    # off: each cycle takes one head per ClusterQueue, so the teams alternate: 4 and 4
    assert first_wave(off) == {"alpha": 4, "beta": 4}
    # on: shares are borrowed usage / weight, so beta (weight 3) preempts alpha until
    # its share (6/3) would pass alpha's (2/1)
    assert first_wave(on) == {"alpha": 2, "beta": 6}


def test_weights_with_fair_sharing_off_are_noted_and_do_not_change_the_fairness_score(tmp_path: Path):
    weighted = Design.load(write(tmp_path, "weighted", teams("3")))
    plain = Design.load(write(tmp_path, "plain", teams("1")))
    assert any("fair sharing is off" in note and "ClusterQueue beta" in note for note in weighted.notes)
    jobs = trace.parse_csv(TRACE, "trace.csv")
    a = driver.simulate(weighted, weighted.check(jobs)).summary("t")
    b = driver.simulate(plain, plain.check(jobs)).summary("t")
    assert a["fairness"] == b["fairness"]
    assert a["model"]["fairSharing"] == "off"
    assert any("fair sharing is off" in note for note in a["notes"])
    on = Design.load(write(tmp_path, "on", teams("3") + FAIR_ON))
    assert not any("fair sharing is off" in note for note in on.notes)
    summary = driver.simulate(on, on.check(jobs)).summary("t")
    assert summary["model"]["fairSharing"].startswith("on")
    assert summary["model"]["configuration"].endswith("on.yaml#7")


def test_v1beta1_configuration_and_what_the_simulator_does_not_model(tmp_path: Path):
    config = """\
---
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
fairSharing: {enable: true, preemptionStrategies: [LessThanOrEqualToFinalShare]}
admissionFairSharing: {usageHalfLifeTime: 1h}
waitForPodsReady: {enable: true, timeout: 5m}
integrations: {frameworks: [batch/job]}
"""
    design = Design.load(write(tmp_path, "d", teams() + config))
    assert design.config.fair_sharing.preemption_strategies == ("LessThanOrEqualToFinalShare",)
    assert design.config.admission_fair_sharing is not None
    assert design.config.wait_for_pods_ready is None
    assert design.config.nominal_first  # the simulator's default stays unless pykueue.nominalFirst says
    assert any("waitForPodsReady is not simulated" in note for note in design.notes)
    assert any("not used by the simulator: integrations" in note for note in design.notes)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("fairSharing: {enable: true}\nfairShare: {}\n", "Configuration fairShare: unknown field"),
        ("fairSharing: {preemptionStrategies: [Nope]}\n", "unknown 'Nope'"),
        ("featureGates: {NoSuchGate: true}\n", "unknown gate(s): NoSuchGate"),
    ],
)
def test_a_bad_configuration_names_the_file_and_key(tmp_path: Path, config: str, message: str):
    text = teams() + "---\napiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n" + config
    with pytest.raises(InputError) as caught:
        Design.load(write(tmp_path, "bad", text))
    assert message in str(caught.value)
    assert "bad.yaml#7" in str(caught.value)


def test_two_configurations_in_one_design_are_refused(tmp_path: Path):
    with pytest.raises(InputError, match="one Configuration; found 2"):
        Design.load(write(tmp_path, "two", teams() + FAIR_ON + FAIR_ON))


def test_the_worked_example_fair_sharing_on_and_off():
    # docs/simulator.md, "A worked plan": the cohort's own 8 GPUs count in the capacity,
    # the weight changes nothing until the Configuration turns fair sharing on.
    examples = Path(__file__).resolve().parents[2] / "examples" / "sim"
    jobs = trace.load(examples / "trace-shared.csv")
    off = Design.load(examples / "shared.yaml")
    on = Design.load(examples / "shared-fair.yaml")
    assert any("fair sharing is off" in note for note in off.notes) and not on.notes
    a = driver.simulate(off, off.check(jobs)).summary("t")
    b = driver.simulate(on, on.check(jobs)).summary("t")
    assert a["totals"]["nominalCapacity"] == {"nvidia.com/gpu": 16.0}
    product_off, product_on = a["clusterQueues"]["product"], b["clusterQueues"]["product"]
    assert product_on["completionDelay"]["p90"] < product_off["completionDelay"]["p90"]
    assert b["clusterQueues"]["research"]["preemptions"] > a["clusterQueues"]["research"]["preemptions"]
    assert {row["reasons"].get("InCohortFairSharing", 0) for row in b["preemptionsByPreemptor"]} != {0}


def test_the_default_preemption_contract_is_read_for_planning(tmp_path: Path):
    config = """\
---
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
pykueue: {preemptionContract: {minRunTime: 30m}}
"""
    design = Design.load(write(tmp_path, "d", teams() + config))
    contract = design.config.default_contract
    assert contract is not None and contract.min_run_time == 30 * 60 * 10**6
    assert design.config.nominal_first  # still the simulator's default: only the contract was given

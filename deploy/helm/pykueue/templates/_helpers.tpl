{{/* Labels every object carries (the Deployment's pods are selected by them). */}}
{{- define "pykueue.labels" -}}
app.kubernetes.io/name: pykueue
app.kubernetes.io/component: controller
{{- end }}

{{/* The job kinds pykueue integrates: where the API serves them (keep in step with
     src/pykueue/reconcilers/integrations; a test compares them). */}}
{{- define "pykueue.integrations" -}}
batch/job: {group: batch, version: v1, plural: jobs, composable: false, parent: false}
jobset.x-k8s.io/jobset: {group: jobset.x-k8s.io, version: v1alpha2, plural: jobsets, composable: false, parent: false}
pod: {group: "", version: v1, plural: pods, composable: true, parent: false}
deployment: {group: apps, version: v1, plural: deployments, composable: false, parent: true}
statefulset: {group: apps, version: v1, plural: statefulsets, composable: false, parent: true}
leaderworkerset.x-k8s.io/leaderworkerset: {group: leaderworkerset.x-k8s.io, version: v1, plural: leaderworkersets, composable: false, parent: true, validated: true}
kubeflow.org/pytorchjob: {group: kubeflow.org, version: v1, plural: pytorchjobs, composable: false, parent: false}
kubeflow.org/tfjob: {group: kubeflow.org, version: v1, plural: tfjobs, composable: false, parent: false}
kubeflow.org/paddlejob: {group: kubeflow.org, version: v1, plural: paddlejobs, composable: false, parent: false}
kubeflow.org/xgboostjob: {group: kubeflow.org, version: v1, plural: xgboostjobs, composable: false, parent: false}
kubeflow.org/jaxjob: {group: kubeflow.org, version: v1, plural: jaxjobs, composable: false, parent: false}
kubeflow.org/mpijob: {group: kubeflow.org, version: v2beta1, plural: mpijobs, composable: false, parent: false}
ray.io/rayjob: {group: ray.io, version: v1, plural: rayjobs, composable: false, parent: false}
ray.io/raycluster: {group: ray.io, version: v1, plural: rayclusters, composable: false, parent: false}
workload.codeflare.dev/appwrapper: {group: workload.codeflare.dev, version: v1beta2, plural: appwrappers, composable: false, parent: false}
trainer.kubeflow.org/trainjob: {group: trainer.kubeflow.org, version: v1alpha1, plural: trainjobs, composable: false, parent: false}
{{- end }}

{{/* The enabled frameworks: configuration.integrations.frameworks, default [batch/job]. */}}
{{- define "pykueue.frameworks" -}}
{{- $integrations := .Values.configuration.integrations | default dict -}}
{{- $frameworks := $integrations.frameworks | default (list "batch/job") -}}
{{- $known := include "pykueue.integrations" . | fromYaml -}}
{{- range $frameworks }}
{{- if not (hasKey $known .) }}
{{- fail (printf "configuration.integrations.frameworks: unknown framework %q" .) }}
{{- end }}
{{- end }}
{{- toJson $frameworks -}}
{{- end }}

{{- define "pykueue.replicas" -}}
{{- if .Values.replicas }}{{ .Values.replicas }}{{ else if .Values.leaderElection }}2{{ else }}1{{ end -}}
{{- end }}

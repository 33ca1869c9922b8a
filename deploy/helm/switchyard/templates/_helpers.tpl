{{/* The chart's name, and the release's full name (at most 63 characters: a label value). */}}
{{- define "switchyard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "switchyard.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "switchyard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "switchyard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "switchyard.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "switchyard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: switchyard
{{- end }}

{{- define "switchyard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "switchyard.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "switchyard.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{- define "switchyard.leaseName" -}}
{{- default (include "switchyard.fullname" .) .Values.leaderElection.leaseName }}
{{- end }}

{{- define "switchyard.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.namespace }}
{{- end }}

{{/* A pack file's ConfigMap key: ConfigMap keys allow no `/`. The volume's items map it back. */}}
{{- define "switchyard.fileKey" -}}
{{- regexReplaceAll "[^-._a-zA-Z0-9]" . "_" }}
{{- end }}

{{/* Where a member cluster's kubeconfig Secret is mounted. */}}
{{- define "switchyard.kubeconfigDir" -}}
{{- if .name }}
{{- printf "/etc/switchyard/kubeconfigs/%s-%s" .role .name }}
{{- else }}
{{- printf "/etc/switchyard/kubeconfigs/%s" .role }}
{{- end }}
{{- end }}

{{/*
The generated RBAC sources: the chart's files for the packs of `rbac.packs`, and
`rbac.generated` (the output of `switchyard rbac --packs DIR -o json`). A list of
{packs, roles} objects.
*/}}
{{- define "switchyard.rbacSources" -}}
{{- $sources := list }}
{{- range .Values.rbac.packs }}
{{- $file := printf "rbac/%s.json" . }}
{{- $text := $.Files.Get $file }}
{{- if not $text }}
{{- fail (printf "rbac.packs: the chart has no generated RBAC for pack `%s` (%s); give it with rbac.generated (`switchyard rbac --packs DIR -o json`)" . $file) }}
{{- end }}
{{- $sources = append $sources (fromJson $text) }}
{{- end }}
{{- if .Values.rbac.generated }}
{{- $sources = append $sources (fromJson .Values.rbac.generated) }}
{{- end }}
{{- toJson (dict "sources" $sources) }}
{{- end }}

{{/* Kubernetes PolicyRules from generated rules: the `why` becomes a comment, not a field. */}}
{{- define "switchyard.policyRules" -}}
{{- $last := "" }}
{{- range . }}
{{- if ne .why $last }}
# {{ .why | replace "\n" " " }}
{{- $last = .why }}
{{- end }}
- apiGroups: {{ toJson .apiGroups }}
  resources: {{ toJson .resources }}
  {{- with .resourceNames }}
  resourceNames: {{ toJson . }}
  {{- end }}
  verbs: {{ toJson .verbs }}
{{- end }}
{{- end }}

{{/*
A Role (namespace given) or ClusterRole and its binding to the broker's ServiceAccount:
dict with root, name, namespace, rules, comment.
*/}}
{{- define "switchyard.ownRole" -}}
{{- $root := .root }}
---
# {{ .comment }}
apiVersion: rbac.authorization.k8s.io/v1
kind: {{ if .namespace }}Role{{ else }}ClusterRole{{ end }}
metadata:
  name: {{ .name }}
  {{- with .namespace }}
  namespace: {{ . }}
  {{- end }}
  labels:
    {{- include "switchyard.labels" $root | nindent 4 }}
rules:
  {{- include "switchyard.policyRules" .rules | trim | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: {{ if .namespace }}RoleBinding{{ else }}ClusterRoleBinding{{ end }}
metadata:
  name: {{ .name }}
  {{- with .namespace }}
  namespace: {{ . }}
  {{- end }}
  labels:
    {{- include "switchyard.labels" $root | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: {{ if .namespace }}Role{{ else }}ClusterRole{{ end }}
  name: {{ .name }}
subjects:
  - kind: ServiceAccount
    name: {{ include "switchyard.serviceAccountName" $root }}
    namespace: {{ $root.Release.Namespace }}
{{- end }}

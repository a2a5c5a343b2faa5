{{/* The name of every object: the release name, or "<release>-kube-nudge" unless it
     already contains the chart's name. */}}
{{- define "kube-nudge.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kube-nudge.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kube-nudge.labels" -}}
{{ include "kube-nudge.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "kube-nudge.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kube-nudge.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kube-nudge.subject" -}}
- kind: ServiceAccount
  name: {{ include "kube-nudge.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end -}}

{{/* The Lease and the HMAC key Secret, in the release namespace; the state Role grants
     exactly these names. */}}
{{- define "kube-nudge.leaseName" -}}
{{- include "kube-nudge.fullname" . -}}
{{- end -}}
{{- define "kube-nudge.hmacSecretName" -}}
{{- printf "%s-hmac-key" (include "kube-nudge.fullname" .) -}}
{{- end -}}

{{- define "kube-nudge.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* What kube-nudge reads and writes where it watches: a ClusterRole's rules (cluster-wide)
     or each watched namespace's Role's rules (namespace-scoped). */}}
{{- define "kube-nudge.watchRules" -}}
- apiGroups: [""]
  resources: [configmaps, secrets]
  verbs: [get, list, watch]
# Once per workload, at adoption: did its pods start before their config last changed?
- apiGroups: [""]
  resources: [pods]
  verbs: [list]
- apiGroups: [apps]
  resources: [deployments, statefulsets, daemonsets]
  verbs: [get, list, watch, patch]
- apiGroups: [batch]
  resources: [cronjobs]
  verbs: [get, list, watch, patch]
{{- if .Values.snapshotStrategy.enabled }}
# Strategy snapshot: make the copies, move their ownerReferences, delete unused ones ...
- apiGroups: [""]
  resources: [configmaps, secrets]
  verbs: [create, patch, delete]
# ... and find the revisions that use them.
- apiGroups: [apps]
  resources: [replicasets, controllerrevisions]
  verbs: [list]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [list]
{{- end }}
{{- range .Values.customWorkloads }}
- apiGroups: [{{ .group | quote }}]
  resources: [{{ .resource | quote }}]
  verbs: [get, list, watch, patch]
{{- end }}
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
{{- end -}}

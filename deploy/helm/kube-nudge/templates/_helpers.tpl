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
# Once per workload, at adoption: did its pods start before their config last changed? And
# the pods a ConfigMap's or Secret's kube-nudge.io/pod-selector names.
- apiGroups: [""]
  resources: [pods]
  verbs: [list]
# kube-nudge.io/pod-selector: stale pods are evicted, never deleted, so PodDisruptionBudgets
# hold; the budgets are listed to know how many may go at once.
- apiGroups: [""]
  resources: [pods/eviction]
  verbs: [create]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [list]
- apiGroups: [apps]
  resources: [deployments, statefulsets, daemonsets]
  verbs: [get, list, watch, patch]
- apiGroups: [batch]
  resources: [cronjobs]
  verbs: [get, list, watch, patch]
{{- if .Values.hotStrategy.enabled }}
# Strategy hot: the annotation on a workload's pods that makes their kubelets refresh their
# config volumes now (the admission policy keeps the patch to that one annotation).
- apiGroups: [""]
  resources: [pods]
  verbs: [patch]
{{- end }}
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

{{/* The snapshot webhook: its Service (the certificate's DNS names) and TLS Secret. */}}
{{- define "kube-nudge.webhookEnabled" -}}
{{- if .Values.snapshotStrategy.webhook.enabled -}}
{{- if not .Values.snapshotStrategy.enabled -}}
{{- fail "snapshotStrategy.webhook.enabled needs snapshotStrategy.enabled: the webhook serves only the snapshot strategy" -}}
{{- end -}}
true
{{- end -}}
{{- end -}}
{{- define "kube-nudge.webhookServiceName" -}}
{{- printf "%s-webhook" (include "kube-nudge.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- define "kube-nudge.webhookSecretName" -}}
{{- printf "%s-webhook-tls" (include "kube-nudge.fullname" .) -}}
{{- end -}}
{{- define "kube-nudge.webhookDNSNames" -}}
{{- $svc := include "kube-nudge.webhookServiceName" . -}}
{{- $ns := .Release.Namespace -}}
{{- toJson (list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns)) -}}
{{- end -}}

{{/* The webhook's TLS material when Helm manages it, as JSON {"crt", "key", "ca"} (base64
     PEM): the Secret of the installed release when lookup finds it complete (helm install and
     upgrade; never under helm template or --dry-run, where lookup finds nothing), else a new
     CA and a certificate for the Service's DNS names. Made once per render and kept on the
     root context, so the Secret, the caBundle and the pod's checksum annotation, rendered
     from different files, agree. */}}
{{- define "kube-nudge.webhookTLS" -}}
{{- if not (hasKey . "kubeNudgeWebhookTLS") -}}
{{- $name := include "kube-nudge.webhookSecretName" . -}}
{{- $existing := (lookup "v1" "Secret" .Release.Namespace $name).data | default dict -}}
{{- $tls := dict -}}
{{- if and (index $existing "tls.crt") (index $existing "tls.key") (index $existing "ca.crt") -}}
{{- $tls = dict "crt" (index $existing "tls.crt") "key" (index $existing "tls.key") "ca" (index $existing "ca.crt") -}}
{{- else -}}
{{- $days := int .Values.snapshotStrategy.webhook.selfManaged.validityDays -}}
{{- $dnsNames := include "kube-nudge.webhookDNSNames" . | fromJsonArray -}}
{{- $ca := genCA (printf "%s-webhook-ca" (include "kube-nudge.fullname" .)) $days -}}
{{- $cert := genSignedCert (index $dnsNames 2) nil $dnsNames $days $ca -}}
{{- $tls = dict "crt" ($cert.Cert | b64enc) "key" ($cert.Key | b64enc) "ca" ($ca.Cert | b64enc) -}}
{{- end -}}
{{- $_ := set . "kubeNudgeWebhookTLS" $tls -}}
{{- end -}}
{{- toJson .kubeNudgeWebhookTLS -}}
{{- end -}}

{{/* kube-nudge agent sidecars (agent.*): their image, the chart's own unless set ... */}}
{{- define "kube-nudge.agentImage" -}}
{{- $image := .Values.agent.image -}}
{{- if not $image.repository -}}
{{- include "kube-nudge.image" . -}}
{{- else if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag) -}}
{{- end -}}
{{- end -}}
{{/* ... their ServiceAccounts by namespace, as JSON {"namespace": ["name", ...]} (names
     sorted, each once) ... */}}
{{- define "kube-nudge.agentAccounts" -}}
{{- $byNamespace := dict -}}
{{- range .Values.agent.rbac.serviceAccounts -}}
{{- $names := get $byNamespace .namespace | default list -}}
{{- $_ := set $byNamespace .namespace (append $names .name | uniq | sortAlpha) -}}
{{- end -}}
{{- toJson $byNamespace -}}
{{- end -}}
{{/* ... and their user names, as a CEL list literal (the schema keeps names to DNS
     characters, so no quoting is needed). */}}
{{- define "kube-nudge.agentUsernames" -}}
{{- $users := list -}}
{{- range $ns, $names := include "kube-nudge.agentAccounts" . | fromJson -}}
{{- range $names -}}
{{- $users = append $users (printf "'system:serviceaccount:%s:%s'" $ns .) -}}
{{- end -}}
{{- end -}}
{{- printf "[%s]" (join ", " $users) -}}
{{- end -}}

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
{{- if .Values.argoRollouts.enabled }}
# Argo Rollouts (--argo-rollouts): read, followed and annotated like any workload.
- apiGroups: [argoproj.io]
  resources: [rollouts]
  verbs: [get, list, watch, patch]
{{- end }}
{{- if .Values.analysis.prometheusUrls }}
# kube-nudge.io/analysis: the templates whose metrics judge a completed rollout, read only
# (watched: an analysis reads its template from the cache).
- apiGroups: [kube-nudge.io]
  resources: [analysistemplates]
  verbs: [get, list, watch]
{{- if .Values.analysis.argoTemplates }}
# --argo-analysis-templates: Argo's too, once the API server serves them.
- apiGroups: [argoproj.io]
  resources: [analysistemplates, clusteranalysistemplates]
  verbs: [get, list, watch]
{{- end }}
{{- end }}
{{- if .Values.csi.enabled }}
# --csi-secrets: the Secrets Store CSI driver's record of the object versions it mounted
# for each pod (docs/csi-secrets.md); read only, and nothing else of the driver's.
- apiGroups: [secrets-store.csi.x-k8s.io]
  resources: [secretproviderclasspodstatuses]
  verbs: [get, list, watch]
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

{{/* Seconds in a Go duration whose form values.schema.json has checked (e.g. 1m30s, 500ms;
     "0" is 0), as a number: the template-side half of the controller's flag checks. */}}
{{- define "kube-nudge.seconds" -}}
{{- $unitSeconds := dict "ns" 0.000000001 "us" 0.000001 "µs" 0.000001 "μs" 0.000001 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)" (toString .) -1 -}}
{{- $unit := regexFind "(ns|us|µs|μs|ms|s|m|h)$" . -}}
{{- $total = addf $total (mulf (float64 (trimSuffix $unit .)) (get $unitSeconds $unit)) -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/* A duration value within [low, high] seconds, or fail naming the value and its flag, as
     `kube-nudge run` would refuse it (a crash-looping pod). Args: list name value low high
     range-text flag. */}}
{{- define "kube-nudge.checkDuration" -}}
{{- $name := index . 0 -}}{{- $value := index . 1 -}}
{{- $seconds := include "kube-nudge.seconds" $value | float64 -}}
{{- if or (lt $seconds (index . 2)) (gt $seconds (index . 3)) -}}
{{- fail (printf "%s %q: want a duration from %s (%s refuses it)" $name $value (index . 4) (index . 5)) -}}
{{- end -}}
{{- end -}}

{{/* What values.schema.json cannot say: the ranges of durations and the relations between
     values, checked as `kube-nudge run` checks its flags (src/kube_nudge/app/run_command.py),
     so that what the controller would refuse fails the install instead of crash-looping. */}}
{{- define "kube-nudge.checkValues" -}}
{{- with .Values.debounce -}}
{{- if ne . "auto" -}}
{{- include "kube-nudge.checkDuration" (list "debounce" . 0.0 3600.0 "0 to 1h" "--debounce") -}}
{{- end -}}
{{- end -}}
{{- with .Values.maxRollouts -}}
{{- $window := regexReplaceAll "^[^/]*/" . "" -}}
{{- include "kube-nudge.checkDuration" (list "maxRollouts' window" $window 1.0 86400.0 "1s to 24h, as in 3/5m" "--max-rollouts") -}}
{{- end -}}
{{- $le := .Values.leaderElection -}}
{{- if $le.enabled -}}
{{- $lease := $le.leaseDuration | default "15s" -}}
{{- $renew := $le.renewDeadline | default "10s" -}}
{{- $retry := $le.retryPeriod | default "2s" -}}
{{- include "kube-nudge.checkDuration" (list "leaderElection.leaseDuration" $lease 1.0 3600.0 "1s to 1h" "--lease-duration") -}}
{{- include "kube-nudge.checkDuration" (list "leaderElection.renewDeadline" $renew 0.1 3600.0 "100ms to 1h" "--renew-deadline") -}}
{{- include "kube-nudge.checkDuration" (list "leaderElection.retryPeriod" $retry 0.1 3600.0 "100ms to 1h" "--retry-period") -}}
{{- $leaseSeconds := include "kube-nudge.seconds" $lease | float64 -}}
{{- $renewSeconds := include "kube-nudge.seconds" $renew | float64 -}}
{{- $retrySeconds := include "kube-nudge.seconds" $retry | float64 -}}
{{- if not (and (lt $retrySeconds $renewSeconds) (lt $renewSeconds $leaseSeconds)) -}}
{{- fail (printf "leaderElection: retryPeriod %s < renewDeadline %s < leaseDuration %s does not hold (empty ones are the controller's 2s, 10s, 15s): a leader must stop before its lease can expire for the others" $retry $renew $lease) -}}
{{- end -}}
{{- end -}}
{{- if and (include "kube-nudge.webhookEnabled" .) (eq (int .Values.metrics.port) (int .Values.snapshotStrategy.webhook.port)) -}}
{{- fail (printf "metrics.port and snapshotStrategy.webhook.port are both %d: kube-nudge serves each on its own port" (int .Values.metrics.port)) -}}
{{- end -}}
{{- $pdb := .Values.podDisruptionBudget -}}
{{- if and $pdb.enabled (gt (int .Values.replicas) 1) (not (kindIs "string" $pdb.minAvailable)) (ge (int $pdb.minAvailable) (int .Values.replicas)) -}}
{{- fail (printf "podDisruptionBudget.minAvailable %d with %d replicas would block every node drain: set it below replicas" (int $pdb.minAvailable) (int .Values.replicas)) -}}
{{- end -}}
{{- if and .Values.createNamespaces (not .Values.watchNamespaces) -}}
{{- fail "createNamespaces needs watchNamespaces: it creates the namespace-scoped mode's namespaces" -}}
{{- end -}}
{{- end -}}

{{/* The prometheus-operator's objects need its API: installing one without it would fail
     half-way (no matches for kind), so the chart fails first, saying so. Arg: list root
     value-name kind. */}}
{{- define "kube-nudge.requireMonitoringAPI" -}}
{{- $root := index . 0 -}}
{{- if not ($root.Capabilities.APIVersions.Has "monitoring.coreos.com/v1") -}}
{{- fail (printf "%s: the cluster does not serve monitoring.coreos.com/v1 (the prometheus-operator's CRDs), so there can be no %s: install the operator's CRDs first, or turn it off. helm template cannot ask the cluster: pass --api-versions monitoring.coreos.com/v1" (index . 1) (index . 2)) -}}
{{- end -}}
{{- end -}}

{{/* "true" when the chart's ValidatingAdmissionPolicies go in: asked for
     (admissionPolicy.enabled) and served by the cluster (admissionregistration.k8s.io/v1,
     GA in Kubernetes 1.30; a cluster can turn it off). Where it is not served they are left
     out and NOTES.txt says so in one line, rather than failing the install. A cluster's
     discovery names every kind ("v1/ConfigMap"), so there the kind itself is asked for;
     helm template knows only group/versions, so there the group/version is. */}}
{{- define "kube-nudge.admissionPolicies" -}}
{{- $api := .Capabilities.APIVersions -}}
{{- $served := $api.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy" -}}
{{- if not ($api.Has "v1/ConfigMap") -}}
{{- $served = $api.Has "admissionregistration.k8s.io/v1" -}}
{{- end -}}
{{- if and .Values.admissionPolicy.enabled $served -}}
true
{{- end -}}
{{- end -}}

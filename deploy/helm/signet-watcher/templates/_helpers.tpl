{{/*
The name of every object: the release name when it already says signet-watcher (the usual
`helm install signet-watcher`), else "<release>-signet-watcher". At most 63 characters.
*/}}
{{- define "signet-watcher.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
Labels on every object: the selector label (the kustomize base's only one) and Helm's own.
*/}}
{{- define "signet-watcher.labels" -}}
{{ include "signet-watcher.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/*
The pods' selector. It never changes across upgrades (a Deployment's selector is immutable).
*/}}
{{- define "signet-watcher.selectorLabels" -}}
app.kubernetes.io/name: {{ include "signet-watcher.fullname" . }}
{{- end -}}

{{/*
The port of server.address (host:port, or [v6]:port).
*/}}
{{- define "signet-watcher.serverPort" -}}
{{- $parts := splitList ":" .Values.server.address -}}
{{- if lt (len $parts) 2 -}}
{{- fail (printf "server.address %q: want host:port" .Values.server.address) -}}
{{- end -}}
{{- last $parts -}}
{{- end -}}

{{/*
Where the ledger witness's public keys (the ConfigMap ledgerWitness.publicKeys.configMapName)
are mounted, as components/ledger-witness mounts them.
*/}}
{{- define "signet-watcher.ledgerWitnessKeysDir" -}}
/etc/signet/ledger-witness
{{- end -}}

{{/*
config.yaml, the watcher's configuration. Settings left at the watcher's defaults are left
out, as in the kustomize base's config.yaml.
*/}}
{{- define "signet-watcher.config" -}}
apiVersion: signet.dev/v1alpha1
kind: WatcherConfiguration
signerNames: {{ toJson .Values.signerNames }}
clusterName: {{ .Values.clusterName }}
server:
  address: {{ .Values.server.address }}
  {{- with .Values.server.addresses }}
  addresses: {{ toJson . }}
  {{- end }}
  caFile: /etc/signet/tls/ca.crt
  certFile: /etc/signet/tls/tls.crt
  keyFile: /etc/signet/tls/tls.key
{{- if not .Values.podCertificateRequests.enabled }}
podCertificateRequests:
  enabled: false
{{- end }}
{{- if or (not .Values.trustBundles.enabled) .Values.trustBundles.period }}
trustBundles:
  enabled: {{ .Values.trustBundles.enabled }}
  {{- with .Values.trustBundles.period }}
  period: {{ . }}
  {{- end }}
{{- end }}
{{- with .Values.tpmApprover.signerNames }}
tpmApprover:
  signerNames: {{ toJson . }}
{{- end }}
{{- with .Values.nodeAddresses.signerNames }}
nodeAddresses:
  signerNames: {{ toJson . }}
{{- end }}
{{- with .Values.ledgerWitness }}
{{- if .enabled }}
ledgerWitness:
  {{- $files := list }}
  {{- range .publicKeys.keys }}
  {{- $files = append $files (printf "%s/%s" (include "signet-watcher.ledgerWitnessKeysDir" $) .) }}
  {{- end }}
  publicKeyFiles: {{ toJson $files }}
  {{- with .origins }}
  origins: {{ toJson . }}
  {{- end }}
  {{- with .period }}
  period: {{ . }}
  {{- end }}
  configMapName: {{ .configMapName }}
  {{- if .signOnAlarm }}
  signOnAlarm: true
  {{- end }}
{{- end }}
{{- end }}
metricsAddress: ":9465"
leaderElection:
  enabled: true
  leaseName: {{ include "signet-watcher.fullname" . }}
  leaseDuration: {{ .Values.leaderElection.leaseDuration }}
  renewDeadline: {{ .Values.leaderElection.renewDeadline }}
  retryPeriod: {{ .Values.leaderElection.retryPeriod }}
{{- end -}}

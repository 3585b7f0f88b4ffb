{{/*
The name of every object: fullnameOverride if set; else the release name when it already
contains the chart's name (nameOverride, default signet-watcher: the usual `helm install
signet-watcher`), else "<release>-<name>". At most 63 characters.
*/}}
{{- define "signet-watcher.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The ServiceAccount the pods run as and every binding names: serviceAccount.name, else the
chart's name.
*/}}
{{- define "signet-watcher.serviceAccountName" -}}
{{- default (include "signet-watcher.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/*
The image: [registry/]repository@digest when image.digest is set, else
[registry/]repository:tag, the tag defaulting to the chart's appVersion (the release's tag).
*/}}
{{- define "signet-watcher.image" -}}
{{- $repo := .Values.image.repository -}}
{{- with .Values.image.registry -}}
{{- $repo = printf "%s/%s" (trimSuffix "/" .) $repo -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) -}}
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
An IntOrString value: a percentage as a quoted string, a number as an integer.
*/}}
{{- define "signet-watcher.intOrPercent" -}}
{{- if kindIs "string" . -}}
{{- quote . -}}
{{- else -}}
{{- int . -}}
{{- end -}}
{{- end -}}

{{/*
Where the ledger witness's public keys (the ConfigMap ledgerWitness.publicKeys.configMapName)
are mounted, as components/ledger-witness mounts them.
*/}}
{{- define "signet-watcher.ledgerWitnessKeysDir" -}}
/etc/signet/ledger-witness
{{- end -}}

{{/*
config.yaml, the watcher's configuration. Settings left at the watcher's defaults (empty
values) are left out, as in the kustomize base's config.yaml. Every field of the watcher's
Config is here: set from the value of the same name, or derived from the chart's own objects
(the TLS Secret's mount, the metrics port, the Lease, the witness's key mount and namespace).
test/integration's TestHelmValuesReachEveryConfigField walks the Config type and fails on a
field that is neither.
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
  {{- with .Values.server.serverName }}
  serverName: {{ . | quote }}
  {{- end }}
{{- with .Values.workers }}
workers: {{ . | int }}
{{- end }}
{{- with .Values.rpcTimeout }}
rpcTimeout: {{ . }}
{{- end }}
{{- if or .Values.backoff.initial .Values.backoff.max }}
backoff:
  {{- with .Values.backoff.initial }}
  initial: {{ . }}
  {{- end }}
  {{- with .Values.backoff.max }}
  max: {{ . }}
  {{- end }}
{{- end }}
{{- with .Values.signedEvents }}
signedEvents: {{ . }}
{{- end }}
{{- if or (not .Values.podCertificateRequests.enabled) .Values.podCertificateRequests.giveUpAfter }}
podCertificateRequests:
  {{- if not .Values.podCertificateRequests.enabled }}
  enabled: false
  {{- end }}
  {{- with .Values.podCertificateRequests.giveUpAfter }}
  giveUpAfter: {{ . }}
  {{- end }}
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
  enabled: {{ .Values.leaderElection.enabled }}
  leaseName: {{ include "signet-watcher.fullname" . }}
  leaseDuration: {{ .Values.leaderElection.leaseDuration }}
  renewDeadline: {{ .Values.leaderElection.renewDeadline }}
  retryPeriod: {{ .Values.leaderElection.retryPeriod }}
{{- end -}}

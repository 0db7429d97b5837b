{{/* Name of the release's objects: <release>-wevent, or the release name if it contains "wevent". */}}
{{- define "wevent.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "wevent.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: worker
{{- end -}}

{{- define "wevent.labels" -}}
{{ include "wevent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/*
The noise key comes from an existing Secret or from a value, never from the chart: a worker that
re-processes a slot must draw the very same noise, so every render must give the same key.
*/}}
{{- define "wevent.checkNoiseKey" -}}
{{- $key := .Values.noiseKey -}}
{{- if and $key.value $key.existingSecret -}}
{{- fail "noiseKey: set noiseKey.existingSecret or noiseKey.value, not both" -}}
{{- end -}}
{{- if not (or $key.value $key.existingSecret) -}}
{{- fail "noiseKey: set noiseKey.existingSecret (a Secret holding the key) or noiseKey.value (64 hex characters, openssl rand -hex 32); the chart never generates the key" -}}
{{- end -}}
{{- if and $key.value (not (regexMatch "^[0-9a-fA-F]{64}$" $key.value)) -}}
{{- fail "noiseKey.value must be 64 hex characters (openssl rand -hex 32)" -}}
{{- end -}}
{{- $own := and .Values.kafka.sasl.username (not .Values.kafka.sasl.existingSecret) -}}
{{- if and $own (eq $key.existingSecret (include "wevent.fullname" .)) -}}
{{- fail (printf "noiseKey.existingSecret is %s, the name of the chart's own Secret for the Kafka credentials: put them in kafka.sasl.existingSecret" $key.existingSecret) -}}
{{- end -}}
{{- end -}}

{{/* The Secret and entry of the noise key. */}}
{{- define "wevent.noiseKeyRef" -}}
{{- include "wevent.checkNoiseKey" . -}}
name: {{ .Values.noiseKey.existingSecret | default (include "wevent.fullname" .) }}
key: {{ ternary .Values.noiseKey.secretKey "noise-key" (not (empty .Values.noiseKey.existingSecret)) }}
{{- end -}}

{{/* The Secret holding the Kafka credentials. */}}
{{- define "wevent.kafkaSecretName" -}}
{{- .Values.kafka.sasl.existingSecret | default (include "wevent.fullname" .) -}}
{{- end -}}

{{- define "wevent.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

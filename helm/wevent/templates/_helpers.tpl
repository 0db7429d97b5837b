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

{{/* The Kafka security protocol: kafka.securityProtocol, or SASL_SSL with SASL credentials and PLAINTEXT without. */}}
{{- define "wevent.kafkaProtocol" -}}
{{- .Values.kafka.securityProtocol | default (ternary "SASL_SSL" "PLAINTEXT" (not (empty .Values.kafka.sasl.username))) -}}
{{- end -}}

{{/* Where kafka.tls.existingSecret is mounted: not below /etc/wevent, a read-only ConfigMap
volume, inside which Kubernetes cannot create a mount point. */}}
{{- define "wevent.kafkaTlsDir" -}}/etc/wevent-kafka-tls{{- end -}}

{{/*
Kafka's settings must agree with the protocol: credentials or TLS files it would not use fail the
render, rather than leaving the workers to connect in some other way than the one intended.
*/}}
{{- define "wevent.checkKafka" -}}
{{- $protocol := include "wevent.kafkaProtocol" . -}}
{{- $sasl := hasPrefix "SASL_" $protocol -}}
{{- $ssl := hasSuffix "SSL" $protocol -}}
{{- $tls := .Values.kafka.tls -}}
{{- if and (not .Values.kafka.sasl.username) (or .Values.kafka.sasl.password .Values.kafka.sasl.existingSecret) -}}
{{- fail "kafka.sasl.username is empty, which switches SASL off, but kafka.sasl.password or kafka.sasl.existingSecret is set: set the username too" -}}
{{- end -}}
{{- if and $sasl (not .Values.kafka.sasl.username) -}}
{{- fail (printf "kafka.securityProtocol %s needs kafka.sasl.username (and the password or kafka.sasl.existingSecret)" $protocol) -}}
{{- end -}}
{{- if and .Values.kafka.sasl.username (not $sasl) -}}
{{- fail (printf "kafka.sasl.username is set but kafka.securityProtocol %s sends no credentials: use SASL_SSL or SASL_PLAINTEXT" $protocol) -}}
{{- end -}}
{{- if and $tls.existingSecret (not $ssl) -}}
{{- fail (printf "kafka.tls.existingSecret is set but kafka.securityProtocol %s uses no TLS: use SSL or SASL_SSL" $protocol) -}}
{{- end -}}
{{- if and $tls.existingSecret (not (or $tls.ca $tls.clientCertificate)) -}}
{{- fail "kafka.tls.existingSecret is set but neither kafka.tls.ca nor kafka.tls.clientCertificate: nothing to mount" -}}
{{- end -}}
{{- if and $tls.clientCertificate (not $tls.existingSecret) -}}
{{- fail "kafka.tls.clientCertificate needs kafka.tls.existingSecret, a Secret with the entries tls.crt and tls.key" -}}
{{- end -}}
{{- if and $tls.keyPasswordKey (not $tls.clientCertificate) -}}
{{- fail "kafka.tls.keyPasswordKey is set but kafka.tls.clientCertificate is not: there is no key to decrypt" -}}
{{- end -}}
{{- end -}}

{{/* The worker's environment the chart sets: the noise key and how to reach Kafka. */}}
{{- define "wevent.env" -}}
{{- include "wevent.checkKafka" . -}}
{{- $tls := .Values.kafka.tls -}}
{{- $dir := include "wevent.kafkaTlsDir" . -}}
- name: WEVENT_WEB_PORT
  value: {{ .Values.webPort | quote }}
- name: WEVENT_NOISE_KEY
  valueFrom:
    secretKeyRef:
      {{- include "wevent.noiseKeyRef" . | nindent 6 }}
- name: WEVENT_KAFKA_SECURITY_PROTOCOL
  value: {{ include "wevent.kafkaProtocol" . | quote }}
{{- if .Values.kafka.sasl.username }}
- name: WEVENT_KAFKA_SASL_MECHANISM
  value: {{ .Values.kafka.sasl.mechanism | quote }}
- name: WEVENT_KAFKA_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ include "wevent.kafkaSecretName" . }}
      key: kafka-username
- name: WEVENT_KAFKA_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "wevent.kafkaSecretName" . }}
      key: kafka-password
{{- end }}
{{- if and $tls.existingSecret $tls.ca }}
- name: WEVENT_KAFKA_SSL_CAFILE
  value: {{ printf "%s/ca.crt" $dir | quote }}
{{- end }}
{{- if $tls.clientCertificate }}
- name: WEVENT_KAFKA_SSL_CERTFILE
  value: {{ printf "%s/tls.crt" $dir | quote }}
- name: WEVENT_KAFKA_SSL_KEYFILE
  value: {{ printf "%s/tls.key" $dir | quote }}
{{- end }}
{{- with $tls.keyPasswordKey }}
- name: WEVENT_KAFKA_SSL_KEY_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $tls.existingSecret }}
      key: {{ . }}
{{- end }}
{{- end -}}

{{- define "wevent.volumeMounts" -}}
- name: config
  mountPath: /etc/wevent
  readOnly: true
- name: data
  mountPath: /var/lib/wevent/data
- name: tmp
  mountPath: /tmp
{{- if .Values.kafka.tls.existingSecret }}
- name: kafka-tls
  mountPath: {{ include "wevent.kafkaTlsDir" . }}
  readOnly: true
{{- end }}
{{- end -}}

{{- define "wevent.volumes" -}}
- name: config
  configMap:
    name: {{ include "wevent.fullname" . }}
- name: data
  emptyDir: {}
- name: tmp
  emptyDir: {}
{{- with .Values.kafka.tls }}
{{- if .existingSecret }}
- name: kafka-tls
  secret:
    secretName: {{ .existingSecret }}
    defaultMode: 288  # 0440: the worker reads the key through the pod's fsGroup; nobody else can
    items:
      {{- if .ca }}
      - key: ca.crt
        path: ca.crt
      {{- end }}
      {{- if .clientCertificate }}
      - key: tls.crt
        path: tls.crt
      - key: tls.key
        path: tls.key
      {{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
The extra env, volumes and mounts must not redo what the chart does: Kubernetes keeps the last of
two variables of one name without a word (an extra WEVENT_NOISE_KEY would replace the key), and
refuses a pod with two volumes of one name, two mounts at one path or a mount inside a read-only
volume only when it starts.
*/}}
{{- define "wevent.checkExtras" -}}
{{- $own := list -}}
{{- range (include "wevent.env" . | fromYamlArray) }}{{ $own = append $own .name }}{{ end -}}
{{- $extra := list -}}
{{- range .Values.extraEnv -}}
{{- if has .name $own -}}
{{- fail (printf "extraEnv sets %s, which the chart sets itself: change the chart's value instead" .name) -}}
{{- end -}}
{{- if has .name $extra -}}
{{- fail (printf "extraEnv sets %s twice" .name) -}}
{{- end -}}
{{- $extra = append $extra .name -}}
{{- end -}}
{{- $volumes := list -}}
{{- range (include "wevent.volumes" . | fromYamlArray) }}{{ $volumes = append $volumes .name }}{{ end -}}
{{- range .Values.extraVolumes -}}
{{- if has .name $volumes -}}
{{- fail (printf "extraVolumes has a second volume named %s: the names config, data, tmp and kafka-tls are the chart's" .name) -}}
{{- end -}}
{{- $volumes = append $volumes .name -}}
{{- end -}}
{{- $mounts := include "wevent.volumeMounts" . | fromYamlArray -}}
{{- range $extra := .Values.extraVolumeMounts -}}
{{- if not (has $extra.name $volumes) -}}
{{- fail (printf "extraVolumeMounts mounts %s, which is no volume of the pod: add it to extraVolumes" $extra.name) -}}
{{- end -}}
{{- range $mounts -}}
{{- if or (eq $extra.mountPath .mountPath) (and .readOnly (hasPrefix (printf "%s/" .mountPath) $extra.mountPath)) -}}
{{- fail (printf "extraVolumeMounts mounts %s at %s, on or inside the mount of %s at %s" $extra.name $extra.mountPath .name .mountPath) -}}
{{- end -}}
{{- end -}}
{{- $mounts = append $mounts $extra -}}
{{- end -}}
{{- end -}}

{{/* The chart's name, or nameOverride. */}}
{{- define "wevent.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Name of the release's objects: fullnameOverride, else <release>-<name>, or the release name if
it contains the name. */}}
{{- define "wevent.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "wevent.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "wevent.instanceLabels" -}}
app.kubernetes.io/name: {{ include "wevent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "wevent.selectorLabels" -}}
{{ include "wevent.instanceLabels" . }}
app.kubernetes.io/component: worker
{{- end -}}

{{/* The labels of the `helm test` pod, which the NetworkPolicy admits. */}}
{{- define "wevent.testLabels" -}}
{{ include "wevent.instanceLabels" . }}
app.kubernetes.io/component: test
{{- end -}}

{{- define "wevent.commonLabels" -}}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "wevent.labels" -}}
{{ include "wevent.selectorLabels" . }}
{{ include "wevent.commonLabels" . }}
{{- end -}}

{{/* The ServiceAccount the pod runs as. */}}
{{- define "wevent.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "wevent.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
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
{{- if and (include "wevent.ownKafkaSecret" .) (eq $key.existingSecret (include "wevent.fullname" .)) -}}
{{- fail (printf "noiseKey.existingSecret is %s, the name of the chart's own Secret for the Kafka credentials and properties: name another Secret" $key.existingSecret) -}}
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

{{/* Whether the chart's Secret holds anything of Kafka's ("true" or empty): the SASL credentials
given as values, or the client properties. */}}
{{- define "wevent.ownKafkaSecret" -}}
{{- if or (and .Values.kafka.sasl.username (not .Values.kafka.sasl.existingSecret)) .Values.kafka.properties -}}true{{- end -}}
{{- end -}}

{{/* The image by digest when one is given, else by tag. */}}
{{- define "wevent.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* The Kafka security protocol: kafka.securityProtocol, else the properties' security.protocol, else
SASL_SSL with SASL credentials and PLAINTEXT without. */}}
{{- define "wevent.kafkaProtocol" -}}
{{- $fromProperties := index .Values.kafka.properties "security.protocol" | default "" | upper -}}
{{- .Values.kafka.securityProtocol | default $fromProperties | default (ternary "SASL_SSL" "PLAINTEXT" (not (empty .Values.kafka.sasl.username))) -}}
{{- end -}}

{{/* Where the Kafka client properties are mounted, and the file the worker reads. */}}
{{- define "wevent.kafkaPropertiesDir" -}}/etc/wevent-kafka-properties{{- end -}}
{{- define "wevent.kafkaPropertiesFile" -}}{{ include "wevent.kafkaPropertiesDir" . }}/kafka.properties{{- end -}}

{{/* Whether the worker gets a properties file ("true" or empty). */}}
{{- define "wevent.kafkaProperties" -}}
{{- if or .Values.kafka.properties .Values.kafka.propertiesFile.existingSecret -}}true{{- end -}}
{{- end -}}

{{/* kafka.properties as a Java properties file: one name=value line each, sorted by name. The
schema keeps line breaks and backslashes out of the values, so any properties reader reads the
same. */}}
{{- define "wevent.kafkaPropertiesText" -}}
# Kafka client properties of the wevent workers (kafka.properties of the Helm chart).
{{- range $name, $value := .Values.kafka.properties }}
{{ $name }}={{ $value }}
{{- end }}
{{ end -}}

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
{{- $properties := .Values.kafka.properties -}}
{{- $file := .Values.kafka.propertiesFile -}}
{{- if and $properties $file.existingSecret -}}
{{- fail "kafka.properties and kafka.propertiesFile.existingSecret are both set: give the properties in one of them" -}}
{{- end -}}
{{- if and $file.existingSecret (not .Values.kafka.securityProtocol) -}}
{{- fail "kafka.propertiesFile.existingSecret is set but kafka.securityProtocol is not: the chart cannot read the file, so name the protocol it uses" -}}
{{- end -}}
{{- if hasKey $properties "bootstrap.servers" -}}
{{- fail "kafka.properties sets bootstrap.servers: set kafka.bootstrap, which the chart passes as --bootstrap" -}}
{{- end -}}
{{- if and .Values.kafka.securityProtocol (hasKey $properties "security.protocol") -}}
{{- fail "kafka.properties sets security.protocol and kafka.securityProtocol is set: give the protocol in one place" -}}
{{- end -}}
{{- $saslProperties := list -}}
{{- $tlsProperties := list -}}
{{- range $name, $_ := $properties -}}
{{- if has $name (list "sasl.mechanism" "sasl.mechanisms" "sasl.username" "sasl.password" "sasl.jaas.config") -}}
{{- $saslProperties = append $saslProperties $name -}}
{{- end -}}
{{- if regexMatch "^ssl\\.(ca|certificate|key|keystore|truststore)\\." $name -}}
{{- $tlsProperties = append $tlsProperties $name -}}
{{- end -}}
{{- end -}}
{{- if and .Values.kafka.sasl.username $saslProperties -}}
{{- fail (printf "kafka.properties sets %s and kafka.sasl.username is set: give the SASL settings in one place" (join ", " $saslProperties)) -}}
{{- end -}}
{{- if and $tls.existingSecret $tlsProperties -}}
{{- fail (printf "kafka.properties sets %s and kafka.tls.existingSecret is set: give the TLS files in one place" (join ", " $tlsProperties)) -}}
{{- end -}}
{{- if and $tlsProperties (not $ssl) -}}
{{- fail (printf "kafka.properties sets %s but the security protocol %s uses no TLS: use SSL or SASL_SSL" (join ", " $tlsProperties) $protocol) -}}
{{- end -}}
{{- $saslFromProperties := or (hasKey $properties "sasl.mechanism") (hasKey $properties "sasl.mechanisms") $file.existingSecret -}}
{{- if and $saslProperties (not $sasl) -}}
{{- fail (printf "kafka.properties sets %s but the security protocol %s sends no credentials: use SASL_SSL or SASL_PLAINTEXT" (join ", " $saslProperties) $protocol) -}}
{{- end -}}
{{- if and (not .Values.kafka.sasl.username) (or .Values.kafka.sasl.password .Values.kafka.sasl.existingSecret) -}}
{{- fail "kafka.sasl.username is empty, which switches SASL off, but kafka.sasl.password or kafka.sasl.existingSecret is set: set the username too" -}}
{{- end -}}
{{- if and $sasl (not .Values.kafka.sasl.username) (not $saslFromProperties) -}}
{{- fail (printf "kafka.securityProtocol %s needs kafka.sasl.username (and the password or kafka.sasl.existingSecret), or sasl.mechanism and its settings in kafka.properties" $protocol) -}}
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
{{- with .Values.releasePublicKey }}
- name: WEVENT_RELEASE_PUBLIC_KEY
  value: {{ . | quote }}
{{- end }}
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
{{- if include "wevent.kafkaProperties" . }}
- name: WEVENT_KAFKA_PROPERTIES_FILE
  value: {{ include "wevent.kafkaPropertiesFile" . | quote }}
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
{{- if include "wevent.kafkaProperties" . }}
- name: kafka-properties
  mountPath: {{ include "wevent.kafkaPropertiesDir" . }}
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
{{- if include "wevent.kafkaProperties" . }}
- name: kafka-properties
  secret:
    secretName: {{ .Values.kafka.propertiesFile.existingSecret | default (include "wevent.fullname" .) }}
    defaultMode: 288  # 0440, as the TLS files: the properties may hold a client secret
    items:
      - key: {{ ternary .Values.kafka.propertiesFile.key "kafka.properties" (not (empty .Values.kafka.propertiesFile.existingSecret)) }}
        path: kafka.properties
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
{{- fail (printf "extraVolumes has a second volume named %s: the names config, data, tmp, kafka-tls and kafka-properties are the chart's" .name) -}}
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

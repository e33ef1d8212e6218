{{/* Chart name, truncated to a DNS label. */}}
{{- define "apns-relay.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: the release name, unless it already contains the chart name. */}}
{{- define "apns-relay.fullname" -}}
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

{{- define "apns-relay.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Standard labels (app.kubernetes.io/*) on every object. */}}
{{- define "apns-relay.labels" -}}
helm.sh/chart: {{ include "apns-relay.chart" . }}
{{ include "apns-relay.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: relay
app.kubernetes.io/part-of: apns-relay
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels: stable across upgrades. */}}
{{- define "apns-relay.selectorLabels" -}}
app.kubernetes.io/name: {{ include "apns-relay.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "apns-relay.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "apns-relay.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The workload that runs the pods: workload.kind, where "auto" is a StatefulSet with kafka.exactlyOnce (each pod
     then needs a transactional id that survives its restarts, which only a stable pod name gives) and a
     Deployment without. */}}
{{- define "apns-relay.workloadKind" -}}
{{- $w := .Values.workload | default dict -}}
{{- $exactlyOnce := .Values.kafka.exactlyOnce | default false -}}
{{- $kind := $w.kind | default "auto" -}}
{{- if eq $kind "auto" }}{{ $kind = ternary "StatefulSet" "Deployment" $exactlyOnce }}{{ end -}}
{{- if not (has $kind (list "Deployment" "StatefulSet")) }}
{{- fail (printf "workload.kind '%s' is not auto, Deployment or StatefulSet" $kind) }}
{{- end }}
{{- if and (eq $kind "Deployment") $exactlyOnce (not $w.allowDeploymentWithExactlyOnce) }}
{{- fail (printf "kafka.exactlyOnce with workload.kind Deployment: a Deployment's replacement pod gets a new name, so a new transactional id, and a crashed pod's open transaction then holds read_committed readers back for kafka.transactionTimeoutMs (%d ms) instead of being aborted at once. Use workload.kind StatefulSet (or auto), or set workload.allowDeploymentWithExactlyOnce: true to accept that wait" (int64 .Values.kafka.transactionTimeoutMs)) }}
{{- end }}
{{- $kind -}}
{{- end }}

{{/* "true" when each pod is a static group member named after its pod (kafka.groupInstanceIdFromPodName; unset:
     with a StatefulSet, whose pod names survive restarts, and not with a Deployment, whose do not). */}}
{{- define "apns-relay.staticMembership" -}}
{{- $fromPodName := .Values.kafka.groupInstanceIdFromPodName -}}
{{- if kindIs "invalid" $fromPodName }}{{ if eq (include "apns-relay.workloadKind" .) "StatefulSet" }}true{{ end }}
{{- else if $fromPodName }}true{{ end -}}
{{- end }}

{{/* The StatefulSet's governing Service, and the label that sets it apart from the scraped one. */}}
{{- define "apns-relay.headlessServiceName" -}}
{{- printf "%s-headless" (include "apns-relay.fullname" .) -}}
{{- end }}
{{- define "apns-relay.headlessLabel" -}}apns-relay/headless-service{{- end }}

{{- define "apns-relay.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/* Where the pieces are mounted in the container. */}}
{{- define "apns-relay.configDir" -}}/etc/apns-relay{{- end }}
{{- define "apns-relay.tokenDir" -}}/etc/apns-relay/apns-token{{- end }}
{{- define "apns-relay.certificateDir" -}}/etc/apns-relay/apns-certificate{{- end }}
{{- define "apns-relay.credentialsDir" -}}/etc/apns-relay/credentials{{- end }}
{{- define "apns-relay.caDir" -}}/etc/apns-relay/apns-ca{{- end }}
{{- define "apns-relay.proxyDir" -}}/etc/apns-relay/proxy{{- end }}

{{/* "true" when the unnamed credential (apns.auth, apns.token, apns.certificate) is rendered and mounted: always,
unless named credentials are listed and the unnamed one is a token credential without a key id. */}}
{{- define "apns-relay.defaultCredential" -}}
{{- $a := .Values.apns -}}
{{- if or (not $a.credentials) (ne $a.auth "token") $a.token.keyId (and $a.token.existingSecret $a.token.existingSecretKeyIdKey) }}true{{ end -}}
{{- end }}

{{/* The Secret holding the .p8 key: the user's, or the chart's (created when apns.token.privateKey is set,
     otherwise expected to be created out of band under this name; see NOTES.txt). */}}
{{- define "apns-relay.tokenSecretName" -}}
{{- .Values.apns.token.existingSecret | default (printf "%s-apns-token" (include "apns-relay.fullname" .)) }}
{{- end }}
{{- define "apns-relay.tokenSecretKey" -}}
{{- if .Values.apns.token.existingSecret }}{{ .Values.apns.token.existingSecretKey }}{{ else }}AuthKey.p8{{ end }}
{{- end }}

{{- define "apns-relay.certificateSecretName" -}}
{{- .Values.apns.certificate.existingSecret | default (printf "%s-apns-certificate" (include "apns-relay.fullname" .)) }}
{{- end }}

{{/* Does the chart create the credentials Secret itself? */}}
{{- define "apns-relay.createSecret" -}}
{{- $a := .Values.apns -}}
{{- if and (eq $a.auth "token") (not $a.token.existingSecret) $a.token.privateKey -}}true
{{- else if and (eq $a.auth "certificate") (not $a.certificate.existingSecret) (or $a.certificate.certificate $a.certificate.pkcs12Base64) -}}true
{{- end -}}
{{- end }}

{{/* kafka.bootstrapServers as one comma-separated string (it may be given as a list). */}}
{{- define "apns-relay.bootstrapServers" -}}
{{- $s := .Values.kafka.bootstrapServers -}}
{{- if kindIs "slice" $s }}{{ join "," $s }}{{ else }}{{ $s }}{{ end -}}
{{- end }}

{{/* A topics value (a comma-separated string or a list) as a JSON list, blanks dropped (as the relay reads it). */}}
{{- define "apns-relay.topicList" -}}
{{- $t := . | default "" -}}
{{- $list := list -}}
{{- if kindIs "slice" $t }}{{ $list = $t }}{{ else }}{{ $list = splitList "," (toString $t) }}{{ end -}}
{{- $out := list -}}
{{- range $list }}{{ if trim (toString .) }}{{ $out = append $out (trim (toString .)) }}{{ end }}{{ end -}}
{{- toJson $out -}}
{{- end }}

{{/* kafka.topics.input (the bulk lane) as a list. */}}
{{- define "apns-relay.inputTopics" -}}
{{- include "apns-relay.topicList" .Values.kafka.topics.input -}}
{{- end }}

{{/* kafka.topics.urgent (the urgent lane) as a list; empty when unset. */}}
{{- define "apns-relay.urgentTopics" -}}
{{- include "apns-relay.topicList" .Values.kafka.topics.urgent -}}
{{- end }}

{{/* Grace period: given, or the drain deadline rounded up plus a margin; must exceed the drain deadline. */}}
{{- define "apns-relay.terminationGracePeriodSeconds" -}}
{{- $drainMs := int64 .Values.relay.drainTimeoutMs -}}
{{- $drainS := div (add $drainMs 999) 1000 -}}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds -}}
{{- add $drainS .Values.terminationGraceMarginSeconds -}}
{{- else -}}
{{- $grace := int64 .Values.terminationGracePeriodSeconds -}}
{{- if le (mul $grace 1000) $drainMs -}}
{{- fail (printf "terminationGracePeriodSeconds (%d s) must be longer than relay.drainTimeoutMs (%d ms): Kubernetes would kill the relay before it drains" $grace $drainMs) -}}
{{- end -}}
{{- $grace -}}
{{- end -}}
{{- end }}

{{/* Where the Kafka secrets are mounted: each Secret's volume as a directory (a subPath mount would never see the
     Secret's updates, and the relay reads the SASL password file again for a rotated one). */}}
{{- define "apns-relay.kafkaSaslDir" -}}/etc/apns-relay/kafka-sasl{{- end }}
{{- define "apns-relay.kafkaCaDir" -}}/etc/apns-relay/kafka-ca{{- end }}
{{- define "apns-relay.kafkaClientDir" -}}/etc/apns-relay/kafka-client{{- end }}

{{/* "true" when the relay speaks TLS to the brokers: kafka.tls.enabled, or a CA or client certificate given
     (as for the relay, where any kafka.tls file turns TLS on). */}}
{{- define "apns-relay.kafkaTls" -}}
{{- $t := .Values.kafka.tls | default dict -}}
{{- if or $t.enabled $t.caSecret $t.existingSecret }}true{{ end -}}
{{- end }}

{{/* The Secret key holding the SASL secret: the password (PLAIN, SCRAM) or the OIDC client secret (OAUTHBEARER). */}}
{{- define "apns-relay.kafkaSaslKey" -}}
{{- $s := .Values.kafka.sasl -}}
{{- if eq (upper (toString $s.mechanism)) "OAUTHBEARER" }}{{ (($s.oauthbearer | default dict).clientSecretKey) | default "client-secret" }}
{{- else }}{{ $s.passwordKey | default "password" }}{{ end -}}
{{- end }}

{{/* kafka.sasl and kafka.tls of relay.yaml (JSON; an empty object when both are off), the secrets' paths pointing
     at their mounts. Refuses, naming the keys, what the relay would refuse at start, and the chart's former
     kafka.sasl.enabled and kafka.sasl.securityProtocol. */}}
{{- define "apns-relay.kafkaSecurity" -}}
{{- $s := .Values.kafka.sasl | default dict -}}
{{- $t := .Values.kafka.tls | default dict -}}
{{- $oauth := $s.oauthbearer | default dict -}}
{{- if hasKey $s "enabled" }}
{{- fail "kafka.sasl.enabled is no longer a value: kafka.sasl.mechanism turns SASL on (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER; the chart's former default was SCRAM-SHA-512), and kafka.tls.enabled: true makes it SASL_SSL (the former default kafka.sasl.securityProtocol). Remove kafka.sasl.enabled; the password comes from kafka.sasl.existingSecret as before, now as a mounted file" }}
{{- end }}
{{- if hasKey $s "securityProtocol" }}
{{- fail "kafka.sasl.securityProtocol is no longer a value: security.protocol follows from kafka.sasl.mechanism and kafka.tls.enabled (SASL_SSL: a mechanism and kafka.tls.enabled: true; SASL_PLAINTEXT: a mechanism alone; SSL: kafka.tls.enabled alone). Remove kafka.sasl.securityProtocol" }}
{{- end }}
{{- $mechanism := upper (toString ($s.mechanism | default "")) -}}
{{- $out := dict -}}
{{- $passwordKeys := list -}}
{{- if $s.username }}{{ $passwordKeys = append $passwordKeys "kafka.sasl.username" }}{{ end -}}
{{- $oauthKeys := list -}}
{{- range $k := list "tokenEndpointUrl" "clientId" "scope" }}
{{- if get $oauth $k }}{{ $oauthKeys = append $oauthKeys (printf "kafka.sasl.oauthbearer.%s" $k) }}{{ end }}
{{- end -}}
{{- if $mechanism }}
{{- if not (has $mechanism (list "PLAIN" "SCRAM-SHA-256" "SCRAM-SHA-512" "OAUTHBEARER")) }}
{{- fail (printf "kafka.sasl.mechanism '%s' is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (or empty: no SASL)" $s.mechanism) }}
{{- end }}
{{- $dir := include "apns-relay.kafkaSaslDir" . -}}
{{- $key := include "apns-relay.kafkaSaslKey" . -}}
{{- $sasl := dict "mechanism" $mechanism -}}
{{- if eq $mechanism "OAUTHBEARER" }}
{{- if not $s.existingSecret }}
{{- fail "kafka.sasl.mechanism OAUTHBEARER needs kafka.sasl.existingSecret: the Secret holding the OIDC client secret (under kafka.sasl.oauthbearer.clientSecretKey), mounted as kafka.sasl.oauthbearer.clientSecretFile" }}
{{- end }}
{{- $missing := list -}}
{{- range $k := list "tokenEndpointUrl" "clientId" }}{{ if not (get $oauth $k) }}{{ $missing = append $missing (printf "kafka.sasl.oauthbearer.%s" $k) }}{{ end }}{{ end -}}
{{- if $missing }}
{{- fail (printf "kafka.sasl.mechanism OAUTHBEARER needs %s (OIDC client credentials: librdkafka fetches and renews the token)" (join " and " $missing)) }}
{{- end }}
{{- range $passwordKeys }}
{{- fail (printf "%s is for PLAIN and SCRAM; kafka.sasl.mechanism OAUTHBEARER authenticates with kafka.sasl.oauthbearer.clientId" .) }}
{{- end }}
{{- $o := dict "tokenEndpointUrl" $oauth.tokenEndpointUrl "clientId" $oauth.clientId "clientSecretFile" (printf "%s/%s" $dir $key) -}}
{{- with $oauth.scope }}{{ $_ := set $o "scope" . }}{{ end -}}
{{- $_ := set $sasl "oauthbearer" $o -}}
{{- else }}
{{- if not $s.existingSecret }}
{{- fail (printf "kafka.sasl.mechanism %s needs kafka.sasl.existingSecret: the Secret holding the password (under kafka.sasl.passwordKey), mounted as kafka.sasl.passwordFile" $mechanism) }}
{{- end }}
{{- if not $s.username }}
{{- fail (printf "kafka.sasl.mechanism %s needs kafka.sasl.username" $mechanism) }}
{{- end }}
{{- range $oauthKeys }}
{{- fail (printf "%s is for kafka.sasl.mechanism OAUTHBEARER, not %s" . $mechanism) }}
{{- end }}
{{- $_ := set $sasl "username" $s.username -}}
{{- $_ := set $sasl "passwordFile" (printf "%s/%s" $dir $key) -}}
{{- if not (kindIs "invalid" $s.reloadIntervalMs) }}{{ $_ := set $sasl "reloadIntervalMs" (int64 $s.reloadIntervalMs) }}{{ end -}}
{{- end }}
{{- $_ := set $out "sasl" $sasl -}}
{{- else }}
{{- $given := concat $passwordKeys $oauthKeys -}}
{{- if $s.existingSecret }}{{ $given = append $given "kafka.sasl.existingSecret" }}{{ end -}}
{{- range $given }}
{{- fail (printf "%s is set but kafka.sasl.mechanism is not (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER)" .) }}
{{- end }}
{{- end }}
{{- if $t.keyPasswordKey }}{{ if not $t.existingSecret }}
{{- fail "kafka.tls.keyPasswordKey names a key of kafka.tls.existingSecret (the client certificate's Secret), which is not set" }}
{{- end }}{{ end }}
{{- if include "apns-relay.kafkaTls" . }}
{{- $tls := dict "enabled" true -}}
{{- if $t.caSecret }}
{{- if not $t.caKey }}{{ fail "kafka.tls.caSecret needs kafka.tls.caKey: the key of the CA bundle in that Secret (Strimzi: ca.crt)" }}{{ end }}
{{- $_ := set $tls "caFile" (printf "%s/%s" (include "apns-relay.kafkaCaDir" .) $t.caKey) -}}
{{- end }}
{{- if $t.existingSecret }}
{{- if or (not $t.certificateKey) (not $t.privateKeyKey) }}
{{- fail "kafka.tls.existingSecret needs kafka.tls.certificateKey and kafka.tls.privateKeyKey: the keys of the client certificate and its private key in that Secret (Strimzi: user.crt, user.key)" }}
{{- end }}
{{- $dir := include "apns-relay.kafkaClientDir" . -}}
{{- $_ := set $tls "certFile" (printf "%s/%s" $dir $t.certificateKey) -}}
{{- $_ := set $tls "keyFile" (printf "%s/%s" $dir $t.privateKeyKey) -}}
{{- with $t.keyPasswordKey }}{{ $_ := set $tls "keyPasswordFile" (printf "%s/%s" $dir .) }}{{ end -}}
{{- end }}
{{- $_ := set $out "tls" $tls -}}
{{- end }}
{{- /* librdkafka properties that kafka.sasl.* and kafka.tls.* decide: the relay refuses them beside these keys. */ -}}
{{- if $out }}
{{- $managed := list "security.protocol" -}}
{{- if $out.sasl }}{{ $managed = concat $managed (list "sasl.mechanism" "sasl.mechanisms" "sasl.username" "sasl.password" "sasl.oauthbearer.method" "sasl.oauthbearer.client.id" "sasl.oauthbearer.client.secret" "sasl.oauthbearer.token.endpoint.url" "sasl.oauthbearer.scope") }}{{ end -}}
{{- if $out.tls }}{{ $managed = concat $managed (list "ssl.ca.location" "ssl.certificate.location" "ssl.key.location" "ssl.key.password") }}{{ end -}}
{{- range $source := list "properties" "consumerProperties" "producerProperties" }}
{{- $given := get $.Values.kafka $source | default list -}}
{{- $names := list -}}
{{- if kindIs "map" $given }}{{ $names = keys $given | sortAlpha }}
{{- else }}{{ range $given }}{{ $names = append $names (trim (first (splitList "=" (toString .)))) }}{{ end }}{{ end -}}
{{- range $name := $names }}
{{- if has $name $managed }}
{{- fail (printf "kafka.%s sets '%s', which kafka.sasl.* and kafka.tls.* decide: remove it from kafka.%s" $source $name $source) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- toJson $out -}}
{{- end }}

{{/* relay.yaml: the relay's own keys from the values, chart-only keys left out, file paths filled in. */}}
{{- define "apns-relay.config" -}}
{{- $v := .Values -}}
{{- /* Checks the relay would make at start, made here so that a wrong release fails at install instead. */ -}}
{{- if gt (int64 $v.apns.pool.minConnections) (int64 $v.apns.pool.maxConnections) }}
{{- fail (printf "apns.pool.minConnections (%d) is above apns.pool.maxConnections (%d)" (int64 $v.apns.pool.minConnections) (int64 $v.apns.pool.maxConnections)) }}
{{- end }}
{{- $inputs := include "apns-relay.inputTopics" . | fromJsonArray -}}
{{- if not $inputs }}{{ fail "kafka.topics.input lists no topic" }}{{ end -}}
{{- $urgent := include "apns-relay.urgentTopics" . | fromJsonArray -}}
{{- range $t := $urgent }}
{{- if has $t $inputs }}{{ fail (printf "topic '%s' is in both kafka.topics.input (bulk) and kafka.topics.urgent; a topic belongs to one lane" $t) }}{{ end }}
{{- end }}
{{- range $out := list $v.kafka.topics.results $v.kafka.topics.removedTokens $v.kafka.topics.removedChannels $v.kafka.topics.deadLetters }}
{{- if has $out $inputs }}{{ fail (printf "topic '%s' is both an input (kafka.topics.input) and an output topic; the relay would consume its own records" $out) }}{{ end }}
{{- if has $out $urgent }}{{ fail (printf "topic '%s' is both an urgent input (kafka.topics.urgent) and an output topic; the relay would consume its own records" $out) }}{{ end }}
{{- end }}
{{- /* The chart derives the probes' port and the grace period from these; a second source would disagree. */ -}}
{{- if and (hasKey $v.extraConfig "admin") (hasKey (get $v.extraConfig "admin" | default dict) "port") }}
{{- fail "set admin.port, not extraConfig.admin.port (the chart's probes, Service and annotations use admin.port)" }}
{{- end }}
{{- if and (hasKey $v.extraConfig "relay") (hasKey (get $v.extraConfig "relay" | default dict) "drainTimeoutMs") }}
{{- fail "set relay.drainTimeoutMs, not extraConfig.relay.drainTimeoutMs (the grace period is computed from it)" }}
{{- end }}
{{- $kafka := deepCopy $v.kafka -}}
{{- /* kafka.sasl and kafka.tls only when on: chart-only keys left out, the secrets as paths to their mounts. */ -}}
{{- $_ := unset $kafka "sasl" -}}
{{- $_ := unset $kafka "tls" -}}
{{- $kafka = merge $kafka (include "apns-relay.kafkaSecurity" . | fromJson) -}}
{{- /* A pod's name is known only in the pod: the pod template passes it as APNS_RELAY_KAFKA_GROUP_INSTANCE_ID. */ -}}
{{- $_ := unset $kafka "groupInstanceIdFromPodName" -}}
{{- /* The transaction keys only with exactlyOnce (a relay older than them, image.tag pinned, refuses them). */ -}}
{{- if not $v.kafka.exactlyOnce }}
{{- range $k := list "exactlyOnce" "transactionIntervalMs" "transactionTimeoutMs" }}{{ $_ := unset $kafka $k }}{{ end }}
{{- end -}}
{{- range $k := list "properties" "consumerProperties" "producerProperties" }}
{{- if not (get $kafka $k) }}{{ $_ := unset $kafka $k }}{{ end }}
{{- end -}}
{{- /* The urgent lane's keys only with urgent topics: without them the relay reserves nothing, and a relay
     older than the lanes (image.tag pinned) would refuse them as unknown keys. */ -}}
{{- $relay := deepCopy $v.relay -}}
{{- if not $urgent }}
{{- $_ := unset $kafka.topics "urgent" -}}
{{- $_ := unset $relay "lanes" -}}
{{- end -}}
{{- $apns := dict "production" $v.apns.production "development" $v.apns.development "pool" $v.apns.pool "connectTimeoutMs" $v.apns.connectTimeoutMs "ioThreads" $v.apns.ioThreads "batchWindowMs" $v.apns.batchWindowMs "insecureSkipVerify" $v.apns.insecureSkipVerify "keyReloadIntervalMs" $v.apns.keyReloadIntervalMs -}}
{{- with $v.apns.topics }}{{ $_ := set $apns "topics" . }}{{ end -}}
{{- with $v.apns.environments }}{{ $_ := set $apns "environments" . }}{{ end -}}
{{- if or $v.apns.ca.existingSecret $v.apns.ca.existingConfigMap }}
{{- if and $v.apns.ca.existingSecret $v.apns.ca.existingConfigMap }}{{ fail "set apns.ca.existingSecret or apns.ca.existingConfigMap, not both" }}{{ end }}
{{- $_ := set $apns "caFile" (printf "%s/ca.pem" (include "apns-relay.caDir" .)) -}}
{{- end -}}
{{- with $v.apns.proxy }}
{{- if .url }}
{{- $proxy := dict "url" .url -}}
{{- if .existingSecret }}{{ $_ := set $proxy "credentialsFile" (printf "%s/credentials" (include "apns-relay.proxyDir" $)) }}{{ end -}}
{{- $_ := set $apns "proxy" $proxy -}}
{{- else if .existingSecret }}
{{- fail "apns.proxy.existingSecret is set but apns.proxy.url is not" }}
{{- end }}
{{- end -}}
{{- if $v.apns.credentials -}}
{{- $names := list -}}
{{- $named := dict -}}
{{- range $c := $v.apns.credentials -}}
{{- if has $c.name $names }}{{ fail (printf "apns.credentials names '%s' twice" $c.name) }}{{ end -}}
{{- $names = append $names $c.name -}}
{{- $dir := printf "%s/%s" (include "apns-relay.credentialsDir" $) $c.name -}}
{{- $auth := $c.auth | default "token" -}}
{{- $entry := dict "auth" $auth "topics" $c.topics -}}
{{- with $c.environments }}{{ $_ := set $entry "environments" . }}{{ end -}}
{{- if eq $auth "token" -}}
{{- $t := $c.token | default dict -}}
{{- if not $t.existingSecret }}{{ fail (printf "apns.credentials '%s': token.existingSecret (and token.keyId, token.teamId) are required" $c.name) }}{{ end -}}
{{- $token := dict "teamId" $t.teamId "privateKeyFile" (printf "%s/AuthKey.p8" $dir) -}}
{{- if $t.existingSecretKeyIdKey }}{{ $_ := set $token "keyIdFile" (printf "%s/keyId" $dir) }}
{{- else if $t.keyId }}{{ $_ := set $token "keyId" $t.keyId }}
{{- else }}{{ fail (printf "apns.credentials '%s': token.keyId or token.existingSecretKeyIdKey is required" $c.name) }}{{ end -}}
{{- with $t.rotationMinutes }}{{ $_ := set $token "rotationMinutes" . }}{{ end -}}
{{- $_ := set $entry "token" $token -}}
{{- else -}}
{{- $cc := $c.certificate | default dict -}}
{{- if not $cc.existingSecret }}{{ fail (printf "apns.credentials '%s': certificate.existingSecret is required" $c.name) }}{{ end -}}
{{- if eq ($cc.format | default "pem") "pkcs12" -}}
{{- $cert := dict "pkcs12File" (printf "%s/certificate.p12" $dir) -}}
{{- if $cc.passphraseKey }}{{ $_ := set $cert "passphraseFile" (printf "%s/passphrase" $dir) }}{{ end -}}
{{- $_ := set $entry "certificate" $cert -}}
{{- else -}}
{{- $_ := set $entry "certificate" (dict "certificateFile" (printf "%s/tls.crt" $dir) "privateKeyFile" (printf "%s/tls.key" $dir)) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $named $c.name $entry -}}
{{- end -}}
{{- $_ := set $apns "credentials" $names -}}
{{- $_ := set $apns "credential" $named -}}
{{- end -}}
{{- if include "apns-relay.defaultCredential" . -}}
{{- $_ := set $apns "auth" $v.apns.auth -}}
{{- if eq $v.apns.auth "token" -}}
{{- $token := dict "rotationMinutes" $v.apns.token.rotationMinutes "privateKeyFile" (printf "%s/AuthKey.p8" (include "apns-relay.tokenDir" .)) -}}
{{- if and $v.apns.token.existingSecret $v.apns.token.existingSecretKeyIdKey }}{{ $_ := set $token "keyIdFile" (printf "%s/keyId" (include "apns-relay.tokenDir" .)) }}
{{- else }}{{ with $v.apns.token.keyId }}{{ $_ := set $token "keyId" . }}{{ end }}{{ end -}}
{{- with $v.apns.token.teamId }}{{ $_ := set $token "teamId" . }}{{ end -}}
{{- $_ := set $apns "token" $token -}}
{{- else -}}
{{- $dir := include "apns-relay.certificateDir" . -}}
{{- $c := $v.apns.certificate -}}
{{- if eq $c.format "pkcs12" -}}
{{- $cert := dict "pkcs12File" (printf "%s/certificate.p12" $dir) -}}
{{- if or $c.passphraseKey $c.passphrase }}{{ $_ := set $cert "passphraseFile" (printf "%s/passphrase" $dir) }}{{ end -}}
{{- $_ := set $apns "certificate" $cert -}}
{{- else -}}
{{- $_ := set $apns "certificate" (dict "certificateFile" (printf "%s/tls.crt" $dir) "privateKeyFile" (printf "%s/tls.key" $dir)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $config := dict "kafka" $kafka "apns" $apns "relay" $relay "admin" (dict "host" $v.admin.host "port" $v.admin.port) "log" $v.log -}}
{{- /* Tracing's keys only with an endpoint: without one tracing is off, and a relay older than tracing (image.tag
     pinned) would refuse them as unknown keys. */ -}}
{{- with $v.tracing }}{{ if .otlpEndpoint }}
{{- $_ := set $config "tracing" (dict "otlpEndpoint" .otlpEndpoint "serviceName" .serviceName "sampleRatio" .sampleRatio "parentIsProducer" .parentIsProducer "maxQueueSize" .maxQueueSize "exportTimeoutMs" .exportTimeoutMs) -}}
{{- end }}{{ end -}}
{{- $config = mustMergeOverwrite $config (deepCopy $v.extraConfig) -}}
{{- toYaml $config -}}
{{- end }}

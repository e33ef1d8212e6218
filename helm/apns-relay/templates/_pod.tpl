{{/* The relay's pod, the same whichever workload runs it (Deployment or StatefulSet): grace period, probes,
     checksums, volumes. With a StatefulSet the pod's stable name gives it its Kafka identities. */}}
{{- define "apns-relay.podTemplate" -}}
{{- $v := .Values }}
{{- $grace := include "apns-relay.terminationGracePeriodSeconds" . }}
{{- /* Checked (and refused) by apns-relay.kafkaSecurity, as relay.yaml renders it. */}}
{{- $kafkaSecurity := include "apns-relay.kafkaSecurity" . | fromJson }}
{{- $kafkaTls := $v.kafka.tls | default dict }}
{{- $statefulSet := eq (include "apns-relay.workloadKind" .) "StatefulSet" }}
{{- $staticMembership := include "apns-relay.staticMembership" . }}
{{- /* A transactional id per pod, stable across its restarts, only where the pod's name is (see statefulset.yaml). */}}
{{- $transactionalId := and $statefulSet $v.kafka.exactlyOnce -}}
metadata:
  labels:
    {{- include "apns-relay.selectorLabels" . | nindent 4 }}
    {{- with $v.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    # Config or credential changes roll the pods.
    checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
    {{- if include "apns-relay.createSecret" . }}
    checksum/secret: {{ include (print $.Template.BasePath "/secret.yaml") . | sha256sum }}
    {{- end }}
    {{- if $v.metrics.podAnnotations }}
    prometheus.io/scrape: "true"
    prometheus.io/port: {{ $v.admin.port | quote }}
    prometheus.io/path: /metrics
    {{- end }}
    {{- with $v.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "apns-relay.serviceAccountName" . }}
  automountServiceAccountToken: {{ $v.serviceAccount.automountServiceAccountToken }}
  # Kubernetes would put a service-link variable set (APNS_RELAY_SERVICE_HOST, APNS_RELAY_PORT_9090_TCP, …) for
  # every Service of the namespace into the container; a Service named apns-relay yields APNS_RELAY_* names,
  # which the relay reads as configuration keys. The relay finds Kafka and APNs by name, never by these.
  enableServiceLinks: false
  {{- with $v.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  # Longer than relay.drainTimeoutMs ({{ $v.relay.drainTimeoutMs | int64 }} ms): SIGTERM starts the drain, SIGKILL must not cut it.
  terminationGracePeriodSeconds: {{ $grace }}
  securityContext:
    {{- toYaml $v.podSecurityContext | nindent 4 }}
  containers:
    - name: apns-relay
      image: {{ include "apns-relay.image" . | quote }}
      imagePullPolicy: {{ $v.image.pullPolicy }}
      args: ["run", "--config", "{{ include "apns-relay.configDir" . }}/relay.yaml"]
      ports:
        - name: metrics
          containerPort: {{ $v.admin.port }}
          protocol: TCP
      {{- /* No Kafka secret here: they are mounted as files (a variable shows in the pod spec and /proc/PID/environ). */}}
      {{- if or $v.extraEnv $staticMembership $transactionalId }}
      env:
        {{- if $transactionalId }}
        # First: Kubernetes expands $(POD_NAME) only in variables declared after it.
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        {{- end }}
        {{- if $staticMembership }}
        - name: APNS_RELAY_KAFKA_GROUP_INSTANCE_ID
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        {{- end }}
        {{- if $transactionalId }}
        # The relay's own default (<groupId>-<host name>), from the pod's name rather than its host name (which
        # hostNetwork or setHostnameAsFQDN would change). Transactional ids are global to the Kafka cluster: the
        # group id keeps apart releases of the same name that consume for different groups. ("$$" is a literal "$"
        # to Kubernetes.)
        - name: APNS_RELAY_KAFKA_TRANSACTIONAL_ID
          value: {{ printf "%s-$(POD_NAME)" ($v.kafka.groupId | replace "$" "$$") | quote }}
        {{- end }}
        {{- with $v.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- end }}
      {{- with $v.extraEnvFrom }}
      envFrom:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if $v.startupProbe.enabled }}
      startupProbe:
        httpGet:
          path: /healthz
          port: metrics
        periodSeconds: {{ $v.startupProbe.periodSeconds }}
        timeoutSeconds: {{ $v.startupProbe.timeoutSeconds }}
        failureThreshold: {{ $v.startupProbe.failureThreshold }}
      {{- end }}
      {{- if $v.livenessProbe.enabled }}
      livenessProbe:
        httpGet:
          path: /healthz
          port: metrics
        initialDelaySeconds: {{ $v.livenessProbe.initialDelaySeconds }}
        periodSeconds: {{ $v.livenessProbe.periodSeconds }}
        timeoutSeconds: {{ $v.livenessProbe.timeoutSeconds }}
        failureThreshold: {{ $v.livenessProbe.failureThreshold }}
      {{- end }}
      {{- if $v.readinessProbe.enabled }}
      readinessProbe:
        httpGet:
          path: /readyz
          port: metrics
        initialDelaySeconds: {{ $v.readinessProbe.initialDelaySeconds }}
        periodSeconds: {{ $v.readinessProbe.periodSeconds }}
        timeoutSeconds: {{ $v.readinessProbe.timeoutSeconds }}
        failureThreshold: {{ $v.readinessProbe.failureThreshold }}
      {{- end }}
      resources:
        {{- toYaml $v.resources | nindent 8 }}
      securityContext:
        {{- toYaml $v.securityContext | nindent 8 }}
      volumeMounts:
        - name: config
          mountPath: {{ include "apns-relay.configDir" . }}/relay.yaml
          subPath: relay.yaml
          readOnly: true
        {{- if include "apns-relay.defaultCredential" . }}
        {{- if eq $v.apns.auth "token" }}
        - name: apns-token
          mountPath: {{ include "apns-relay.tokenDir" . }}
          readOnly: true
        {{- else }}
        - name: apns-certificate
          mountPath: {{ include "apns-relay.certificateDir" . }}
          readOnly: true
        {{- end }}
        {{- end }}
        {{- range $c := $v.apns.credentials }}
        - name: apns-credential-{{ $c.name }}
          mountPath: {{ include "apns-relay.credentialsDir" $ }}/{{ $c.name }}
          readOnly: true
        {{- end }}
        {{- if or $v.apns.ca.existingSecret $v.apns.ca.existingConfigMap }}
        - name: apns-ca
          mountPath: {{ include "apns-relay.caDir" . }}
          readOnly: true
        {{- end }}
        {{- if and $v.apns.proxy.url $v.apns.proxy.existingSecret }}
        - name: apns-proxy
          mountPath: {{ include "apns-relay.proxyDir" . }}
          readOnly: true
        {{- end }}
        {{- /* Whole directories, never subPath: the kubelet updates a Secret's files in place only there, and the
             relay reads kafka.sasl.passwordFile again for a rotated password. */}}
        {{- if $kafkaSecurity.sasl }}
        - name: kafka-sasl
          mountPath: {{ include "apns-relay.kafkaSaslDir" . }}
          readOnly: true
        {{- end }}
        {{- if $kafkaTls.caSecret }}
        - name: kafka-tls-ca
          mountPath: {{ include "apns-relay.kafkaCaDir" . }}
          readOnly: true
        {{- end }}
        {{- if $kafkaTls.existingSecret }}
        - name: kafka-tls-client
          mountPath: {{ include "apns-relay.kafkaClientDir" . }}
          readOnly: true
        {{- end }}
        - name: tmp
          mountPath: /tmp
        {{- with $v.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
  volumes:
    - name: config
      configMap:
        name: {{ include "apns-relay.fullname" . }}
    {{- range $c := $v.apns.credentials }}
    - name: apns-credential-{{ $c.name }}
      secret:
        {{- if eq ($c.auth | default "token") "token" }}
        secretName: {{ $c.token.existingSecret }}
        defaultMode: 0440
        items:
          - key: {{ $c.token.existingSecretKey | default "AuthKey.p8" }}
            path: AuthKey.p8
          {{- with $c.token.existingSecretKeyIdKey }}
          - key: {{ . }}
            path: keyId
          {{- end }}
        {{- else }}
        {{- $cc := $c.certificate }}
        secretName: {{ $cc.existingSecret }}
        defaultMode: 0440
        items:
          {{- if eq ($cc.format | default "pem") "pkcs12" }}
          - key: {{ $cc.pkcs12Key | default "certificate.p12" }}
            path: certificate.p12
          {{- with $cc.passphraseKey }}
          - key: {{ . }}
            path: passphrase
          {{- end }}
          {{- else }}
          - key: {{ $cc.certificateKey | default "tls.crt" }}
            path: tls.crt
          - key: {{ $cc.privateKeyKey | default "tls.key" }}
            path: tls.key
          {{- end }}
        {{- end }}
    {{- end }}
    {{- if and $v.apns.proxy.url $v.apns.proxy.existingSecret }}
    - name: apns-proxy
      secret:
        secretName: {{ $v.apns.proxy.existingSecret }}
        defaultMode: 0440
        items:
          - key: {{ $v.apns.proxy.credentialsKey }}
            path: credentials
    {{- end }}
    {{- if $kafkaSecurity.sasl }}
    - name: kafka-sasl
      secret:
        secretName: {{ $v.kafka.sasl.existingSecret }}
        defaultMode: 0440
        items:
          - key: {{ include "apns-relay.kafkaSaslKey" . | quote }}
            path: {{ include "apns-relay.kafkaSaslKey" . | quote }}
    {{- end }}
    {{- if $kafkaTls.caSecret }}
    - name: kafka-tls-ca
      secret:
        secretName: {{ $kafkaTls.caSecret }}
        defaultMode: 0440
        items:
          - key: {{ $kafkaTls.caKey | quote }}
            path: {{ $kafkaTls.caKey | quote }}
    {{- end }}
    {{- with $kafkaTls.existingSecret }}
    - name: kafka-tls-client
      secret:
        secretName: {{ . }}
        defaultMode: 0440
        items:
          {{- range $key := compact (uniq (list $kafkaTls.certificateKey $kafkaTls.privateKeyKey $kafkaTls.keyPasswordKey)) }}
          - key: {{ $key | quote }}
            path: {{ $key | quote }}
          {{- end }}
    {{- end }}
    {{- with $v.apns.ca }}
    {{- if .existingSecret }}
    - name: apns-ca
      secret:
        secretName: {{ .existingSecret }}
        items:
          - key: {{ .key }}
            path: ca.pem
    {{- else if .existingConfigMap }}
    - name: apns-ca
      configMap:
        name: {{ .existingConfigMap }}
        items:
          - key: {{ .key }}
            path: ca.pem
    {{- end }}
    {{- end }}
    {{- if not (include "apns-relay.defaultCredential" .) }}
    {{- else if eq $v.apns.auth "token" }}
    - name: apns-token
      secret:
        secretName: {{ include "apns-relay.tokenSecretName" . }}
        defaultMode: 0440
        items:
          - key: {{ include "apns-relay.tokenSecretKey" . }}
            path: AuthKey.p8
          {{- if and $v.apns.token.existingSecret $v.apns.token.existingSecretKeyIdKey }}
          - key: {{ $v.apns.token.existingSecretKeyIdKey }}
            path: keyId
          {{- end }}
    {{- else }}
    {{- $c := $v.apns.certificate }}
    - name: apns-certificate
      secret:
        secretName: {{ include "apns-relay.certificateSecretName" . }}
        defaultMode: 0440
        items:
          {{- if eq $c.format "pkcs12" }}
          - key: {{ $c.pkcs12Key }}
            path: certificate.p12
          {{- if or $c.passphraseKey $c.passphrase }}
          - key: {{ $c.passphraseKey | default "passphrase" }}
            path: passphrase
          {{- end }}
          {{- else }}
          - key: {{ $c.certificateKey }}
            path: tls.crt
          - key: {{ $c.privateKeyKey }}
            path: tls.key
          {{- end }}
    {{- end }}
    - name: tmp
      emptyDir:
        sizeLimit: 64Mi
    {{- with $v.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $v.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}

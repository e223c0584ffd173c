{{/*
The pod template of the workload: the container runs the image's entrypoint
(`mcp-breaker serve`) with the chart's ConfigMap as its --config.
*/}}
{{- define "mcp-breaker.secretEnv" -}}
{{- $secret := include "mcp-breaker.secretName" . -}}
{{- if $secret }}
{{- $external := not (empty .Values.secrets.existingSecret) -}}
{{- $present := dict
  "advisory-tokens" (and (not (empty .Values.secrets.advisoryTokens)) (not .Values.secrets.tokensFile))
  "advisory-admin-tokens" (not (empty .Values.secrets.advisoryAdminTokens))
  "forward-headers" (not (empty .Values.secrets.forwardHeaders)) -}}
{{- $envs := dict
  "advisory-tokens" "MCP_BREAKER_ADVISORIES_TOKENS"
  "advisory-admin-tokens" "MCP_BREAKER_ADVISORIES_ADMIN_TOKENS"
  "forward-headers" "MCP_BREAKER_FORWARD_HEADERS" -}}
{{- range $key, $env := $envs }}
{{- if or $external (index $present $key) }}
- name: {{ $env }}
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ $key }}
      {{- if $external }}
      optional: true
      {{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- if .Values.redis.enabled }}
{{- with include "mcp-breaker.redisPasswordRef" . }}
{{- $ref := fromJson . }}
- name: MCP_BREAKER_STATE_REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $ref.name }}
      key: {{ $ref.key }}
{{- end }}
{{- end }}
{{- end }}

{{- define "mcp-breaker.podTemplate" -}}
{{- $dir := include "mcp-breaker.mountPath" . -}}
metadata:
  annotations:
    checksum/config: {{ include "mcp-breaker.config" . | sha256sum }}
    {{- if and (include "mcp-breaker.secretName" .) (not .Values.secrets.existingSecret) }}
    {{- /* Not of tokens-file: the kubelet updates that file in place, and the service
    reads it again, so a token rotates without rolling the pods. */}}
    checksum/secret: {{ include "mcp-breaker.secretEnvData" . | sha256sum }}
    {{- end }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  labels:
    {{- include "mcp-breaker.selectorLabels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "mcp-breaker.serviceAccountName" . }}
  automountServiceAccountToken: {{ .Values.serviceAccount.automountServiceAccountToken }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
  containers:
    - name: mcp-breaker
      image: {{ include "mcp-breaker.image" . | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        - --config
        - {{ $dir }}/config/config.yaml
        {{- range .Values.extraArgs }}
        - {{ . | quote }}
        {{- end }}
      ports:
        {{- range $name, $port := .Values.ports }}
        {{- if $port.enabled }}
        - name: {{ $name }}
          containerPort: {{ $port.containerPort }}
          protocol: TCP
        {{- end }}
        {{- end }}
      {{- $secretEnv := include "mcp-breaker.secretEnv" . }}
      {{- if or $secretEnv .Values.extraEnv }}
      env:
        {{- with $secretEnv }}
        {{- . | trim | nindent 8 }}
        {{- end }}
        {{- with .Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- end }}
      {{- with .Values.extraEnvFrom }}
      envFrom:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.livenessProbe }}
      livenessProbe:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.readinessProbe }}
      readinessProbe:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.startupProbe }}
      startupProbe:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.lifecycleHooks }}
      lifecycle:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      volumeMounts:
        - name: config
          mountPath: {{ $dir }}/config
          readOnly: true
        # A writable /tmp on a read-only root filesystem.
        - name: tmp
          mountPath: /tmp
        {{- if .Values.persistence.enabled }}
        - name: queue
          mountPath: {{ include "mcp-breaker.dataPath" . }}
        {{- end }}
        {{- if .Values.advisoryTls.enabled }}
        - name: advisory-tls
          mountPath: {{ $dir }}/tls
          readOnly: true
        {{- if .Values.advisoryTls.mutual }}
        - name: advisory-client-ca
          mountPath: {{ $dir }}/client-ca
          readOnly: true
        {{- end }}
        {{- end }}
        {{- if .Values.receiversTls.enabled }}
        - name: receivers-tls
          mountPath: {{ $dir }}/receivers-tls
          readOnly: true
        {{- if .Values.receiversTls.mutual }}
        - name: receivers-client-ca
          mountPath: {{ $dir }}/receivers-client-ca
          readOnly: true
        {{- end }}
        {{- end }}
        {{- if .Values.secrets.tokensFile }}
        # A directory, not a subPath: the kubelet's updates of the Secret reach the file.
        - name: tokens
          mountPath: {{ include "mcp-breaker.tokensFile" . | dir }}
          readOnly: true
        {{- end }}
        {{- with .Values.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
  volumes:
    - name: config
      configMap:
        name: {{ include "mcp-breaker.fullname" . }}
        items:
          - key: config.yaml
            path: config.yaml
    - name: tmp
      emptyDir:
        sizeLimit: 64Mi
    {{- with .Values.persistence.existingClaim }}
    {{- if $.Values.persistence.enabled }}
    - name: queue
      persistentVolumeClaim:
        claimName: {{ . }}
    {{- end }}
    {{- end }}
    {{- if .Values.advisoryTls.enabled }}
    - name: advisory-tls
      secret:
        secretName: {{ .Values.advisoryTls.secretName }}
        items:
          - key: tls.crt
            path: tls.crt
          - key: tls.key
            path: tls.key
    {{- if .Values.advisoryTls.mutual }}
    - name: advisory-client-ca
      secret:
        secretName: {{ default .Values.advisoryTls.secretName .Values.advisoryTls.clientCaSecretName }}
        items:
          - key: ca.crt
            path: ca.crt
    {{- end }}
    {{- end }}
    {{- if .Values.receiversTls.enabled }}
    - name: receivers-tls
      secret:
        secretName: {{ .Values.receiversTls.secretName }}
        items:
          - key: tls.crt
            path: tls.crt
          - key: tls.key
            path: tls.key
    {{- if .Values.receiversTls.mutual }}
    - name: receivers-client-ca
      secret:
        secretName: {{ default .Values.receiversTls.secretName .Values.receiversTls.clientCaSecretName }}
        items:
          - key: ca.crt
            path: ca.crt
    {{- end }}
    {{- end }}
    {{- if .Values.secrets.tokensFile }}
    - name: tokens
      secret:
        secretName: {{ include "mcp-breaker.secretName" . }}
        items:
          - key: tokens-file
            path: {{ include "mcp-breaker.tokensFile" . | base }}
    {{- end }}
    {{- with .Values.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}

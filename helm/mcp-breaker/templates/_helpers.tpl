{{/*
Names and labels, as Helm charts usually write them.
*/}}
{{- define "mcp-breaker.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release's full name: the release name alone when it already holds the chart's name.
*/}}
{{- define "mcp-breaker.fullname" -}}
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

{{- define "mcp-breaker.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{- define "mcp-breaker.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "mcp-breaker.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcp-breaker.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "mcp-breaker.labels" -}}
helm.sh/chart: {{ include "mcp-breaker.chart" . }}
{{ include "mcp-breaker.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: telemetry-hop
{{- end }}

{{- define "mcp-breaker.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "mcp-breaker.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The image reference: by digest when one is given, else by tag (the appVersion by default).
*/}}
{{- define "mcp-breaker.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The Secret the service's secret keys come from: the user's, or the one the chart creates
(only when it has something to hold). Empty: no secret at all.
*/}}
{{- define "mcp-breaker.secretName" -}}
{{- if .Values.secrets.existingSecret }}
{{- .Values.secrets.existingSecret }}
{{- else if or .Values.secrets.advisoryTokens .Values.secrets.advisoryAdminTokens .Values.secrets.forwardHeaders (and .Values.redis.enabled .Values.redis.password (not .Values.redis.existingSecret)) }}
{{- include "mcp-breaker.fullname" . }}
{{- end }}
{{- end }}

{{/*
The Redis the replicas share: the user's (redis.url), or the chart's own single pod.
*/}}
{{- define "mcp-breaker.redisName" -}}
{{- printf "%s-redis" (include "mcp-breaker.fullname" . | trunc 57 | trimSuffix "-") }}
{{- end }}

{{- define "mcp-breaker.redisSelectorLabels" -}}
app.kubernetes.io/name: {{ include "mcp-breaker.name" . | trunc 57 | trimSuffix "-" }}-redis
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "mcp-breaker.redisLabels" -}}
helm.sh/chart: {{ include "mcp-breaker.chart" . }}
{{ include "mcp-breaker.redisSelectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: shared-state
{{- end }}

{{- define "mcp-breaker.redisUrl" -}}
{{- if .Values.redis.url }}
{{- .Values.redis.url }}
{{- else }}
{{- printf "redis://%s.%s.svc:6379/0" (include "mcp-breaker.redisName" .) (include "mcp-breaker.namespace" .) }}
{{- end }}
{{- end }}

{{/*
Where the Redis password is: (Secret name, key), or nothing when there is no password.
*/}}
{{- define "mcp-breaker.redisPasswordRef" -}}
{{- if .Values.redis.existingSecret }}
{{- dict "name" .Values.redis.existingSecret "key" .Values.redis.passwordKey | toJson }}
{{- else if .Values.redis.password }}
{{- dict "name" (include "mcp-breaker.fullname" .) "key" "redis-password" | toJson }}
{{- end }}
{{- end }}

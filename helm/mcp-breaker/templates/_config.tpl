{{/*
The service's configuration file: the chart's defaults with `config` merged over them.

The chart owns the keys that must agree with the pod: the listen addresses and on/off
switches (from `ports` and `listenAddress`), the TLS files (from `advisoryTls` and
`receiversTls`, mounted where the defaults say) and, with `secrets.tokensFile`, the tokens
file. The secret keys come from the environment or a mounted Secret, never from this file.
*/}}
{{- define "mcp-breaker.mountPath" -}}/etc/mcp-breaker{{- end }}
{{- /* Where secrets.tokensFile mounts the Secret's key tokens-file: a directory, never a
subPath, so the kubelet's in-place updates reach the file. */ -}}
{{- define "mcp-breaker.tokensFile" -}}{{ include "mcp-breaker.mountPath" . }}/tokens/tokens{{- end }}
{{- /* Where the persistence volume is mounted; the disk queue is a directory in it. */ -}}
{{- define "mcp-breaker.dataPath" -}}/var/lib/mcp-breaker{{- end }}

{{- define "mcp-breaker.configDefaults" -}}
{{- $host := .Values.listenAddress -}}
{{- $ports := .Values.ports -}}
{{- $http := index $ports "otlp-http" -}}
{{- $advisories := dict
  "enabled" $ports.advisories.enabled
  "endpoint" (printf "%s:%d" $host (int $ports.advisories.containerPort)) -}}
{{- if .Values.advisoryTls.enabled }}
{{- $dir := include "mcp-breaker.mountPath" . -}}
{{- $tls := dict "cert_file" (printf "%s/tls/tls.crt" $dir) "key_file" (printf "%s/tls/tls.key" $dir) -}}
{{- if .Values.advisoryTls.mutual }}
{{- $_ := set $tls "client_ca_file" (printf "%s/client-ca/ca.crt" $dir) -}}
{{- end }}
{{- $_ := set $advisories "tls" $tls -}}
{{- end }}
{{- $receivers := dict
  "grpc" (dict "enabled" $ports.otlp.enabled "endpoint" (printf "%s:%d" $host (int $ports.otlp.containerPort)))
  "http" (dict "enabled" $http.enabled "endpoint" (printf "%s:%d" $host (int $http.containerPort))) -}}
{{- if .Values.receiversTls.enabled }}
{{- $dir := include "mcp-breaker.mountPath" . -}}
{{- $tls := dict "cert_file" (printf "%s/receivers-tls/tls.crt" $dir) "key_file" (printf "%s/receivers-tls/tls.key" $dir) -}}
{{- if .Values.receiversTls.mutual }}
{{- $_ := set $tls "client_ca_file" (printf "%s/receivers-client-ca/ca.crt" $dir) -}}
{{- end }}
{{- $_ := set $receivers "tls" $tls -}}
{{- end }}
{{- $defaults := dict
  "receivers" $receivers
  "telemetry" (dict
    "enabled" $ports.metrics.enabled
    "metrics_endpoint" (printf "%s:%d" $host (int $ports.metrics.containerPort)))
  "advisories" $advisories -}}
{{- if .Values.redis.enabled }}
{{- $redis := dict "url" (include "mcp-breaker.redisUrl" .) -}}
{{- with .Values.redis.username }}
{{- $_ := set $redis "username" . -}}
{{- end }}
{{- $_ := set $defaults "state" (dict "backend" "redis" "redis" $redis) -}}
{{- end }}
{{- if .Values.secrets.tokensFile }}
{{- $_ := set $defaults "auth" (dict "tokens_file" (include "mcp-breaker.tokensFile" .)) -}}
{{- end }}
{{- if .Values.persistence.enabled }}
{{- $queue := dict "storage" "disk" "directory" (printf "%s/queue" (include "mcp-breaker.dataPath" .)) -}}
{{- $_ := set $defaults "forward" (dict "queue" $queue) -}}
{{- end }}
{{- toYaml $defaults }}
{{- end }}

{{- define "mcp-breaker.config" -}}
{{- include "mcp-breaker.validate" . -}}
{{- $defaults := include "mcp-breaker.configDefaults" . | fromYaml -}}
{{- toYaml (mergeOverwrite $defaults (deepCopy .Values.config)) }}
{{- end }}

{{/*
Refuse values that would give pods a config they cannot serve, before anything is applied.
values.schema.json already rejects most of these; this says why, and holds with
--skip-schema-validation too. A message never quotes a secret.
*/}}
{{- define "mcp-breaker.validate" -}}
{{- $owned := list
  (list "receivers.grpc.endpoint" "ports.otlp.containerPort and listenAddress")
  (list "receivers.grpc.enabled" "ports.otlp.enabled")
  (list "receivers.http.endpoint" "ports.otlp-http.containerPort and listenAddress")
  (list "receivers.http.enabled" "ports.otlp-http.enabled")
  (list "telemetry.metrics_endpoint" "ports.metrics.containerPort and listenAddress")
  (list "telemetry.enabled" "ports.metrics.enabled")
  (list "advisories.endpoint" "ports.advisories.containerPort and listenAddress")
  (list "advisories.enabled" "ports.advisories.enabled")
  (list "advisories.tls" "advisoryTls")
  (list "receivers.tls" "receiversTls")
  (list "forward.queue.storage" "persistence.enabled (the disk queue needs a volume)")
  (list "forward.queue.directory" "persistence (the chart mounts the volume and names the directory)")
  (list "advisories.tokens" "secrets.advisoryTokens or secrets.existingSecret: it is a secret")
  (list "advisories.admin_tokens" "secrets.advisoryAdminTokens or secrets.existingSecret: it is a secret")
  (list "forward.headers" "secrets.forwardHeaders or secrets.existingSecret: they can hold credentials")
  (list "state.backend" "redis.enabled")
  (list "state.redis.url" "redis.url or redis.embedded.enabled")
  (list "state.redis.username" "redis.username")
  (list "state.redis.password" "redis.password or redis.existingSecret: it is a secret")
  (list "state.redis.password_file" "redis.existingSecret") -}}
{{- range $rule := $owned }}
{{- $node := $.Values.config -}}
{{- $found := true -}}
{{- range $part := splitList "." (index $rule 0) }}
{{- if and $found (kindIs "map" $node) (hasKey $node $part) }}
{{- $node = index $node $part -}}
{{- else }}
{{- $found = false -}}
{{- end }}
{{- end }}
{{- if $found }}
{{- fail (printf "config.%s is set by the chart: use %s instead" (index $rule 0) (index $rule 1)) }}
{{- end }}
{{- end }}
{{- if not (or .Values.ports.otlp.enabled (index .Values.ports "otlp-http").enabled) }}
{{- fail "ports: at least one of otlp and otlp-http must be enabled, or no span can come in" }}
{{- end }}
{{- if not .Values.ports.metrics.enabled }}
{{- range $probe := list "livenessProbe" "readinessProbe" "startupProbe" }}
{{- $spec := index $.Values $probe -}}
{{- if and $spec.httpGet (eq (toString $spec.httpGet.port) "metrics") }}
{{- if $.Values.receiversTls.enabled }}
{{- fail (printf "ports.metrics.enabled is false, so /healthz and /readyz are not served: give %s another check, e.g. tcpSocket: {port: otlp} (the kubelet's gRPC probe speaks no TLS, and receiversTls is on)" $probe) }}
{{- end }}
{{- fail (printf "ports.metrics.enabled is false, so /healthz and /readyz are not served: give %s another check, e.g. grpc: {port: %d}" $probe (int $.Values.ports.otlp.containerPort)) }}
{{- end }}
{{- end }}
{{- end }}
{{- /* The service's own default (forward.shutdown_grace_s, processor/config/forward.py). */ -}}
{{- $grace := float64 (dig "forward" "shutdown_grace_s" 10.0 .Values.config) -}}
{{- if lt (float64 .Values.terminationGracePeriodSeconds) (addf $grace 5) }}
{{- fail (printf "terminationGracePeriodSeconds (%v) must be at least forward.shutdown_grace_s (%v) + 5: the pod is killed before its queue has drained" .Values.terminationGracePeriodSeconds $grace) }}
{{- end }}
{{- if not (has .Values.workload (list "Deployment" "StatefulSet")) }}
{{- fail (printf "workload must be Deployment or StatefulSet, got %v" .Values.workload) }}
{{- end }}
{{- if and (dig "forward" "queue" "fsync" false .Values.config) (not .Values.persistence.enabled) }}
{{- fail "config.forward.queue.fsync is for the disk queue: set persistence.enabled too" }}
{{- end }}
{{- if .Values.persistence.enabled }}
{{- if not (dig "forward" "endpoint" "" .Values.config) }}
{{- fail "persistence.enabled needs config.forward.endpoint: without a next hop nothing is queued" }}
{{- end }}
{{- if and (eq .Values.workload "Deployment") (not .Values.persistence.existingClaim) }}
{{- fail "persistence.enabled with workload Deployment needs persistence.existingClaim; for a volume per pod, set workload: StatefulSet" }}
{{- end }}
{{- if and .Values.persistence.existingClaim (or .Values.autoscaling.enabled (gt (int .Values.replicaCount) 1)) }}
{{- fail "persistence.existingClaim is one volume, and two pods cannot share a queue: keep replicaCount 1 without autoscaling, or use workload: StatefulSet without existingClaim (a claim per pod)" }}
{{- end }}
{{- end }}
{{- if and .Values.advisoryTls.enabled (not .Values.advisoryTls.secretName) }}
{{- fail "advisoryTls.enabled needs advisoryTls.secretName: a kubernetes.io/tls Secret with tls.crt and tls.key" }}
{{- end }}
{{- with .Values.receiversTls }}
{{- if and .enabled (not .secretName) }}
{{- fail "receiversTls.enabled needs receiversTls.secretName: a kubernetes.io/tls Secret with tls.crt and tls.key" }}
{{- end }}
{{- if and .mutual (not .enabled) }}
{{- fail "receiversTls.mutual needs receiversTls.enabled (and secretName): mutual TLS is TLS first" }}
{{- end }}
{{- if and .clientCaSecretName (not .mutual) }}
{{- fail "receiversTls.clientCaSecretName is the CA that verifies senders' certificates: set receiversTls.mutual too, or leave it empty" }}
{{- end }}
{{- end }}
{{- if .Values.receiversTls.enabled }}
{{- range $probe := list "livenessProbe" "readinessProbe" "startupProbe" }}
{{- $spec := index $.Values $probe -}}
{{- if and $spec.grpc (eq (int $spec.grpc.port) (int $.Values.ports.otlp.containerPort)) }}
{{- fail (printf "%s: the kubelet's gRPC probe speaks no TLS, and receiversTls puts TLS on port %d: probe the metrics port (httpGet /healthz, /readyz) or use tcpSocket" $probe (int $.Values.ports.otlp.containerPort)) }}
{{- end }}
{{- end }}
{{- end }}
{{- $auth := toString (dig "receivers" "auth" "none" .Values.config) -}}
{{- if and (eq $auth "certificate") (not (and .Values.receiversTls.enabled .Values.receiversTls.mutual)) }}
{{- fail "config.receivers.auth: certificate needs mutual TLS on the receivers: set receiversTls.enabled, receiversTls.secretName and receiversTls.mutual (the client certificate's common name is the tenant)" }}
{{- end }}
{{- if and (eq $auth "token") (not (or .Values.secrets.existingSecret .Values.secrets.advisoryTokens (dig "auth" "tokens_file" "" .Values.config))) }}
{{- fail "config.receivers.auth: token needs tokens, or no sender gets in: set secrets.advisoryTokens, or secrets.existingSecret (its key advisory-tokens, or tokens-file with secrets.tokensFile)" }}
{{- end }}
{{- if .Values.secrets.tokensFile }}
{{- if not (or .Values.secrets.existingSecret .Values.secrets.advisoryTokens) }}
{{- fail "secrets.tokensFile needs the tokens: secrets.existingSecret (its key tokens-file, token=tenant a line) or secrets.advisoryTokens" }}
{{- end }}
{{- if dig "auth" "tokens_file" "" .Values.config }}
{{- fail "config.auth.tokens_file is set by the chart with secrets.tokensFile: put the tokens in the Secret's key tokens-file, or turn secrets.tokensFile off to mount a file of your own (extraVolumes)" }}
{{- end }}
{{- range $token, $tenant := .Values.secrets.advisoryTokens }}
{{- if or (contains "\n" $token) (contains "\n" (toString $tenant)) (hasPrefix "#" (trim $token)) }}
{{- fail "secrets.advisoryTokens: with secrets.tokensFile a token or tenant cannot hold a line break, nor a token start with '#': the file holds token=tenant lines" }}
{{- end }}
{{- end }}
{{- end }}
{{- if and .Values.secrets.existingSecret (or .Values.secrets.advisoryTokens .Values.secrets.advisoryAdminTokens .Values.secrets.forwardHeaders) }}
{{- fail "secrets.existingSecret is set: put the tokens and headers in that Secret, not in secrets.advisoryTokens, advisoryAdminTokens or forwardHeaders" }}
{{- end }}
{{- if .Values.redis.enabled }}
{{- if and .Values.redis.url .Values.redis.embedded.enabled }}
{{- fail "redis: set redis.url (your Redis) or redis.embedded.enabled (the chart's own), not both" }}
{{- end }}
{{- if not (or .Values.redis.url .Values.redis.embedded.enabled) }}
{{- fail "redis.enabled needs redis.url (your Redis, the production answer) or redis.embedded.enabled (one pod, for trying it out)" }}
{{- end }}
{{- if and .Values.redis.existingSecret .Values.redis.password }}
{{- fail "redis.existingSecret is set: put the password in that Secret, not in redis.password" }}
{{- end }}
{{- if and .Values.secrets.existingSecret .Values.redis.password (not .Values.redis.existingSecret) }}
{{- fail "secrets.existingSecret is set, so the chart makes no Secret: put the Redis password in a Secret too and name it in redis.existingSecret" }}
{{- end }}
{{- if and .Values.redis.url (contains "@" .Values.redis.url) }}
{{- fail "redis.url must not hold credentials: use redis.username, and redis.password or redis.existingSecret" }}
{{- end }}
{{- else if .Values.redis.embedded.enabled }}
{{- fail "redis.embedded.enabled runs a Redis nothing would use: set redis.enabled too" }}
{{- end }}
{{- range $token, $tenant := .Values.secrets.advisoryTokens }}
{{- if or (contains "," $token) (contains "=" $token) (contains "," (toString $tenant)) }}
{{- fail "secrets.advisoryTokens: a token holds ',' or '=', or a tenant holds ',': the service reads them as token=tenant,token2=tenant2" }}
{{- end }}
{{- end }}
{{- range $token := .Values.secrets.advisoryAdminTokens }}
{{- if contains "," $token }}
{{- fail "secrets.advisoryAdminTokens: a token holds ',': the service reads them as token,token2" }}
{{- end }}
{{- end }}
{{- range $name, $value := .Values.secrets.forwardHeaders }}
{{- if or (contains "," $name) (contains "=" $name) (contains "," (toString $value)) }}
{{- fail "secrets.forwardHeaders: a header name holds ',' or '=', or a value holds ',': the service reads them as name=value,name2=value2" }}
{{- end }}
{{- end }}
{{- end }}

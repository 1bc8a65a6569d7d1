{{/*
Frontdoor chart helpers. A component is one of: console issuer ledger (HTTP), deliverer worker
beat (the dispatcher image), migrate (the hook Job), maintenance (reencrypt-secrets Job).
*/}}

{{- define "frontdoor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "frontdoor.fullname" -}}
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

{{/* The HTTP services: name -> container port (the images' EXPOSE). */}}
{{- define "frontdoor.httpPorts" -}}
console: 8000
issuer: 8001
ledger: 8002
{{- end -}}

{{/* Components serving Prometheus /metrics on .Values.metrics.port (all of them). */}}
{{- define "frontdoor.metricsComponents" -}}
[console, issuer, ledger, deliverer, worker, beat]
{{- end -}}

{{/* Components allowed to reach the internet (public addresses only). */}}
{{- define "frontdoor.internetComponents" -}}
[console, issuer, deliverer, worker]
{{- end -}}

{{/* "<fullname>-<component>", at most 63 characters. */}}
{{- define "frontdoor.componentName" -}}
{{- printf "%s-%s" (include "frontdoor.fullname" .root) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "frontdoor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "frontdoor.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "frontdoor.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "frontdoor.selectorLabels" . }}
app.kubernetes.io/part-of: frontdoor
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- end -}}

{{/* image reference for an images.<key> entry: (dict "root" $ "key" "console") */}}
{{- define "frontdoor.image" -}}
{{- $img := index .root.Values.images .key -}}
{{- $tag := $img.tag | default .root.Values.image.tag | default .root.Chart.AppVersion -}}
{{- $repo := $img.repository -}}
{{- if .root.Values.image.registry -}}
{{- $repo = printf "%s/%s" .root.Values.image.registry $repo -}}
{{- end -}}
{{- printf "%s:%s" $repo $tag -}}
{{- end -}}

{{/* The host of a public URL, after checking the three hosts differ. */}}
{{- define "frontdoor.host" -}}
{{- $u := index .root.Values.publicUrls .component -}}
{{- (urlParse $u).host -}}
{{- end -}}

{{- define "frontdoor.checkHosts" -}}
{{- $seen := dict -}}
{{- range $name := list "console" "issuer" "ledger" -}}
{{- $host := (urlParse (index $.Values.publicUrls $name)).host -}}
{{- if hasKey $seen $host -}}
{{- fail (printf "publicUrls.%s and publicUrls.%s share the host %s: the issuer and the ledger use every path of their host (/{slug}/...), so each service needs its own host" (get $seen $host) $name $host) -}}
{{- end -}}
{{- $_ := set $seen $host $name -}}
{{- end -}}
{{- end -}}

{{/* A secretKeyRef env var: (dict "name" "DATABASE_URL" "secret" "..." "key" "...") */}}
{{- define "frontdoor.secretEnv" -}}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ .secret | quote }}
      key: {{ .key | quote }}
{{- end -}}

{{- define "frontdoor.databaseEnv" -}}
{{- $db := .Values.database -}}
{{- if and $db.url $db.existingSecret -}}
{{- fail "set database.url or database.existingSecret, not both" -}}
{{- end -}}
{{- if $db.url }}
- name: DATABASE_URL
  value: {{ $db.url | quote }}
{{- else }}
{{ include "frontdoor.secretEnv" (dict "name" "DATABASE_URL" "secret" ($db.existingSecret | default .Values.secrets.existingSecret) "key" $db.secretKey) }}
{{- end }}
{{- end -}}

{{- define "frontdoor.redisEnv" -}}
{{- $r := .Values.redis -}}
{{- if and $r.url $r.existingSecret -}}
{{- fail "set redis.url or redis.existingSecret, not both" -}}
{{- end -}}
{{- if $r.url }}
- name: REDIS_URL
  value: {{ $r.url | quote }}
{{- else }}
{{ include "frontdoor.secretEnv" (dict "name" "REDIS_URL" "secret" ($r.existingSecret | default .Values.secrets.existingSecret) "key" $r.secretKey) }}
{{- end }}
{{- end -}}

{{/* Environment of every Frontdoor service process: (dict "root" $ "component" "console") */}}
{{- define "frontdoor.env" -}}
{{- $v := .root.Values -}}
- name: FRONTDOOR_ENV
  value: production
- name: FRONTDOOR_CONSOLE_BASE_URL
  value: {{ $v.publicUrls.console | quote }}
- name: FRONTDOOR_ISSUER_BASE_URL
  value: {{ $v.publicUrls.issuer | quote }}
- name: FRONTDOOR_LEDGER_BASE_URL
  value: {{ $v.publicUrls.ledger | quote }}
{{ include "frontdoor.secretEnv" (dict "name" "FRONTDOOR_KEK" "secret" $v.secrets.existingSecret "key" $v.secrets.kekKey) }}
{{- if $v.stripe.existingSecret }}
{{ include "frontdoor.secretEnv" (dict "name" "STRIPE_API_KEY" "secret" $v.stripe.existingSecret "key" $v.stripe.apiKeyKey) }}
{{ include "frontdoor.secretEnv" (dict "name" "STRIPE_WEBHOOK_SECRET" "secret" $v.stripe.existingSecret "key" $v.stripe.webhookSecretKey) }}
{{- end }}
{{- include "frontdoor.databaseEnv" .root }}
{{- include "frontdoor.redisEnv" .root }}
{{- if $v.telemetry.otlpEndpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ $v.telemetry.otlpEndpoint | quote }}
{{- end }}
{{- if has .component (include "frontdoor.metricsComponents" .root | fromYamlArray) }}
- name: FRONTDOOR_METRICS_PORT
  value: {{ $v.metrics.port | quote }}
{{- end }}
{{- range $key, $value := $v.config }}
- name: {{ $key }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- with $v.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- with (index $v .component).extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "frontdoor.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.podSecurityContext.runAsUser }}
runAsGroup: {{ .Values.podSecurityContext.runAsGroup }}
fsGroup: {{ .Values.podSecurityContext.fsGroup }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "frontdoor.containerSecurityContext" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Writable paths under a read-only root: /tmp, and FRONTDOOR_DATA_DIR (beat's schedule, the deliverer's heartbeat). */}}
{{- define "frontdoor.volumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
- name: data
  emptyDir:
    sizeLimit: 16Mi
{{- end -}}

{{- define "frontdoor.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
- name: data
  mountPath: /var/lib/frontdoor
{{- end -}}

{{- define "frontdoor.topologySpread" -}}
{{- $t := .root.Values.topologySpread -}}
{{- if $t.enabled }}
topologySpreadConstraints:
  - maxSkew: {{ $t.maxSkew }}
    topologyKey: {{ $t.zoneKey }}
    whenUnsatisfiable: {{ $t.whenUnsatisfiable }}
    labelSelector:
      matchLabels:
        {{- include "frontdoor.selectorLabels" . | nindent 8 }}
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "frontdoor.selectorLabels" . | nindent 8 }}
{{- end }}
{{- end -}}

{{- define "frontdoor.imagePullSecrets" -}}
{{- with .Values.image.pullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ . | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Egress every Frontdoor pod needs: DNS, PostgreSQL (and, unless .noRedis, Redis and OTLP). */}}
{{- define "frontdoor.baseEgress" -}}
{{- $np := .root.Values.networkPolicy -}}
- to:
    {{- toYaml $np.dns.to | nindent 4 }}
  ports:
    - {port: 53, protocol: UDP}
    - {port: 53, protocol: TCP}
- {{- with $np.postgres.to }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  ports:
    {{- range $np.postgres.ports }}
    - {port: {{ . }}, protocol: TCP}
    {{- end }}
{{- if not .noRedis }}
- {{- with $np.redis.to }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  ports:
    {{- range $np.redis.ports }}
    - {port: {{ . }}, protocol: TCP}
    {{- end }}
{{- if .root.Values.telemetry.otlpEndpoint }}
- {{- with $np.otlp.to }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  ports:
    {{- range $np.otlp.ports }}
    - {port: {{ . }}, protocol: TCP}
    {{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* redlimit.name is the chart's name. */}}
{{- define "redlimit.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* redlimit.fullname is the release's name, with the chart's unless it holds it. */}}
{{- define "redlimit.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* redlimit.selectorLabels select the release's pods. */}}
{{- define "redlimit.selectorLabels" -}}
app.kubernetes.io/name: {{ include "redlimit.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* redlimit.labels label every object. */}}
{{- define "redlimit.labels" -}}
{{ include "redlimit.selectorLabels" . }}
app.kubernetes.io/component: rate-limit-service
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* redlimit.redisSecret names the Secret holding the Redis URL. */}}
{{- define "redlimit.redisSecret" -}}
{{- .Values.redis.existingSecret | default (printf "%s-redis" (include "redlimit.fullname" .)) }}
{{- end }}

{{/* redlimit.rulesConfigMap names the ConfigMap of rule files. */}}
{{- define "redlimit.rulesConfigMap" -}}
{{- .Values.existingRulesConfigMap | default (printf "%s-rules" (include "redlimit.fullname" .)) }}
{{- end }}

{{/* redlimit.tlsSecret names the Secret holding the TLS certificate. */}}
{{- define "redlimit.tlsSecret" -}}
{{- .Values.tls.secretName | default (printf "%s-tls" (include "redlimit.fullname" .)) }}
{{- end }}

{{/* redlimit.httpTLS is tls.http as a flag value: YAML 1.1 reads on and off as booleans. */}}
{{- define "redlimit.httpTLS" -}}
{{- if kindIs "bool" .Values.tls.http }}{{ ternary "on" "off" .Values.tls.http }}{{ else }}{{ toString .Values.tls.http }}{{ end }}
{{- end }}

{{/* redlimit.httpsMetrics is true when the HTTP port serves TLS. */}}
{{- define "redlimit.httpsMetrics" -}}
{{- if and .Values.tls.enabled (ne (include "redlimit.httpTLS" .) "off") }}true{{ end }}
{{- end }}

{{/* redlimit.allowedHosts lists the names the HTTP port answers: the Service's, then allowedHosts. */}}
{{- define "redlimit.allowedHosts" -}}
{{- $svc := include "redlimit.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- concat (list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns)) .Values.allowedHosts | join "," }}
{{- end }}

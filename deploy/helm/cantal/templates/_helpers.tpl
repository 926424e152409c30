{{- define "cantal.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "cantal.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "cantal.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cantal.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "cantal.labels" -}}
{{ include "cantal.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The agent.yml the chart writes: its own keys, then .Values.config. */}}
{{- define "cantal.agentConfig" -}}
{{- $c := dict
  "cluster-name" .Values.clusterName
  "peer" (list (printf "%s.%s.svc.%s:%d" (include "cantal.fullname" .) .Release.Namespace .Values.clusterDomain (int .Values.port)))
  "proc" "/host/proc"
  "sys" "/host/sys"
  "state-dir" "/var/lib/cantal"
  "log-format" "json" -}}
{{- if .Values.webConfig.secretName }}{{ $_ := set $c "web-config" (printf "/etc/cantal/web/%s" .Values.webConfig.key) }}{{ end -}}
{{- if .Values.gossipKey.secretName }}{{ $_ := set $c "gossip-key" (printf "/etc/cantal/gossip/%s" .Values.gossipKey.key) }}{{ end -}}
{{- if .Values.writeUsers }}{{ $_ := set $c "write-users" .Values.writeUsers }}{{ end -}}
{{- if .Values.remoteWrite }}{{ $_ := set $c "remote-write-config" "/etc/cantal/remote-write/remote-write.yml" }}{{ end -}}
{{- if not .Values.bpf }}{{ $_ := set $c "no-bpf" true }}{{ end -}}
{{- toYaml (mergeOverwrite $c .Values.config) -}}
{{- end -}}

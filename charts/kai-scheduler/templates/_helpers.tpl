{{/* The image both programs run: <registry>/<name>:<tag>. */}}
{{- define "kai.image" -}}
{{- $tag := .Values.global.tag | default .Chart.AppVersion -}}
{{- if .Values.global.registry -}}
{{ .Values.global.registry }}/{{ .Values.image.name }}:{{ $tag }}
{{- else -}}
{{ .Values.image.name }}:{{ $tag }}
{{- end -}}
{{- end -}}

{{- define "kai.labels" -}}
app.kubernetes.io/part-of: kai-scheduler
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{/* Pod settings both Deployments share: pull secrets, placement, priority. */}}
{{- define "kai.podPlacement" -}}
{{- with .Values.global.imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.global.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.global.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.global.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}

{{/* Non-root, no privilege, seccomp: merged with global.podSecurityContext. */}}
{{- define "kai.podSecurityContext" -}}
{{- $base := dict "runAsNonRoot" true "runAsUser" 10001 "runAsGroup" 10001 "seccompProfile" (dict "type" "RuntimeDefault") -}}
{{- toYaml (mergeOverwrite $base .Values.global.podSecurityContext) -}}
{{- end -}}

{{- define "kai.containerSecurityContext" -}}
{{- $base := dict "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true "capabilities" (dict "drop" (list "ALL")) -}}
{{- toYaml (mergeOverwrite $base .Values.global.securityContext) -}}
{{- end -}}

{{/* Anti-affinity across nodes for a component's replicas unless an affinity is given. */}}
{{- define "kai.affinity" -}}
{{- $given := .affinity | default .global -}}
{{- if $given -}}
{{ toYaml $given }}
{{- else -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels: {app.kubernetes.io/name: {{ .name }}}
{{- end -}}
{{- end -}}

{{/* Namespaces whose pods and PodGroups never go to the webhook. */}}
{{- define "kai.webhookNamespaceSelector" -}}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: [kube-system, {{ .Release.Namespace }}, {{ .Values.global.resourceReservation.namespace }}]
{{- end -}}

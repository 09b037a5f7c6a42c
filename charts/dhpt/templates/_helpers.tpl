{{/* Names, labels and shared pieces of the DHPT chart. */}}

{{- define "dhpt.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "dhpt.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "dhpt.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "dhpt.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Selector labels: immutable once deployed, so only name, instance and component. */}}
{{- define "dhpt.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dhpt.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "dhpt.labels" -}}
{{ include "dhpt.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: dhpt
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "dhpt.image" -}}
{{- $image := .root.Values.image -}}
{{- printf "%s/%s/%s:%s" $image.registry $image.repository .component (default .root.Chart.AppVersion $image.tag) -}}
{{- end -}}

{{- define "dhpt.schedulerAddress" -}}
{{- printf "%s-scheduler:%d" (include "dhpt.fullname" .) (int .Values.scheduler.grpcPort) -}}
{{- end -}}

{{/* The token Secret's name. */}}
{{- define "dhpt.tokenSecret" -}}
{{- .Values.security.token.existingSecret | default (printf "%s-token" (include "dhpt.fullname" .)) -}}
{{- end -}}

{{/* Security flags of a client (worker) container, for .root's values. */}}
{{- define "dhpt.clientSecurityArgs" -}}
{{- $security := .Values.security -}}
{{- if $security.tls.enabled }}
- --tls-ca=/etc/dhpt/tls/ca.crt
{{- with $security.tls.serverName }}
- --tls-server-name={{ . }}
{{- end }}
{{- if $security.tls.mutual }}
- --tls-cert=/etc/dhpt/client-tls/tls.crt
- --tls-key=/etc/dhpt/client-tls/tls.key
{{- end }}
{{- end }}
{{- if $security.token.enabled }}
- --auth-token-file=/etc/dhpt/token/worker-token
{{- end }}
{{- end -}}

{{/* The mounts and volumes those flags read: "mounts" or "volumes" as .part. */}}
{{- define "dhpt.securityVolumes" -}}
{{- $security := .root.Values.security -}}
{{- $client := eq .component "worker" -}}
{{- if eq .part "mounts" }}
{{- if $security.tls.enabled }}
- {name: tls, mountPath: /etc/dhpt/tls, readOnly: true}
{{- if and $client $security.tls.mutual }}
- {name: client-tls, mountPath: /etc/dhpt/client-tls, readOnly: true}
{{- end }}
{{- end }}
{{- if $security.token.enabled }}
- {name: token, mountPath: /etc/dhpt/token, readOnly: true}
{{- end }}
{{- else }}
{{- if $security.tls.enabled }}
- name: tls
  secret: {secretName: {{ $security.tls.secretName }}, defaultMode: 0440}
{{- if and $client $security.tls.mutual }}
- name: client-tls
  secret: {secretName: {{ $security.tls.clientSecretName | default $security.tls.secretName }}, defaultMode: 0440}
{{- end }}
{{- end }}
{{- if $security.token.enabled }}
- name: token
  secret:
    secretName: {{ include "dhpt.tokenSecret" .root }}
    defaultMode: 0440
    {{- if $client }}
    # Workers get their own token only: a worker pod never holds the users' token.
    items: [{key: worker-token, path: worker-token}]
    {{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "dhpt.scrapeAnnotations" -}}
{{- if .root.Values.metrics.podAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end -}}

{{/* A worker's commands file (--commands-file), from .values.commands. */}}
{{- define "dhpt.workerCommands" -}}
{{- $commands := list }}
{{- range .values.commands }}
{{- $entry := dict "name" .name "command" .command }}
{{- with .env }}
{{- $_ := set $entry "env" . }}
{{- end }}
{{- if hasKey . "gracePeriodSeconds" }}
{{- $_ := set $entry "grace_period_seconds" .gracePeriodSeconds }}
{{- end }}
{{- $commands = append $commands $entry }}
{{- end }}
{{- toYaml $commands }}
{{- end -}}

{{/* The ConfigMap of a worker's commands, when it has any. */}}
{{- define "dhpt.workerCommandsConfigMap" -}}
{{- if .values.commands }}
{{- $component := printf "%s-worker" .kind }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "dhpt.fullname" .root }}-{{ $component }}-commands
  labels:
    {{- include "dhpt.labels" (dict "root" .root "component" $component) | nindent 4 }}
data:
  commands.yaml: |
    {{- include "dhpt.workerCommands" . | nindent 4 }}
{{- end }}
{{- end -}}

{{/* A worker Deployment; .kind is "cpu" or "gpu", .values its section of the values. */}}
{{- define "dhpt.workerDeployment" -}}
{{- $root := .root -}}
{{- $values := .values -}}
{{- $component := printf "%s-worker" .kind -}}
{{- $context := dict "root" $root "component" $component -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "dhpt.fullname" $root }}-{{ $component }}
  labels:
    {{- include "dhpt.labels" $context | nindent 4 }}
spec:
  replicas: {{ $values.replicas }}
  selector:
    matchLabels:
      {{- include "dhpt.selectorLabels" $context | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "dhpt.labels" $context | nindent 8 }}
      {{- $annotations := merge (dict) $values.podAnnotations (include "dhpt.scrapeAnnotations" (dict "root" $root "port" $values.metricsPort) | fromYaml) }}
      {{- if $values.commands }}
      {{- /* Workers read their commands at start: a changed list rolls the pods. */}}
      {{- $_ := set $annotations "checksum/commands" (include "dhpt.workerCommands" . | sha256sum) }}
      {{- end }}
      {{- with $annotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if and (eq .kind "gpu") $values.runtimeClassName }}
      runtimeClassName: {{ $values.runtimeClassName }}
      {{- end }}
      automountServiceAccountToken: false
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      {{- with $values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- $affinity := deepCopy $values.affinity }}
      {{- $gpuTerm := dict "key" $root.Values.gpuNodeLabel.key "operator" "In" "values" $root.Values.gpuNodeLabel.values }}
      {{- if eq .kind "gpu" }}
      {{- /* GPU workers must sit on GPU boards: required node affinity, merged with the user's. */}}
      {{- $node := get $affinity "nodeAffinity" | default (dict) }}
      {{- $required := get $node "requiredDuringSchedulingIgnoredDuringExecution" | default (dict "nodeSelectorTerms" (list (dict "matchExpressions" (list)))) }}
      {{- $terms := list }}
      {{- range $term := $required.nodeSelectorTerms }}
      {{- $terms = append $terms (set (deepCopy $term) "matchExpressions" (append (default (list) $term.matchExpressions) $gpuTerm)) }}
      {{- end }}
      {{- $_ := set $node "requiredDuringSchedulingIgnoredDuringExecution" (dict "nodeSelectorTerms" $terms) }}
      {{- $_ := set $affinity "nodeAffinity" $node }}
      {{- else if ne $values.gpuNodes "none" }}
      {{- $avoid := dict "key" $root.Values.gpuNodeLabel.key "operator" "NotIn" "values" $root.Values.gpuNodeLabel.values }}
      {{- $node := get $affinity "nodeAffinity" | default (dict) }}
      {{- if eq $values.gpuNodes "required" }}
      {{- $_ := set $node "requiredDuringSchedulingIgnoredDuringExecution" (dict "nodeSelectorTerms" (list (dict "matchExpressions" (list $avoid)))) }}
      {{- else }}
      {{- $preferred := get $node "preferredDuringSchedulingIgnoredDuringExecution" | default (list) }}
      {{- $_ := set $node "preferredDuringSchedulingIgnoredDuringExecution" (append $preferred (dict "weight" 100 "preference" (dict "matchExpressions" (list $avoid)))) }}
      {{- end }}
      {{- $_ := set $affinity "nodeAffinity" $node }}
      {{- end }}
      {{- with $affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: worker
          image: {{ include "dhpt.image" $context }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args:
            - --scheduler={{ include "dhpt.schedulerAddress" $root }}
            - --slots={{ $values.slots }}
            - --threads-per-trial={{ $values.threadsPerTrial }}
            - --metrics-port={{ $values.metricsPort }}
            - --keepalive-time={{ $root.Values.network.keepaliveTime }}
            - --keepalive-timeout={{ $root.Values.network.keepaliveTimeout }}
            - --max-reconnect-backoff={{ $root.Values.network.maxReconnectBackoff }}
            {{- with $values.labels }}
            {{- $labels := . }}
            {{- $pairs := list }}
            {{- range $key := keys $labels | sortAlpha }}
            {{- $pairs = append $pairs (printf "%s=%s" $key (get $labels $key)) }}
            {{- end }}
            - {{ printf "--labels=%s" (join "," $pairs) | quote }}
            {{- end }}
            {{- if eq .kind "gpu" }}
            - --device={{ $values.device }}
            {{- if $values.requireGpu }}
            - --require-gpu
            {{- end }}
            {{- if $values.runCpuModels }}
            - --run-cpu-models
            {{- end }}
            {{- end }}
            {{- include "dhpt.clientSecurityArgs" $root | nindent 12 }}
            {{- if $root.Values.data.volume }}
            - --data-root={{ $root.Values.data.mountPath }}
            {{- end }}
            {{- if $values.commands }}
            - --commands-file=/etc/dhpt/commands/commands.yaml
            {{- end }}
            {{- range $values.extraArgs }}
            - {{ . | quote }}
            {{- end }}
          env:
            # The worker id is the pod's name (stable across reconnects of the pod) and the
            # node its node, for placement and the dashboards.
            - name: DHPT_WORKER_ID
              valueFrom: {fieldRef: {fieldPath: metadata.name}}
            - name: NODE_NAME
              valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
          ports:
            - name: metrics
              containerPort: {{ $values.metricsPort }}
              protocol: TCP
          startupProbe:
            httpGet: {path: /metrics, port: metrics}
            {{- toYaml $root.Values.probes.startup | nindent 12 }}
          livenessProbe:
            httpGet: {path: /metrics, port: metrics}
            {{- toYaml $root.Values.probes.liveness | nindent 12 }}
          securityContext:
            {{- toYaml $root.Values.containerSecurityContext | nindent 12 }}
          resources:
            {{- $resources := deepCopy $values.resources }}
            {{- if and (eq .kind "gpu") $values.gpuResource.enabled }}
            {{- $limits := get $resources "limits" | default (dict) }}
            {{- $_ := set $limits $values.gpuResource.name $values.gpuResource.count }}
            {{- $_ := set $resources "limits" $limits }}
            {{- end }}
            {{- toYaml $resources | nindent 12 }}
          volumeMounts:
            - {name: tmp, mountPath: /tmp}
            {{- if $root.Values.data.volume }}
            - {name: data, mountPath: {{ $root.Values.data.mountPath }}, readOnly: true}
            {{- end }}
            {{- if $values.commands }}
            - {name: commands, mountPath: /etc/dhpt/commands, readOnly: true}
            {{- end }}
            {{- include "dhpt.securityVolumes" (dict "root" $root "component" "worker" "part" "mounts") | nindent 12 }}
            {{- with $values.extraVolumeMounts }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
      volumes:
        - name: tmp
          emptyDir: {}
        {{- with $root.Values.data.volume }}
        - name: data
          {{- toYaml . | nindent 10 }}
        {{- end }}
        {{- if $values.commands }}
        - name: commands
          configMap: {name: {{ include "dhpt.fullname" $root }}-{{ $component }}-commands}
        {{- end }}
        {{- include "dhpt.securityVolumes" (dict "root" $root "component" "worker" "part" "volumes") | nindent 8 }}
        {{- with $values.extraVolumes }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
{{- end -}}

{{/*
A Kubernetes memory quantity ("512Mi", "2G", "268435456") in bytes: the scheduler's
--max-memory-bytes, so the cap it refuses new work under is the limit the kubelet enforces.
*/}}
{{- define "dhpt.memoryBytes" -}}
{{- $quantity := toString . -}}
{{- $number := regexFind "^[0-9]+" $quantity -}}
{{- $suffix := trimPrefix $number $quantity -}}
{{- $units := dict "" 1 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 -}}
{{- if or (not $number) (not (hasKey $units $suffix)) -}}
{{- fail (printf "scheduler.resources.limits.memory: %q is not a memory quantity the chart can pass to --max-memory-bytes; write a whole number with k, M, G, T, Ki, Mi, Gi or Ti (e.g. 512Mi)" $quantity) -}}
{{- end -}}
{{- mul (atoi $number) (get $units $suffix) -}}
{{- end -}}

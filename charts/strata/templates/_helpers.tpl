{{- define "strata.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "strata.operatorName" -}}
{{- printf "%s-operator" (include "strata.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "strata.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/part-of: strata
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "strata.selectorLabels" -}}
app.kubernetes.io/name: strata-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "strata.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "strata.operatorName" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "strata.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "strata.platformSecretName" -}}
{{- /* Not "strata-platform": the operator writes that name into every namespace with Buckets, the release's too. */ -}}
{{- default (printf "%s-operator-platform" (include "strata.fullname" .)) .Values.platform.existingSecret -}}
{{- end -}}

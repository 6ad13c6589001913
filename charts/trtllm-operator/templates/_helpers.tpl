{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "trtllm-operator.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: release name, plus the chart name unless the release already contains it. */}}
{{- define "trtllm-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
Name of the chart's cluster-scoped objects (ClusterRoles, ClusterRoleBindings): the release's namespace,
then the full name. Release names are unique per namespace only (helm install in another namespace
reuses them), and cluster-scoped names are shared by the whole cluster, so without the namespace a
second release of the same name would collide with the first's objects. No truncation: an RBAC object's
name is a path segment name (kubernetes pkg/apis/rbac/validation ValidateRBACName), not a 63-character
label, and a namespace (63) + full name (63) stays far below the 253 an object name may have.
*/}}
{{- define "trtllm-operator.clusterScopedName" -}}
{{- printf "%s-%s" .Release.Namespace (include "trtllm-operator.fullname" .) -}}
{{- end -}}

{{- define "trtllm-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "trtllm-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "trtllm-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "trtllm-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "trtllm-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "trtllm-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The subjects of every RoleBinding and ClusterRoleBinding of the chart: the operator's ServiceAccount. */}}
{{- define "trtllm-operator.subjects" -}}
- kind: ServiceAccount
  name: {{ include "trtllm-operator.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end -}}

{{/*
Where the operator's pod mounts the Secret metrics.certSecret (and TRTLLM_OPERATOR_METRICS_CERT_DIR
names), or "" when nothing is mounted: only a secure metrics endpoint (metrics.secure) with a
certSecret uses it.
*/}}
{{- define "trtllm-operator.metricsCertDir" -}}
{{- if and .Values.metrics.secure .Values.metrics.certSecret -}}
/etc/trtllm-operator/metrics-tls
{{- end -}}
{{- end -}}

{{- define "trtllm-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
The namespaces the operator watches, as a JSON list (use with fromJsonArray): watchNamespaces, or the
release's own namespace when that list is empty; [] = cluster-wide, only with clusterWide: true (an
opt-in: a ClusterRole over every namespace's Jobs, ConfigMaps and Secrets get/create).
*/}}
{{- define "trtllm-operator.watchNamespaces" -}}
{{- if .Values.clusterWide -}}
{{- if .Values.watchNamespaces -}}
{{- fail "clusterWide: true watches every namespace; leave watchNamespaces empty (or set clusterWide: false)" -}}
{{- end -}}
[]
{{- else -}}
{{- default (list .Release.Namespace) .Values.watchNamespaces | toJson -}}
{{- end -}}
{{- end -}}

{{/* Cluster-scoped rules kopf needs in both watch modes. */}}
{{- define "trtllm-operator.clusterRules" -}}
# kopf discovers the resources it serves.
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["get", "list", "watch"]
# Both controllers read the GPU count of nodes with the engine's GPU product (label
# nvidia.com/gpu.product): the LLMEngine controller to size and check the builder pod and the plan's
# one-node rule, the LLMDeployment controller to choose single-node or multi-node serving. Read-only:
# kept from a watch (a kopf index, handlers/indexes.py) instead of a list per reconcile.
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["list", "watch"]
# mode hpa: whether the custom metrics API its HPA reads (APIServices v1beta2/v1beta1
# .custom.metrics.k8s.io, registered by prometheus-adapter) exists and is Available, kept from a watch
# of those two APIServices (a kopf index) instead of a read per resync; the condition says when not.
- apiGroups: ["apiregistration.k8s.io"]
  resources: ["apiservices"]
  verbs: ["list", "watch"]
# kopf peering, used only with replicaCount > 1.
- apiGroups: ["kopf.dev"]
  resources: ["clusterkopfpeerings"]
  verbs: ["get", "list", "watch", "patch"]
{{- if .Values.metrics.auth }}
# Authenticated /metrics (metrics.auth): a scraper's token is checked with a TokenReview and its user
# with a SubjectAccessReview (controller-runtime pkg/metrics/filters, WithAuthenticationAndAuthorization).
- apiGroups: ["authentication.k8s.io"]
  resources: ["tokenreviews"]
  verbs: ["create"]
- apiGroups: ["authorization.k8s.io"]
  resources: ["subjectaccessreviews"]
  verbs: ["create"]
{{- end }}
{{- end -}}

{{/* Namespaced rules: exactly what the operator uses. */}}
{{- define "trtllm-operator.rules" -}}
# The operator's own resources.
- apiGroups: ["llm.trtllm-operator.dev"]
  resources: ["llmengines", "llmdeployments"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["llm.trtllm-operator.dev"]
  resources: ["llmengines/status", "llmdeployments/status"]
  verbs: ["get", "patch"]
# The built-in autoscaler changes replicas only through the scale subresource.
- apiGroups: ["llm.trtllm-operator.dev"]
  resources: ["llmdeployments/scale"]
  verbs: ["get", "patch"]
# Builder Jobs (and benchmark Jobs); deleted by garbage collection through ownerReferences, and by
# the operator only to replace a builder Job it controls whose pod was never scheduled, when
# spec.gpu.resources changed (a Job's pod template is immutable), or to stop a running build of a key
# no LLMEngine wants any more; patched to join a build (ownerReferences) and to give a recorded
# build its ttlSecondsAfterFinished.
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# Builder and serving pods: read their state (scheduling, termination messages) from lists and a
# watch; no single-pod get.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch"]
# Build progress: the last lines of the running builder pod's log (the builder has no token).
- apiGroups: [""]
  resources: ["pods/log"]
  verbs: ["get"]
# Build specs, rendered Triton configs, engine-cache index entries. Written by create and merge
# patch only (the client never PUTs, kube/client.py); deleted: a rendered model-repository
# ConfigMap no pod template uses any more.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# Artifact volumes the operator creates. Never deleted by the operator: with reclaimPolicy Delete
# the LLMEngine's ownerReference (patched to follow the current policy) lets the garbage collector
# delete it, and only while nothing else uses it. Patched too to grow its storage request to a
# raised spec.storage.createPVC.size (PVC expansion).
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "create", "patch"]
# Secrets an LLMEngine references: the operator reads their metadata (PartialObjectMetadata) to
# check the opt-in label llm.trtllm-operator.dev/usable-by-llm-resources, and the value only of an
# opted-in spec.model.credentialsSecretRef, to fetch the model's config.json for the capacity plan
# (settings.hfConfigFetch). create: each LLMDeployment's own <name>-credentials (Triton's admin
# header value, the multi-node SSH key), created once when its metadata GET says absent, immutable,
# removed by garbage collection. Never lists, watches, patches, updates or deletes Secrets
# (docs/security.md).
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "create"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "list", "watch", "create", "patch"]
# Each LLMDeployment's NetworkPolicy <name>; deleted by the operator only when
# servingNetworkPolicy.enabled is false (its own child), otherwise by garbage collection; read from
# the operator's watch cache of the ones it labelled (list, watch: handlers/indexes.py).
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# Serving workloads: a Deployment (single node) or a LeaderWorkerSet (multi-node). When an engine
# change switches between the two, the controller deletes the one it no longer uses (its own child).
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# Rollout progress: pods per engine key are counted through the Deployment's ReplicaSets.
- apiGroups: ["apps"]
  resources: ["replicasets"]
  verbs: ["list"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "watch", "create", "patch"]
- apiGroups: ["leaderworkerset.x-k8s.io"]
  resources: ["leaderworkersets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["autoscaling"]
  resources: ["horizontalpodautoscalers"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["keda.sh"]
  resources: ["scaledobjects"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["inference.networking.k8s.io"]
  resources: ["inferencepools"]
  verbs: ["get", "create", "patch", "delete"]
# The operator's Events and kopf's (kopf 1.45 _cogs/clients/events.py post_event: a POST to core/v1
# events); never patched.
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
# Events about the PVCs a builder mounts (core/v1, field selector involvedObject.name): read only
# while the builder pod is unschedulable, so the LLMEngine says why a claim is Pending.
- apiGroups: [""]
  resources: ["events"]
  verbs: ["list"]
{{- end -}}

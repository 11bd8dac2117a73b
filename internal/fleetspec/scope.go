package fleetspec

import (
	"slices"
	"strings"
)

// SystemNamespaces are the regional namespaces the agent never creates, writes or deletes in,
// whatever the shard says (the namespace scope). ProtectedNamespaces adds the agent's own
// namespace and shard.excludedNamespaces.
var SystemNamespaces = []string{"default", "kube-node-lease", "kube-public", "kube-system"}

// ProtectedNamespaces lists, sorted and without duplicates, SystemNamespaces, the fleet's own
// namespace (where the agent runs; empty: none) and the excluded namespaces.
func ProtectedNamespaces(fleetNamespace string, excluded []string) []string {
	out := slices.Clone(SystemNamespaces)
	if fleetNamespace != "" {
		out = append(out, fleetNamespace)
	}
	out = append(out, excluded...)
	slices.Sort(out)
	return slices.Compact(out)
}

// deniedKinds can never be synced: they are cluster-scoped.
var deniedKinds = []string{"Namespace", "Node"} // core group

// IsSecret reports whether group and kind name the core Secret kind. A Secret carries credentials
// itself: it is synced only by namespace fan-out (fanOut.enabled) and only with allowPrivileged,
// never as an ordinary copy (ValidateResources).
func IsSecret(group, kind string) bool {
	return group == "" && kind == "Secret"
}

// PrivilegedKinds maps an API group ("" = core) to the kinds of it that grant privileges in the
// region: RBAC objects, ServiceAccounts, admission configuration, API extensions, priority
// classes and the known cluster-scoped kinds. Syncing one needs allowPrivileged: whoever may
// write it on management holds what it grants in the region. Validation has no cluster access,
// so cluster-scoped custom kinds are not in this list.
var PrivilegedKinds = map[string][]string{
	"":                             {"ComponentStatus", "PersistentVolume", "ServiceAccount"},
	"rbac.authorization.k8s.io":    {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"},
	"admissionregistration.k8s.io": {"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding", "MutatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ValidatingWebhookConfiguration"},
	"apiextensions.k8s.io":         {"CustomResourceDefinition"},
	"apiregistration.k8s.io":       {"APIService"},
	"scheduling.k8s.io":            {"PriorityClass"},
	"storage.k8s.io":               {"CSIDriver", "CSINode", "StorageClass", "VolumeAttachment", "VolumeAttributesClass"},
	"networking.k8s.io":            {"IPAddress", "IngressClass", "ServiceCIDR"},
	"node.k8s.io":                  {"RuntimeClass"},
	"certificates.k8s.io":          {"CertificateSigningRequest", "ClusterTrustBundle"},
	"flowcontrol.apiserver.k8s.io": {"FlowSchema", "PriorityLevelConfiguration"},
	"resource.k8s.io":              {"DeviceClass", "ResourceSlice"},
	"storagemigration.k8s.io":      {"StorageVersionMigration"},
	"internal.apiserver.k8s.io":    {"StorageVersion"},
}

// IsPrivileged reports whether kind in group is one of PrivilegedKinds.
func IsPrivileged(group, kind string) bool {
	return slices.Contains(PrivilegedKinds[strings.ToLower(group)], kind)
}

// IsDenied reports whether group and kind name a core kind that can never be synced (it is
// cluster-scoped).
func IsDenied(group, kind string) bool {
	return group == "" && slices.Contains(deniedKinds, kind)
}

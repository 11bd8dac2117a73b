package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/shard/claim"
	"github.com/regionsync/regionsync/test/framework/agentconfig"
)

const regionsDir = "../../../deploy/regions"

func regions(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(regionsDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	if len(out) < 3 {
		t.Fatalf("expected at least 3 regions, found %v", out)
	}
	return out
}

func nested(o *unstructured.Unstructured, fields ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(o.Object, fields...)
	return v
}

// Every region's agent overlay renders with its own region, an image, 2+ replicas, the
// management kubeconfig Secret, and a locked-down security context.
func TestAgentOverlays(t *testing.T) {
	for _, region := range regions(t) {
		t.Run(region, func(t *testing.T) {
			objs, err := Render(filepath.Join(regionsDir, region, "agent"))
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				if o.GetKind() != "Namespace" && !strings.HasPrefix(o.GetKind(), "Cluster") && o.GetNamespace() != "regionsync-system" {
					t.Errorf("%s %s is in namespace %q", o.GetKind(), o.GetName(), o.GetNamespace())
				}
			}
			cfg, err := AgentConfig(objs)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Region != region {
				t.Errorf("config region %q in directory %s", cfg.Region, region)
			}
			if !cfg.Telemetry.SecureMetrics {
				t.Error("metrics not served securely")
			}
			// Management users choose namespace names: the prefix keeps them in the space the
			// region gave them; the selector caches only this region's objects, the ones
			// management's admission policy lets this region write.
			if cfg.Shard.NamespacePrefix == "" {
				t.Error("no shard.namespacePrefix")
			}
			if want := regionsyncv1alpha1.RegionLabel + "=" + region; cfg.Shard.LabelSelector != want {
				t.Errorf("shard.labelSelector %q, want %q", cfg.Shard.LabelSelector, want)
			}
			eff := agentconfig.Effective(cfg) // the overlay's values as the agent runs them, defaults included
			for i, r := range eff.Resources {
				if r.Adoption != fleetspec.AdoptionRefuse || r.AllowPrivileged {
					t.Errorf("resource %s: adoption %s, allowPrivileged %v", cfg.Resources[i].Kind, r.Adoption, r.AllowPrivileged)
				}
			}
			d := Find(objs, "Deployment", "regionsync-agent")
			if d == nil {
				t.Fatal("no Deployment")
			}
			if r, err := strconv.Atoi(fmt.Sprint(nested(d, "spec", "replicas"))); err != nil || r < 2 {
				t.Errorf("replicas %v", nested(d, "spec", "replicas"))
			}
			if l, _ := nested(d, "spec", "template", "metadata", "labels").(map[string]any); l["regionsync.dev/region"] != region {
				t.Errorf("pod labels %v lack regionsync.dev/region=%s", l, region)
			}
			pod := nested(d, "spec", "template", "spec").(map[string]any)
			if psc := pod["securityContext"].(map[string]any); psc["runAsNonRoot"] != true {
				t.Errorf("pod securityContext %v", psc)
			}
			c := pod["containers"].([]any)[0].(map[string]any)
			if img, _ := c["image"].(string); !strings.Contains(img, "/") || !strings.Contains(img, ":") {
				t.Errorf("image %q not set by the overlay", img)
			}
			sc := c["securityContext"].(map[string]any)
			if sc["readOnlyRootFilesystem"] != true || sc["allowPrivilegeEscalation"] != false ||
				!slices.Contains(sc["capabilities"].(map[string]any)["drop"].([]any), any("ALL")) {
				t.Errorf("container securityContext %v", sc)
			}
			if c["livenessProbe"] == nil || c["readinessProbe"] == nil {
				t.Error("probes missing")
			}
			var secret string
			for _, v := range pod["volumes"].([]any) {
				if s, ok := v.(map[string]any)["secret"].(map[string]any); ok {
					secret, _ = s["secretName"].(string)
				}
			}
			if secret != "regionsync-management-kubeconfig" {
				t.Errorf("management kubeconfig Secret %q", secret)
			}
			// The agent renews its credential into the Secret it is mounted from, and may get and
			// update that one Secret only.
			if cr := eff.Management.CredentialRenewal; cr == nil || cr.Secret.Name != secret || cr.Secret.Namespace != "regionsync-system" {
				t.Errorf("credential renewal %+v, want on, into Secret regionsync-system/%s", cr, secret)
			}
			var secretRules []string
			for _, kind := range []string{"Role", "ClusterRole"} {
				for _, o := range objs {
					if o.GetKind() != kind {
						continue
					}
					for _, r := range nested(o, "rules").([]any) {
						rule := r.(map[string]any)
						if res, _ := rule["resources"].([]any); slices.Contains(res, any("secrets")) {
							secretRules = append(secretRules, fmt.Sprintf("%s %s: %v %v", kind, o.GetName(), rule["resourceNames"], rule["verbs"]))
						}
					}
				}
			}
			if want := []string{
				"Role regionsync-agent-leader-election: [regionsync-management-kubeconfig] [get update]",
				"ClusterRole regionsync-agent: [tenant-token] [get list watch]",
			}; !slices.Equal(secretRules, want) {
				t.Errorf("Secret rules %q, want %q", secretRules, want)
			}
			for _, kind := range []string{"PodDisruptionBudget", "Service", "ServiceAccount", "ClusterRole", "Role"} {
				if Find(objs, kind, "") == nil {
					t.Errorf("no %s", kind)
				}
			}
		})
	}
}

// Every region's management registration names the region, its identity, and only its own
// secrets, Region and Lease.
func TestManagementOverlays(t *testing.T) {
	for _, region := range regions(t) {
		t.Run(region, func(t *testing.T) {
			objs, err := Render(filepath.Join(regionsDir, region, "management"))
			if err != nil {
				t.Fatal(err)
			}
			agentObjs, err := Render(filepath.Join(regionsDir, region, "agent"))
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := AgentConfig(agentObjs)
			if err != nil {
				t.Fatal(err)
			}
			regionObj := Find(objs, "Region", region)
			if regionObj == nil {
				t.Fatal("no Region object")
			}
			// The registered shard (what the hub places by) is the agent's own.
			var registered regionsyncv1alpha1.Region
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(regionObj.Object, &registered); err != nil {
				t.Fatal(err)
			}
			if registered.Spec.Shard == nil {
				t.Error("the Region registers no spec.shard")
			}
			kinds := make([]schema.GroupVersionKind, 0, len(cfg.Resources))
			for _, r := range cfg.Resources {
				kinds = append(kinds, r.GroupVersionKind())
			}
			if err := shard.CheckRegistered(agentconfig.Effective(cfg).AnnotationDomain, cfg.Shard, kinds, registered.Spec.Shard); err != nil {
				t.Error(err)
			}
			if Find(objs, "ServiceAccount", "region-"+region) == nil {
				t.Error("no region identity")
			}
			own := Find(objs, "ClusterRole", "regionsync-region-"+region)
			if own == nil {
				t.Fatal("no name-scoped ClusterRole")
			}
			names := map[string][]any{}
			for _, r := range nested(own, "rules").([]any) {
				rule := r.(map[string]any)
				names[rule["resources"].([]any)[0].(string)] = rule["resourceNames"].([]any)
			}
			if got := names["secrets"]; len(got) != 1 || got[0] != "tenant-token"+cfg.Shard.RemoteResourceSuffix {
				t.Errorf("secret names %v, want tenant-token%s", got, cfg.Shard.RemoteResourceSuffix)
			}
			if got := names["regions/status"]; len(got) != 1 || got[0] != region {
				t.Errorf("region status names %v", got)
			}
			// Its credential's renewal: tokens of its own ServiceAccount only, in its namespace.
			token := Find(objs, "Role", "regionsync-region-"+region+"-token")
			if token == nil || token.GetNamespace() != "regionsync-system" ||
				fmt.Sprint(nested(token, "rules")) != fmt.Sprintf("[map[apiGroups:[] resourceNames:[region-%s] resources:[serviceaccounts/token] verbs:[create]]]", region) {
				t.Errorf("token role %v", token)
			}
			if b := Find(objs, "RoleBinding", "regionsync-region-"+region+"-token"); b == nil ||
				fmt.Sprint(nested(b, "subjects")) != fmt.Sprintf("[map[kind:ServiceAccount name:region-%s namespace:regionsync-system]]", region) {
				t.Errorf("token role binding %v", b)
			}
			lease := Find(objs, "Role", "regionsync-region-"+region+"-lease")
			if lease == nil || nested(lease, "rules").([]any)[0].(map[string]any)["resourceNames"].([]any)[0] != claim.LeaseName(region) {
				t.Errorf("lease role %v", lease)
			}
		})
	}
}

// The management base installs the Region CRD, the shared role, and the one admission policy
// (bound, denying) that covers every kind the shared role lets regions write.
func TestManagementBase(t *testing.T) {
	objs, err := Render("../../../deploy/kustomize/management")
	if err != nil {
		t.Fatal(err)
	}
	role := Find(objs, "ClusterRole", "regionsync-region")
	if Find(objs, "CustomResourceDefinition", "regions.regionsync.dev") == nil || role == nil {
		t.Fatal("management base incomplete")
	}
	if Find(objs, "CustomResourceDefinition", "tenants.demo.regionsync.dev") != nil {
		t.Fatal("the demo CRD must not be part of the management base")
	}
	policy := Find(objs, "ValidatingAdmissionPolicy", IsolationPolicy)
	binding := Find(objs, "ValidatingAdmissionPolicyBinding", IsolationPolicy)
	if policy == nil || binding == nil {
		t.Fatalf("no admission policy %s with its binding", IsolationPolicy)
	}
	if policy.GetAPIVersion() != "admissionregistration.k8s.io/v1" {
		t.Errorf("policy apiVersion %s", policy.GetAPIVersion())
	}
	if nested(policy, "spec", "failurePolicy") != "Fail" {
		t.Errorf("failurePolicy %v, want Fail", nested(policy, "spec", "failurePolicy"))
	}
	if nested(binding, "spec", "policyName") != IsolationPolicy || !slices.Equal(nested(binding, "spec", "validationActions").([]any), []any{"Deny"}) {
		t.Errorf("binding %v", nested(binding, "spec"))
	}
	if nested(binding, "spec", "paramRef") != nil || nested(binding, "spec", "matchResources") != nil {
		t.Errorf("the binding must apply to every region, unparameterized: %v", nested(binding, "spec"))
	}
	matched := map[string]bool{}
	for _, r := range nested(policy, "spec", "matchConstraints", "resourceRules").([]any) {
		rule := r.(map[string]any)
		if !slices.Contains(rule["operations"].([]any), any("UPDATE")) {
			t.Errorf("rule %v does not match updates", rule)
		}
		for _, g := range rule["apiGroups"].([]any) {
			for _, res := range rule["resources"].([]any) {
				matched[g.(string)+"/"+res.(string)] = true
			}
		}
	}
	// Every resource the shared role lets a region write is under the policy.
	for _, r := range nested(role, "rules").([]any) {
		rule := r.(map[string]any)
		writes := slices.ContainsFunc(rule["verbs"].([]any), func(v any) bool { return v == "update" || v == "patch" || v == "create" })
		for _, g := range rule["apiGroups"].([]any) {
			for _, res := range rule["resources"].([]any) {
				if writes && !matched[g.(string)+"/"+res.(string)] {
					t.Errorf("%s/%s is writable by every region but not under the admission policy", g, res)
				}
			}
		}
	}
	// Events in both APIs that serve them: RBAC cannot tell a region's Events from others'.
	for _, gr := range []string{"coordination.k8s.io/leases", "regionsync.dev/regions", "regionsync.dev/regions/status", "demo.regionsync.dev/tenants/status",
		"/events", "events.k8s.io/events"} {
		if !matched[gr] {
			t.Errorf("%s not under the admission policy", gr)
		}
	}
	if mc := nested(policy, "spec", "matchConditions").([]any); len(mc) != 1 ||
		!strings.Contains(mc[0].(map[string]any)["expression"].(string), "'"+RegionUserPrefix+"'") {
		t.Errorf("matchConditions %v do not select the region identities (%s<region>)", mc, RegionUserPrefix)
	}
}

// The hub's base: 2 replicas as a non-root, read-only container under its own identity, with a
// configuration the hub accepts, and RBAC that reads no Secret and writes no Region but its status.
func TestHubBase(t *testing.T) {
	objs, err := Render("../../../deploy/kustomize/hub")
	if err != nil {
		t.Fatal(err)
	}
	dep := Find(objs, "Deployment", "regionsync-hub")
	if dep == nil || Find(objs, "ServiceAccount", "regionsync-hub") == nil {
		t.Fatal("hub base incomplete")
	}
	if r := nested(dep, "spec", "replicas"); r != int64(2) {
		t.Errorf("replicas %v, want 2", r)
	}
	if nested(dep, "spec", "template", "spec", "serviceAccountName") != "regionsync-hub" ||
		nested(dep, "spec", "template", "spec", "securityContext", "runAsNonRoot") != true {
		t.Errorf("pod spec %v", nested(dep, "spec", "template", "spec"))
	}
	c := nested(dep, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)
	sc := c["securityContext"].(map[string]any)
	if sc["readOnlyRootFilesystem"] != true || sc["allowPrivilegeEscalation"] != false {
		t.Errorf("container securityContext %v", sc)
	}
	var cfgData string
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), "regionsync-hub-config") {
			cfgData, _, _ = unstructured.NestedString(o.Object, "data", "config.yaml")
		}
	}
	if _, err := hub.ParseConfig([]byte(cfgData)); err != nil {
		t.Errorf("the shipped hub configuration: %v", err)
	}
	role := Find(objs, "ClusterRole", "regionsync-hub")
	for _, r := range nested(role, "rules").([]any) {
		rule := r.(map[string]any)
		for _, res := range rule["resources"].([]any) {
			if res == "secrets" || res == "*" {
				t.Errorf("the hub may touch %v: %v", res, rule)
			}
			writes := slices.ContainsFunc(rule["verbs"].([]any), func(v any) bool { return v != "get" && v != "list" && v != "watch" })
			if res == "regions" && writes {
				t.Errorf("the hub may write Regions: %v", rule)
			}
			// Per-region objects are written as the Distribution's ServiceAccount, never as the
			// hub; the reviews are the secure metrics endpoint's checks of its scrapers (create only).
			review := (res == "tokenreviews" || res == "subjectaccessreviews") && fmt.Sprint(rule["verbs"]) == fmt.Sprint([]any{"create"})
			if g := rule["apiGroups"].([]any); !slices.Contains(g, any("regionsync.dev")) && !slices.Contains(g, any("events.k8s.io")) && writes && !review {
				t.Errorf("the hub may write %v itself: %v", res, rule)
			}
			if slices.Contains(rule["verbs"].([]any), any("impersonate")) || slices.Contains(rule["verbs"].([]any), any("*")) {
				t.Errorf("the hub may impersonate cluster-wide: %v", rule)
			}
		}
	}
	// The shrink guard's memory is the one ConfigMap the hub updates, in its own namespace.
	guardMemory := false
	for _, r := range nested(Find(objs, "Role", "regionsync-hub-leases"), "rules").([]any) {
		rule := r.(map[string]any)
		if !slices.Contains(rule["resources"].([]any), any("configmaps")) {
			continue
		}
		if slices.Contains(rule["verbs"].([]any), any("update")) {
			guardMemory = fmt.Sprint(rule["resourceNames"]) == fmt.Sprint([]any{hub.GuardConfigMapName})
			if !guardMemory {
				t.Errorf("the hub may update ConfigMaps other than %s: %v", hub.GuardConfigMapName, rule)
			}
		}
	}
	if !guardMemory {
		t.Errorf("the hub may not write its shrink guard's memory (ConfigMap %s)", hub.GuardConfigMapName)
	}
	// Impersonation is a ClusterRole bound per tenant namespace by the operator, never cluster-wide.
	imp := Find(objs, "ClusterRole", "regionsync-hub-impersonate")
	if imp == nil {
		t.Fatal("no ClusterRole regionsync-hub-impersonate")
	}
	// Besides impersonation, only the Distributions' revisions (ControllerRevisions) in the bound namespace.
	if rules := nested(imp, "rules").([]any); len(rules) != 2 || fmt.Sprint(rules[0]) != fmt.Sprint(map[string]any{"apiGroups": []any{""}, "resources": []any{"serviceaccounts"}, "verbs": []any{"impersonate"}}) ||
		fmt.Sprint(rules[1]) != fmt.Sprint(map[string]any{"apiGroups": []any{"apps"}, "resources": []any{"controllerrevisions"}, "verbs": []any{"create", "patch", "delete"}}) {
		t.Errorf("regionsync-hub-impersonate rules %v", rules)
	}
	for _, o := range objs {
		if o.GetKind() == "ClusterRoleBinding" && nested(o, "roleRef", "name") == "regionsync-hub-impersonate" {
			t.Errorf("ClusterRoleBinding %s binds the hub's impersonation cluster-wide", o.GetName())
		}
	}
}

// The hub's FlowSchema matches its ServiceAccount alone, before the management base's
// regionsync-regions (which matches every ServiceAccount of regionsync-system), and sends it to
// workload-high; the regions' shard Lease schema still comes first, for the hub's leader election.
func TestHubFlowSchemaPrecedesRegions(t *testing.T) {
	hubObjs, err := Render("../../../deploy/kustomize/hub")
	if err != nil {
		t.Fatal(err)
	}
	base, err := Render("../../../deploy/kustomize/management")
	if err != nil {
		t.Fatal(err)
	}
	fs, regions, leases := Find(hubObjs, "FlowSchema", "regionsync-hub"), Find(base, "FlowSchema", "regionsync-regions"), Find(base, "FlowSchema", "regionsync-region-leases")
	if fs == nil || regions == nil || leases == nil {
		t.Fatalf("FlowSchemas missing: hub %v, regions %v, region leases %v", fs != nil, regions != nil, leases != nil)
	}
	precedence := func(o *unstructured.Unstructured) int64 {
		p, ok := nested(o, "spec", "matchingPrecedence").(int64)
		if !ok {
			t.Fatalf("FlowSchema %s has no spec.matchingPrecedence", o.GetName())
		}
		return p
	}
	if precedence(leases) >= precedence(fs) || precedence(fs) >= precedence(regions) {
		t.Errorf("matchingPrecedence: region leases %d, hub %d, regions %d; want region leases < hub < regions",
			precedence(leases), precedence(fs), precedence(regions))
	}
	if l := nested(fs, "spec", "priorityLevelConfiguration", "name"); l != "workload-high" {
		t.Errorf("hub priority level %v, want workload-high", l)
	}
	subjects := 0
	rules, _ := nested(fs, "spec", "rules").([]any)
	for _, r := range rules {
		list, _ := r.(map[string]any)["subjects"].([]any)
		for _, s := range list {
			subjects++
			sa, _ := s.(map[string]any)["serviceAccount"].(map[string]any)
			if sa["namespace"] != "regionsync-system" || sa["name"] != "regionsync-hub" {
				t.Errorf("hub FlowSchema subject %v, want the ServiceAccount regionsync-system/regionsync-hub only", s)
			}
		}
	}
	if subjects == 0 {
		t.Error("the hub FlowSchema has no subject: it matches no request")
	}
}

package config

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/regionsync/regionsync/internal/fleetspec"
)

const minimal = `
apiVersion: regionsync.dev/v1alpha1
kind: AgentConfig
region: eu-west-1
management: {kubeconfig: /mgmt/kubeconfig}
shard: {remoteResourceSuffix: -eu-west-1}
resources:
- {group: demo.regionsync.dev, version: v1alpha1, kind: Tenant}
`

func TestValidFileAndDefaults(t *testing.T) {
	cfg, err := Load("testdata/valid.yaml")
	if err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	if cfg.Region != "us-east-1" || cfg.Resources[0].Secrets[0] != "tenant-token" {
		t.Fatalf("decoded wrong values: %+v", cfg)
	}

	cfg, err = Parse([]byte(minimal))
	if err != nil {
		t.Fatalf("minimal config rejected: %v", err)
	}
	// The file defaults only what the library does not have; everything it shares with
	// regionsync.Options is left unset for the library to default, once.
	r := cfg.Resources[0]
	left := map[string]bool{
		"annotationDomain":                  cfg.AnnotationDomain == "",
		"management.namespace":              cfg.Management.Namespace == "",
		"resources[0].strategy":             r.Strategy == "",
		"resources[0].adoption":             r.Adoption == "",
		"resources[0].deletePropagation":    r.DeletePropagation == "",
		"resources[0].concurrency":          r.Concurrency == 0,
		"management.claim":                  cfg.Management.Claim == LeaseTimings{},
		"management.credentialRenewal":      cfg.Management.CredentialRenewal == CredentialRenewalConfig{},
		"deletionBudget.maxFraction":        cfg.DeletionBudget.MaxFraction == nil,
		"deletionBudget.minObjects":         cfg.DeletionBudget.MinObjects == nil,
		"deletionBudget.window":             cfg.DeletionBudget.Window.Duration == 0,
		"resyncPeriod":                      cfg.ResyncPeriod.Duration == 0,
		"telemetry.heartbeatInterval":       cfg.Telemetry.HeartbeatInterval.Duration == 0,
		"shard.labelSelector":               cfg.Shard.LabelSelector == "",
		"shard.excludedNamespaces":          len(cfg.Shard.ExcludedNamespaces) == 0,
		"telemetry.tracing.endpoint":        cfg.Telemetry.Tracing.Endpoint == "",
		"resources[0].allowPrivileged":      !r.AllowPrivileged,
		"shard.remoteResourceSuffix (kept)": cfg.Shard.RemoteResourceSuffix == "-eu-west-1",
	}
	for name, ok := range left {
		if !ok {
			t.Errorf("%s: the file defaulted a field the library defaults", name)
		}
	}
}

// update rewrites the golden files of this package's tests: go test ./pkg/config -run Golden -update.
var update = flag.Bool("update", false, "rewrite testdata/*.golden.yaml")

// goldenHeader opens testdata/defaults.golden.yaml.
const goldenHeader = `# The minimal agent configuration after config.Default (TestDefaultsGolden; -update rewrites it).
# The file defaults only its own fields. A field absent here, or 0s, is one the file shares with
# regionsync.Options, which the library defaults (docs/configuration.md gives every default).
`

// TestDefaultsGolden holds the file's own defaults (leader election, start jitter, telemetry) in
// testdata/defaults.golden.yaml: the minimal file, defaulted. A changed default is a changed golden
// file in review; the library's defaults are held the same way by pkg/regionsync's tests.
func TestDefaultsGolden(t *testing.T) {
	cfg, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	got, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const golden = "testdata/defaults.golden.yaml"
	got = append([]byte(goldenHeader), got...)
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./pkg/config -run Golden -update writes it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("the minimal file defaulted differs from %s (-update rewrites it):\n%s", golden, got)
	}
	// The golden file is itself a valid configuration that defaults to itself.
	again, err := Parse(want)
	if err != nil {
		t.Fatalf("%s: %v", golden, err)
	}
	if !reflect.DeepEqual(again, cfg) {
		t.Errorf("%s does not default to itself: %+v", golden, again)
	}
}

// mutate decodes the minimal config into a generic map, lets the case edit it, and re-encodes it,
// so each bad case states only what it breaks.
func mutate(t *testing.T, edit func(m map[string]any)) []byte {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(minimal), &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	out, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sub(m map[string]any, key string) map[string]any {
	if v, ok := m[key].(map[string]any); ok {
		return v
	}
	v := map[string]any{}
	m[key] = v
	return v
}

func res(m map[string]any, i int) map[string]any {
	list := m["resources"].([]any)
	for len(list) <= i {
		list = append(list, map[string]any{"group": "demo.regionsync.dev", "version": "v1alpha1", "kind": "Other"})
	}
	m["resources"] = list
	return list[i].(map[string]any)
}

// secretResource turns resources[0] into the Secret kind, with allowPrivileged and fanOut (nil:
// unset); it keeps the minimal file's secrets list.
func secretResource(m map[string]any, allowPrivileged bool, fanOut map[string]any) {
	r := res(m, 0)
	r["group"], r["version"], r["kind"] = "", "v1", "Secret"
	if allowPrivileged {
		r["allowPrivileged"] = true
	}
	if fanOut != nil {
		r["fanOut"] = fanOut
	}
}

func TestBadConfigsNameTheField(t *testing.T) {
	cases := map[string]struct {
		raw  string // used verbatim when set
		edit func(m map[string]any)
		want string // substring of the error: the field path and the reason
	}{
		"not yaml":                {raw: "region: [unclosed", want: "invalid YAML"},
		"unknown top-level field": {edit: func(m map[string]any) { m["regoin"] = "x" }, want: `unknown field "regoin"`},
		"unknown nested field":    {edit: func(m map[string]any) { sub(m, "shard")["remoteSuffix"] = "-x" }, want: `unknown field "shard.remoteSuffix"`},
		"duplicate key":           {raw: minimal + "region: again\n", want: `key "region" already set`},
		"wrong type":              {edit: func(m map[string]any) { res(m, 0)["concurrency"] = "four" }, want: "concurrency"},
		"wrong apiVersion":        {edit: func(m map[string]any) { m["apiVersion"] = "v1" }, want: "apiVersion: Invalid value"},
		"wrong kind":              {edit: func(m map[string]any) { m["kind"] = "Config" }, want: "kind: Invalid value"},
		"missing region":          {edit: func(m map[string]any) { delete(m, "region") }, want: "region: Required value"},
		"region not a DNS label":  {edit: func(m map[string]any) { m["region"] = "US_East" }, want: "region: Invalid value"},
		"bad annotation domain":   {edit: func(m map[string]any) { m["annotationDomain"] = "Not A Domain" }, want: "annotationDomain: Invalid value"},
		"missing kubeconfig":      {edit: func(m map[string]any) { delete(sub(m, "management"), "kubeconfig") }, want: "management.kubeconfig: Required value"},
		"bad management ns":       {edit: func(m map[string]any) { sub(m, "management")["namespace"] = "Regionsync" }, want: "management.namespace: Invalid value"},
		"negative qps":            {edit: func(m map[string]any) { sub(m, "management")["qps"] = -1 }, want: "management.qps: Invalid value"},
		"bad cluster ID":          {edit: func(m map[string]any) { sub(m, "management")["clusterID"] = "staging" }, want: "management.clusterID: Invalid value"},
		"start jitter too long":   {edit: func(m map[string]any) { sub(m, "management")["startJitter"] = "10m" }, want: "management.startJitter: Invalid value"},
		"negative start jitter":   {edit: func(m map[string]any) { sub(m, "management")["startJitter"] = "-1s" }, want: "management.startJitter: Invalid value"},
		"suffix upper case":       {edit: func(m map[string]any) { sub(m, "shard")["remoteResourceSuffix"] = "-US" }, want: "shard.remoteResourceSuffix: Invalid value"},
		"suffix ends with dash":   {edit: func(m map[string]any) { sub(m, "shard")["remoteResourceSuffix"] = "-us-" }, want: "shard.remoteResourceSuffix: Invalid value"},
		"prefix starts with dash": {edit: func(m map[string]any) { sub(m, "shard")["namespacePrefix"] = "-team" }, want: "shard.namespacePrefix: Invalid value"},
		"ns suffix with dot":      {edit: func(m map[string]any) { sub(m, "shard")["remoteNamespaceSuffix"] = ".eu" }, want: "shard.remoteNamespaceSuffix: Invalid value"},
		"local ns suffix too long": {edit: func(m map[string]any) {
			sub(m, "shard")["localNamespaceSuffix"] = strings.Repeat("a", 63)
		}, want: "shard.localNamespaceSuffix: Too long"},
		"excluded namespace not a DNS label": {edit: func(m map[string]any) {
			sub(m, "shard")["excludedNamespaces"] = []any{"cert-manager", "Team_A"}
		}, want: "shard.excludedNamespaces[1]: Invalid value"},
		"excluded namespace empty": {edit: func(m map[string]any) { sub(m, "shard")["excludedNamespaces"] = []any{""} }, want: "shard.excludedNamespaces[0]: Required value"},
		"excluded namespace twice": {edit: func(m map[string]any) {
			sub(m, "shard")["excludedNamespaces"] = []any{"monitoring", "monitoring"}
		}, want: "shard.excludedNamespaces[1]: Duplicate value"},
		"allowPrivileged not a bool": {edit: func(m map[string]any) { res(m, 0)["allowPrivileged"] = "yes" }, want: "allowPrivileged"},
		"secret with allowPrivileged but no fan-out": {edit: func(m map[string]any) {
			secretResource(m, true, nil)
		}, want: "resources[0].kind: Forbidden: Secret is synced only by namespace fan-out, never as an ordinary copy; set resources[0].fanOut.enabled: true"},
		"secret with fan-out disabled": {edit: func(m map[string]any) {
			secretResource(m, true, map[string]any{"enabled": false})
		}, want: "resources[0].kind: Forbidden: Secret is synced only by namespace fan-out"},
		"secret fan-out without allowPrivileged": {edit: func(m map[string]any) {
			secretResource(m, false, map[string]any{"enabled": true})
		}, want: "resources[0].allowPrivileged: Forbidden: a Secret fanned out grants its credentials in every namespace it reaches; set resources[0].allowPrivileged: true"},
		"secret uploading secrets": {edit: func(m map[string]any) {
			secretResource(m, true, map[string]any{"enabled": true})
			res(m, 0)["secrets"] = []any{"token"}
		}, want: "resources[0].secrets: Forbidden: the Secret kind uploads no Secrets"},
		"bad label selector":   {edit: func(m map[string]any) { sub(m, "shard")["labelSelector"] = "a in (b" }, want: "shard.labelSelector: Invalid value"},
		"no resources":         {edit: func(m map[string]any) { m["resources"] = []any{} }, want: "resources: Required value"},
		"resource bad kind":    {edit: func(m map[string]any) { res(m, 1)["kind"] = "tenant" }, want: "resources[1].kind: Invalid value"},
		"resource bad version": {edit: func(m map[string]any) { res(m, 0)["version"] = "1" }, want: "resources[0].version: Invalid value"},
		"resource bad group":   {edit: func(m map[string]any) { res(m, 0)["group"] = "Demo_Group" }, want: "resources[0].group: Invalid value"},
		"resource namespace":   {edit: func(m map[string]any) { res(m, 0)["group"] = ""; res(m, 0)["kind"] = "Namespace" }, want: "resources[0].kind: Forbidden"},
		"duplicate resource": {edit: func(m map[string]any) {
			res(m, 1)["kind"] = "Tenant"
		}, want: "resources[1]: Duplicate value"},
		"bad strategy":     {edit: func(m map[string]any) { res(m, 0)["strategy"] = "Merge" }, want: `resources[0].strategy: Unsupported value: "Merge"`},
		"bad adoption":     {edit: func(m map[string]any) { res(m, 0)["adoption"] = "Steal" }, want: "resources[0].adoption: Unsupported value"},
		"bad propagation":  {edit: func(m map[string]any) { res(m, 0)["deletePropagation"] = "Now" }, want: "resources[0].deletePropagation: Unsupported value"},
		"concurrency zero": {edit: func(m map[string]any) { res(m, 0)["concurrency"] = -1 }, want: "resources[0].concurrency: Invalid value"},
		"bad secret name":  {edit: func(m map[string]any) { res(m, 0)["secrets"] = []any{"Token!"} }, want: "resources[0].secrets[0]: Invalid value"},
		"duplicate secret": {edit: func(m map[string]any) { res(m, 0)["secrets"] = []any{"a", "a"} }, want: "resources[0].secrets[1]: Duplicate value"},
		"fan-out wide without enabled": {edit: func(m map[string]any) {
			res(m, 0)["fanOut"] = map[string]any{"wideSourceNamespaces": []any{"platform"}}
		}, want: "resources[0].fanOut.wideSourceNamespaces: Invalid value"},
		"fan-out wide bad name": {edit: func(m map[string]any) {
			res(m, 0)["fanOut"] = map[string]any{"enabled": true, "wideSourceNamespaces": []any{"Platform"}}
		}, want: "resources[0].fanOut.wideSourceNamespaces[0]: Invalid value"},
		"fan-out wide duplicate": {edit: func(m map[string]any) {
			res(m, 0)["fanOut"] = map[string]any{"enabled": true, "wideSourceNamespaces": []any{"platform", "platform"}}
		}, want: "resources[0].fanOut.wideSourceNamespaces[1]: Duplicate value"},
		"lease <= renew": {edit: func(m map[string]any) { sub(m, "leaderElection")["leaseDuration"] = "5s" }, want: "leaderElection.leaseDuration: Invalid value"},
		"renew <= retry": {edit: func(m map[string]any) { sub(m, "leaderElection")["retryPeriod"] = "9s" }, want: "leaderElection.renewDeadline: Invalid value"},
		"bad duration":   {edit: func(m map[string]any) { sub(m, "leaderElection")["leaseDuration"] = "soon" }, want: "leaderElection.leaseDuration: Invalid value"},
		"claim lease <= renew": {edit: func(m map[string]any) {
			sub(m, "management")["claim"] = map[string]any{"leaseDuration": "30s"}
		}, want: `management.claim.leaseDuration: Invalid value: "30s": must be greater than management.claim.renewDeadline`},
		"leader namespace": {edit: func(m map[string]any) { sub(m, "leaderElection")["namespace"] = "Agents" }, want: "leaderElection.namespace: Invalid value"},
		"heartbeat too short": {edit: func(m map[string]any) {
			sub(m, "telemetry")["heartbeatInterval"] = "100ms"
		}, want: "telemetry.heartbeatInterval: Invalid value"},
		"claim renew <= retry": {edit: func(m map[string]any) {
			sub(m, "management")["claim"] = map[string]any{"retryPeriod": "35s"}
		}, want: "management.claim.renewDeadline: Invalid value"},
		"claim bad duration": {edit: func(m map[string]any) {
			sub(m, "management")["claim"] = map[string]any{"retryPeriod": "often"}
		}, want: "management.claim.retryPeriod: Invalid value"},
		"renewal fields while off": {edit: func(m map[string]any) {
			sub(m, "management")["credentialRenewal"] = map[string]any{"renewBefore": "1h"}
		}, want: "management.credentialRenewal: Forbidden"},
		"renewal bad secret": {edit: func(m map[string]any) {
			sub(m, "management")["credentialRenewal"] = map[string]any{"enabled": true, "secretName": "Kubeconfig!", "secretKey": "a/b"}
		}, want: "management.credentialRenewal.secretName: Invalid value"},
		"renewal bad key": {edit: func(m map[string]any) {
			sub(m, "management")["credentialRenewal"] = map[string]any{"enabled": true, "secretKey": "a/b"}
		}, want: "management.credentialRenewal.secretKey: Invalid value"},
		"renewal short lifetime": {edit: func(m map[string]any) {
			sub(m, "management")["credentialRenewal"] = map[string]any{"enabled": true, "lifetime": "5m"}
		}, want: "management.credentialRenewal.lifetime: Invalid value"},
		"renewal margin >= lifetime": {edit: func(m map[string]any) {
			sub(m, "management")["credentialRenewal"] = map[string]any{"enabled": true, "lifetime": "24h", "renewBefore": "24h"}
		}, want: "management.credentialRenewal.renewBefore: Invalid value"},
		"renewal bad duration": {edit: func(m map[string]any) {
			sub(m, "management")["credentialRenewal"] = map[string]any{"enabled": true, "renewBefore": "soon"}
		}, want: "management.credentialRenewal.renewBefore: Invalid value"},
		"fraction zero":      {edit: func(m map[string]any) { sub(m, "deletionBudget")["maxFraction"] = 0 }, want: "deletionBudget.maxFraction: Invalid value"},
		"fraction above 1":   {edit: func(m map[string]any) { sub(m, "deletionBudget")["maxFraction"] = 1.5 }, want: "deletionBudget.maxFraction: Invalid value"},
		"negative minimum":   {edit: func(m map[string]any) { sub(m, "deletionBudget")["minObjects"] = -3 }, want: "deletionBudget.minObjects: Invalid value"},
		"window too short":   {edit: func(m map[string]any) { sub(m, "deletionBudget")["window"] = "500ms" }, want: "deletionBudget.window: Invalid value"},
		"bad window":         {edit: func(m map[string]any) { sub(m, "deletionBudget")["window"] = "later" }, want: "deletionBudget.window: Invalid value"},
		"resync too short":   {edit: func(m map[string]any) { m["resyncPeriod"] = "1s" }, want: "resyncPeriod: Invalid value"},
		"bad metrics addr":   {edit: func(m map[string]any) { sub(m, "telemetry")["metricsAddr"] = "8080" }, want: "telemetry.metricsAddr: Invalid value"},
		"bad health port":    {edit: func(m map[string]any) { sub(m, "telemetry")["healthAddr"] = ":99999" }, want: "telemetry.healthAddr: Invalid value"},
		"sampling above 1":   {edit: func(m map[string]any) { sub(sub(m, "telemetry"), "tracing")["samplingRatio"] = 2 }, want: "telemetry.tracing.samplingRatio: Invalid value"},
		"endpoint bad URL":   {edit: func(m map[string]any) { sub(sub(m, "telemetry"), "tracing")["endpoint"] = "ftp://collector:4317" }, want: "telemetry.tracing.endpoint: Invalid value"},
		"endpoint no port":   {edit: func(m map[string]any) { sub(sub(m, "telemetry"), "tracing")["endpoint"] = "collector" }, want: "telemetry.tracing.endpoint: Invalid value"},
		"two errors at once": {edit: func(m map[string]any) { m["region"] = ""; res(m, 0)["strategy"] = "X" }, want: "region: Required value"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			data := []byte(tc.raw)
			if tc.raw == "" {
				data = mutate(t, tc.edit)
			}
			_, err := Parse(data)
			if err == nil {
				t.Fatalf("accepted bad config:\n%s", data)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

// Every privileged kind is refused, naming the resource's kind and allowPrivileged fields, unless
// the resource sets allowPrivileged: true; then it is accepted.
func TestPrivilegedKinds(t *testing.T) {
	n := 0
	for group, kinds := range fleetspec.PrivilegedKinds {
		for _, kind := range kinds {
			n++
			gk := kind + "." + group
			if group == "" {
				gk = kind
			}
			t.Run(gk, func(t *testing.T) {
				edit := func(allow bool) []byte {
					return mutate(t, func(m map[string]any) {
						r := res(m, 2) // the third resource, so the error must name its index
						r["group"], r["version"], r["kind"] = group, "v1", kind
						if allow {
							r["allowPrivileged"] = true
						}
					})
				}
				_, err := Parse(edit(false))
				want := "resources[2].kind: Forbidden: " + gk + " grants privileges in the region; set resources[2].allowPrivileged: true to sync it"
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("without allowPrivileged: error %v, want it to contain %q", err, want)
				}
				cfg, err := Parse(edit(true))
				if err != nil {
					t.Fatalf("with allowPrivileged: %v", err)
				}
				if r := cfg.Resources[2]; !r.AllowPrivileged || r.Kind != kind || r.Group != group {
					t.Fatalf("decoded %+v", r)
				}
			})
		}
	}
	// The privileged kinds the safety model names, so that the table cannot shrink unnoticed.
	for _, gk := range [][2]string{
		{"rbac.authorization.k8s.io", "Role"}, {"rbac.authorization.k8s.io", "RoleBinding"},
		{"rbac.authorization.k8s.io", "ClusterRole"}, {"rbac.authorization.k8s.io", "ClusterRoleBinding"},
		{"", "ServiceAccount"}, {"", "PersistentVolume"},
		{"admissionregistration.k8s.io", "ValidatingWebhookConfiguration"}, {"admissionregistration.k8s.io", "MutatingWebhookConfiguration"},
		{"admissionregistration.k8s.io", "ValidatingAdmissionPolicy"}, {"admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"},
		{"admissionregistration.k8s.io", "MutatingAdmissionPolicy"}, {"admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding"},
		{"apiextensions.k8s.io", "CustomResourceDefinition"}, {"apiregistration.k8s.io", "APIService"},
		{"scheduling.k8s.io", "PriorityClass"}, {"storage.k8s.io", "StorageClass"},
	} {
		if !fleetspec.IsPrivileged(gk[0], gk[1]) {
			t.Errorf("%s.%s is not in fleetspec.PrivilegedKinds", gk[1], gk[0])
		}
	}
	if n < 30 {
		t.Errorf("only %d privileged kinds", n)
	}
	// Ordinary kinds need no flag: a namespaced workload kind and the demo's own.
	for _, gk := range [][2]string{{"apps", "Deployment"}, {"", "ConfigMap"}, {"demo.regionsync.dev", "Tenant"}} {
		if fleetspec.IsPrivileged(gk[0], gk[1]) {
			t.Errorf("%s.%s is privileged", gk[1], gk[0])
		}
	}
}

// The Secret kind is accepted with fanOut.enabled and allowPrivileged together, and then only: a
// table of the combinations, each refusal naming its field.
func TestConfigSecretFanOut(t *testing.T) {
	cases := []struct {
		name   string
		allow  bool
		fanOut map[string]any
		want   []string // substrings of the error; none: accepted
	}{
		{name: "fan-out and allowPrivileged", allow: true, fanOut: map[string]any{"enabled": true}},
		{name: "fan-out, wide source, allowPrivileged", allow: true, fanOut: map[string]any{"enabled": true, "wideSourceNamespaces": []any{"platform"}}},
		{name: "neither", want: []string{"resources[0].kind: Forbidden", "resources[0].allowPrivileged: Forbidden"}},
		{name: "fan-out only", fanOut: map[string]any{"enabled": true}, want: []string{"resources[0].allowPrivileged: Forbidden"}},
		{name: "allowPrivileged only", allow: true, want: []string{"resources[0].kind: Forbidden: Secret is synced only by namespace fan-out"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse(mutate(t, func(m map[string]any) { secretResource(m, c.allow, c.fanOut) }))
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if r := cfg.Resources[0]; !fleetspec.IsSecret(r.Group, r.Kind) || !r.FanOutEnabled() || !r.AllowPrivileged {
					t.Fatalf("decoded %+v", r)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want it to contain %q", err, w)
				}
			}
		})
	}
	if fleetspec.IsSecret("apps", "Secret") || fleetspec.IsSecret("", "ConfigMap") || !fleetspec.IsSecret("", "Secret") {
		t.Error("fleetspec.IsSecret names the wrong kind")
	}
}

func TestProtectedNamespaces(t *testing.T) {
	cases := map[string]struct {
		edit func(m map[string]any)
		want []string
	}{
		"defaults": {
			edit: func(map[string]any) {},
			want: []string{"default", "kube-node-lease", "kube-public", "kube-system", "regionsync-system"},
		},
		"own leader-election namespace and exclusions, sorted, once each": {
			edit: func(m map[string]any) {
				sub(m, "leaderElection")["namespace"] = "sync-agent"
				sub(m, "management")["namespace"] = "mgmt-only" // on management: not protected locally
				sub(m, "shard")["excludedNamespaces"] = []any{"monitoring", "kube-system", "cert-manager"}
			},
			want: []string{"cert-manager", "default", "kube-node-lease", "kube-public", "kube-system", "monitoring", "sync-agent"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, err := Parse(mutate(t, tc.edit))
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.ProtectedNamespaces(); !slices.Equal(got, tc.want) {
				t.Fatalf("ProtectedNamespaces() = %v, want %v", got, tc.want)
			}
			for _, ns := range tc.want {
				if !cfg.IsProtectedNamespace(ns) {
					t.Errorf("%s not protected", ns)
				}
			}
			if cfg.IsProtectedNamespace("tenant-acme") {
				t.Error("tenant-acme protected")
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("testdata/does-not-exist.yaml")
	if err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Fatalf("want a not-exist error, got %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}

// FuzzParse: for any input, Parse does not panic and every field an error names exists in
// AgentConfig; a config Parse accepts validates again, and serialized and parsed again it is the
// same config (nothing is lost, and defaulting a defaulted config changes nothing). Whatever
// decodes, defaulted, Validate does not panic on, and it too names only fields that exist.
func FuzzParse(f *testing.F) {
	f.Add([]byte(minimal))
	if data, err := os.ReadFile("testdata/valid.yaml"); err == nil {
		f.Add(data)
	}
	f.Add([]byte("resources: [{kind: X}]"))
	f.Add([]byte(minimal + "- {group: rbac.authorization.k8s.io, version: v1, kind: RoleBinding, allowPrivileged: true}\n"))
	f.Add([]byte(strings.Replace(minimal, "shard: {", "shard: {excludedNamespaces: [cert-manager, monitoring], ", 1)))
	f.Add([]byte(minimal + "resyncPeriod: 1s\ndeletionBudget: {maxFraction: 2}\n"))
	f.Add([]byte(minimal + "leaderElection: {leaseDuration: soon}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			checkFieldsExist(t, err)
			js, jerr := yaml.YAMLToJSON(data)
			raw := &AgentConfig{}
			if jerr != nil || json.Unmarshal(js, raw) != nil {
				return
			}
			Default(raw)
			if err := Validate(raw); err != nil {
				checkFieldsExist(t, err)
			}
			return
		}
		if err := Validate(cfg); err != nil {
			t.Fatalf("accepted config no longer validates: %v", err)
		}
		for i, r := range cfg.Resources {
			if fleetspec.IsPrivileged(r.Group, r.Kind) && !r.AllowPrivileged {
				t.Fatalf("resources[%d] %s.%s accepted without allowPrivileged", i, r.Kind, r.Group)
			}
			if fleetspec.IsDenied(r.Group, r.Kind) {
				t.Fatalf("resources[%d] %s accepted", i, r.Kind)
			}
			if fleetspec.IsSecret(r.Group, r.Kind) && (!r.FanOutEnabled() || !r.AllowPrivileged || len(r.Secrets) > 0) {
				t.Fatalf("resources[%d] Secret accepted without fan-out and allowPrivileged, or with secrets: %+v", i, r)
			}
			if a := cfg.Options(nil).WithDefaults().Resources[i].Adoption; a != AdoptionRefuse && a != AdoptionAdopt { // as the agent runs it
				t.Fatalf("resources[%d] adoption %q (%q in the file)", i, a, r.Adoption)
			}
		}
		protected := cfg.ProtectedNamespaces()
		for _, ns := range append(append(slices.Clone(fleetspec.SystemNamespaces), cfg.LeaderElection.Namespace), cfg.Shard.ExcludedNamespaces...) {
			if !slices.Contains(protected, ns) {
				t.Fatalf("namespace %q not protected (%v)", ns, protected)
			}
		}
		for _, ns := range cfg.Shard.ExcludedNamespaces {
			if len(validation.IsDNS1123Label(ns)) > 0 {
				t.Fatalf("excluded namespace %q accepted", ns)
			}
		}
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatalf("accepted config does not serialize: %v", err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("accepted config, serialized, is rejected: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(cfg, again) {
			t.Fatalf("accepted config changed through serialization:\n%#v\n%#v\n%s", cfg, again, out)
		}
	})
}

// checkFieldsExist fails t unless every field err names (a field.Error, or each of a
// ValidationError's) is a path of AgentConfig's JSON fields.
func checkFieldsExist(t *testing.T, err error) {
	t.Helper()
	var list field.ErrorList
	var verr *ValidationError
	var ferr *field.Error
	switch {
	case errors.As(err, &verr):
		list = verr.Errors
	case errors.As(err, &ferr):
		list = field.ErrorList{ferr}
	}
	for _, fe := range list {
		if !fieldExists(reflect.TypeFor[AgentConfig](), fe.Field) {
			t.Fatalf("error names field %q, which AgentConfig does not have: %v", fe.Field, fe)
		}
	}
}

// fieldExists reports whether path ("resources[1].secrets[0]") names a JSON field of typ.
func fieldExists(typ reflect.Type, path string) bool {
	for _, seg := range strings.Split(path, ".") {
		name, rest, _ := strings.Cut(seg, "[")
		var ok bool
		if typ, ok = jsonField(typ, name); !ok {
			return false
		}
		for ; rest != ""; _, rest, _ = strings.Cut(rest, "[") {
			for typ.Kind() == reflect.Pointer {
				typ = typ.Elem()
			}
			if typ.Kind() != reflect.Slice && typ.Kind() != reflect.Map {
				return false
			}
			typ = typ.Elem()
		}
	}
	return true
}

// jsonField is the type of typ's field whose JSON name is name (inline structs included).
func jsonField(typ reflect.Type, name string) (reflect.Type, bool) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct {
		return nil, false
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "" && strings.Contains(opts, "inline") {
			if ft, ok := jsonField(f.Type, name); ok {
				return ft, true
			}
			continue
		}
		if tag == name {
			return f.Type, true
		}
	}
	return nil, false
}

// TestFieldExists: the checker FuzzParse relies on tells real paths from made-up ones.
func TestFieldExists(t *testing.T) {
	typ := reflect.TypeFor[AgentConfig]()
	for path, want := range map[string]bool{
		"apiVersion":                       true,
		"resources[1].secrets[0]":          true,
		"telemetry.tracing.samplingRatio":  true,
		"leaderElection.leaseDuration":     true,
		"deletionBudget.maxFraction":       true,
		"resources[0].nosuch":              false,
		"regoin":                           false,
		"region[0]":                        false,
		"telemetry.tracing.samplingRatio2": false,
	} {
		if got := fieldExists(typ, path); got != want {
			t.Errorf("fieldExists(%q) = %v, want %v", path, got, want)
		}
	}
}

// TestValidateUndefaulted: a configuration built in code that skipped Default gets field errors
// for the file's own fields, not a crash; the fields it shares with the library are the library's
// to default (Validate checks them defaulted, as New will run them).
func TestValidateUndefaulted(t *testing.T) {
	c := &AgentConfig{TypeMeta: TypeMeta(), Region: "us", Management: ManagementConfig{Kubeconfig: "/k", Namespace: "ns"},
		Resources: []ResourceConfig{{Version: "v1", Kind: "ConfigMap"}}}
	err := Validate(c)
	if err == nil {
		t.Fatal("an undefaulted configuration validated")
	}
	for _, f := range []string{"leaderElection.retryPeriod", "telemetry.metricsAddr", "telemetry.tracing.samplingRatio"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error does not name %s: %v", f, err)
		}
	}
	for _, f := range []string{"deletionBudget", "management.claim", "resyncPeriod"} {
		if strings.Contains(err.Error(), f) {
			t.Errorf("error names %s, which the library defaults: %v", f, err)
		}
	}
}

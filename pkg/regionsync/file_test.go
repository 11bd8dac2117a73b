package regionsync_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/syncer"
	"github.com/regionsync/regionsync/internal/syncer/budget"
	"github.com/regionsync/regionsync/pkg/config"
	"github.com/regionsync/regionsync/pkg/regionsync"
)

// parseFile parses an agent configuration file or fails the test.
func parseFile(t *testing.T, data string) *config.AgentConfig {
	t.Helper()
	cfg, err := config.Parse([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A configuration file reaches the engine whole: every field the file sets arrives in Settings
// (the agent binary's one way: file → Options → Settings).
func TestConfigFileReachesEngine(t *testing.T) {
	cfg := parseFile(t, `apiVersion: regionsync.dev/v1alpha1
kind: AgentConfig
region: eu-west-1
annotationDomain: cloud.teleport.dev
management:
  kubeconfig: /k
  namespace: fleet
  clusterID: 0b3c6f3e-8f55-4a8e-9d7c-2f0e6c1d9a11
  claim: {leaseDuration: 90s, renewDeadline: 50s, retryPeriod: 20s}
  startJitter: 12s
shard:
  namespacePrefix: tenant-
  remoteResourceSuffix: -eu
  remoteNamespaceSuffix: -mgmt
  localNamespaceSuffix: -local
  labelSelector: regionsync.dev/region=eu-west-1
  excludedNamespaces: [istio-system]
resources:
  - {group: demo.regionsync.dev, version: v1alpha1, kind: Tenant, secrets: [token], strategy: Apply, adoption: Adopt, deletePropagation: Background, concurrency: 9}
leaderElection: {namespace: agents}
deletionBudget: {maxFraction: 0.25, minObjects: 3, window: 7m}
resyncPeriod: 11m
telemetry: {heartbeatInterval: 45s}
`)
	_, s, err := regionsync.Complete(cfg.Options(&rest.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	want := &syncer.Settings{
		Region: "eu-west-1", AnnotationDomain: "cloud.teleport.dev", ManagementNamespace: "fleet",
		ClusterID: "0b3c6f3e-8f55-4a8e-9d7c-2f0e6c1d9a11", FleetNamespace: "agents",
		Shard: fleetspec.Shard{NamespacePrefix: "tenant-", RemoteResourceSuffix: "-eu", RemoteNamespaceSuffix: "-mgmt",
			LocalNamespaceSuffix: "-local", LabelSelector: "regionsync.dev/region=eu-west-1", ExcludedNamespaces: []string{"istio-system"}},
		Resources: []fleetspec.Resource{{
			Group: "demo.regionsync.dev", Version: "v1alpha1", Kind: "Tenant", Secrets: []string{"token"},
			Strategy: fleetspec.StrategyApply, Adoption: fleetspec.AdoptionAdopt, DeletePropagation: "Background", Concurrency: 9,
		}},
		DeletionBudget:    budget.Budget{MaxFraction: 0.25, MinObjects: 3, Window: 7 * time.Minute},
		ResyncPeriod:      11 * time.Minute,
		HeartbeatInterval: 45 * time.Second,
		StartJitter:       12 * time.Second,
		Claim:             syncer.LeaseTimings{LeaseDuration: 90 * time.Second, RenewDeadline: 50 * time.Second, RetryPeriod: 20 * time.Second},
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("settings\n got %+v\nwant %+v", s, want)
	}
}

// A minimal file gets the library's defaults, once, where the file leaves them to it: its settings
// are exactly those of the same agent described as Options (TestOptionsDefaults holds those), but
// for what the binary sets itself: a 5 s start jitter, and the claim per fleet in the
// leader-election namespace.
func TestConfigFileDefaultsReachEngine(t *testing.T) {
	cfg := parseFile(t, `apiVersion: regionsync.dev/v1alpha1
kind: AgentConfig
region: eu-west-1
management: {kubeconfig: /k}
resources: [{group: demo.regionsync.dev, version: v1alpha1, kind: Tenant}]
`)
	o, s, err := regionsync.Complete(cfg.Options(&rest.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	tenant := &unstructured.Unstructured{}
	tenant.SetGroupVersionKind(cfg.Resources[0].GroupVersionKind())
	_, want, err := regionsync.Complete(regionsync.Options{
		Region: "eu-west-1", Management: regionsync.Management{Config: &rest.Config{}, StartJitter: fleetspec.DefaultStartJitter},
		Resources: []regionsync.Resource{{Object: tenant}},
		Claim:     regionsync.Claim{Scope: regionsync.ClaimPerFleet, FleetNamespace: fleetspec.DefaultLeaderNamespace},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("settings\n got %+v\nwant %+v", s, want)
	}
	if o.Claim.Scope != regionsync.ClaimPerFleet || s.StartJitter != fleetspec.DefaultStartJitter || s.DeletionBudget.MaxFraction != fleetspec.DefaultDeletionMaxFraction {
		t.Fatalf("claim scope %q, start jitter %s, deletion budget %+v", o.Claim.Scope, s.StartJitter, s.DeletionBudget)
	}
}

// Credential renewal goes from the file to Options whole; the library defaults what the file
// leaves out (the Secret the overlays mount, in the agent's own namespace); off, it is nil (a
// host with a static kubeconfig).
func TestConfigFileCredentialRenewal(t *testing.T) {
	file := func(renewal string) *config.AgentConfig {
		return parseFile(t, `apiVersion: regionsync.dev/v1alpha1
kind: AgentConfig
region: eu-west-1
management: {kubeconfig: /k`+renewal+`}
resources: [{group: demo.regionsync.dev, version: v1alpha1, kind: Tenant}]
leaderElection: {namespace: agents}
`)
	}
	if r := file("").Options(&rest.Config{}).Management.CredentialRenewal; r != nil {
		t.Fatalf("renewal off in the file, on in Options: %+v", r)
	}
	for name, tc := range map[string]struct {
		renewal string
		want    regionsync.CredentialRenewal
	}{
		"defaults": {", credentialRenewal: {enabled: true}", regionsync.CredentialRenewal{
			Secret: types.NamespacedName{Namespace: "agents", Name: fleetspec.DefaultCredentialSecret}, SecretKey: fleetspec.DefaultCredentialSecretKey}},
		"every field": {", credentialRenewal: {enabled: true, secretName: kc, secretNamespace: ops, secretKey: config, lifetime: 48h, renewBefore: 12h}", regionsync.CredentialRenewal{
			Secret: types.NamespacedName{Namespace: "ops", Name: "kc"}, SecretKey: "config", Lifetime: 48 * time.Hour, RenewBefore: 12 * time.Hour}},
	} {
		o, _, err := regionsync.Complete(file(tc.renewal).Options(&rest.Config{}))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if r := o.Management.CredentialRenewal; r == nil || *r != tc.want {
			t.Errorf("%s: %s", name, fmt.Sprintf("Options %+v, want %+v", r, tc.want))
		}
	}
}

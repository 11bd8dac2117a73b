package regionsync

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/syncer"
	"github.com/regionsync/regionsync/internal/syncer/budget"
)

func kind(group, version, k string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: version, Kind: k})
	return u
}

// minimal is the smallest valid Options: a region, management and one kind.
func minimal() Options {
	return Options{
		Region:     "us-east-1",
		Management: Management{Config: &rest.Config{Host: "https://management.example"}},
		Resources:  []Resource{{Object: kind("demo.regionsync.dev", "v1alpha1", "Tenant")}},
	}
}

// Every default is applied by complete, to the values documented for the configuration file.
func TestOptionsDefaults(t *testing.T) {
	_, s, typed, err := minimal().complete(runtime.NewScheme())
	if err != nil {
		t.Fatal(err)
	}
	want := &syncer.Settings{
		Region: "us-east-1", AnnotationDomain: fleetspec.DefaultAnnotationDomain,
		ManagementNamespace: fleetspec.DefaultManagementNamespace, FleetNamespace: fleetspec.DefaultLeaderNamespace,
		Resources: []fleetspec.Resource{{
			Group: "demo.regionsync.dev", Version: "v1alpha1", Kind: "Tenant", Strategy: fleetspec.StrategyReplace,
			Adoption: fleetspec.AdoptionRefuse, DeletePropagation: "Foreground", Concurrency: fleetspec.DefaultConcurrency,
		}},
		DeletionBudget:    budget.Budget{MaxFraction: fleetspec.DefaultDeletionMaxFraction, MinObjects: fleetspec.DefaultDeletionMinObjects, Window: fleetspec.DefaultDeletionWindow},
		ResyncPeriod:      fleetspec.DefaultResyncPeriod,
		HeartbeatInterval: fleetspec.DefaultHeartbeatInterval,
		Claim:             syncer.LeaseTimings{LeaseDuration: fleetspec.DefaultClaimLeaseDuration, RenewDeadline: fleetspec.DefaultClaimRenewDeadline, RetryPeriod: fleetspec.DefaultClaimRetryPeriod},
	}
	if diff := settingsDiff(s, want); diff != "" {
		t.Fatal(diff)
	}
	if len(typed) != 0 {
		t.Fatalf("typed kinds %v, want none (the kind is unstructured)", typed)
	}
	// Zero is a value, not "unset", for MinObjects.
	o := minimal()
	o.DeletionBudget.MinObjects = ptr.To(0)
	if _, s, _, err = o.complete(runtime.NewScheme()); err != nil || s.DeletionBudget.MinObjects != 0 {
		t.Fatalf("minObjects 0: %v, %+v", err, s)
	}
}

// The management config's User-Agent names the syncer, its version and region unless the host
// set one; the host's config is never changed.
func TestOptionsManagementUserAgent(t *testing.T) {
	for name, c := range map[string]struct {
		version, userAgent, want string
	}{
		"default version":       {want: "regionsync/dev (region us-east-1)"},
		"the host's version":    {version: "v1.2.3", want: "regionsync/v1.2.3 (region us-east-1)"},
		"the host's User-Agent": {version: "v1.2.3", userAgent: "acme-operator/2.0", want: "acme-operator/2.0"},
	} {
		t.Run(name, func(t *testing.T) {
			o := minimal()
			o.Version, o.Management.Config.UserAgent = c.version, c.userAgent
			if got := o.WithDefaults().Management.Config.UserAgent; got != c.want {
				t.Errorf("User-Agent %q, want %q", got, c.want)
			}
			if o.Management.Config.UserAgent != c.userAgent {
				t.Errorf("the host's config changed: User-Agent %q", o.Management.Config.UserAgent)
			}
		})
	}
}

// Credential renewal's defaults: the Secret the overlays mount, in the fleet's own namespace;
// the host's value is not changed.
func TestCredentialRenewalDefaults(t *testing.T) {
	o := minimal()
	o.Claim.FleetNamespace = "agents"
	o.Management.CredentialRenewal = &CredentialRenewal{}
	if r := o.WithDefaults().Management.CredentialRenewal; *r != (CredentialRenewal{
		Secret: types.NamespacedName{Namespace: "agents", Name: fleetspec.DefaultCredentialSecret}, SecretKey: fleetspec.DefaultCredentialSecretKey}) {
		t.Fatalf("library defaults %+v", r)
	}
	if *o.Management.CredentialRenewal != (CredentialRenewal{}) {
		t.Fatal("withDefaults changed the host's CredentialRenewal")
	}
}

// Every invalid field is refused with ErrInvalidOptions and named; all of them at once.
func TestOptionsErrorsNameTheField(t *testing.T) {
	cases := map[string]struct {
		edit func(*Options)
		want []string
	}{
		"no management":     {func(o *Options) { o.Management.Config = nil }, []string{"management.config: Required value"}},
		"no region":         {func(o *Options) { o.Region = "" }, []string{"region: Required value"}},
		"bad region":        {func(o *Options) { o.Region = "US_East" }, []string{"region: Invalid value"}},
		"domain":            {func(o *Options) { o.AnnotationDomain = "Not A Domain" }, []string{"annotationDomain: Invalid value"}},
		"cluster ID":        {func(o *Options) { o.Management.ClusterID = "prod" }, []string{"management.clusterID: Invalid value"}},
		"suffix":            {func(o *Options) { o.Shard.RemoteResourceSuffix = "-US" }, []string{"shard.remoteResourceSuffix: Invalid value"}},
		"selector":          {func(o *Options) { o.Shard.LabelSelector = "a in (" }, []string{"shard.labelSelector: Invalid value"}},
		"no kinds":          {func(o *Options) { o.Resources = nil }, []string{"resources: Required value"}},
		"nil object":        {func(o *Options) { o.Resources[0].Object = nil }, []string{"resources[0].object: Required value"}},
		"no gvk":            {func(o *Options) { o.Resources[0].Object = &unstructured.Unstructured{} }, []string{"resources[0].version: Invalid value", "resources[0].kind: Invalid value"}},
		"untyped in scheme": {func(o *Options) { o.Resources[0].Object = &corev1ConfigMapLike{} }, []string{"resources[0].object: Invalid value", "not registered"}},
		"privileged":        {func(o *Options) { o.Resources[0].Object = kind("rbac.authorization.k8s.io", "v1", "Role") }, []string{"resources[0].kind: Forbidden", "resources[0].allowPrivileged"}},
		"secret kind":       {func(o *Options) { o.Resources[0].Object = kind("", "v1", "Secret") }, []string{"resources[0].kind: Forbidden"}},
		"strategy":          {func(o *Options) { o.Resources[0].Strategy = "Merge" }, []string{"resources[0].strategy: Unsupported value"}},
		"adoption":          {func(o *Options) { o.Resources[0].Adoption = "Steal" }, []string{"resources[0].adoption: Unsupported value"}},
		"concurrency":       {func(o *Options) { o.Resources[0].Concurrency = 1000 }, []string{"resources[0].concurrency: Invalid value"}},
		"duplicate kind":    {func(o *Options) { o.Resources = append(o.Resources, o.Resources[0]) }, []string{"resources[1]: Duplicate value"}},
		"budget fraction":   {func(o *Options) { o.DeletionBudget.MaxFraction = ptr.To(2.0) }, []string{"deletionBudget.maxFraction: Invalid value"}},
		"budget fraction 0": {func(o *Options) { o.DeletionBudget.MaxFraction = ptr.To(0.0) }, []string{"deletionBudget.maxFraction: Invalid value"}},
		"budget min":        {func(o *Options) { o.DeletionBudget.MinObjects = ptr.To(-1) }, []string{"deletionBudget.minObjects: Invalid value"}},
		"resync":            {func(o *Options) { o.ResyncPeriod = time.Second }, []string{"resyncPeriod: Invalid value"}},
		"heartbeat":         {func(o *Options) { o.HeartbeatInterval = time.Hour }, []string{"heartbeatInterval: Invalid value"}},
		"start jitter":      {func(o *Options) { o.Management.StartJitter = -time.Second }, []string{"management.startJitter: Invalid value"}},
		"renewal secret": {func(o *Options) {
			o.Management.CredentialRenewal = &CredentialRenewal{Secret: types.NamespacedName{Name: "Bad!"}}
		}, []string{"management.credentialRenewal.secretName: Invalid value"}},
		"renewal lifetime": {func(o *Options) { o.Management.CredentialRenewal = &CredentialRenewal{Lifetime: time.Minute} }, []string{"management.credentialRenewal.lifetime: Invalid value"}},
		"renewal margin": {func(o *Options) {
			o.Management.CredentialRenewal = &CredentialRenewal{Lifetime: time.Hour, RenewBefore: 2 * time.Hour}
		}, []string{"management.credentialRenewal.renewBefore: Invalid value"}},
		"scope":           {func(o *Options) { o.Claim.Scope = "PerRegion" }, []string{"claim.scope: Unsupported value"}},
		"fleet namespace": {func(o *Options) { o.Claim.FleetNamespace = "Fleet" }, []string{"claim.fleetNamespace: Invalid value"}},
		"claim timings":   {func(o *Options) { o.Claim.LeaseDuration = 5 * time.Second }, []string{"claim.leaseDuration: Invalid value"}},
		"all at once": {func(o *Options) { o.Region, o.Shard.RemoteResourceSuffix, o.ResyncPeriod = "", "-US", time.Second },
			[]string{"3 invalid fields", "region: Required value", "shard.remoteResourceSuffix", "resyncPeriod"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := minimal()
			tc.edit(&o)
			_, _, _, err := o.complete(runtime.NewScheme())
			if !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("error %v, want ErrInvalidOptions", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// corev1ConfigMapLike is a typed object no scheme of the test knows.
type corev1ConfigMapLike struct{ unstructured.Unstructured }

func settingsDiff(got, want *syncer.Settings) string {
	g, w := *got, *want
	if len(g.Shard.ExcludedNamespaces) == 0 && len(w.Shard.ExcludedNamespaces) == 0 {
		g.Shard.ExcludedNamespaces, w.Shard.ExcludedNamespaces = nil, nil
	}
	for i := range g.Resources {
		if len(g.Resources[i].Secrets) == 0 {
			g.Resources[i].Secrets = nil
		}
	}
	if !reflect.DeepEqual(g, w) {
		return fmt.Sprintf("settings\n got %+v\nwant %+v", g, w)
	}
	return ""
}

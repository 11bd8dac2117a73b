package shard

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
)

func TestCheckRegistered(t *testing.T) {
	tenant := schema.GroupVersionKind{Group: "demo.regionsync.dev", Version: "v1alpha1", Kind: "Tenant"}
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	cfg := fleetspec.Shard{NamespacePrefix: "tenant-", RemoteResourceSuffix: "-us-east-1", LabelSelector: "regionsync.dev/region=us-east-1"}
	registered := func(mutate ...func(*regionsyncv1alpha1.RegionShard)) *regionsyncv1alpha1.RegionShard {
		r := &regionsyncv1alpha1.RegionShard{
			AnnotationDomain: "regionsync.dev", NamespacePrefix: "tenant-", RemoteResourceSuffix: "-us-east-1",
			LabelSelector: "regionsync.dev/region=us-east-1", Kinds: []string{"Tenant.demo.regionsync.dev", "ConfigMap"},
		}
		for _, m := range mutate {
			m(r)
		}
		return r
	}
	for name, tc := range map[string]struct {
		domain     string
		registered *regionsyncv1alpha1.RegionShard
		kinds      []schema.GroupVersionKind
		want       []string // substrings of the error; none = no error
	}{
		"nothing registered keeps working": {"", nil, []schema.GroupVersionKind{tenant}, nil},
		"equal (kinds in any order, default domain)": {"", registered(func(r *regionsyncv1alpha1.RegionShard) { r.AnnotationDomain = "" }),
			[]schema.GroupVersionKind{cm, tenant}, nil},
		"other suffix": {"", registered(func(r *regionsyncv1alpha1.RegionShard) { r.RemoteResourceSuffix = "-eu-west-1" }),
			[]schema.GroupVersionKind{tenant, cm}, []string{`shard.remoteResourceSuffix: configured "-us-east-1", registered "-eu-west-1"`}},
		"other domain and selector": {"cloud.teleport.dev", registered(func(r *regionsyncv1alpha1.RegionShard) { r.LabelSelector = "" }),
			[]schema.GroupVersionKind{tenant, cm}, []string{"annotationDomain:", "shard.labelSelector:"}},
		"a kind more than registered": {"", registered(), []schema.GroupVersionKind{tenant},
			[]string{`resources (kinds): configured "Tenant.demo.regionsync.dev", registered "ConfigMap,Tenant.demo.regionsync.dev"`}},
		"other prefix and namespace suffixes": {"", registered(func(r *regionsyncv1alpha1.RegionShard) {
			r.NamespacePrefix, r.RemoteNamespaceSuffix, r.LocalNamespaceSuffix = "team-", "-m", "-l"
		}), []schema.GroupVersionKind{tenant, cm}, []string{"shard.namespacePrefix", "shard.remoteNamespaceSuffix", "shard.localNamespaceSuffix"}},
	} {
		t.Run(name, func(t *testing.T) {
			err := CheckRegistered(tc.domain, cfg, tc.kinds, tc.registered)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("CheckRegistered: %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("CheckRegistered: nil, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

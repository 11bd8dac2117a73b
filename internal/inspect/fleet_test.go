package inspect

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/shard"
)

// registered is a Region of name with spec.shard: names *suffix labelled for it, copies in
// namespaces ending in suffix, under domain ("" = default).
func registered(name, suffix, domain string) *regionsyncv1alpha1.Region {
	return readyRegion(name, func(r *regionsyncv1alpha1.Region) {
		r.Spec.Shard = &regionsyncv1alpha1.RegionShard{
			AnnotationDomain: domain, RemoteResourceSuffix: suffix, LocalNamespaceSuffix: suffix,
			LabelSelector: "regionsync.dev/region=" + name, Kinds: []string{tenantKind},
		}
	})
}

func TestRegisterShard(t *testing.T) {
	cases := []struct {
		name  string
		lease *ShardRecord
		// noLease, known: the merged record has no Lease / knows the local suffix.
		noLease, known bool
	}{
		{name: "no Lease: the registered shard alone", noLease: true, known: true},
		{name: "a Lease without a definition takes the registered one", lease: liveShard("use", "-use", func(s *ShardRecord) { s.DefErr = errTest }), known: true},
		{name: "the same shard on both", lease: liveShard("use", "-use"), known: true},
		{name: "a Lease of another shard is kept as it is", lease: liveShard("use", "-other")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := fleetOf(nil)
			if tc.lease != nil {
				f.Shards["use"] = tc.lease
			}
			f.register(registered("use", "-use", ""))
			s := f.Shards["use"]
			if s == nil || s.DefErr != nil {
				t.Fatalf("record %+v", s)
			}
			_, known := s.localSuffix()
			if s.NoLease != tc.noLease || known != tc.known {
				t.Errorf("noLease %v, local suffix known %v; want %v, %v", s.NoLease, known, tc.noLease, tc.known)
			}
		})
	}
}

var errTest = errors.New("no definition")

func TestExplainRegisteredShard(t *testing.T) {
	obj := func(ns, name, region string) *unstructured.Unstructured { return syncedTenant(ns, name, region) }
	cases := []struct {
		name    string
		fleet   *Fleet
		obj     *unstructured.Unstructured
		verdict string
		want    string
	}{
		{
			name:  "the copy's namespace is known exactly",
			fleet: withRegistered(fleetOf([]*ShardRecord{liveShard("use", "-use")}), registered("use", "-use", "")), obj: obj("acme", "web-use", "use"),
			verdict: VerdictSynced, want: "copy acme-use/web\n",
		},
		{
			name:  "registered, but no agent claims",
			fleet: withRegistered(fleetOf(nil), registered("use", "-use", "")), obj: obj("acme", "web-use", "use"),
			verdict: VerdictRegionNotLive, want: "registered on its Region (spec.shard) but no agent holds its shard Lease",
		},
		{
			name: "the region's own annotation domain",
			fleet: withRegistered(fleetOf([]*ShardRecord{liveShard("tp", "-tp", func(s *ShardRecord) { s.Def.LabelSelector = "regionsync.dev/region=tp" })}),
				registered("tp", "-tp", "cloud.teleport.dev")),
			obj: syncedTenant("acme", "web-tp", "tp", func(u *unstructured.Unstructured) {
				k := shard.NewKeys("cloud.teleport.dev")
				u.SetFinalizers([]string{k.Finalizer})
				u.SetAnnotations(map[string]string{k.RemoteGeneration: "2", k.LocalGeneration: "1"})
			}),
			verdict: VerdictSynced, want: "claimed: finalizer cloud.teleport.dev/sync-local",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := Explain(ExplainInput{Keys: testKeys, Kind: tenantKind, Namespace: tc.obj.GetNamespace(), Name: tc.obj.GetName(), Object: tc.obj, Fleet: tc.fleet, Now: testNow})
			if e.Verdict != tc.verdict {
				t.Fatalf("verdict %s (%s), want %s", e.Verdict, e.Summary, tc.verdict)
			}
			var text strings.Builder
			for _, f := range e.Findings {
				text.WriteString(f.Text + "\n")
			}
			if !strings.Contains(text.String(), tc.want) {
				t.Errorf("findings lack %q:\n%s", tc.want, text.String())
			}
		})
	}
}

func withRegistered(f *Fleet, regions ...*regionsyncv1alpha1.Region) *Fleet {
	for _, r := range regions {
		f.Regions[r.Name] = r
		f.register(r)
	}
	return f
}

func TestSummarizeDistributions(t *testing.T) {
	dist := func(name string, conds ...metav1.Condition) unstructured.Unstructured {
		list := make([]any, 0, len(conds))
		for _, c := range conds {
			list = append(list, map[string]any{"type": c.Type, "status": string(c.Status), "reason": c.Reason})
		}
		u := unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": list}}}
		u.SetNamespace("acme")
		u.SetName(name)
		return u
	}
	s := SummarizeDistributions([]unstructured.Unstructured{
		dist("fine", metav1.Condition{Type: "Available", Status: metav1.ConditionTrue, Reason: "Available"}),
		dist("rolling", metav1.Condition{Type: "Available", Status: metav1.ConditionFalse, Reason: "Progressing"}),
		dist("waves", metav1.Condition{Type: "Progressing", Status: metav1.ConditionTrue}),
		dist("stopped", metav1.Condition{Type: "Halted", Status: metav1.ConditionTrue}),
		dist("broken", metav1.Condition{Type: "Degraded", Status: metav1.ConditionTrue}, metav1.Condition{Type: "Available", Status: metav1.ConditionFalse, Reason: "Unhealthy"}),
		dist("shrinking", metav1.Condition{Type: "RemovalHeld", Status: metav1.ConditionTrue}),
		dist("new"),
	})
	want := DistributionSummary{Total: 7, Progressing: 2, Halted: 1, Degraded: 1, RemovalHeld: 1, NeedAttention: []string{"acme/broken", "acme/shrinking", "acme/stopped"}}
	if s.Total != want.Total || s.Progressing != want.Progressing || s.Halted != want.Halted || s.Degraded != want.Degraded || s.RemovalHeld != want.RemovalHeld ||
		strings.Join(s.NeedAttention, ",") != strings.Join(want.NeedAttention, ",") {
		t.Errorf("summary %+v, want %+v", *s, want)
	}
}

package inspect

import (
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/shard/claim"
)

const tenantKind = "Tenant.demo.regionsync.dev"

var (
	testNow  = time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	testKeys = shard.NewKeys("regionsync.dev")
)

// liveShard is a syncing, live shard of region over Tenants with a name suffix and the shipped
// label selector.
func liveShard(region, suffix string, mutate ...func(*ShardRecord)) *ShardRecord {
	s := &ShardRecord{
		Region: region, Lease: "regionsync-system/region-" + region, State: claim.StateSyncing,
		Holder: region + "-fleet", Live: true, Renewed: testNow.Add(-3 * time.Second), Registered: testNow.Add(-time.Hour),
		Def: shard.Definition{Region: region, RemoteResourceSuffix: suffix, LabelSelector: "regionsync.dev/region=" + region, Kinds: []string{tenantKind}},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func readyRegion(name string, mutate ...func(*regionsyncv1alpha1.Region)) *regionsyncv1alpha1.Region {
	r := &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: name}}
	r.Status.Conditions = []metav1.Condition{{Type: regionsyncv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: regionsyncv1alpha1.ReasonReady}}
	r.Status.HeartbeatTime = &metav1.Time{Time: testNow.Add(-5 * time.Second)}
	r.Status.Resources = []regionsyncv1alpha1.ResourceCounts{{Resource: tenantKind, Synced: 3}}
	for _, m := range mutate {
		m(r)
	}
	return r
}

func fleetOf(shards []*ShardRecord, regions ...*regionsyncv1alpha1.Region) *Fleet {
	f := &Fleet{Shards: map[string]*ShardRecord{}, Regions: map[string]*regionsyncv1alpha1.Region{}}
	for _, s := range shards {
		f.Shards[s.Region] = s
	}
	for _, r := range regions {
		f.Regions[r.Name] = r
	}
	return f
}

// syncedTenant is a management Tenant the agent of region has claimed and copied at generation 2.
func syncedTenant(ns, name, region string, mutate ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "demo.regionsync.dev/v1alpha1", "kind": "Tenant",
		"spec": map[string]any{"displayName": "Web"},
	}}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID("uid-1")
	u.SetGeneration(2)
	u.SetLabels(map[string]string{"regionsync.dev/region": region})
	u.SetFinalizers([]string{testKeys.Finalizer})
	u.SetAnnotations(map[string]string{testKeys.RemoteGeneration: "2", testKeys.LocalGeneration: "1"})
	for _, m := range mutate {
		m(u)
	}
	return u
}

// copyOfTenant is region use's copy of u at generation 1.
func copyOfTenant(u *unstructured.Unstructured, localName string, mutate ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	c := &unstructured.Unstructured{Object: map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(), "spec": map[string]any{"displayName": "Web"}}}
	c.SetNamespace(u.GetNamespace())
	c.SetName(localName)
	c.SetGeneration(1)
	c.SetLabels(map[string]string{testKeys.Region: "use"})
	c.SetAnnotations(map[string]string{testKeys.RemoteUID: string(u.GetUID())})
	for _, m := range mutate {
		m(c)
	}
	return c
}

func withAnnotation(k, v string) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		a := u.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[k] = v
		u.SetAnnotations(a)
	}
}

func TestExplainVerdicts(t *testing.T) {
	use, euw := liveShard("use", "-use"), liveShard("euw", "-euw")
	twoRegions := fleetOf([]*ShardRecord{use, euw}, readyRegion("use"), readyRegion("euw"))
	terminating := func(u *unstructured.Unstructured) {
		u.SetDeletionTimestamp(&metav1.Time{Time: testNow.Add(-time.Minute)})
	}
	cases := []struct {
		name string
		in   ExplainInput
		// verdict is the expected verdict; want are substrings of the summary or of a finding.
		verdict string
		want    []string
	}{
		{
			name:    "synced and current, with the copy and its trace",
			in:      ExplainInput{Object: syncedTenant("acme", "web-use", "use", withAnnotation(testKeys.TraceParent, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")), Fleet: twoRegions, RegionRead: true},
			verdict: VerdictSynced,
			want:    []string{"region use takes it", "current: generation 2", "4bf92f3577b34da6a3ce929d0e0e4736", "content is management's"},
		},
		{
			name:    "name suffix of no shard",
			in:      ExplainInput{Object: syncedTenant("acme", "web-apac", "use"), Fleet: twoRegions},
			verdict: VerdictNoShard,
			want:    []string{`name "web-apac" does not end with the shard's suffix "-use"`},
		},
		{
			name:    "label selector",
			in:      ExplainInput{Object: syncedTenant("acme", "web-use", "euw"), Fleet: twoRegions},
			verdict: VerdictNoShard,
			want:    []string{`regionsync.dev/region=euw do not match the shard's selector "regionsync.dev/region=use"`},
		},
		{
			name:    "labelled for a region without a shard",
			in:      ExplainInput{Object: syncedTenant("acme", "web-apac", "apac"), Fleet: twoRegions},
			verdict: VerdictNoShard,
			want:    []string{"region apac has no shard Lease"},
		},
		{
			name:    "namespace prefix",
			in:      ExplainInput{Object: syncedTenant("acme", "web-use", "use"), Fleet: fleetOf([]*ShardRecord{liveShard("use", "-use", func(s *ShardRecord) { s.Def.NamespacePrefix = "tenant-" })})},
			verdict: VerdictNoShard,
			want:    []string{`namespace "acme" does not start with the shard's namespacePrefix "tenant-"`},
		},
		{
			name:    "kind not synced",
			in:      ExplainInput{Object: syncedTenant("acme", "web-use", "use"), Fleet: fleetOf([]*ShardRecord{liveShard("use", "-use", func(s *ShardRecord) { s.Def.Kinds = []string{"ConfigMap"} })})},
			verdict: VerdictNoShard,
			want:    []string{"syncs ConfigMap, not " + tenantKind},
		},
		{
			name: "overlapping shards",
			in: ExplainInput{Object: syncedTenant("acme", "web-us-east", "x"), Fleet: fleetOf([]*ShardRecord{
				liveShard("east", "-east", func(s *ShardRecord) { s.Def.LabelSelector = "" }),
				liveShard("us-east", "-us-east", func(s *ShardRecord) { s.Def.LabelSelector = ""; s.State = claim.StateRefused }),
			})},
			verdict: VerdictShardOverlap,
			want:    []string{"regions east, us-east overlap", "east syncs (registered first)"},
		},
		{
			name:    "protected namespace",
			in:      ExplainInput{Object: syncedTenant("kube-system", "web-use", "use"), Fleet: twoRegions},
			verdict: VerdictProtectedNamespace,
			want:    []string{"system namespace kube-system"},
		},
		{
			name: "protected namespace the agent reported",
			in: ExplainInput{Object: syncedTenant("agents", "web-use", "use"), Fleet: twoRegions,
				Events: []EventLine{{Time: testNow, Type: "Warning", Reason: reasonProtectedNamespace, Message: "acme/web-use maps to local namespace agents, which regionsync never writes"}}},
			verdict: VerdictProtectedNamespace,
			want:    []string{"the agent refused it"},
		},
		{
			name:    "invalid mapping",
			in:      ExplainInput{Object: syncedTenant("acme", "-use", "use"), Fleet: twoRegions},
			verdict: VerdictInvalidMapping,
			want:    []string{"maps to invalid local"},
		},
		{
			name: "region not live",
			in: ExplainInput{Object: syncedTenant("acme", "web-use", "use"), Fleet: fleetOf([]*ShardRecord{liveShard("use", "-use", func(s *ShardRecord) {
				s.Live, s.Renewed = false, testNow.Add(-2*time.Hour)
			})}, readyRegion("use"))},
			verdict: VerdictRegionNotLive,
			want:    []string{"last renewed 120m ago"},
		},
		{
			name: "shard refused",
			in: ExplainInput{Object: syncedTenant("acme", "web-use", "use"), Fleet: fleetOf([]*ShardRecord{liveShard("use", "-use", func(s *ShardRecord) { s.State = claim.StateRefused })},
				readyRegion("use", func(r *regionsyncv1alpha1.Region) {
					r.Status.Conditions = append(r.Status.Conditions, metav1.Condition{Type: regionsyncv1alpha1.ConditionShardClaimed, Status: metav1.ConditionFalse, Reason: regionsyncv1alpha1.ReasonShardOverlap, Message: "collides with the shard of region other"})
				}))},
			verdict: VerdictShardRefused,
			want:    []string{"collides with the shard of region other"},
		},
		{
			name: "deletion held",
			in: ExplainInput{Object: syncedTenant("acme", "web-use", "use", terminating), Fleet: fleetOf([]*ShardRecord{use}, readyRegion("use", func(r *regionsyncv1alpha1.Region) {
				r.Status.Resources[0].DeletionsHeld = 4
				r.Annotations = map[string]string{testKeys.ReleaseDeletionsBefore: "2026-01-01T00:00:00Z"}
			}))},
			verdict: VerdictDeletionHeld,
			want:    []string{"holds the deletion of its copy", "4 " + tenantKind + " deletions held", "release --region use --before now", "2026-01-01T00:00:00Z"},
		},
		{
			name:    "terminating, not held",
			in:      ExplainInput{Object: syncedTenant("acme", "web-use", "use", terminating), Fleet: twoRegions},
			verdict: VerdictDeleting,
			want:    []string{"the agent deletes the copy"},
		},
		{
			name:    "paused on management",
			in:      ExplainInput{Object: syncedTenant("acme", "web-use", "use", withAnnotation(testKeys.Paused, "true")), Fleet: twoRegions},
			verdict: VerdictPaused,
			want:    []string{"paused on management"},
		},
		{
			name: "write fight in the region",
			in: ExplainInput{Object: syncedTenant("acme", "web-use", "use"), Fleet: twoRegions, RegionRead: true,
				CopyEvents: []EventLine{{Time: testNow.Add(-time.Minute), Type: "Warning", Reason: reasonWriteFight, Message: "a writer in region use keeps undoing the spec of the local copy"}}},
			verdict: VerdictWriteFight,
			want:    []string{"write fight 60s ago: a writer in region use"},
		},
		{
			name: "not claimed",
			in: ExplainInput{Object: syncedTenant("acme", "web-use", "use", func(u *unstructured.Unstructured) {
				u.SetFinalizers(nil)
				u.SetAnnotations(nil)
			}), Fleet: twoRegions},
			verdict: VerdictNotClaimed,
			want:    []string{"not claimed", "never copied"},
		},
		{
			name:    "not current",
			in:      ExplainInput{Object: syncedTenant("acme", "web-use", "use", func(u *unstructured.Unstructured) { u.SetGeneration(3) }), Fleet: twoRegions},
			verdict: VerdictNotCurrent,
			want:    []string{"management generation 3, last copied 2"},
		},
		{
			name:    "not found, no region read",
			in:      ExplainInput{Fleet: twoRegions},
			verdict: VerdictNotFound,
			want:    []string{"give --region-context"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Keys, in.Kind, in.Now = testKeys, tenantKind, testNow
			if in.Object != nil {
				in.Namespace, in.Name = in.Object.GetNamespace(), in.Object.GetName()
				if in.RegionRead && tc.verdict == VerdictSynced {
					in.Copy = copyOfTenant(in.Object, strings.TrimSuffix(in.Name, "-use"),
						withAnnotation(testKeys.TraceParent, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"))
				}
			} else {
				in.Namespace, in.Name = "acme", "gone-use"
			}
			e := Explain(in)
			if e.Verdict != tc.verdict {
				t.Fatalf("verdict %s (%s), want %s; findings %+v", e.Verdict, e.Summary, tc.verdict, e.Findings)
			}
			text := e.Summary + "\n" + e.OtherShards
			for _, f := range e.Findings {
				text += "\n" + f.Text
			}
			for _, s := range e.Shards {
				for _, m := range s.Misses {
					text += "\n" + m.Text
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("explanation lacks %q:\n%s", w, text)
				}
			}
		})
	}
}

// A kind without metadata.generation (ConfigMap): current when the agent's applied-content hash
// is the hash of the object now; not current once the content changed, or without a hash.
func TestExplainKindWithoutGeneration(t *testing.T) {
	cm := func(color string, mutate ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"color": color}}}
		u.SetNamespace("acme")
		u.SetName("settings-use")
		u.SetUID("uid-1")
		u.SetLabels(map[string]string{"regionsync.dev/region": "use"})
		u.SetFinalizers([]string{testKeys.Finalizer})
		u.SetAnnotations(map[string]string{testKeys.RemoteGeneration: "0", testKeys.LocalGeneration: "0"})
		for _, m := range mutate {
			m(u)
		}
		return u
	}
	applied := withAnnotation(testKeys.AppliedHash, testKeys.AppliedContentHash(cm("blue")))
	fleet := fleetOf([]*ShardRecord{liveShard("use", "-use", func(s *ShardRecord) { s.Def.Kinds = []string{"ConfigMap"} })}, readyRegion("use"))
	for name, tc := range map[string]struct {
		obj     *unstructured.Unstructured
		verdict string
		want    string
	}{
		"copied as it is":        {cm("blue", applied), VerdictSynced, "current: the content copied down is the object's now"},
		"changed since the copy": {cm("green", applied), VerdictNotCurrent, "the content changed since the agent last copied it"},
		"no hash recorded":       {cm("blue"), VerdictNotCurrent, "an agent that records none cannot tell"},
	} {
		t.Run(name, func(t *testing.T) {
			e := Explain(ExplainInput{Object: tc.obj, Fleet: fleet, Keys: testKeys, Kind: "ConfigMap", Now: testNow,
				Namespace: tc.obj.GetNamespace(), Name: tc.obj.GetName()})
			text := e.Summary
			for _, f := range e.Findings {
				text += "\n" + f.Text
			}
			if e.Verdict != tc.verdict || !strings.Contains(text, tc.want) {
				t.Errorf("verdict %s, want %s containing %q:\n%s", e.Verdict, tc.verdict, tc.want, text)
			}
		})
	}
}

// A copy found in the region whose management object is gone: its deletion held by the budget.
func TestExplainOrphanCopyHeld(t *testing.T) {
	gone := syncedTenant("acme", "web-use", "use")
	in := ExplainInput{
		Keys: testKeys, Kind: tenantKind, Namespace: "acme", Name: "web-use", Now: testNow, RegionRead: true,
		Fleet: fleetOf([]*ShardRecord{liveShard("use", "-use"), liveShard("use2", "-use", func(s *ShardRecord) { s.State = claim.StateRefused })}, readyRegion("use")),
		Copy:  copyOfTenant(gone, "web"),
		CopyEvents: []EventLine{{Time: testNow, Type: "Warning", Reason: reasonDeletionHeld,
			Message: "2 deletions of local Tenant.demo.regionsync.dev copies held by the deletion budget"}},
	}
	e := Explain(in)
	if e.Verdict != VerdictDeletionHeld || e.Region != "use" {
		t.Fatalf("verdict %s in region %q (%s), want DeletionHeld in use", e.Verdict, e.Region, e.Summary)
	}
	if !strings.Contains(e.Summary, "the object is gone from management") {
		t.Errorf("summary %q does not say the object is gone", e.Summary)
	}
}

// With 1,000 shards the nearest misses are listed and the rest counted, not listed.
func TestExplainManyShardsSummarized(t *testing.T) {
	shards := make([]*ShardRecord, 0, 1000)
	for i := range 1000 {
		shards = append(shards, liveShard("r"+strconv.Itoa(i), "-r"+strconv.Itoa(i)))
	}
	e := Explain(ExplainInput{Keys: testKeys, Kind: tenantKind, Namespace: "acme", Name: "web-r1000", Now: testNow, Object: syncedTenant("acme", "web-r1000", "nowhere"), Fleet: fleetOf(shards)})
	if e.Verdict != VerdictNoShard {
		t.Fatalf("verdict %s, want NoShard", e.Verdict)
	}
	if len(e.Shards) > nearMisses {
		t.Errorf("%d shards listed, want at most %d", len(e.Shards), nearMisses)
	}
	if !strings.Contains(e.OtherShards, "1000 other shards miss it") {
		t.Errorf("other shards: %q", e.OtherShards)
	}
}

func TestTraceID(t *testing.T) {
	for tp, want := range map[string]string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": "4bf92f3577b34da6a3ce929d0e0e4736",
		"": "", "garbage": "", "00-short-00f067aa0ba902b7-01": "",
	} {
		if got := traceID(tp); got != want {
			t.Errorf("traceID(%q) = %q, want %q", tp, got, want)
		}
	}
}

func TestDrift(t *testing.T) {
	remote := syncedTenant("acme", "web-use", "use")
	same := copyOfTenant(remote, "web")
	if d := drift(remote, same); d != "" {
		t.Errorf("drift of an identical copy: %s", d)
	}
	changed := copyOfTenant(remote, "web", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "Changed in the region", "spec", "displayName")
	})
	if d := drift(remote, changed); !strings.Contains(d, "Changed in the region") || !strings.Contains(d, `"Web"`) {
		t.Errorf("drift does not show both values: %s", d)
	}
}

func TestRenderExplanation(t *testing.T) {
	e := &Explanation{
		Object: tenantKind + " acme/web-apac", Verdict: VerdictNoShard, Summary: "no region's shard takes it",
		Shards: []ShardVerdict{
			{Region: "use", Misses: []Miss{{"name", `name "web-apac" does not end with the shard's suffix "-use"`}, {"labels", "labels x=y do not match"}}},
			{Region: "euw", Takes: true, Shard: "region euw (names *-euw, " + tenantKind + ")"},
		},
		OtherShards: "998 other shards miss it: 998 by name",
		Findings:    []Finding{{Topic: TopicShard, Text: "no region's shard takes it"}, {Topic: TopicClaim, OK: true, Text: "claimed"}},
		Drift:       "-a\n+b\n",
		Copy:        "acme-use/web in region use",
		CopyObject:  map[string]any{"spec": map[string]any{"displayName": "Web"}},
	}
	for i := range 7 {
		e.Events = append(e.Events, EventLine{Time: testNow.Add(time.Duration(i-10) * time.Minute), Type: "Normal", Reason: "R" + strconv.Itoa(i), Message: "line\nbreak"})
	}
	var out strings.Builder
	if err := WriteExplanation(&out, e, 3, testNow); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"Verdict: NoShard: no region's shard takes it\n",
		`  use does not: name "web-apac" does not end with the shard's suffix "-use"; labels x=y do not match` + "\n",
		"  euw takes it: region euw (names *-euw, " + tenantKind + ")\n",
		"  998 other shards miss it: 998 by name\n",
		"  !! shard     no region's shard takes it\n",
		"  ok claim     claimed\n",
		"Drift (- management, + copy):\n-a\n+b\n",
		"Events on management:",
		"Copy acme-use/web in region use:\n  spec:\n    displayName: Web\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	// The last 3 events, oldest first, each on one line.
	for i, reason := range []string{"R4", "R5", "R6"} {
		if !strings.Contains(text, reason) {
			t.Errorf("event %d (%s) missing:\n%s", i, reason, text)
		}
	}
	if strings.Contains(text, "R3") || strings.Contains(text, "line\nbreak") || strings.Contains(text, "Events of the copy") {
		t.Errorf("older events, multi-line messages or an empty copy section shown:\n%s", text)
	}
	if strings.Index(text, "R4") > strings.Index(text, "R6") {
		t.Errorf("events not oldest first:\n%s", text)
	}
}

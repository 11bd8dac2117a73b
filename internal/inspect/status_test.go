package inspect

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
)

func TestVersionSkew(t *testing.T) {
	cases := []struct {
		name     string
		versions map[string]string
		hub      string
		newest   string
		flagged  []string
	}{
		{"one version", map[string]string{"a": "v0.4.0", "b": "v0.4.0"}, "", "v0.4.0", nil},
		{"adjacent minors are within the policy", map[string]string{"a": "v0.4.2", "b": "v0.5.0"}, "", "v0.5.0", nil},
		{"two minors behind", map[string]string{"a": "v0.3.9", "b": "v0.5.0", "c": "v0.4.0"}, "", "v0.5.0", []string{"a"}},
		{"another major", map[string]string{"a": "v1.0.0", "b": "v2.0.0"}, "", "v2.0.0", []string{"a"}},
		{"development builds are not judged", map[string]string{"a": "dev", "b": "", "c": "v0.5.0"}, "", "v0.5.0", nil},
		{"nothing released", map[string]string{"a": "dev"}, "", "", nil},
		{"within one minor of the hub, either side", map[string]string{"a": "v0.4.0", "b": "v0.5.0"}, "v0.5.1", "v0.5.0", nil},
		{"two minors behind the hub", map[string]string{"a": "v0.3.0", "b": "v0.4.0"}, "v0.5.0", "v0.4.0", []string{"a"}},
		{"two minors ahead of the hub", map[string]string{"a": "v0.7.0", "b": "v0.6.0"}, "v0.5.0", "v0.7.0", []string{"a"}},
		{"another major than the hub", map[string]string{"a": "v1.0.0"}, "v0.9.0", "v1.0.0", []string{"a"}},
		{"a development hub is not judged", map[string]string{"a": "v0.5.0", "b": "v0.4.0"}, "dev", "v0.5.0", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			newest, flagged := VersionSkew(tc.versions, tc.hub)
			if newest != tc.newest {
				t.Errorf("newest %q, want %q", newest, tc.newest)
			}
			var got []string
			for _, r := range slices.Sorted(maps.Keys(tc.versions)) {
				if flagged[r] != "" {
					got = append(got, r)
				}
			}
			if diff := cmp.Diff(tc.flagged, got); diff != "" {
				t.Errorf("flagged regions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderStatus(t *testing.T) {
	use := liveShard("use", "-use")
	gone := liveShard("gone", "-gone", func(s *ShardRecord) { s.Live = false; s.Renewed = testNow.Add(-2 * time.Hour) })
	f := fleetOf([]*ShardRecord{use, gone},
		readyRegion("use", func(r *regionsyncv1alpha1.Region) {
			r.Status.Leader, r.Status.AgentVersion = "agent-0", "v0.5.0"
			r.Status.Resources = append(r.Status.Resources, regionsyncv1alpha1.ResourceCounts{Resource: "ConfigMap", Synced: 7, Pending: 1, Failed: 2, DeletionsHeld: 3})
		}),
		readyRegion("old", func(r *regionsyncv1alpha1.Region) {
			r.Status.AgentVersion = "v0.3.0"
			r.Status.Conditions[0] = metav1.Condition{Type: regionsyncv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: regionsyncv1alpha1.ReasonNotReady}
		}),
	)
	f.Regions["new"] = registered("new", "-new", "")
	f.register(f.Regions["new"])
	report := BuildStatus(f, "")
	report.Distributions = &DistributionSummary{Total: 3, Progressing: 1, Halted: 1, NeedAttention: []string{"acme/web"}}
	for i := range report.Regions {
		if report.Regions[i].Name == "use" {
			report.Regions[i].Distributions = &RegionDistributions{Progressing: 2, Halted: 1}
		}
	}
	var out bytes.Buffer
	if err := WriteStatusTable(&out, report, false, testNow); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	wantRows := [][]string{
		{"REGION", "READY", "LIVE", "REPORTED", "RENEWED", "LEADER", "VERSION", "DISTRIBUTIONS", "KIND", "SYNCED", "PENDING", "FAILED", "HELD"},
		{"gone", "no", "Region", "no", "-", "120m", "-", "-", "-", "-", "-", "-", "-", "-"},
		{"new", "True", "no", "Lease", "5s", "-", "-", "-", "-", tenantKind, "3", "0", "0", "0"},
		{"old", "False", "(NotReady)", "no", "Lease", "5s", "-", "-", "v0.3.0", "SKEW", "-", tenantKind, "3", "0", "0", "0"},
		{"use", "True", "yes", "5s", "3s", "agent-0", "v0.5.0", "2", "progressing,", "1", "halted", "ConfigMap", "7", "1", "2", "3"},
		{"use", tenantKind, "3", "0", "0", "0"},
	}
	for i, want := range wantRows {
		if got := strings.Fields(lines[i]); !cmp.Equal(got, want) {
			t.Errorf("line %d: %q, want fields %q", i, lines[i], want)
		}
	}
	for _, want := range []string{"SKEW: 1 region(s)", "v0.5.0", "Distributions: 3, 1 progressing, 1 halted, 0 degraded, 0 with removals held (need attention: acme/web)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// Without the Distribution kind, no Distributions line; wide adds the wide columns.
	report.Distributions = nil
	out.Reset()
	if err := WriteStatusTable(&out, report, true, testNow); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "Distributions") {
		t.Errorf("a Distributions line without the kind:\n%s", out.String())
	}
	if strings.Contains(out.String(), "DISTRIBUTIONS") {
		t.Errorf("a DISTRIBUTIONS column without the kind:\n%s", out.String())
	}
	if !strings.Contains(lines[0], "HELD") || !strings.Contains(out.String(), "SHARD-STATE") || !strings.Contains(out.String(), "KUBERNETES") || !strings.Contains(out.String(), "Syncing") {
		t.Errorf("wide output lacks the wide columns:\n%s", out.String())
	}
}

func TestDistributionsPerRegion(t *testing.T) {
	dist := func(halted bool, regions ...map[string]any) unstructured.Unstructured {
		u := unstructured.Unstructured{Object: map[string]any{"status": map[string]any{}}}
		list := make([]any, 0, len(regions))
		for _, r := range regions {
			list = append(list, r)
		}
		status := u.Object["status"].(map[string]any)
		status["regions"] = list
		if halted {
			status["conditions"] = []any{map[string]any{"type": "Halted", "status": "True", "reason": "MaxFailures"}}
		}
		return u
	}
	entry := func(region, state string, current bool, health string) map[string]any {
		return map[string]any{"region": region, "state": state, "current": current, "health": health}
	}
	got := DistributionsPerRegion([]unstructured.Unstructured{
		dist(false, entry("a", "Applied", true, "Current"), entry("b", "Applied", false, ""), entry("c", "Unplaceable", false, "")),
		dist(true, entry("a", "Applied", false, "InProgress"), entry("b", "Applied", true, "Current")),
		dist(false, entry("a", "Removing", true, "Current"), entry("b", "Applied", true, "Failed"), entry("c", "RemovalHeld", true, "Current")),
	})
	want := map[string]*RegionDistributions{
		"a": {Progressing: 1, Halted: 1},
		"b": {Progressing: 2, Halted: 1},
		"c": {Failed: 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("per region (-want +got):\n%s", diff)
	}
}

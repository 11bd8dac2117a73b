package hub

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regionsync/regionsync/internal/clusterinventory"
)

func TestClusterProfilesConfig(t *testing.T) {
	c, err := ParseConfig([]byte("apiVersion: regionsync.dev/v1alpha1\nkind: HubConfig\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.ClusterProfiles.Namespace != "" {
		t.Errorf("ClusterProfiles on by default (namespace %q)", c.ClusterProfiles.Namespace)
	}
	c, err = ParseConfig([]byte("apiVersion: regionsync.dev/v1alpha1\nkind: HubConfig\nclusterProfiles: {namespace: fleet}\n"))
	if err != nil || c.ClusterProfiles.Namespace != "fleet" {
		t.Errorf("clusterProfiles.namespace fleet: %v, %+v", err, c)
	}
	for yaml, want := range map[string]string{
		"clusterProfiles: {namespace: Not_A_Namespace}\n": "clusterProfiles.namespace: Invalid value",
		"clusterProfiles: {namspace: fleet}\n":            `unknown field "clusterProfiles.namspace"`,
	} {
		if _, err := ParseConfig([]byte("apiVersion: regionsync.dev/v1alpha1\nkind: HubConfig\n" + yaml)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", yaml, err, want)
		}
	}
}

func TestSameProfileStatus(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	status := func(observed time.Time, healthy metav1.ConditionStatus, kube string) *clusterinventory.ClusterProfileStatus {
		return &clusterinventory.ClusterProfileStatus{
			Conditions: []metav1.Condition{{Type: clusterinventory.ConditionControlPlaneHealthy, Status: healthy, Reason: "AgentReporting",
				LastTransitionTime: metav1.NewTime(now.Add(-time.Hour + 500*time.Millisecond))}},
			Version:    clusterinventory.ClusterVersion{Kubernetes: kube},
			Properties: []clusterinventory.Property{{Name: clusterinventory.PropertyRegion, Value: "r", LastObservedTime: metav1.NewTime(observed)}},
		}
	}
	written := now.Add(-time.Minute)
	cases := []struct {
		name    string
		desired *clusterinventory.ClusterProfileStatus
		same    bool
	}{
		{"identical", status(written, metav1.ConditionTrue, "v1.36.3"), true},
		{"a newer heartbeat only, recently written", status(now, metav1.ConditionTrue, "v1.36.3"), true},
		{"liveness changed", status(now, metav1.ConditionUnknown, "v1.36.3"), false},
		{"version changed", status(now, metav1.ConditionTrue, "v1.37.0"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Through the API server, transition times lose their sub-second part.
			current := status(written, metav1.ConditionTrue, "v1.36.3")
			current.Conditions[0].LastTransitionTime = metav1.NewTime(current.Conditions[0].LastTransitionTime.Truncate(time.Second))
			if got := sameProfileStatus(current, tc.desired, now); got != tc.same {
				t.Errorf("sameProfileStatus = %v, want %v", got, tc.same)
			}
		})
	}
	// An observation older than the refresh interval is rewritten with the newer one.
	old := status(now.Add(-ClusterProfileRefresh-time.Second), metav1.ConditionTrue, "v1.36.3")
	if sameProfileStatus(old, status(now, metav1.ConditionTrue, "v1.36.3"), now) {
		t.Errorf("an observation older than %s is kept", ClusterProfileRefresh)
	}
}

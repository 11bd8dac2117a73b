package clusterinventory

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
)

var heartbeat = metav1.NewTime(time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC))

func region(ready *metav1.Condition) *regionsyncv1alpha1.Region {
	r := &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: "us-east-1"}, Spec: regionsyncv1alpha1.RegionSpec{Description: "east coast"}}
	if ready != nil {
		r.Status = regionsyncv1alpha1.RegionStatus{
			Conditions: []metav1.Condition{*ready}, ClusterID: "0f7c-uid", AgentVersion: "v0.5.0", KubernetesVersion: "v1.36.3",
			Shard: "region us-east-1 (names *-us-east-1, Tenant.demo.regionsync.dev)", HeartbeatTime: &heartbeat,
		}
	}
	return r
}

func TestForRegionLiveness(t *testing.T) {
	cases := []struct {
		name   string
		ready  *metav1.Condition
		status metav1.ConditionStatus
		reason string
	}{
		{"no report yet", nil, metav1.ConditionUnknown, ReasonNoReport},
		{"ready", &metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"}, metav1.ConditionTrue, ReasonAgentReporting},
		{"reporting, not ready", &metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "NotReady"}, metav1.ConditionTrue, ReasonAgentReporting},
		{"heartbeat missed", &metav1.Condition{Type: "Ready", Status: metav1.ConditionUnknown, Reason: regionsyncv1alpha1.ReasonHeartbeatMissed, Message: "Lease not renewed for 75s"},
			metav1.ConditionUnknown, regionsyncv1alpha1.ReasonHeartbeatMissed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := ForRegion(region(tc.ready), "fleet")
			c := p.Status.Conditions[0]
			if c.Type != ConditionControlPlaneHealthy || c.Status != tc.status || c.Reason != tc.reason {
				t.Errorf("ControlPlaneHealthy %s (%s): want %s (%s)", c.Status, c.Reason, tc.status, tc.reason)
			}
			mirrored := len(p.Status.Conditions) == 2 && p.Status.Conditions[1].Type == ConditionRegionReady
			if mirrored != (tc.ready != nil) || mirrored && p.Status.Conditions[1].Status != tc.ready.Status {
				t.Errorf("Ready mirrored: %+v", p.Status.Conditions)
			}
		})
	}
}

func TestForRegionIdentityAndProperties(t *testing.T) {
	r := region(&metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"})
	r.Spec.Description = strings.Repeat("d", 2000)
	p := ForRegion(r, "fleet")
	if p.Namespace != "fleet" || p.Name != "us-east-1" || p.Labels[LabelClusterManagerKey] != ClusterManagerName || p.Spec.ClusterManager.Name != ClusterManagerName {
		t.Errorf("identity: %+v %+v", p.ObjectMeta, p.Spec)
	}
	got := map[string]string{}
	for _, prop := range p.Status.Properties {
		got[prop.Name] = prop.Value
		if !prop.LastObservedTime.Equal(&heartbeat) {
			t.Errorf("property %s observed %v, want the heartbeat", prop.Name, prop.LastObservedTime)
		}
	}
	want := map[string]string{
		PropertyClusterID: "0f7c-uid", PropertyRegion: "us-east-1", PropertyAgentVersion: "v0.5.0",
		PropertyShard: r.Status.Shard, PropertyDescription: strings.Repeat("d", maxPropertyValue),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("properties (-want +got):\n%s", diff)
	}
	if p.Status.Version.Kubernetes != "v1.36.3" {
		t.Errorf("version.kubernetes %q, want the Region's v1.36.3", p.Status.Version.Kubernetes)
	}
	// The region's ClusterProperty objects come first and win over regionsync's of the same name.
	r.Status.ClusterProperties = []regionsyncv1alpha1.ClusterProperty{{Name: PropertyClusterID, Value: "clusterset-id-east"}, {Name: "location.example.com", Value: "us-east"}}
	p = ForRegion(r, "fleet")
	if len(p.Status.Properties) != 6 || p.Status.Properties[0].Value != "clusterset-id-east" || p.Status.Properties[1].Name != "location.example.com" {
		t.Errorf("properties with the region's ClusterProperties: %+v", p.Status.Properties)
	}
	for _, prop := range p.Status.Properties[1:] {
		if prop.Name == PropertyClusterID {
			t.Errorf("%s twice: %+v", PropertyClusterID, p.Status.Properties)
		}
	}
	// Unknown values are left out, not written empty (the API requires a value).
	if n := len(ForRegion(region(nil), "fleet").Status.Properties); n != 2 {
		t.Errorf("%d properties for a Region without status, want 2 (region, description)", n)
	}
}

// The JSON form follows the published schema's field names.
func TestSchemaFieldNames(t *testing.T) {
	b, err := json.Marshal(ForRegion(region(&metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"}), "fleet"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"apiVersion":"multicluster.x-k8s.io/v1alpha1"`, `"kind":"ClusterProfile"`, `"clusterManager":{"name":"regionsync"}`,
		`"displayName":"us-east-1"`, `"properties":[`, `"lastObservedTime":"2026-01-02T15:00:00Z"`, `"type":"ControlPlaneHealthy"`, `"version":{"kubernetes":"v1.36.3"}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s: %s", want, b)
		}
	}
}

func TestSchemeAndDeepCopy(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"ClusterProfile", "ClusterProfileList"} {
		if !s.Recognizes(GroupVersion.WithKind(kind)) {
			t.Errorf("scheme does not know %s", kind)
		}
	}
	p := ForRegion(region(&metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"}), "fleet")
	c := p.DeepCopyObject().(*ClusterProfile)
	c.Labels["x"] = "y"
	c.Status.Conditions[0].Status = metav1.ConditionFalse
	c.Status.Properties[0].Value = "changed"
	if p.Labels["x"] != "" || p.Status.Conditions[0].Status != metav1.ConditionTrue || p.Status.Properties[0].Value == "changed" {
		t.Error("the copy shares state with the original")
	}
	l := (&ClusterProfileList{Items: []ClusterProfile{*p}}).DeepCopyObject().(*ClusterProfileList)
	l.Items[0].Status.Properties[0].Value = "changed"
	if p.Status.Properties[0].Value == "changed" {
		t.Error("the list copy shares state with the original")
	}
}

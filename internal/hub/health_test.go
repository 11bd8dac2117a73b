package hub

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
)

// configMap is a per-region ConfigMap as management holds it, with annotations.
func configMap(color string, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings-us", "namespace": "tenant-acme"},
		"data":     map[string]any{"color": color},
	}}
	u.SetLabels(map[string]string{"regionsync.dev/region": "us", testKeys.Distribution: "settings"})
	u.SetAnnotations(annotations)
	return u
}

// TestObserveWithoutGeneration: a kind without metadata.generation is current when the hash the
// agent recorded is the hash of its content now.
func TestObserveWithoutGeneration(t *testing.T) {
	applied := testKeys.AppliedContentHash(configMap("blue", nil))
	synced := func(hash string) map[string]string {
		a := map[string]string{testKeys.RemoteGeneration: "0", testKeys.LocalGeneration: "0"}
		if hash != "" {
			a[testKeys.AppliedHash] = hash
		}
		return a
	}
	for name, tc := range map[string]struct {
		obj     *unstructured.Unstructured
		current bool
		health  string
	}{
		"never synced":                        {configMap("blue", nil), false, "Unknown"},
		"copied, hash of this content":        {configMap("blue", synced(applied)), true, "Current"},
		"content changed since the copy":      {configMap("green", synced(applied)), false, "Current"},
		"an agent that records no hash":       {configMap("blue", synced("")), false, "Current"},
		"a trace context added by the hub":    {configMap("blue", merge(synced(applied), map[string]string{testKeys.TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})), true, "Current"},
		"an annotation added since the copy":  {configMap("blue", merge(synced(applied), map[string]string{"example.com/owner": "ops"})), false, "Current"},
		"generation annotations of a version": {configMap("blue", map[string]string{testKeys.RemoteGeneration: "3", testKeys.LocalGeneration: "0", testKeys.AppliedHash: applied}), false, "Current"},
	} {
		t.Run(name, func(t *testing.T) {
			o := Observe(tc.obj, testKeys, nil)
			if o.Current != tc.current || o.Health != tc.health {
				t.Errorf("Observe = %+v, want current %v health %s", o, tc.current, tc.health)
			}
		})
	}
}

func merge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func TestCompileHealthRule(t *testing.T) {
	for name, tc := range map[string]struct {
		rule    regionsyncv1alpha1.HealthRule
		wantErr string
	}{
		"current only":            {regionsyncv1alpha1.HealthRule{Current: "object.status.phase == 'Ready'"}, ""},
		"current and failed":      {regionsyncv1alpha1.HealthRule{Current: "object.status.phase == 'Ready'", Failed: "object.status.phase == 'Failed'"}, ""},
		"the Kubernetes library":  {regionsyncv1alpha1.HealthRule{Current: "quantity(object.spec.size).isGreaterThan(quantity('1Gi'))"}, ""},
		"a dynamic value is bool": {regionsyncv1alpha1.HealthRule{Current: "object.status.ready"}, ""},
		"optional fields":         {regionsyncv1alpha1.HealthRule{Current: "object.?status.?conditions.orValue([]).exists(c, c.type == 'Ready' && c.status == 'True')", Failed: "object.?status.?phase.orValue('') == 'Failed'"}, ""},
		"no current":              {regionsyncv1alpha1.HealthRule{Failed: "true"}, "spec.health.current is required"},
		"current does not parse":  {regionsyncv1alpha1.HealthRule{Current: "object.status.phase =="}, "spec.health.current does not compile"},
		"failed does not parse":   {regionsyncv1alpha1.HealthRule{Current: "true", Failed: "object.status.("}, "spec.health.failed does not compile"},
		"current is not a bool":   {regionsyncv1alpha1.HealthRule{Current: "'Ready'"}, "spec.health.current must be a bool expression, is of type string"},
		"an unknown variable":     {regionsyncv1alpha1.HealthRule{Current: "self.status.ready"}, "spec.health.current does not compile: ERROR: <input>:1:1: undeclared reference to 'self'"},
		"an unknown function":     {regionsyncv1alpha1.HealthRule{Current: "healthy(object)"}, "spec.health.current does not compile"},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := CompileHealthRule(&tc.rule)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("CompileHealthRule: %v", err)
			case tc.wantErr == "" && r == nil:
				t.Fatal("CompileHealthRule: no rule")
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("CompileHealthRule: %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
	if r, err := CompileHealthRule(nil); r != nil || err != nil {
		t.Errorf("no spec.health: %v, %v; want kstatus (nil, nil)", r, err)
	}
}

// TestObserveHealthRule: the rule judges the copy (failed before current, else InProgress), on
// its own generation, never before its status observes that generation; an evaluation error is
// Unknown, naming the field.
func TestObserveHealthRule(t *testing.T) {
	rule, err := CompileHealthRule(&regionsyncv1alpha1.HealthRule{
		Current: "object.status.phase == 'Ready' && object.metadata.generation == 2",
		Failed:  "has(object.status) && has(object.status.phase) && object.status.phase == 'Failed'",
	})
	if err != nil {
		t.Fatal(err)
	}
	copied := map[string]any{"regionsync.dev/sync-remote-generation": "4", "regionsync.dev/sync-local-generation": "2"}
	for name, tc := range map[string]struct {
		annotations map[string]any
		status      map[string]any
		current     bool
		health      string
		err         string
	}{
		"never synced":                    {nil, map[string]any{"phase": "Ready"}, false, "Unknown", ""},
		"ready":                           {copied, map[string]any{"observedGeneration": int64(2), "phase": "Ready"}, true, "Current", ""},
		"failed":                          {copied, map[string]any{"observedGeneration": int64(2), "phase": "Failed"}, true, "Failed", ""},
		"neither":                         {copied, map[string]any{"observedGeneration": int64(2), "phase": "Provisioning"}, true, "InProgress", ""},
		"status of an older generation":   {copied, map[string]any{"observedGeneration": int64(1), "phase": "Ready"}, false, "InProgress", ""},
		"no observedGeneration in kind":   {copied, map[string]any{"phase": "Ready"}, true, "Current", ""},
		"no status yet: evaluation fails": {copied, nil, true, "Unknown", "spec.health.current: no such key: status"},
	} {
		t.Run(name, func(t *testing.T) {
			obj := map[string]any{"apiVersion": "demo.regionsync.dev/v1alpha1", "kind": "Tenant",
				"metadata": map[string]any{"name": "a", "generation": int64(4)}}
			if tc.annotations != nil {
				obj["metadata"].(map[string]any)["annotations"] = tc.annotations
			}
			if tc.status != nil {
				obj["status"] = tc.status
			}
			o := Observe(&unstructured.Unstructured{Object: obj}, testKeys, rule)
			if o.Current != tc.current || o.Health != tc.health || o.HealthError != tc.err {
				t.Errorf("Observe = %+v, want current %v health %s error %q", o, tc.current, tc.health, tc.err)
			}
		})
	}
}

// TestHealthRuleOptionalFields: with optional field selection a rule judges a copy without a
// status yet (InProgress) instead of failing on it.
func TestHealthRuleOptionalFields(t *testing.T) {
	rule, err := CompileHealthRule(&regionsyncv1alpha1.HealthRule{
		Current: "object.?status.?conditions.orValue([]).exists(c, c.type == 'Ready' && c.status == 'True')",
		Failed:  "object.?status.?phase.orValue('') == 'Failed'",
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		status map[string]any
		want   string
	}{
		"no status": {nil, "InProgress"},
		"ready":     {map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}, "Current"},
		"not ready": {map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "False"}}}, "InProgress"},
		"failed":    {map[string]any{"phase": "Failed"}, "Failed"},
	} {
		t.Run(name, func(t *testing.T) {
			obj := map[string]any{"metadata": map[string]any{"name": "a"}}
			if tc.status != nil {
				obj["status"] = tc.status
			}
			got, err := rule.Judge(obj)
			if err != nil || string(got) != tc.want {
				t.Errorf("Judge = %s, %v; want %s", got, err, tc.want)
			}
		})
	}
}

// TestStatusHealthRule: a rule that does not compile is Degraded and not Available, naming the
// field; one that fails on some copies is Degraded naming the field and the regions.
func TestStatusHealthRule(t *testing.T) {
	d := &regionsyncv1alpha1.Distribution{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
	placed := func(region, health string) regionsyncv1alpha1.DistributionRegionStatus {
		return regionsyncv1alpha1.DistributionRegionStatus{Region: region, State: regionsyncv1alpha1.PlacementApplied, Current: true, Health: health, Generation: 1}
	}
	now := time.Now()
	for name, tc := range map[string]struct {
		in                          StatusInput
		degradedReason, degradedMsg string
		availableReason             string
	}{
		"does not compile": {
			StatusInput{Selected: 2, Entries: []regionsyncv1alpha1.DistributionRegionStatus{placed("a", "Unknown"), placed("b", "Unknown")},
				InvalidHealthRule: errors.New("spec.health.current does not compile: ERROR: <input>:1:21: Syntax error")},
			regionsyncv1alpha1.ReasonInvalidHealthRule, "spec.health.current does not compile", regionsyncv1alpha1.ReasonInvalidHealthRule,
		},
		"fails on a copy": {
			StatusInput{Selected: 2, Entries: []regionsyncv1alpha1.DistributionRegionStatus{placed("a", "Current"), func() regionsyncv1alpha1.DistributionRegionStatus {
				e := placed("b", "Unknown")
				Observation{Generation: 1, Current: true, Health: "Unknown", HealthError: "spec.health.current: no such key: status"}.into(&e)
				return e
			}()}},
			regionsyncv1alpha1.ReasonHealthRuleError, "b: spec.health.current: no such key: status", regionsyncv1alpha1.ReasonProgressing,
		},
		"judged": {
			StatusInput{Selected: 2, Entries: []regionsyncv1alpha1.DistributionRegionStatus{placed("a", "Current"), placed("b", "Failed")}},
			regionsyncv1alpha1.ReasonUnhealthy, "copies failed in: b", regionsyncv1alpha1.ReasonProgressing,
		},
	} {
		t.Run(name, func(t *testing.T) {
			st := ComputeStatus(d, tc.in, now)
			degraded := meta.FindStatusCondition(st.Conditions, regionsyncv1alpha1.DistributionDegraded)
			if degraded == nil || degraded.Status != metav1.ConditionTrue || degraded.Reason != tc.degradedReason || !strings.Contains(degraded.Message, tc.degradedMsg) {
				t.Errorf("Degraded %+v, want True %s containing %q", degraded, tc.degradedReason, tc.degradedMsg)
			}
			available := meta.FindStatusCondition(st.Conditions, regionsyncv1alpha1.DistributionAvailable)
			if available == nil || available.Status != metav1.ConditionFalse || available.Reason != tc.availableReason {
				t.Errorf("Available %+v, want False %s", available, tc.availableReason)
			}
			applied := meta.FindStatusCondition(st.Conditions, regionsyncv1alpha1.DistributionApplied)
			if applied == nil || applied.Status != metav1.ConditionTrue {
				t.Errorf("Applied %+v: a health rule never stops placement", applied)
			}
		})
	}
}

// TestHealthRulesCache: a rule is compiled once per distinct spec; one that does not compile
// judges every copy Unknown with its error, never falling back to kstatus.
func TestHealthRulesCache(t *testing.T) {
	var h healthRules
	good := &regionsyncv1alpha1.HealthRule{Current: "true"}
	r1, err1 := h.get(good)
	r2, err2 := h.get(&regionsyncv1alpha1.HealthRule{Current: "true"})
	if err1 != nil || err2 != nil || r1 != r2 {
		t.Fatalf("the same rule twice: %p %v, %p %v; want one compiled rule", r1, err1, r2, err2)
	}
	if r, err := h.get(nil); r != nil || err != nil {
		t.Fatalf("no rule: %v %v", r, err)
	}
	bad, err := h.get(&regionsyncv1alpha1.HealthRule{Current: "object.status.("})
	if err == nil || bad == nil {
		t.Fatalf("a rule that does not compile: %v, %v", bad, err)
	}
	status, jerr := bad.Judge(map[string]any{"status": map[string]any{}})
	if status != "Unknown" || jerr == nil || !strings.Contains(jerr.Error(), "spec.health.current does not compile") {
		t.Errorf("Judge of a rule that does not compile: %s, %v", status, jerr)
	}
}

// FuzzHealthRule: whatever the expressions, compiling never panics; a rule that compiles judges a
// copy as Current, InProgress or Failed, or Unknown with an error naming its field.
func FuzzHealthRule(f *testing.F) {
	f.Add("object.status.phase == 'Ready'", "")
	f.Add("object.?status.?conditions.orValue([]).exists(c, c.type == 'Ready')", "object.status.phase == 'Failed'")
	f.Add("object.status.(", "1")
	f.Add("size(object.metadata.name) > 3", "object.status.replicas / 0 == 1")
	f.Add("object.spec.items.all(i, i > 0)", "'x'.matches('[')")
	object := map[string]any{"metadata": map[string]any{"name": "acme", "generation": int64(2)},
		"spec":   map[string]any{"items": []any{int64(1), int64(2)}},
		"status": map[string]any{"phase": "Ready", "replicas": int64(3), "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}}
	f.Fuzz(func(t *testing.T, current, failed string) {
		r, err := CompileHealthRule(&regionsyncv1alpha1.HealthRule{Current: current, Failed: failed})
		if err != nil {
			if !strings.Contains(err.Error(), "spec.health.") {
				t.Fatalf("error names no field: %v", err)
			}
			return
		}
		status, err := r.Judge(object)
		switch {
		case err != nil && (status != "Unknown" || !strings.Contains(err.Error(), "spec.health.")):
			t.Fatalf("Judge: %s, %v", status, err)
		case err == nil && status != "Current" && status != "InProgress" && status != "Failed":
			t.Fatalf("Judge: %s", status)
		}
	})
}

// TestHealthRuleCostLimit: an expensive rule stops at the per-evaluation cost limit, as an error
// naming its field, instead of running on.
func TestHealthRuleCostLimit(t *testing.T) {
	rule, err := CompileHealthRule(&regionsyncv1alpha1.HealthRule{
		Current: "object.spec.items.all(x, object.spec.items.all(y, object.spec.items.all(z, x + y + z >= 0)))",
	})
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, 300)
	for i := range items {
		items[i] = int64(i)
	}
	status, err := rule.Judge(map[string]any{"spec": map[string]any{"items": items}})
	if status != "Unknown" || err == nil || !strings.Contains(err.Error(), "spec.health.current") || !strings.Contains(err.Error(), "cost limit") {
		t.Fatalf("Judge of 27 million steps: %s, %v; want Unknown and the cost limit", status, err)
	}
}

// TestObserveFanOut: a per-region object that asks for namespace fan-out is judged from its
// region's fan-out report: current when the report is of its generation (or, without one, of
// its content hash) and every matching namespace's copy is current; Failed when a namespace's
// copy failed.
func TestObserveFanOut(t *testing.T) {
	fanOut := func(o *unstructured.Unstructured, report string) *unstructured.Unstructured {
		a := merge(o.GetAnnotations(), map[string]string{testKeys.FanOutNamespaces: "*"})
		if report != "" {
			a[testKeys.FanOutReport] = report
		}
		o.SetAnnotations(a)
		return o
	}
	hash := testKeys.AppliedContentHash(configMap("blue", nil))
	tenant := func(generation int64) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "demo.regionsync.dev/v1alpha1", "kind": "Tenant",
			"metadata": map[string]any{"name": "acme-us", "namespace": "tenant-acme"}, "spec": map[string]any{"plan": "team"}}}
		u.SetGeneration(generation)
		return u
	}
	terminating := fanOut(tenant(2), `{"matching":3,"current":3,"generation":2}`)
	terminating.SetDeletionTimestamp(&metav1.Time{Time: time.Unix(1, 0)})
	for name, tc := range map[string]struct {
		obj     *unstructured.Unstructured
		current bool
		health  string
	}{
		"not reported yet":                 {fanOut(tenant(2), ""), false, "Unknown"},
		"every copy of this generation":    {fanOut(tenant(2), `{"matching":3,"current":3,"generation":2}`), true, "Current"},
		"a report of an older generation":  {fanOut(tenant(3), `{"matching":3,"current":3,"generation":2}`), false, "InProgress"},
		"copies still being written":       {fanOut(tenant(2), `{"matching":3,"current":1,"generation":2}`), false, "InProgress"},
		"a namespace's copy failed":        {fanOut(tenant(2), `{"matching":3,"current":2,"failed":["team-b"],"generation":2}`), false, "Failed"},
		"failures beyond those named":      {fanOut(tenant(2), `{"matching":30,"current":30,"moreFailed":2,"generation":2}`), false, "Failed"},
		"no namespace matches":             {fanOut(tenant(2), `{"matching":0,"current":0,"generation":2}`), true, "Current"},
		"no generation, hash of this data": {fanOut(configMap("blue", nil), `{"matching":2,"current":2,"hash":"`+hash+`"}`), true, "Current"},
		"no generation, data changed":      {fanOut(configMap("green", nil), `{"matching":2,"current":2,"hash":"`+hash+`"}`), false, "InProgress"},
		"no generation, no hash":           {fanOut(configMap("blue", nil), `{"matching":2,"current":2}`), false, "InProgress"},
		"terminating":                      {terminating, false, "Terminating"},
	} {
		t.Run(name, func(t *testing.T) {
			o := Observe(tc.obj, testKeys, nil)
			if o.Current != tc.current || o.Health != tc.health {
				t.Errorf("Observe = %+v, want current %v health %s", o, tc.current, tc.health)
			}
		})
	}
	bad := Observe(fanOut(tenant(2), `{"matching":`), testKeys, nil)
	if bad.Current || !strings.Contains(bad.HealthError, testKeys.FanOutReport) {
		t.Errorf("a report that does not decode: %+v, want not current and an error naming %s", bad, testKeys.FanOutReport)
	}
}

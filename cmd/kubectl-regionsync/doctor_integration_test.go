//go:build integration

package main

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/inspect"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/shard/claim"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// doctorFleet writes, on a real management API server, what agents and the hub would have
// written (Regions and their status, shard Leases, objects with the agents' finalizer,
// Distributions and their status), so that every finding can be produced at will.
type doctorFleet struct {
	t  *testing.T
	mc client.Client
}

// region registers a Region with spec.shard (names *-<name>, labelled for it) and a status;
// leaseAge < 0 means no Lease.
func (f *doctorFleet) region(name, suffix string, leaseAge time.Duration) {
	f.t.Helper()
	bg := context.Background()
	reg := &regionsyncv1alpha1.RegionShard{
		RemoteResourceSuffix: suffix, LocalNamespaceSuffix: suffix,
		LabelSelector: regionsyncv1alpha1.RegionLabel + "=" + name, Kinds: []string{tenantKind},
	}
	r := &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: regionsyncv1alpha1.RegionSpec{Shard: reg}}
	create(f.t, f.mc, r)
	r.Status = regionsyncv1alpha1.RegionStatus{
		Conditions: []metav1.Condition{
			{Type: regionsyncv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: regionsyncv1alpha1.ReasonReady, LastTransitionTime: metav1.Now()},
			{Type: regionsyncv1alpha1.ConditionDeletionsHeld, Status: metav1.ConditionFalse, Reason: regionsyncv1alpha1.ReasonNoneHeld, LastTransitionTime: metav1.Now()},
		},
		Leader: name + "-agent-0", AgentVersion: "v0.5.0", KubernetesVersion: "v1.36.3", HeartbeatTime: ptr.To(metav1.Now()),
		CredentialExpiryTime: ptr.To(metav1.NewTime(time.Now().Add(30 * 24 * time.Hour))),
		Resources:            []regionsyncv1alpha1.ResourceCounts{{Resource: tenantKind, Synced: 1}},
	}
	if err := f.mc.Status().Update(bg, r); err != nil {
		f.t.Fatal(err)
	}
	if leaseAge < 0 {
		return
	}
	def, err := json.Marshal(shard.Definition{Region: name, RemoteResourceSuffix: suffix, LabelSelector: reg.LabelSelector, Kinds: reg.Kinds})
	if err != nil {
		f.t.Fatal(err)
	}
	renewed := metav1.NewMicroTime(time.Now().Add(-leaseAge))
	create(f.t, f.mc, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: fleetspec.DefaultManagementNamespace, Name: claim.LeaseName(name),
			Labels: map[string]string{claim.LeaseLabel: "true"},
			Annotations: map[string]string{claim.DefinitionAnnotation: string(def), claim.StateAnnotation: claim.StateSyncing,
				claim.HolderAnnotation: name + "-agent-0", claim.RegisteredAnnotation: renewed.UTC().Format(time.RFC3339Nano)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name + "-fleet"), LeaseDurationSeconds: ptr.To[int32](60), RenewTime: &renewed, AcquireTime: &renewed},
	})
}

// setRegion changes a Region's status.
func (f *doctorFleet) setRegion(name string, mutate func(*regionsyncv1alpha1.Region)) {
	f.t.Helper()
	r := &regionsyncv1alpha1.Region{}
	if err := f.mc.Get(context.Background(), client.ObjectKey{Name: name}, r); err != nil {
		f.t.Fatal(err)
	}
	mutate(r)
	if err := f.mc.Status().Update(context.Background(), r); err != nil {
		f.t.Fatal(err)
	}
}

// tenant creates a Tenant in acme, labelled for region (none: ""), with the agents' finalizer
// when claimed.
func (f *doctorFleet) tenant(name, region string, claimed bool) {
	f.t.Helper()
	tn := testenv.Tenant("acme", name, "Web", func(tn *demov1alpha1.Tenant) {
		if region != "" {
			tn.Labels = map[string]string{regionsyncv1alpha1.RegionLabel: region}
		}
		if claimed {
			tn.Finalizers = []string{keys.Finalizer}
		}
	})
	create(f.t, f.mc, tn)
}

// distribution creates a Distribution in acme and writes its status.
func (f *doctorFleet) distribution(name string, status regionsyncv1alpha1.DistributionStatus) {
	f.t.Helper()
	d := &regionsyncv1alpha1.Distribution{
		ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: name},
		Spec: regionsyncv1alpha1.DistributionSpec{
			Template:  runtime.RawExtension{Raw: []byte(`{"apiVersion":"demo.regionsync.dev/v1alpha1","kind":"Tenant","spec":{"displayName":"Web","plan":"team"}}`)},
			Placement: regionsyncv1alpha1.Placement{Regions: []string{"use"}},
		},
	}
	create(f.t, f.mc, d)
	for i := range status.Conditions {
		status.Conditions[i].LastTransitionTime = metav1.Now()
	}
	d.Status = status
	if err := f.mc.Status().Update(context.Background(), d); err != nil {
		f.t.Fatal(err)
	}
}

// doctorRun runs doctor -o json and returns its report and whether it exited with "problems".
func doctorRun(t *testing.T, p *plugin, args ...string) (*inspect.DoctorReport, bool) {
	t.Helper()
	out, err := p.run(append([]string{"doctor", "-o", "json"}, args...)...)
	problems := errors.Is(err, errProblemsFound)
	if err != nil && !problems {
		t.Fatalf("doctor: %v", err)
	}
	r := &inspect.DoctorReport{}
	if err := json.Unmarshal([]byte(out), r); err != nil {
		t.Fatalf("doctor -o json: %v\n%s", err, out)
	}
	if problems != (len(r.Findings) > 0) {
		t.Errorf("doctor exit says problems=%v with %d findings", problems, len(r.Findings))
	}
	return r, problems
}

// findingOf returns the finding of class about object, or nil.
func findingOf(r *inspect.DoctorReport, class, object string) *inspect.Problem {
	for i := range r.Findings {
		if r.Findings[i].Class == class && r.Findings[i].Object == object {
			return &r.Findings[i]
		}
	}
	return nil
}

// TestDoctor produces every doctor finding on a real management API server, one class at a time,
// and checks each names the object and the fix, the exit code, and that decommission (the
// library's, with its dry run), retry and pause of a Distribution are the documented call and
// annotations.
func TestDoctor(t *testing.T) {
	bg := context.Background()
	fleet, err := testenv.Start([]string{"management"}, testenv.Options{Dir: t.TempDir(), Log: t.Logf, NoControllerManager: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fleet.Stop(); err != nil {
			t.Errorf("stopping clusters: %v", err)
		}
	})
	management := fleet.Cluster("management")
	mc := management.Client
	create(t, mc, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetspec.DefaultManagementNamespace}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme"}})
	p := &plugin{t: t, kubeconfig: writeKubeconfig(t, management)}
	f := &doctorFleet{t: t, mc: mc}

	// A healthy fleet: one live region, its claimed object, the hub at the agents' version, an
	// available Distribution.
	f.region("use", "-use", 0)
	f.tenant("web-use", "use", true)
	create(t, mc, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: fleetspec.DefaultManagementNamespace, Name: inspect.HubDeployment},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "hub"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "hub"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "hub", Image: "ghcr.io/regionsync/agent:v0.5.2"}}},
			},
		},
	})
	f.distribution("fine", regionsyncv1alpha1.DistributionStatus{Conditions: []metav1.Condition{
		{Type: regionsyncv1alpha1.DistributionAvailable, Status: metav1.ConditionTrue, Reason: regionsyncv1alpha1.ReasonAvailable},
	}})

	t.Run("a healthy fleet: no finding, exit 0", func(t *testing.T) {
		r, problems := doctorRun(t, p)
		if problems || len(r.Findings) != 0 {
			t.Fatalf("findings in a healthy fleet: %+v", r.Findings)
		}
		if r.Checked.Regions != 1 || r.Checked.ShardLeases != 1 || r.Checked.Objects != 1 || r.Checked.Distributions != 1 || r.Checked.HubVersion != "v0.5.2" ||
			!slices.Equal(r.Checked.Kinds, []string{tenantKind}) {
			t.Errorf("checked %+v", r.Checked)
		}
		out, err := p.run("doctor")
		if err != nil || !strings.Contains(out, "No problems found in 1 Region(s), 1 shard Lease(s), 1 object(s) of 1 kind(s), 1 Distribution(s)") {
			t.Errorf("doctor: %v\n%s", err, out)
		}
		// --kind adds kinds; one management does not serve is said, not a finding.
		r, problems = doctorRun(t, p, "--kind", "ConfigMap", "--kind", "Widget.example.com")
		if problems || !slices.Contains(r.Checked.Kinds, "ConfigMap") || r.Checked.Objects < 2 ||
			len(r.Skipped) != 1 || !strings.Contains(r.Skipped[0], "kind Widget.example.com: not served by management") {
			t.Errorf("doctor --kind: findings %+v, checked %+v, skipped %v", r.Findings, r.Checked, r.Skipped)
		}
	})

	// Each case adds one problem; the finding must appear, with the object and a fix.
	for _, tc := range []struct {
		name, class, object string
		add                 func()
		want                []string // in problem or fix
	}{
		{"a stale heartbeat", inspect.FindingStaleHeartbeat, "Lease regionsync-system/region-old",
			func() { f.region("old", "-old", 10*time.Minute) },
			[]string{"last renewed 10m ago; its lease is 1m0s", "kubectl regionsync decommission old"}},
		{"a Region no agent has claimed", inspect.FindingStaleHeartbeat, "Region fresh",
			func() { f.region("fresh", "-fresh", -1) },
			[]string{"no shard Lease regionsync-system/region-fresh", "get pods,events"}},
		{"a finalizer of a region that no longer exists", inspect.FindingOrphanedFinalizer, tenantKind + " acme/web-gone",
			func() { f.tenant("web-gone", "", true) },
			[]string{"carries the finalizer regionsync.dev/sync-local, but no known region's shard takes it", `/metadata/finalizers/0`}},
		{"an object labelled for an unknown region", inspect.FindingUnknownRegion, tenantKind + " acme/stray-apac",
			func() { f.tenant("stray-apac", "apac", false) },
			[]string{"labelled regionsync.dev/region=apac, but region apac has neither a Region nor a shard Lease", "scripts/new-region.sh apac"}},
		{"overlapping shards", inspect.FindingShardOverlap, "Regions use and use2",
			func() { f.region("use2", "-use", -1) },
			[]string{"both shards can hold " + tenantKind + " objects named *-use and *-use", "decommission use2"}},
		{"a credential expiring within 7 days", inspect.FindingCredentialExpiring, "Region use",
			func() {
				f.setRegion("use", func(r *regionsyncv1alpha1.Region) {
					r.Status.CredentialExpiryTime = ptr.To(metav1.NewTime(time.Now().Add(3 * 24 * time.Hour)))
				})
			},
			[]string{"management credential expires in 2d", "scripts/region-kubeconfig.sh use"}},
		{"an expired credential", inspect.FindingCredentialExpiring, "Region old",
			func() {
				f.setRegion("old", func(r *regionsyncv1alpha1.Region) {
					r.Status.CredentialExpiryTime = ptr.To(metav1.NewTime(time.Now().Add(-time.Hour)))
				})
			},
			[]string{"management credential expired 6", "renewal is failing or off"}},
		{"an agent outside the version-skew policy", inspect.FindingVersionSkew, "Region old",
			func() { f.setRegion("old", func(r *regionsyncv1alpha1.Region) { r.Status.AgentVersion = "v0.3.1" }) },
			[]string{"runs v0.3.1: 2 minor versions away from the hub's v0.5.2", "docs/versioning.md"}},
		{"held deletions", inspect.FindingDeletionsHeld, "Region use",
			func() {
				f.setRegion("use", func(r *regionsyncv1alpha1.Region) {
					r.Status.Resources[0].DeletionsHeld = 2
					r.Status.Conditions[1] = metav1.Condition{Type: regionsyncv1alpha1.ConditionDeletionsHeld, Status: metav1.ConditionTrue, Reason: regionsyncv1alpha1.ReasonBudgetExceeded, LastTransitionTime: metav1.Now()}
				})
			},
			[]string{"holds 2 deletion(s) (" + tenantKind + ": 2)", "kubectl regionsync release --region use --before now"}},
		{"a halted Distribution", inspect.FindingDistributionHalted, "Distribution acme/halted",
			func() {
				f.distribution("halted", regionsyncv1alpha1.DistributionStatus{Conditions: []metav1.Condition{
					{Type: regionsyncv1alpha1.DistributionHalted, Status: metav1.ConditionTrue, Reason: "MaxFailuresExceeded", Message: "wave 1: region use failed"},
				}})
			},
			[]string{"its rollout halted (MaxFailuresExceeded): wave 1: region use failed", "kubectl regionsync retry halted -n acme"}},
		{"a Distribution with an unplaceable region", inspect.FindingDistributionUnplaceable, "Distribution acme/nowhere",
			func() {
				f.distribution("nowhere", regionsyncv1alpha1.DistributionStatus{
					Conditions: []metav1.Condition{{Type: regionsyncv1alpha1.DistributionDegraded, Status: metav1.ConditionTrue, Reason: regionsyncv1alpha1.ReasonUnplaceable}},
					Regions: []regionsyncv1alpha1.DistributionRegionStatus{
						{Region: "use", State: regionsyncv1alpha1.PlacementApplied, Current: true, Health: "Current"},
						{Region: "euw", State: regionsyncv1alpha1.PlacementUnplaceable, Reason: regionsyncv1alpha1.ReasonNoShard, Message: "Region euw has no spec.shard"},
					},
				})
			},
			[]string{"1 region(s) cannot receive it or refused it: euw: Unplaceable/NoShard (Region euw has no spec.shard)", "register the Region's spec.shard"}},
		{"a Distribution whose removals are held", inspect.FindingDistributionRemovalHeld, "Distribution acme/shrinking",
			func() {
				f.distribution("shrinking", regionsyncv1alpha1.DistributionStatus{Conditions: []metav1.Condition{
					{Type: regionsyncv1alpha1.DistributionRemovalHeld, Status: metav1.ConditionTrue, Reason: regionsyncv1alpha1.ReasonHeld, Message: "3 of 4 removals held"},
				}})
			},
			[]string{"3 of 4 removals held", keys.ConfirmRemovalsBefore + "=$(date -u +%FT%TZ)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.add()
			r, problems := doctorRun(t, p)
			got := findingOf(r, tc.class, tc.object)
			if !problems || got == nil {
				t.Fatalf("no %s finding about %s (exit with problems: %v): %+v", tc.class, tc.object, problems, r.Findings)
			}
			for _, want := range tc.want {
				if !strings.Contains(got.Problem+"\n"+got.Fix, want) {
					t.Errorf("%s finding lacks %q:\n%s\n%s", tc.class, want, got.Problem, got.Fix)
				}
			}
		})
	}

	t.Run("the table and the exit code with every finding", func(t *testing.T) {
		out, err := p.run("doctor")
		if !errors.Is(err, errProblemsFound) {
			t.Fatalf("doctor with problems: %v", err)
		}
		t.Logf("kubectl regionsync doctor\n%s", out)
		for _, want := range []string{"[StaleHeartbeat] Lease regionsync-system/region-old\n  problem: ", "\n  fix:     ", "[UnknownRegion] " + tenantKind + " acme/stray-apac",
			"problem(s) need a person, in 4 Region(s), 2 shard Lease(s), 3 object(s) of 1 kind(s), 4 Distribution(s)."} {
			if !strings.Contains(out, want) {
				t.Errorf("doctor output lacks %q", want)
			}
		}
		// A region labelled for an existing region is not reported; a claimed object its shard
		// takes is not reported.
		r, _ := doctorRun(t, p)
		if findingOf(r, inspect.FindingOrphanedFinalizer, tenantKind+" acme/web-use") != nil || findingOf(r, inspect.FindingUnknownRegion, tenantKind+" acme/web-use") != nil {
			t.Errorf("a healthy object reported: %+v", r.Findings)
		}
	})

	t.Run("status: the hub's version judges the skew, the Kubernetes version", func(t *testing.T) {
		out := p.mustRun("status", "-o", "json")
		var report inspect.StatusReport
		if err := json.Unmarshal([]byte(out), &report); err != nil {
			t.Fatal(err)
		}
		byName := map[string]inspect.RegionStatus{}
		for _, r := range report.Regions {
			byName[r.Name] = r
		}
		if report.HubVersion != "v0.5.2" || !strings.Contains(byName["old"].VersionSkew, "away from the hub's v0.5.2") || byName["use"].KubernetesVersion != "v1.36.3" {
			t.Errorf("hub %q, old's skew %q, use's Kubernetes %q", report.HubVersion, byName["old"].VersionSkew, byName["use"].KubernetesVersion)
		}
		if d := byName["euw"].Distributions; d != nil {
			t.Errorf("euw has no Region: %+v", d)
		}
	})

	t.Run("retry: the annotation on a halted Distribution only", func(t *testing.T) {
		if _, err := p.run("retry", "fine", "-n", "acme"); err == nil || !strings.Contains(err.Error(), "has not halted") {
			t.Errorf("retry of a Distribution that has not halted: %v", err)
		}
		if _, err := p.run("retry", "missing", "-n", "acme"); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("retry of a missing Distribution: %v", err)
		}
		before := time.Now().Add(-time.Second)
		out := p.mustRun("retry", "halted", "-n", "acme")
		d := &regionsyncv1alpha1.Distribution{}
		if err := mc.Get(bg, client.ObjectKey{Namespace: "acme", Name: "halted"}, d); err != nil {
			t.Fatal(err)
		}
		at, err := time.Parse(time.RFC3339, d.Annotations["regionsync.dev/retry-rollout"])
		if err != nil || at.Before(before) {
			t.Errorf("retry-rollout %q (%v), want an RFC 3339 time of now; output %s", d.Annotations["regionsync.dev/retry-rollout"], err, out)
		}
	})

	t.Run("pause a Distribution: spec.paused where the CRD has it", func(t *testing.T) {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		if err := mc.Get(bg, client.ObjectKey{Name: "distributions.regionsync.dev"}, crd); err != nil {
			t.Fatal(err)
		}
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		_, hasPaused, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties", "paused")
		out, err := p.run("pause", "distribution/fine", "-n", "acme")
		d := &regionsyncv1alpha1.Distribution{}
		if getErr := mc.Get(bg, client.ObjectKey{Namespace: "acme", Name: "fine"}, d); getErr != nil {
			t.Fatal(getErr)
		}
		if d.Annotations[keys.Paused] != "" {
			t.Errorf("pause of a Distribution wrote %s, which pauses the object, not the rollout", keys.Paused)
		}
		switch {
		case hasPaused && (err != nil || !d.Spec.Paused):
			t.Errorf("pause of a Distribution: %v, spec.paused %v\n%s", err, d.Spec.Paused, out)
		case !hasPaused && (err == nil || !strings.Contains(err.Error(), "no spec.paused")):
			t.Errorf("pause of a Distribution whose CRD has no spec.paused: %v, want an error saying so", err)
		}
		if hasPaused {
			p.mustRun("resume", "distribution/fine", "-n", "acme")
			if err := mc.Get(bg, client.ObjectKey{Namespace: "acme", Name: "fine"}, d); err != nil || d.Spec.Paused {
				t.Errorf("resume of a Distribution: %v, spec.paused %v", err, d.Spec.Paused)
			}
		}
	})

	t.Run("decommission: the library's, dry run first", func(t *testing.T) {
		f.tenant("web-old", "old", true)
		if _, err := p.run("decommission", "nowhere"); err == nil || !strings.Contains(err.Error(), "no Region nowhere") {
			t.Errorf("decommission of an unknown region: %v", err)
		}
		if _, err := p.run("decommission", "old", "--delete-copies"); err == nil || !strings.Contains(err.Error(), "--region-context") {
			t.Errorf("decommission --delete-copies without the region: %v", err)
		}
		out, err := p.run("decommission", "use", "--dry-run")
		if err == nil || !strings.Contains(err.Error(), "is held by use-fleet and has not expired") || strings.Contains(out, "nothing written") {
			t.Errorf("decommission of a region whose Lease is live: %v\n%s", err, out)
		}
		out = p.mustRun("decommission", "old", "--dry-run")
		if !strings.Contains(out, "dry run, nothing written") || !strings.Contains(out, "would release "+tenantKind+" acme/web-old") {
			t.Errorf("decommission --dry-run:\n%s", out)
		}
		tn := &demov1alpha1.Tenant{}
		if err := mc.Get(bg, client.ObjectKey{Namespace: "acme", Name: "web-old"}, tn); err != nil || !slices.Contains(tn.Finalizers, keys.Finalizer) {
			t.Fatalf("the dry run wrote: %v %v", err, tn.Finalizers)
		}
		out = p.mustRun("decommission", "old")
		t.Logf("kubectl regionsync decommission old\n%s", out)
		if err := mc.Get(bg, client.ObjectKey{Namespace: "acme", Name: "web-old"}, tn); err != nil || slices.Contains(tn.Finalizers, keys.Finalizer) {
			t.Errorf("the finalizer is not released: %v %v", err, tn.Finalizers)
		}
		lease := &coordinationv1.Lease{}
		if err := mc.Get(bg, client.ObjectKey{Namespace: fleetspec.DefaultManagementNamespace, Name: claim.LeaseName("old")}, lease); err == nil {
			t.Errorf("the shard Lease of old is still there:\n%s", out)
		}
		r, _ := doctorRun(t, p)
		if got := findingOf(r, inspect.FindingStaleHeartbeat, "Region old"); got == nil || !strings.Contains(got.Problem, "no shard Lease") {
			t.Errorf("after decommission, old is a Region without a Lease: %+v", r.Findings)
		}
	})
}

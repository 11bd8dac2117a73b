package inspect

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/sets"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/shard/claim"
)

// The classes of the problems Doctor finds (Problem.Class).
const (
	// FindingStaleHeartbeat: a region's shard Lease was not renewed within its lease duration, or
	// a Region has no shard Lease at all.
	FindingStaleHeartbeat = "StaleHeartbeat"
	// FindingOrphanedFinalizer: a management object carries the agents' finalizer but no known
	// region's shard takes it (its region was removed without being decommissioned).
	FindingOrphanedFinalizer = "OrphanedFinalizer"
	// FindingUnknownRegion: a management object is labelled for a region that has neither a
	// Region nor a shard Lease.
	FindingUnknownRegion = "UnknownRegion"
	// FindingShardOverlap: two regions' shards overlap (the agents' own rule).
	FindingShardOverlap = "ShardOverlap"
	// FindingCredentialExpiring: a region's management credential expires soon, or has expired.
	FindingCredentialExpiring = "CredentialExpiring"
	// FindingVersionSkew: an agent is outside the version-skew policy.
	FindingVersionSkew = "VersionSkew"
	// FindingDeletionsHeld: a region holds deletions (the deletion budget).
	FindingDeletionsHeld = "DeletionsHeld"
	// FindingDistributionHalted: a Distribution's rollout halted.
	FindingDistributionHalted = "DistributionHalted"
	// FindingDistributionUnplaceable: some region a Distribution selects cannot receive it, or
	// refused it.
	FindingDistributionUnplaceable = "DistributionUnplaceable"
	// FindingDistributionRemovalHeld: the hub's shrink guard holds a Distribution's removals.
	FindingDistributionRemovalHeld = "DistributionRemovalHeld"
)

// DefaultCredentialWarning is how long before its expiry Doctor reports a region's credential by
// default.
const DefaultCredentialWarning = 7 * 24 * time.Hour

// Problem is one thing Doctor found: what, where, and what to do.
type Problem struct {
	Class string `json:"class"`
	// Object names the object at fault: "Region us-east-1", "Tenant.demo.regionsync.dev acme/web".
	Object  string `json:"object"`
	Problem string `json:"problem"`
	Fix     string `json:"fix"`
}

// DoctorReport is what Doctor found: the output of kubectl regionsync doctor (its JSON and YAML
// form).
type DoctorReport struct {
	Findings []Problem `json:"findings"`
	// Checked counts what was looked at.
	Checked DoctorChecked `json:"checked"`
	// Skipped says what could not be checked, and why.
	Skipped []string `json:"skipped,omitempty"`
}

// DoctorChecked counts what Doctor looked at.
type DoctorChecked struct {
	Regions       int      `json:"regions"`
	ShardLeases   int      `json:"shardLeases"`
	Kinds         []string `json:"kinds"`
	Objects       int      `json:"objects"`
	Distributions int      `json:"distributions"`
	HubVersion    string   `json:"hubVersion,omitempty"`
}

// DoctorOptions say where Doctor looks and what it reports.
type DoctorOptions struct {
	// ManagementNamespace holds the shard Leases on management.
	ManagementNamespace string
	// Keys are the agents' annotation keys (their finalizer is what orphans are told by).
	Keys shard.Keys
	// Kinds are checked besides the kinds of every recorded shard (dotted: Tenant.demo.regionsync.dev).
	Kinds []string
	// CredentialWarning: a region's management credential expiring within it is reported.
	CredentialWarning time.Duration
	// Now is the clock liveness and expiries are judged against.
	Now time.Time
}

// Doctor reads management through c (the Regions, the shard Leases, the metadata of every object
// of the kinds to check, paged, the hub's Deployment and the Distributions) and reports what needs
// a person, each Problem with the object at fault and the fix.
func Doctor(ctx context.Context, c *Clients, opts DoctorOptions) (*DoctorReport, error) {
	now := opts.Now
	f, err := LoadFleet(ctx, c, opts.ManagementNamespace, now)
	if err != nil {
		return nil, err
	}
	d := &doctor{c: c, namespace: opts.ManagementNamespace, f: f, now: now, keys: opts.Keys, report: &DoctorReport{Findings: []Problem{}}}
	d.report.Checked.Regions = len(f.Regions)
	for _, s := range f.Shards {
		if !s.NoLease {
			d.report.Checked.ShardLeases++
		}
	}
	hubVersion, err := readHubVersion(ctx, c, opts.ManagementNamespace)
	if err != nil {
		d.report.Skipped = append(d.report.Skipped, err.Error())
	}
	d.report.Checked.HubVersion = hubVersion
	d.heartbeats()
	d.overlaps()
	d.credentials(opts.CredentialWarning)
	d.versions(hubVersion)
	d.heldDeletions()
	if err := d.objects(ctx, opts.Kinds); err != nil {
		return nil, err
	}
	if err := d.distributions(ctx); err != nil {
		return nil, err
	}
	return d.report, nil
}

// doctor is one run's state.
type doctor struct {
	c *Clients
	// namespace holds the shard Leases on management.
	namespace string
	f         *Fleet
	now       time.Time
	keys      shard.Keys
	report    *DoctorReport
}

func (d *doctor) add(class, object, what, fix string) {
	d.report.Findings = append(d.report.Findings, Problem{Class: class, Object: object, Problem: what, Fix: fix})
}

// heartbeats reports every shard Lease not renewed within its lease duration, and every Region
// with no Lease at all.
func (d *doctor) heartbeats() {
	for _, name := range d.f.names() {
		s, r := d.f.Shards[name], d.f.Regions[name]
		check := fmt.Sprintf("look at region %s's agent (kubectl --context <%s> -n regionsync-system get pods,events; its logs) and the Region's conditions (kubectl get region %s -o yaml)", name, name, name)
		gone := fmt.Sprintf("; if the region is gone for good, kubectl regionsync decommission %s", name)
		switch {
		case s == nil || s.NoLease:
			d.add(FindingStaleHeartbeat, "Region "+name,
				fmt.Sprintf("no shard Lease %s/%s: no agent has claimed region %s's shard (not deployed, not reaching management, or refusing its configuration)", d.namespace, claim.LeaseName(name), name),
				check+gone)
		case s.Live:
		case s.Renewed.IsZero():
			d.add(FindingStaleHeartbeat, "Lease "+s.Lease, fmt.Sprintf("region %s's shard Lease was never renewed", name), check+gone)
		default:
			what := fmt.Sprintf("region %s's shard Lease was last renewed %s ago; its lease is %s", name, duration.HumanDuration(d.now.Sub(s.Renewed)), s.Duration)
			if s.Holder == "" {
				what = fmt.Sprintf("region %s's shard Lease is released (its agent stopped) since %s ago", name, duration.HumanDuration(d.now.Sub(s.Renewed)))
			}
			if r == nil {
				what += "; no Region exists for it"
				gone = fmt.Sprintf("; if the region is gone for good, kubectl regionsync decommission %s (it releases the region's finalizers and deletes the Lease)", name)
			}
			d.add(FindingStaleHeartbeat, "Lease "+s.Lease, what, check+gone)
		}
	}
}

// overlaps reports every pair of recorded shards that overlap, by shard.Overlap (the agents' own
// rule).
func (d *doctor) overlaps() {
	shards := d.f.shardList()
	for i, a := range shards {
		for _, b := range shards[i+1:] {
			if a.DefErr != nil || b.DefErr != nil {
				continue
			}
			if overlap, why := shard.Overlap(a.Def, b.Def); overlap {
				d.add(FindingShardOverlap, fmt.Sprintf("Regions %s and %s", a.Region, b.Region),
					fmt.Sprintf("the shards overlap: %s (%s; %s); the one registered later refuses to sync", why, a.Def, b.Def),
					fmt.Sprintf("give one of them a name suffix the other's cannot end with (a new Region and overlay, scripts/new-region.sh), then decommission the old one (kubectl regionsync decommission %s)", b.Region))
			}
		}
	}
}

// credentials reports every Region whose management credential expires within warn.
func (d *doctor) credentials(warn time.Duration) {
	for _, name := range d.f.names() {
		r := d.f.Regions[name]
		if r == nil || r.Status.CredentialExpiryTime == nil {
			continue
		}
		exp := r.Status.CredentialExpiryTime.Time
		left := exp.Sub(d.now)
		if left > warn {
			continue
		}
		what := fmt.Sprintf("region %s's management credential expires in %s (%s)", name, duration.HumanDuration(left), exp.UTC().Format(time.RFC3339))
		if left <= 0 {
			what = fmt.Sprintf("region %s's management credential expired %s ago (%s)", name, duration.HumanDuration(-left), exp.UTC().Format(time.RFC3339))
		}
		d.add(FindingCredentialExpiring, "Region "+name, what+": with renewal on the agent renews it at two thirds of its lifetime, so renewal is failing or off",
			fmt.Sprintf("look for the agent's credential renewal errors in region %s; or issue a new token (scripts/region-kubeconfig.sh %s --context <management>) into the Secret regionsync-management-kubeconfig in the region (docs/operations/credentials.md)", name, name))
	}
}

// versions reports the agents outside the version-skew policy.
func (d *doctor) versions(hubVersion string) {
	agents := map[string]string{}
	for name, r := range d.f.Regions {
		agents[name] = r.Status.AgentVersion
	}
	_, flagged := VersionSkew(agents, hubVersion)
	for _, name := range d.f.names() {
		if why := flagged[name]; why != "" {
			d.add(FindingVersionSkew, "Region "+name, fmt.Sprintf("region %s's agent runs %s: %s", name, agents[name], why),
				"upgrade the agents (and the hub) so that every agent is within one minor version of the hub and of every other agent, one minor version at a time (docs/versioning.md)")
		}
	}
}

// heldDeletions reports every region that holds deletions.
func (d *doctor) heldDeletions() {
	for _, name := range d.f.names() {
		r := d.f.Regions[name]
		if r == nil {
			continue
		}
		var held int32
		var kinds []string
		for _, c := range r.Status.Resources {
			if c.DeletionsHeld > 0 {
				held += c.DeletionsHeld
				kinds = append(kinds, fmt.Sprintf("%s: %d", c.Resource, c.DeletionsHeld))
			}
		}
		cond := condition(r, regionsyncv1alpha1.ConditionDeletionsHeld)
		if held == 0 && (cond == nil || cond.Status != metav1.ConditionTrue) {
			continue
		}
		what := fmt.Sprintf("region %s holds %d deletion(s) (%s): their management objects vanished or terminate together, beyond the deletion budget", name, held, strings.Join(kinds, ", "))
		if held == 0 {
			what = fmt.Sprintf("region %s reports DeletionsHeld: %s", name, cond.Message)
		}
		d.add(FindingDeletionsHeld, "Region "+name, what,
			fmt.Sprintf("if the objects were meant to go: kubectl regionsync release --region %s --before now; if not, restore them on management (the hold ends when every one is back); kubectl regionsync explain <kind>/<name> -n <namespace> shows one", name))
	}
}

// kindsToCheck returns the dotted kinds of every recorded shard, plus extra.
func (d *doctor) kindsToCheck(extra []string) []string {
	seen := sets.New(extra...)
	for _, s := range d.f.Shards {
		seen.Insert(s.Def.Kinds...)
		if s.RegisteredShard != nil {
			seen.Insert(s.RegisteredShard.Kinds...)
		}
	}
	return sets.List(seen)
}

// objects lists the metadata of every object of the kinds to check (paged, one list per kind
// and page) and reports finalizers no known shard accounts for and labels naming unknown
// regions.
func (d *doctor) objects(ctx context.Context, extra []string) error {
	mapper := d.c.Mapper
	shards := d.f.shardList()
	for _, kind := range d.kindsToCheck(extra) {
		gk := schema.ParseGroupKind(kind)
		mapping, err := mapper.RESTMapping(gk)
		if meta.IsNoMatchError(err) {
			d.report.Skipped = append(d.report.Skipped, fmt.Sprintf("kind %s: not served by management", kind))
			continue
		}
		if err != nil {
			return fmt.Errorf("looking up kind %s on management: %w", kind, err)
		}
		d.report.Checked.Kinds = append(d.report.Checked.Kinds, kind)
		opts := metav1.ListOptions{Limit: 500}
		for {
			list, err := d.c.Metadata.Resource(mapping.Resource).List(ctx, opts)
			if apierrors.IsForbidden(err) {
				d.report.Skipped = append(d.report.Skipped, fmt.Sprintf("kind %s: %v", kind, err))
				break
			}
			if err != nil {
				return fmt.Errorf("listing %s on management: %w", kind, err)
			}
			for i := range list.Items {
				d.object(kind, &list.Items[i], shards)
			}
			if opts.Continue = list.Continue; opts.Continue == "" {
				break
			}
		}
	}
	return nil
}

// object judges one management object.
func (d *doctor) object(kind string, m *metav1.PartialObjectMetadata, shards []*ShardRecord) {
	d.report.Checked.Objects++
	ref := fmt.Sprintf("%s %s/%s", kind, m.Namespace, m.Name)
	labelled := m.Labels[regionsyncv1alpha1.RegionLabel]
	if labelled != "" && d.f.Regions[labelled] == nil && d.f.Shards[labelled] == nil {
		d.add(FindingUnknownRegion, ref, fmt.Sprintf("labelled %s=%s, but region %s has neither a Region nor a shard Lease: no agent syncs it there", regionsyncv1alpha1.RegionLabel, labelled, labelled),
			fmt.Sprintf("label it for an existing region (kubectl get regions), delete it, or add region %s (scripts/new-region.sh %s)", labelled, labelled))
	}
	if !slices.Contains(m.Finalizers, d.keys.Finalizer) {
		return
	}
	for _, s := range shards {
		// A shard of another annotation domain carries another finalizer.
		if s.keys(d.keys).Finalizer != d.keys.Finalizer {
			continue
		}
		if judgeShard(kind, m.Namespace, m.Name, m.Labels, s).Takes {
			return
		}
	}
	what := fmt.Sprintf("carries the finalizer %s, but no known region's shard takes it: its region was removed without being decommissioned, or its labels or name changed, so deleting it waits forever", d.keys.Finalizer)
	fix := fmt.Sprintf("if a region still has its copy, run agent decommission --out-of-shard-only there; otherwise remove the finalizer: kubectl -n %s patch %s %s --type=json -p '[{\"op\":\"remove\",\"path\":\"/metadata/finalizers/%d\"}]'",
		m.Namespace, strings.ToLower(kind), m.Name, slices.Index(m.Finalizers, d.keys.Finalizer))
	if m.DeletionTimestamp != nil {
		what = fmt.Sprintf("terminating since %s ago and held by the finalizer %s, which no known region's shard will remove", duration.HumanDuration(d.now.Sub(m.DeletionTimestamp.Time)), d.keys.Finalizer)
	}
	d.add(FindingOrphanedFinalizer, ref, what, fix)
}

// distributions reports halted Distributions, those with regions they cannot be placed in or
// that refused them, and those whose removals are held; nothing where management does not serve
// the kind.
func (d *doctor) distributions(ctx context.Context) error {
	items, err := listDistributions(ctx, d.c)
	if err != nil || items == nil {
		return err
	}
	d.report.Checked.Distributions = len(items)
	for i := range items {
		dist := &items[i]
		ref := fmt.Sprintf("Distribution %s/%s", dist.GetNamespace(), dist.GetName())
		conds := UnstructuredConditions(dist.Object)
		if c := conds[regionsyncv1alpha1.DistributionHalted]; c.Status == metav1.ConditionTrue {
			d.add(FindingDistributionHalted, ref, fmt.Sprintf("its rollout halted (%s): %s", c.Reason, orDash(c.Message)),
				fmt.Sprintf("fix the cause in the failing regions (kubectl get distribution -n %s %s -o yaml: status.regions), then kubectl regionsync retry %s -n %s",
					dist.GetNamespace(), dist.GetName(), dist.GetName(), dist.GetNamespace()))
		}
		if bad := troubledRegions(dist); len(bad) > 0 {
			d.add(FindingDistributionUnplaceable, ref, fmt.Sprintf("%d region(s) cannot receive it or refused it: %s", len(bad), strings.Join(bad, "; ")),
				"per reason: NoShard or InvalidShard: register the Region's spec.shard; KindNotSynced: add the kind to the region; NamespaceOutOfScope, SelectorMismatch, InvalidName: change the Distribution or its placement; RegionNotFound: add the Region or drop it from spec.placement; Conflict: remove or rename the object holding the per-region name")
		}
		if c := conds[regionsyncv1alpha1.DistributionRemovalHeld]; c.Status == metav1.ConditionTrue {
			d.add(FindingDistributionRemovalHeld, ref, fmt.Sprintf("the hub holds removals of its per-region objects: %s", orDash(c.Message)),
				fmt.Sprintf("if the removals are meant: kubectl -n %s annotate distribution %s %s=$(date -u +%%FT%%TZ) --overwrite; if not, restore the placement",
					dist.GetNamespace(), dist.GetName(), d.keys.ConfirmRemovalsBefore))
		}
	}
	return nil
}

// troubledRegions lists the regions of a Distribution's status that cannot receive it or refused
// it ("region: State/Reason (message)").
func troubledRegions(dist *unstructured.Unstructured) []string {
	regions, _, _ := unstructured.NestedSlice(dist.Object, "status", "regions")
	out := make([]string, 0, len(regions))
	for _, r := range regions {
		m, _ := r.(map[string]any)
		state, _ := m["state"].(string)
		switch regionsyncv1alpha1.PlacementState(state) {
		case regionsyncv1alpha1.PlacementUnplaceable, regionsyncv1alpha1.PlacementConflict, regionsyncv1alpha1.PlacementFailed:
		default:
			continue
		}
		name, _ := m["region"].(string)
		reason, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		line := fmt.Sprintf("%s: %s/%s", name, state, reason)
		if msg != "" {
			line += " (" + msg + ")"
		}
		out = append(out, line)
	}
	return out
}

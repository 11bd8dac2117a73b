package inspect

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
)

// StatusReport is the fleet at a glance, what Status found: the output of kubectl regionsync
// status (its JSON and YAML form).
type StatusReport struct {
	// Regions, sorted by name.
	Regions []RegionStatus `json:"regions"`
	// NewestAgentVersion is the newest release version among the agents ("" when none runs a
	// release).
	NewestAgentVersion string `json:"newestAgentVersion,omitempty"`
	// HubVersion is the hub's version, from its Deployment ("" when none is installed or it
	// cannot be read).
	HubVersion string `json:"hubVersion,omitempty"`
	// Distributions is nil where management does not serve the Distribution kind.
	Distributions *DistributionSummary `json:"distributions,omitempty"`
}

// RegionStatus is one region's line of a StatusReport.
type RegionStatus struct {
	Name string `json:"name"`
	// HasRegion: a Region exists; HasLease: a shard Lease exists.
	HasRegion bool `json:"hasRegion"`
	HasLease  bool `json:"hasLease"`
	// Ready is the Region's Ready condition (status and reason).
	Ready       metav1.ConditionStatus `json:"ready,omitempty"`
	ReadyReason string                 `json:"readyReason,omitempty"`
	// Live: the shard Lease is held and its lease has not run out.
	Live bool `json:"live"`
	// ShardState is the claim state recorded on the Lease (Syncing, Refused).
	ShardState     string       `json:"shardState,omitempty"`
	HeartbeatTime  *metav1.Time `json:"heartbeatTime,omitempty"`
	LeaseRenewTime *metav1.Time `json:"leaseRenewTime,omitempty"`
	// Leader is the Region's leading replica; LeaseHolder the Lease's holder identity.
	Leader       string `json:"leader,omitempty"`
	LeaseHolder  string `json:"leaseHolder,omitempty"`
	AgentVersion string `json:"agentVersion,omitempty"`
	// KubernetesVersion is the regional API server's version, as the agent reports it.
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// VersionSkew says why the agent's version is outside the skew policy ("" when it is not).
	VersionSkew string `json:"versionSkew,omitempty"`
	ClusterID   string `json:"clusterID,omitempty"`
	// CredentialExpiryTime is when the leader's management credential expires (Region status).
	CredentialExpiryTime *metav1.Time                        `json:"credentialExpiryTime,omitempty"`
	Shard                string                              `json:"shard,omitempty"`
	Resources            []regionsyncv1alpha1.ResourceCounts `json:"resources,omitempty"`
	// Distributions counts the Distributions on their way to the region, halted, or failing
	// there (nil where management does not serve the Distribution kind or none lists the
	// region).
	Distributions *RegionDistributions `json:"distributions,omitempty"`
}

// DistributionSummary counts the hub's Distributions by their conditions.
type DistributionSummary struct {
	Total int `json:"total"`
	// Progressing: some copy is not current or healthy yet (Available with reason Progressing),
	// or a rollout is under way (Progressing=True).
	Progressing int `json:"progressing"`
	// Halted: a rollout stopped on failures (Halted=True).
	Halted int `json:"halted"`
	// Degraded: some region cannot be placed, refused the object or reports it unhealthy.
	Degraded int `json:"degraded"`
	// RemovalHeld: the shrink guard holds removals until an operator confirms them.
	RemovalHeld int `json:"removalHeld"`
	// NeedAttention names the halted, degraded and removal-held Distributions (namespace/name).
	NeedAttention []string `json:"needAttention,omitempty"`
}

// SummarizeDistributions counts Distributions (unstructured, so that conditions a newer hub
// adds are read too) by their conditions.
func SummarizeDistributions(items []unstructured.Unstructured) *DistributionSummary {
	s := &DistributionSummary{Total: len(items)}
	for _, d := range items {
		conds := UnstructuredConditions(d.Object)
		available := conds[regionsyncv1alpha1.DistributionAvailable]
		if conds[regionsyncv1alpha1.DistributionProgressing].Status == metav1.ConditionTrue ||
			available.Status != "" && available.Status != metav1.ConditionTrue && available.Reason == regionsyncv1alpha1.ReasonProgressing {
			s.Progressing++
		}
		attention := false
		for t, n := range map[string]*int{regionsyncv1alpha1.DistributionHalted: &s.Halted, regionsyncv1alpha1.DistributionDegraded: &s.Degraded, regionsyncv1alpha1.DistributionRemovalHeld: &s.RemovalHeld} {
			if conds[t].Status == metav1.ConditionTrue {
				*n++
				attention = true
			}
		}
		if attention {
			s.NeedAttention = append(s.NeedAttention, d.GetNamespace()+"/"+d.GetName())
		}
	}
	sort.Strings(s.NeedAttention)
	return s
}

// Status reads management through c: the shard Leases in managementNamespace and the Regions (one
// list each), the hub's Deployment and, where served, the Distributions; and reports every region,
// its liveness judged at now.
func Status(ctx context.Context, c *Clients, managementNamespace string, now time.Time) (*StatusReport, error) {
	f, err := LoadFleet(ctx, c, managementNamespace, now)
	if err != nil {
		return nil, err
	}
	hubVersion, err := readHubVersion(ctx, c, managementNamespace)
	if err != nil {
		hubVersion = ""
	}
	report := BuildStatus(f, hubVersion)
	items, err := listDistributions(ctx, c)
	if err != nil {
		return nil, err
	}
	if items != nil {
		report.Distributions = SummarizeDistributions(items)
		perRegion := DistributionsPerRegion(items)
		for i := range report.Regions {
			report.Regions[i].Distributions = perRegion[report.Regions[i].Name]
		}
	}
	return report, nil
}

// listDistributions lists the hub's Distributions through c (its Mapper finds the kind), or
// returns nil when management does not serve the kind.
func listDistributions(ctx context.Context, c *Clients) ([]unstructured.Unstructured, error) {
	mapping, err := c.Mapper.RESTMapping(DistributionKind)
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("looking up the Distribution kind on management: %w", err)
	}
	list, err := c.Dynamic.Resource(mapping.Resource).List(ctx, metav1.ListOptions{})
	if isNotServed(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the Distributions on management: %w", err)
	}
	if list.Items == nil {
		list.Items = []unstructured.Unstructured{}
	}
	return list.Items, nil
}

// RegionDistributions counts, for one region, the Distributions whose copy there is on its way,
// whose rollout is halted, or that cannot be placed there (from the Distributions'
// status.regions, which lists every region that needs attention).
type RegionDistributions struct {
	// Progressing: placed, but the copy is not current and healthy yet, or being removed.
	Progressing int `json:"progressing"`
	// Halted: the Distribution's rollout halted (Halted=True) and lists this region.
	Halted int `json:"halted"`
	// Failed: the region cannot receive it (Unplaceable), a conflict, or a failed write or
	// override, or its removal is held.
	Failed int `json:"failed"`
}

// DistributionsPerRegion counts the Distributions per region.
func DistributionsPerRegion(items []unstructured.Unstructured) map[string]*RegionDistributions {
	out := map[string]*RegionDistributions{}
	for i := range items {
		halted := UnstructuredConditions(items[i].Object)[regionsyncv1alpha1.DistributionHalted].Status == metav1.ConditionTrue
		regions, _, _ := unstructured.NestedSlice(items[i].Object, "status", "regions")
		for _, r := range regions {
			m, _ := r.(map[string]any)
			name, _ := m["region"].(string)
			state, _ := m["state"].(string)
			current, _ := m["current"].(bool)
			health, _ := m["health"].(string)
			if name == "" {
				continue
			}
			c := out[name]
			if c == nil {
				c = &RegionDistributions{}
				out[name] = c
			}
			switch regionsyncv1alpha1.PlacementState(state) {
			case regionsyncv1alpha1.PlacementUnplaceable, regionsyncv1alpha1.PlacementConflict, regionsyncv1alpha1.PlacementFailed, regionsyncv1alpha1.PlacementRemovalHeld:
				c.Failed++
				continue
			case regionsyncv1alpha1.PlacementRemoving, regionsyncv1alpha1.PlacementWaitingForRegion:
				c.Progressing++
				continue
			}
			switch {
			case halted:
				c.Halted++
			case !current || health != "Current":
				c.Progressing++
			}
		}
	}
	return out
}

// readHubVersion reads the version of the hub's Deployment (regionsync-hub in the management
// namespace): its app.kubernetes.io/version label, else the tag of its hub container's image.
// It returns "" without an error when no hub is installed, and an error saying why the hub could
// not be judged otherwise (e.g. no right to read Deployments).
func readHubVersion(ctx context.Context, c *Clients, managementNamespace string) (string, error) {
	dep, err := c.Kube.AppsV1().Deployments(managementNamespace).Get(ctx, HubDeployment, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("the hub's version (Deployment %s/%s): %w", managementNamespace, HubDeployment, err)
	}
	if v := dep.Labels["app.kubernetes.io/version"]; v != "" {
		return v, nil
	}
	for _, c := range dep.Spec.Template.Spec.Containers {
		if c.Name != "hub" {
			continue
		}
		image, _, _ := strings.Cut(c.Image, "@")
		if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
			return image[i+1:], nil
		}
	}
	return "", nil
}

// HubDeployment is the name of the hub's Deployment (deploy/kustomize/hub).
const HubDeployment = "regionsync-hub"

// UnstructuredConditions returns the status.conditions of an unstructured object by type.
func UnstructuredConditions(obj map[string]any) map[string]metav1.Condition {
	status, _ := obj["status"].(map[string]any)
	list, _ := status["conditions"].([]any)
	out := map[string]metav1.Condition{}
	for _, c := range list {
		m, _ := c.(map[string]any)
		t, _ := m["type"].(string)
		st, _ := m["status"].(string)
		reason, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		if t != "" {
			out[t] = metav1.Condition{Type: t, Status: metav1.ConditionStatus(st), Reason: reason, Message: msg}
		}
	}
	return out
}

// BuildStatus turns a Fleet and the hub's version ("" when unknown) into the report: one line per
// region, versions judged against the fleet's newest and the hub's (the Distributions are left
// to Status).
func BuildStatus(f *Fleet, hubVersion string) *StatusReport {
	report := &StatusReport{HubVersion: hubVersion}
	versions := map[string]string{}
	for _, name := range f.names() {
		line := RegionStatus{Name: name}
		if r := f.Regions[name]; r != nil {
			line.HasRegion = true
			if c := condition(r, regionsyncv1alpha1.ConditionReady); c != nil {
				line.Ready, line.ReadyReason = c.Status, c.Reason
			}
			line.HeartbeatTime = r.Status.HeartbeatTime
			line.Leader, line.AgentVersion, line.ClusterID = r.Status.Leader, r.Status.AgentVersion, r.Status.ClusterID
			line.KubernetesVersion = r.Status.KubernetesVersion
			line.CredentialExpiryTime = r.Status.CredentialExpiryTime
			line.Shard = r.Status.Shard
			line.Resources = append(line.Resources, r.Status.Resources...)
			sort.Slice(line.Resources, func(i, j int) bool { return line.Resources[i].Resource < line.Resources[j].Resource })
			versions[name] = r.Status.AgentVersion
		}
		if s := f.Shards[name]; s != nil && !s.NoLease {
			line.HasLease, line.Live, line.ShardState, line.LeaseHolder = true, s.Live, s.State, s.Holder
			if !s.Renewed.IsZero() {
				line.LeaseRenewTime = &metav1.Time{Time: s.Renewed}
			}
			if line.Shard == "" && s.DefErr == nil {
				line.Shard = s.Def.String()
			}
		}
		report.Regions = append(report.Regions, line)
	}
	newest, skew := VersionSkew(versions, hubVersion)
	report.NewestAgentVersion = newest
	for i := range report.Regions {
		report.Regions[i].VersionSkew = skew[report.Regions[i].Name]
	}
	return report
}

// VersionSkew applies the version-skew policy (docs/versioning.md: every agent within one minor
// version of the hub and of every other agent) to the agents' versions by region and the hub's
// version (hub "" or not a release: the hub is not judged). It returns the newest release version
// among the agents and, for every region whose agent is more than one minor version (or a major
// version) away from the hub or behind the newest agent, why. Versions that are not releases
// ("dev", "") are judged by nobody: they are neither the newest nor flagged.
func VersionSkew(versions map[string]string, hub string) (string, map[string]string) {
	var newest *version.Version
	newestRaw := ""
	parsed := map[string]*version.Version{}
	for region, raw := range versions {
		v, err := version.ParseSemantic(raw)
		if err != nil {
			continue
		}
		parsed[region] = v
		if newest == nil || newest.LessThan(v) {
			newest, newestRaw = v, raw
		}
	}
	hubVersion, err := version.ParseSemantic(hub)
	if err != nil {
		hubVersion = nil
	}
	flagged := map[string]string{}
	for region, v := range parsed {
		switch {
		case hubVersion != nil && v.Major() != hubVersion.Major():
			flagged[region] = fmt.Sprintf("major version %d, the hub runs %s", v.Major(), hub)
		case hubVersion != nil && minorDistance(v, hubVersion) > 1:
			flagged[region] = fmt.Sprintf("%d minor versions away from the hub's %s (the policy allows one)", minorDistance(v, hubVersion), hub)
		case v.Major() != newest.Major():
			flagged[region] = fmt.Sprintf("major version %d, the fleet's newest agent runs %s", v.Major(), newestRaw)
		case newest.Minor()-v.Minor() > 1:
			flagged[region] = fmt.Sprintf("%d minor versions behind %s (the policy allows one)", newest.Minor()-v.Minor(), newestRaw)
		}
	}
	return newestRaw, flagged
}

// minorDistance is how many minor versions apart two versions of one major version are.
func minorDistance(a, b *version.Version) uint {
	if a.Minor() > b.Minor() {
		return a.Minor() - b.Minor()
	}
	return b.Minor() - a.Minor()
}

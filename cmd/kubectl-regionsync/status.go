package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
)

// Output formats.
const (
	outputTable = ""
	outputWide  = "wide"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

func checkOutput(o string, allowed ...string) error {
	for _, a := range allowed {
		if o == a {
			return nil
		}
	}
	return fmt.Errorf("unknown output format %q: use one of %s", o, strings.Join(allowed[1:], ", "))
}

func newStatusCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "The fleet in one table: liveness, claim, agent version and object counts per region and kind",
		Long: "status lists every region that has a Region or a shard Lease on management (one list of each):\n" +
			"Ready and its reason, LIVE (the shard Lease is held and not expired), the ages of the Region's last status\n" +
			"write and of the Lease's renewal (the heartbeat), the leading replica, the agent version (SKEW flags an agent more than one\n" +
			"minor version away from the fleet's newest), and per synced kind the objects synced, pending, failed\n" +
			"and whose deletion is held. Where management serves the hub's Distribution kind, a last line counts\n" +
			"the Distributions progressing and halted.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output, outputTable, outputWide, outputJSON, outputYAML); err != nil {
				return err
			}
			report, err := o.status(cmd.Context())
			if err != nil {
				return err
			}
			return writeReport(o.streams.Out, output, report, func(w io.Writer) error {
				return renderStatus(w, report, output == outputWide, o.now())
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, json or yaml (default: a table)")
	return cmd
}

// writeReport writes v as JSON or YAML, or calls table.
func writeReport(w io.Writer, output string, v any, table func(io.Writer) error) error {
	switch output {
	case outputJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case outputYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return table(w)
}

// statusReport is the output of status (its JSON and YAML form).
type statusReport struct {
	// Regions, sorted by name.
	Regions []regionStatus `json:"regions"`
	// NewestAgentVersion is the newest release version among the agents ("" when none runs a
	// release).
	NewestAgentVersion string `json:"newestAgentVersion,omitempty"`
	// HubVersion is the hub's version, from its Deployment ("" when none is installed or it
	// cannot be read).
	HubVersion string `json:"hubVersion,omitempty"`
	// Distributions is nil where management does not serve the Distribution kind.
	Distributions *distributionSummary `json:"distributions,omitempty"`
}

// regionStatus is one region's line of status.
type regionStatus struct {
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
	Distributions *regionDistributions `json:"distributions,omitempty"`
}

// distributionSummary counts the hub's Distributions by their conditions.
type distributionSummary struct {
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

// summarizeDistributions counts Distributions (unstructured, so that conditions a newer hub
// adds are read too) by their conditions.
func summarizeDistributions(items []unstructured.Unstructured) *distributionSummary {
	s := &distributionSummary{Total: len(items)}
	for _, d := range items {
		conds := unstructuredConditions(d.Object)
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

// status reads management: the Leases and the Regions (one list each) and, where served, the
// Distributions.
func (o *options) status(ctx context.Context) (*statusReport, error) {
	mc, err := o.management()
	if err != nil {
		return nil, err
	}
	now := o.now()
	f, err := loadFleet(ctx, mc, o.managementNamespace, now)
	if err != nil {
		return nil, err
	}
	hubVersion, err := o.hubVersion(ctx, mc)
	if err != nil {
		hubVersion = ""
	}
	report := buildStatus(f, hubVersion)
	items, err := o.listDistributions(ctx, mc)
	if err != nil {
		return nil, err
	}
	if items != nil {
		report.Distributions = summarizeDistributions(items)
		perRegion := distributionsPerRegion(items)
		for i := range report.Regions {
			report.Regions[i].Distributions = perRegion[report.Regions[i].Name]
		}
	}
	return report, nil
}

// listDistributions lists the hub's Distributions, or returns nil when management does not
// serve the kind.
func (o *options) listDistributions(ctx context.Context, mc *clients) ([]unstructured.Unstructured, error) {
	mapper, err := o.config.ToRESTMapper()
	if err != nil {
		return nil, fmt.Errorf("management cluster: %w", err)
	}
	mapping, err := mapper.RESTMapping(distributionGK)
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("looking up the Distribution kind on management: %w", err)
	}
	list, err := mc.dynamic.Resource(mapping.Resource).List(ctx, metav1.ListOptions{})
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

// regionDistributions counts, for one region, the Distributions whose copy there is on its way,
// whose rollout is halted, or that cannot be placed there (from the Distributions'
// status.regions, which lists every region that needs attention).
type regionDistributions struct {
	// Progressing: placed, but the copy is not current and healthy yet, or being removed.
	Progressing int `json:"progressing"`
	// Halted: the Distribution's rollout halted (Halted=True) and lists this region.
	Halted int `json:"halted"`
	// Failed: the region cannot receive it (Unplaceable), a conflict, or a failed write or
	// override, or its removal is held.
	Failed int `json:"failed"`
}

// distributionsPerRegion counts the Distributions per region.
func distributionsPerRegion(items []unstructured.Unstructured) map[string]*regionDistributions {
	out := map[string]*regionDistributions{}
	for i := range items {
		halted := unstructuredConditions(items[i].Object)[regionsyncv1alpha1.DistributionHalted].Status == metav1.ConditionTrue
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
				c = &regionDistributions{}
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

// hubVersion reads the version of the hub's Deployment (regionsync-hub in the management
// namespace): its app.kubernetes.io/version label, else the tag of its hub container's image.
// It returns "" without an error when no hub is installed, and an error saying why the hub could
// not be judged otherwise (e.g. no right to read Deployments).
func (o *options) hubVersion(ctx context.Context, mc *clients) (string, error) {
	dep, err := mc.kube.AppsV1().Deployments(o.managementNamespace).Get(ctx, hubDeployment, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("the hub's version (Deployment %s/%s): %w", o.managementNamespace, hubDeployment, err)
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

// hubDeployment is the name of the hub's Deployment (deploy/kustomize/hub).
const hubDeployment = "regionsync-hub"

// unstructuredConditions returns status.conditions by type.
func unstructuredConditions(obj map[string]any) map[string]metav1.Condition {
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

// buildStatus turns what was read into the report: one line per region, versions judged
// against the fleet's newest.
func buildStatus(f *fleet, hubVersion string) *statusReport {
	report := &statusReport{HubVersion: hubVersion}
	versions := map[string]string{}
	for _, name := range f.names() {
		line := regionStatus{Name: name}
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
	newest, skew := versionSkew(versions, hubVersion)
	report.NewestAgentVersion = newest
	for i := range report.Regions {
		report.Regions[i].VersionSkew = skew[report.Regions[i].Name]
	}
	return report
}

// versionSkew applies the version-skew policy (docs/versioning.md: every agent within one minor
// version of the hub and of every other agent) to the agents' versions by region and the hub's
// version (hub "" or not a release: the hub is not judged). It returns the newest release version
// among the agents and, for every region whose agent is more than one minor version (or a major
// version) away from the hub or behind the newest agent, why. Versions that are not releases
// ("dev", "") are judged by nobody: they are neither the newest nor flagged.
func versionSkew(versions map[string]string, hub string) (string, map[string]string) {
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

// age formats how long ago t was ("-" for never).
func age(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// until formats how long until t ("in 5d", "expired 2h ago", "-" for unknown).
func until(t *metav1.Time, now time.Time) string {
	switch {
	case t == nil || t.IsZero():
		return "-"
	case t.After(now):
		return "in " + duration.HumanDuration(t.Sub(now))
	}
	return "expired " + duration.HumanDuration(now.Sub(t.Time)) + " ago"
}

// renderStatus writes the status table: one row per region and synced kind (the region's columns
// on its first row only), and the Distributions line where the kind is served.
func renderStatus(w io.Writer, r *statusReport, wide bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	header := []string{"REGION", "READY", "LIVE", "REPORTED", "RENEWED", "LEADER", "VERSION"}
	if r.Distributions != nil {
		header = append(header, "DISTRIBUTIONS")
	}
	header = append(header, "KIND", "SYNCED", "PENDING", "FAILED", "HELD")
	if wide {
		header = append(header, "PAUSED", "INVALID", "SHARD-STATE", "LEASE-HOLDER", "CREDENTIAL-EXPIRES", "KUBERNETES", "CLUSTER-ID", "SHARD")
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	skewed := 0
	for _, line := range r.Regions {
		ready := string(line.Ready)
		switch {
		case !line.HasRegion:
			ready = "no Region"
		case ready == "":
			ready = "Unknown"
		}
		if line.ReadyReason != "" && line.Ready != metav1.ConditionTrue {
			ready += " (" + line.ReadyReason + ")"
		}
		live := "no"
		switch {
		case !line.HasLease:
			live = "no Lease"
		case line.Live:
			live = "yes"
		}
		ver := orDash(line.AgentVersion)
		if line.VersionSkew != "" {
			ver += " SKEW"
			skewed++
		}
		region := []string{line.Name, ready, live, age(line.HeartbeatTime, now), age(line.LeaseRenewTime, now), orDash(line.Leader), ver}
		if r.Distributions != nil {
			region = append(region, distributionCell(line.Distributions))
		}
		regionWide := []string{orDash(line.ShardState), orDash(line.LeaseHolder), until(line.CredentialExpiryTime, now), orDash(line.KubernetesVersion), orDash(line.ClusterID), orDash(line.Shard)}
		rows := line.Resources
		if len(rows) == 0 {
			rows = []regionsyncv1alpha1.ResourceCounts{{}}
		}
		for i, c := range rows {
			cells := region
			if i > 0 {
				cells = append([]string{line.Name}, blank(len(region)-1)...)
			}
			cells = append(append([]string(nil), cells...), countCells(c)...)
			if wide {
				cells = append(cells, num(c.Resource, c.Paused), num(c.Resource, c.Invalid))
				if i == 0 {
					cells = append(cells, regionWide...)
				} else {
					cells = append(cells, blank(len(regionWide))...)
				}
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if skewed > 0 {
		against := "the newest, " + r.NewestAgentVersion
		if r.HubVersion != "" {
			against += ", or from the hub's " + r.HubVersion
		}
		fmt.Fprintf(w, "\nSKEW: %d region(s) run an agent more than one minor version away from %s (-o json: versionSkew says why).\n", skewed, against)
	}
	if d := r.Distributions; d != nil {
		fmt.Fprintf(w, "\nDistributions: %d, %d progressing, %d halted, %d degraded, %d with removals held", d.Total, d.Progressing, d.Halted, d.Degraded, d.RemovalHeld)
		if len(d.NeedAttention) > 0 {
			fmt.Fprintf(w, " (need attention: %s)", strings.Join(d.NeedAttention, ", "))
		}
		fmt.Fprintln(w)
	}
	return nil
}

// distributionCell says how many Distributions progress, halted or fail in a region ("-": none).
func distributionCell(d *regionDistributions) string {
	if d == nil {
		return "-"
	}
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{{d.Progressing, "progressing"}, {d.Halted, "halted"}, {d.Failed, "failed"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func countCells(c regionsyncv1alpha1.ResourceCounts) []string {
	if c.Resource == "" {
		return []string{"-", "-", "-", "-", "-"}
	}
	return []string{c.Resource, strconv.Itoa(int(c.Synced)), strconv.Itoa(int(c.Pending)), strconv.Itoa(int(c.Failed)), strconv.Itoa(int(c.DeletionsHeld))}
}

func num(kind string, n int32) string {
	if kind == "" {
		return "-"
	}
	return strconv.Itoa(int(n))
}

func blank(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = ""
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

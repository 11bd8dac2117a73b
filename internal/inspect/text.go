package inspect

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
)

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

// WriteStatusTable writes a StatusReport as kubectl regionsync status prints it (wide: -o wide):
// one row per region and synced kind (the region's columns on its first row only), and the
// Distributions line where the kind is served; ages are shown as of now.
func WriteStatusTable(w io.Writer, r *StatusReport, wide bool, now time.Time) error {
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
func distributionCell(d *RegionDistributions) string {
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

// copyLines is how many lines of the copy WriteExplanation prints.
const copyLines = 40

// renderCopy prints the copy as YAML, cut after copyLines lines (-o yaml prints it whole).
func renderCopy(w io.Writer, ref string, obj map[string]any) error {
	b, err := yaml.Marshal(obj)
	if err != nil {
		return fmt.Errorf("printing the copy %s: %w", ref, err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	fmt.Fprintf(w, "\nCopy %s:\n", ref)
	for i, l := range lines {
		if i == copyLines {
			fmt.Fprintf(w, "  ... (%d more lines: -o yaml prints the whole copy)\n", len(lines)-copyLines)
			break
		}
		fmt.Fprintf(w, "  %s\n", l)
	}
	return nil
}

// WriteExplanation writes an Explanation as kubectl regionsync explain prints it: the last events
// Events of each side (events < 0: all), ages as of now.
func WriteExplanation(w io.Writer, e *Explanation, events int, now time.Time) error {
	fmt.Fprintf(w, "%s on management\n", e.Object)
	fmt.Fprintf(w, "Verdict: %s: %s\n", e.Verdict, e.Summary)
	if len(e.Shards) > 0 {
		fmt.Fprintln(w, "\nShards:")
		for _, s := range e.Shards {
			switch {
			case s.Takes:
				fmt.Fprintf(w, "  %s takes it: %s\n", s.Region, orDash(s.Shard))
			default:
				texts := make([]string, 0, len(s.Misses))
				for _, m := range s.Misses {
					texts = append(texts, m.Text)
				}
				fmt.Fprintf(w, "  %s does not: %s\n", s.Region, strings.Join(texts, "; "))
			}
		}
	}
	if e.OtherShards != "" {
		fmt.Fprintf(w, "  %s\n", e.OtherShards)
	}
	fmt.Fprintln(w, "\nFindings:")
	for _, f := range e.Findings {
		mark := "ok"
		if !f.OK {
			mark = "!!"
		}
		fmt.Fprintf(w, "  %s %-9s %s\n", mark, f.Topic, f.Text)
	}
	if e.CopyObject != nil {
		if err := renderCopy(w, e.Copy, e.CopyObject); err != nil {
			return err
		}
	}
	if e.Drift != "" {
		fmt.Fprintf(w, "\nDrift (- management, + copy):\n%s", e.Drift)
	}
	for _, ev := range []struct {
		title  string
		events []EventLine
	}{{"Events on management", e.Events}, {"Events of the copy in the region", e.CopyEvents}} {
		if len(ev.events) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", ev.title)
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  AGE\tTYPE\tREASON\tFROM\tMESSAGE")
		list := ev.events
		if events >= 0 && len(list) > events {
			list = list[len(list)-events:]
		}
		for _, l := range list {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", since(now, l.Time), l.Type, l.Reason, orDash(l.From), strings.ReplaceAll(l.Message, "\n", " "))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// WriteDoctorReport writes a DoctorReport as kubectl regionsync doctor prints it: the findings
// grouped by class, then a summary.
func WriteDoctorReport(w io.Writer, r *DoctorReport) error {
	for _, f := range r.Findings {
		fmt.Fprintf(w, "[%s] %s\n  problem: %s\n  fix:     %s\n\n", f.Class, f.Object, f.Problem, f.Fix)
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "not checked: %s\n", s)
	}
	c := r.Checked
	what := fmt.Sprintf("%d Region(s), %d shard Lease(s), %d object(s) of %d kind(s), %d Distribution(s)", c.Regions, c.ShardLeases, c.Objects, len(c.Kinds), c.Distributions)
	if len(r.Findings) == 0 {
		_, err := fmt.Fprintf(w, "No problems found in %s.\n", what)
		return err
	}
	_, err := fmt.Fprintf(w, "%d problem(s) need a person, in %s.\n", len(r.Findings), what)
	return err
}

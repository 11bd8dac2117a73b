package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/yaml"

	"github.com/regionsync/regionsync/internal/shard"
)

// eventsShown is how many of the last events explain prints per cluster by default.
const eventsShown = 5

func newExplainCommand(o *options) *cobra.Command {
	var output string
	events := eventsShown
	cmd := &cobra.Command{
		Use:   "explain <kind>/<name> -n <namespace>",
		Short: "An object's way from management to its region, or why it has none",
		Long: "explain reads the object on management, the shard Leases and the Regions (one list each, whatever the\n" +
			"number of regions) and the object's Events, and says which region's shard takes it and why (or why none:\n" +
			"kind, namespace prefix or suffix, name suffix, label selector, protected namespace, overlapping shards),\n" +
			"whether the region's agent is live, whether the object is claimed (the finalizer) and its copy current\n" +
			"(the generation annotations), paused, its deletion held, a write fight, and the trace of the last sync.\n" +
			"With --region-context it also reads the copy in the region, its Events, and the drift of its content\n" +
			"from management's.\n\n" +
			"The verdict is the first of: NotFound, NoShard, ShardOverlap, ProtectedNamespace, InvalidMapping,\n" +
			"RegionNotLive, ShardRefused, DeletionHeld, Deleting, Paused, WriteFight, NotClaimed, NotCurrent, Synced.",
		Example: "  kubectl regionsync explain tenant/web-us-east-1 -n acme\n" +
			"  kubectl regionsync explain tenants.demo.regionsync.dev/web-us-east-1 -n acme --region-context us-east-1 -o yaml",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, outputTable, outputJSON, outputYAML); err != nil {
				return err
			}
			e, err := o.explain(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return writeReport(o.streams.Out, output, e, func(w io.Writer) error { return renderExplanation(w, e, events, o.now()) })
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (default: text)")
	cmd.Flags().IntVar(&events, "events", eventsShown, "how many of the last Events to show per cluster")
	return cmd
}

// explain reads what explain needs, a bounded number of requests whatever the number of regions:
// on management the object, the shard Leases, the Regions and the object's Events (plus the
// discovery kubectl's mapper caches); in the region, when asked, one list for the copy and one
// for its Events.
func (o *options) explain(ctx context.Context, arg string) (*explanation, error) {
	mapping, name, err := o.resolveObject(arg)
	if err != nil {
		return nil, err
	}
	ns, err := o.namespace()
	if err != nil {
		return nil, err
	}
	mc, err := o.management()
	if err != nil {
		return nil, err
	}
	in := explainInput{Keys: o.keys(), Kind: shard.KindName(mapping.GroupVersionKind), Namespace: ns, Name: name, Now: o.now()}
	ref := fmt.Sprintf("%s %s/%s", in.Kind, ns, name)
	obj, err := mc.dynamic.Resource(mapping.Resource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("reading %s on management: %w", ref, err)
	default:
		in.Object = obj
	}
	if in.Fleet, err = loadFleet(ctx, mc, o.managementNamespace, in.Now); err != nil {
		return nil, err
	}
	if in.Events, err = eventsAbout(ctx, mc, ns, mapping.GroupVersionKind.Kind, name); err != nil {
		return nil, fmt.Errorf("listing the Events of %s on management: %w", ref, err)
	}
	if o.regionContext != "" {
		rc, err := o.region()
		if err != nil {
			return nil, err
		}
		in.RegionRead = true
		if in.Copy, err = findCopy(ctx, rc, mapping, in); err != nil {
			return nil, err
		}
		if in.Copy != nil {
			if in.CopyEvents, err = eventsAbout(ctx, rc, in.Copy.GetNamespace(), mapping.GroupVersionKind.Kind, in.Copy.GetName()); err != nil {
				return nil, fmt.Errorf("listing the Events of the copy %s/%s in the region: %w", in.Copy.GetNamespace(), in.Copy.GetName(), err)
			}
		}
	}
	return explain(in), nil
}

// eventsAbout lists the Events regarding kind namespace/name, oldest first.
func eventsAbout(ctx context.Context, c *clients, namespace, kind, name string) ([]eventLine, error) {
	sel := fields.Set{"involvedObject.name": name, "involvedObject.kind": kind}.AsSelector().String()
	list, err := c.kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, err
	}
	out := make([]eventLine, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, eventLineOf(&list.Items[i]))
	}
	sortEvents(out)
	return out, nil
}

// findCopy looks for the regional copy of the object: the copies are marked with their region
// (label Keys.Region) and the management object's UID (annotation Keys.RemoteUID), under each
// region's annotation domain. Where the region's localNamespaceSuffix is not registered the
// copy's namespace is not known, so copies are listed by name across namespaces: one list per
// local name and domain the taking shards give (normally one).
func findCopy(ctx context.Context, rc *clients, mapping *meta.RESTMapping, in explainInput) (*unstructured.Unstructured, error) {
	type group struct {
		local  string
		keys   shard.Keys
		region []string
	}
	var groups []*group
	var labelsOf map[string]string
	if in.Object != nil {
		labelsOf = in.Object.GetLabels()
		if labelsOf == nil {
			labelsOf = map[string]string{}
		}
	}
	for _, s := range in.Fleet.shardList() {
		v := judgeShard(in.Kind, in.Namespace, in.Name, labelsOf, s)
		if !v.Takes || v.MapError != "" {
			continue
		}
		k := s.keys(in.Keys)
		i := slices.IndexFunc(groups, func(g *group) bool { return g.local == v.local.Name && g.keys.Domain == k.Domain })
		if i < 0 {
			groups = append(groups, &group{local: v.local.Name, keys: k})
			i = len(groups) - 1
		}
		groups[i].region = append(groups[i].region, s.Region)
	}
	for _, g := range groups {
		req, err := labels.NewRequirement(g.keys.Region, selection.In, g.region)
		if err != nil {
			return nil, fmt.Errorf("selecting copies of regions %v: %w", g.region, err)
		}
		list, err := rc.dynamic.Resource(mapping.Resource).List(ctx, metav1.ListOptions{
			LabelSelector: labels.NewSelector().Add(*req).String(),
			FieldSelector: fields.OneTermEqualSelector("metadata.name", g.local).String(),
		})
		if err != nil {
			return nil, fmt.Errorf("looking for the copy %s of %s %s/%s in the region: %w", g.local, in.Kind, in.Namespace, in.Name, err)
		}
		for i := range list.Items {
			c := &list.Items[i]
			if in.Object != nil && c.GetAnnotations()[g.keys.RemoteUID] == string(in.Object.GetUID()) {
				return c, nil
			}
			if in.Object == nil && copyOf(c, in, g.keys, g.local) {
				return c, nil
			}
		}
	}
	return nil, nil
}

// copyOf reports whether c, a marked copy named local, maps back to the (gone) management object
// under its region's shard.
func copyOf(c *unstructured.Unstructured, in explainInput, k shard.Keys, local string) bool {
	s := in.Fleet.Shards[c.GetLabels()[k.Region]]
	if s == nil || s.DefErr != nil {
		return false
	}
	base := strings.TrimSuffix(in.Namespace, s.Def.RemoteNamespaceSuffix)
	if suffix, ok := s.localSuffix(); ok {
		return local+s.Def.RemoteResourceSuffix == in.Name && c.GetNamespace() == base+suffix
	}
	return local+s.Def.RemoteResourceSuffix == in.Name && strings.HasPrefix(c.GetNamespace(), base)
}

// copyLines is how many lines of the copy explain's text form prints.
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

// renderExplanation writes explain's text form.
func renderExplanation(w io.Writer, e *explanation, events int, now time.Time) error {
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
		events []eventLine
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

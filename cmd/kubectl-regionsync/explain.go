package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/regionsync/regionsync/internal/inspect"
)

// eventsShown is how many of the last events explain prints per cluster by default.
const eventsShown = 5

func newExplainCommand(o *options) *cobra.Command {
	var output, region string
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
			"RegionNotLive, ShardRefused, DeletionHeld, Deleting, Paused, WriteFight, NotClaimed, NotCurrent, Synced.\n\n" +
			"explain distribution/<name> instead says, per region (or the one --region names), why the Distribution is\n" +
			"or is not there, the first of: Deleting, NotReconciled, InvalidSpec, RemovalHeld, Removing, NotSelected (by which\n" +
			"selector), Unplaceable, Conflict, Failed, Halted (on which revision), Paused, WaitingForWave (which wave),\n" +
			"NotCurrent, NotHealthy, Placed.",
		Example: "  kubectl regionsync explain tenant/web-us-east-1 -n acme\n" +
			"  kubectl regionsync explain distribution/storefront -n tenant-fleet --region eu-west-1\n" +
			"  kubectl regionsync explain tenants.demo.regionsync.dev/web-us-east-1 -n acme --region-context us-east-1 -o yaml",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, outputTable, outputJSON, outputYAML); err != nil {
				return err
			}
			mapping, name, err := o.resolveObject(args[0])
			if err != nil {
				return err
			}
			if mapping.GroupVersionKind.GroupKind() == inspect.DistributionKind {
				e, err := o.explainDistribution(cmd.Context(), name, region)
				if err != nil {
					return err
				}
				return writeReport(o.streams.Out, output, e, func(w io.Writer) error { return inspect.WriteDistributionExplanation(w, e, events, o.now()) })
			}
			if region != "" {
				return fmt.Errorf("--region is for explaining a Distribution; for %s give --region-context", args[0])
			}
			e, err := o.explain(cmd.Context(), mapping, name)
			if err != nil {
				return err
			}
			return writeReport(o.streams.Out, output, e, func(w io.Writer) error { return inspect.WriteExplanation(w, e, events, o.now()) })
		},
	}
	cmd.Flags().StringVar(&region, "region", "", "for a Distribution: explain this one region (default: every region selected or holding an object)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (default: text)")
	cmd.Flags().IntVar(&events, "events", eventsShown, "how many of the last Events to show per cluster")
	return cmd
}

// explain reads what explain needs, a bounded number of requests whatever the number of regions
// (inspect.ReadExplainInput, plus the discovery kubectl's mapper caches), and judges it.
func (o *options) explain(ctx context.Context, mapping *meta.RESTMapping, name string) (*inspect.Explanation, error) {
	ns, err := o.namespace()
	if err != nil {
		return nil, err
	}
	mc, err := o.management()
	if err != nil {
		return nil, err
	}
	req := inspect.ExplainRequest{
		Management: mc, ManagementNamespace: o.managementNamespace, Keys: o.keys(),
		Mapping: mapping, Namespace: ns, Name: name, Now: o.now(),
	}
	if o.regionContext != "" {
		req.Region = o.region
	}
	in, err := inspect.ReadExplainInput(ctx, req)
	if err != nil {
		return nil, err
	}
	return inspect.Explain(in), nil
}

// explainDistribution reads what explaining a Distribution needs (inspect.ReadDistributionInput:
// four requests whatever the number of regions) and judges it.
func (o *options) explainDistribution(ctx context.Context, name, region string) (*inspect.DistributionExplanation, error) {
	ns, err := o.namespace()
	if err != nil {
		return nil, err
	}
	mc, err := o.managementWithMapper()
	if err != nil {
		return nil, err
	}
	in, err := inspect.ReadDistributionInput(ctx, mc, o.keys(), ns, name, region)
	if err != nil {
		return nil, err
	}
	return inspect.ExplainDistribution(in), nil
}

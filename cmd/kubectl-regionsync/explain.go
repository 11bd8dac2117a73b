package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/regionsync/regionsync/internal/inspect"
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
			return writeReport(o.streams.Out, output, e, func(w io.Writer) error { return inspect.WriteExplanation(w, e, events, o.now()) })
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (default: text)")
	cmd.Flags().IntVar(&events, "events", eventsShown, "how many of the last Events to show per cluster")
	return cmd
}

// explain reads what explain needs, a bounded number of requests whatever the number of regions
// (inspect.ReadExplainInput, plus the discovery kubectl's mapper caches), and judges it.
func (o *options) explain(ctx context.Context, arg string) (*inspect.Explanation, error) {
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

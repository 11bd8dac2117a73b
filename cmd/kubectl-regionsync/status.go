package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/regionsync/regionsync/internal/inspect"
)

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
			mc, err := o.managementWithMapper()
			if err != nil {
				return err
			}
			report, err := inspect.Status(cmd.Context(), mc, o.managementNamespace, o.now())
			if err != nil {
				return err
			}
			return writeReport(o.streams.Out, output, report, func(w io.Writer) error {
				return inspect.WriteStatusTable(w, report, output == outputWide, o.now())
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, json or yaml (default: a table)")
	return cmd
}

package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/regionsync/regionsync/internal/inspect"
)

// errProblemsFound is returned by doctor when it found something that needs a person; main
// exits with exitProblems for it.
var errProblemsFound = errors.New("problems found")

// exitProblems is the exit code of doctor when it found problems (1 is a failed command).
const exitProblems = 2

func newDoctorCommand(o *options) *cobra.Command {
	var output string
	var kinds []string
	warn := inspect.DefaultCredentialWarning
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Find what needs a person in the fleet; exit code 2 when something does",
		Long: "doctor reads management (the Regions, the shard Leases, the objects of every synced kind, the hub's\n" +
			"Distributions and Deployment) and reports, each with the object at fault and the fix:\n" +
			"  StaleHeartbeat           a shard Lease not renewed within its lease duration, or a Region without one\n" +
			"  OrphanedFinalizer        an object with the agents' finalizer that no known region's shard takes\n" +
			"  UnknownRegion            an object labelled regionsync.dev/region for a region that does not exist\n" +
			"  ShardOverlap             two regions' shards that overlap\n" +
			"  CredentialExpiring       a region's management credential expiring within --credential-warning\n" +
			"  VersionSkew              an agent outside the version-skew policy (docs/versioning.md)\n" +
			"  DeletionsHeld            a region whose deletion budget holds deletions\n" +
			"  DistributionHalted       a Distribution whose rollout halted\n" +
			"  DistributionUnplaceable  a Distribution with regions it cannot be placed in, or that refused it\n" +
			"  DistributionRemovalHeld  a Distribution whose removals the shrink guard holds\n" +
			"Exit code: 0 nothing found, 2 problems found, 1 doctor itself failed.",
		Example: "  kubectl regionsync doctor\n  kubectl regionsync doctor -o json --kind ConfigMap",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output, outputTable, outputJSON, outputYAML); err != nil {
				return err
			}
			mc, err := o.managementWithMapper()
			if err != nil {
				return err
			}
			report, err := inspect.Doctor(cmd.Context(), mc, inspect.DoctorOptions{
				ManagementNamespace: o.managementNamespace, Keys: o.keys(), Kinds: kinds, CredentialWarning: warn, Now: o.now(),
			})
			if err != nil {
				return err
			}
			if err := writeReport(o.streams.Out, output, report, func(w io.Writer) error { return inspect.WriteDoctorReport(w, report) }); err != nil {
				return err
			}
			if len(report.Findings) > 0 {
				return fmt.Errorf("%w: %d finding(s) need a person", errProblemsFound, len(report.Findings))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (default: text)")
	cmd.Flags().StringSliceVar(&kinds, "kind", nil, "also check the objects of this kind (dotted, e.g. Tenant.demo.regionsync.dev; the kinds of every recorded shard are always checked)")
	cmd.Flags().DurationVar(&warn, "credential-warning", inspect.DefaultCredentialWarning, "report a region's management credential expiring within this long")
	return cmd
}

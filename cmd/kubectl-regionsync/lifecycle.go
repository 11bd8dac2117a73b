package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/inspect"
	"github.com/regionsync/regionsync/internal/scheme"
	"github.com/regionsync/regionsync/pkg/regionsync"
)

func newRetryCommand(o *options) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "retry <distribution> -n <namespace>",
		Short: "Retry a Distribution's halted rollout: <domain>/retry-rollout=<now> on the Distribution",
		Long: "retry writes the annotation the hub reads to retry a halted rollout, <domain>/retry-rollout with the\n" +
			"current time (RFC 3339) on the Distribution: the hub retries the rollout from the wave that halted.\n" +
			"It refuses a Distribution whose rollout has not halted (Halted=True) unless --force.",
		Example: "  kubectl regionsync retry storefront -n tenant-fleet",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.retry(cmd.Context(), args[0], force)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "write the annotation although the rollout has not halted")
	return cmd
}

// retry sets the retry annotation on a halted Distribution.
func (o *options) retry(ctx context.Context, name string, force bool) error {
	mc, err := o.management()
	if err != nil {
		return err
	}
	res, err := o.distributionResource()
	if err != nil {
		return err
	}
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	ref := fmt.Sprintf("Distribution %s/%s", ns, name)
	d, err := mc.Dynamic.Resource(res).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s not found on management", ref)
	case err != nil:
		return fmt.Errorf("reading %s: %w", ref, err)
	}
	if halted := inspect.UnstructuredConditions(d.Object)[regionsyncv1alpha1.DistributionHalted]; halted.Status != metav1.ConditionTrue && !force {
		state := "no Halted condition"
		if halted.Status != "" {
			state = "Halted=" + string(halted.Status)
		}
		return fmt.Errorf("%s has not halted (%s): there is no halted rollout to retry (--force writes the annotation anyway)", ref, state)
	}
	key := o.keys().RetryRollout
	// To the nanosecond: a retry in the second the rollout halted is still after the halt.
	value := o.now().UTC().Format(time.RFC3339Nano)
	patch, err := annotationPatch(key, &value)
	if err != nil {
		return err
	}
	if _, err := mc.Dynamic.Resource(res).Namespace(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
		return fmt.Errorf("annotating %s: %w", ref, err)
	}
	fmt.Fprintf(o.streams.Out, "%s: %s=%s; the hub retries its rollout\n", ref, key, value)
	return nil
}

// distributionResource returns the Distribution kind's resource, or an error saying the hub's
// CRD is not installed.
func (o *options) distributionResource() (schema.GroupVersionResource, error) {
	mapper, err := o.config.ToRESTMapper()
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("management cluster: %w", err)
	}
	mapping, err := mapper.RESTMapping(inspect.DistributionKind)
	if meta.IsNoMatchError(err) {
		return schema.GroupVersionResource{}, errors.New("management does not serve the Distribution kind: the hub is not installed (deploy/kustomize/management installs its CRD)")
	}
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("looking up the Distribution kind on management: %w", err)
	}
	return mapping.Resource, nil
}

// decommissionFlags are decommission's flags (those of agent decommission).
type decommissionFlags struct {
	dryRun, deleteCopies, force, outOfShardOnly bool
	timeout                                     time.Duration
}

func newDecommissionCommand(o *options) *cobra.Command {
	var fl decommissionFlags
	cmd := &cobra.Command{
		Use:   "decommission <region> [--region-context <context>] [--delete-copies] [--dry-run]",
		Short: "Release a region's claim on management (the library's Decommission), with a dry run",
		Long: "decommission runs regionsync's own decommissioning (pkg/regionsync Decommission, as `agent decommission`\n" +
			"does) for the region, with its shard as the operator registered it on its Region (spec.shard): every\n" +
			"object of the shard gets the agents' finalizer released, so that deleting it on management completes, and\n" +
			"the region's shard Lease is deleted. It acts with your management credentials, not the region's.\n" +
			"With --region-context it also reads the region: --delete-copies deletes the region's copies first\n" +
			"(releasing a finalizer only once the copy is gone), --out-of-shard-only releases only objects that left the\n" +
			"shard and keeps the Lease. Without it the region is taken as gone (management only). It refuses while a\n" +
			"live replica holds the shard Lease, unless --force. --dry-run writes nothing and lists what it would do.",
		Example: "  kubectl regionsync decommission eu-west-1 --dry-run\n" +
			"  kubectl regionsync decommission eu-west-1 --region-context eu-west-1 --delete-copies",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.decommission(cmd.Context(), args[0], fl)
		},
	}
	cmd.Flags().BoolVar(&fl.dryRun, "dry-run", false, "report what would be done; write nothing")
	cmd.Flags().BoolVar(&fl.deleteCopies, "delete-copies", false, "delete the region's copies first (needs --region-context); release an object's finalizer once its copy is gone")
	cmd.Flags().BoolVar(&fl.force, "force", false, "proceed although a live replica holds the region's shard Lease")
	cmd.Flags().BoolVar(&fl.outOfShardOnly, "out-of-shard-only", false, "release only objects that left the shard (needs --region-context); keep the shard Lease")
	cmd.Flags().DurationVar(&fl.timeout, "timeout", regionsync.DefaultDecommissionTimeout, "how long to wait for deleted copies to be gone")
	return cmd
}

// decommission calls regionsync.Decommission for region with Options built from its Region's
// spec.shard.
func (o *options) decommission(ctx context.Context, region string, fl decommissionFlags) error {
	if o.regionContext == "" && (fl.deleteCopies || fl.outOfShardOnly) {
		return errors.New("--delete-copies and --out-of-shard-only need the region: pass --region-context")
	}
	mgmtConfig, err := o.config.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("management cluster: %w", err)
	}
	mc, err := newClients(mgmtConfig)
	if err != nil {
		return err
	}
	u, err := mc.Dynamic.Resource(inspect.RegionResource).Get(ctx, region, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("there is no Region %s on management: decommission reads the region's shard from its Region's spec.shard; without it run agent decommission with the region's configuration file", region)
	case err != nil:
		return fmt.Errorf("reading Region %s: %w", region, err)
	}
	r := &regionsyncv1alpha1.Region{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, r); err != nil {
		return fmt.Errorf("reading Region %s: %w", region, err)
	}
	if r.Spec.Shard == nil {
		return fmt.Errorf("no spec.shard on Region %s: its shard is not registered, so decommission cannot know it; run agent decommission with the region's configuration file", region)
	}
	opts, err := o.decommissionOptions(r, mgmtConfig)
	if err != nil {
		return err
	}
	var local client.Client
	if o.regionContext != "" {
		cfg, err := o.regionConfig()
		if err != nil {
			return err
		}
		if local, err = client.New(cfg, client.Options{Scheme: scheme.New()}); err != nil {
			return fmt.Errorf("region context %q: %w", o.regionContext, err)
		}
	}
	report, err := regionsync.Decommission(ctx, opts, local, regionsync.DecommissionOptions{
		DryRun: fl.dryRun, DeleteCopies: fl.deleteCopies, Force: fl.force, OutOfShardOnly: fl.outOfShardOnly, Timeout: fl.timeout,
		Logger: logr.Discard(),
	})
	if errors.Is(err, regionsync.ErrShardHeld) {
		// Refused before anything was looked at: no report to print.
		return fmt.Errorf("%w (kubectl --context <%s> -n regionsync-system scale deployment/regionsync-agent --replicas=0; --force only when you know they are gone)", err, region)
	}
	report.Write(o.streams.Out, region, o.managementNamespace)
	return err
}

// decommissionOptions are the library's Options of a region whose shard is registered on its
// Region: its suffixes, prefix, selector, annotation domain and kinds (each at the version
// management prefers), management through the user's own config.
func (o *options) decommissionOptions(r *regionsyncv1alpha1.Region, mgmt *rest.Config) (regionsync.Options, error) {
	reg := r.Spec.Shard
	mapper, err := o.config.ToRESTMapper()
	if err != nil {
		return regionsync.Options{}, fmt.Errorf("management cluster: %w", err)
	}
	opts := regionsync.Options{
		Region:           r.Name,
		AnnotationDomain: reg.AnnotationDomain,
		Management:       regionsync.Management{Config: mgmt, Namespace: o.managementNamespace},
		Shard: regionsync.Shard{
			NamespacePrefix: reg.NamespacePrefix, RemoteResourceSuffix: reg.RemoteResourceSuffix,
			RemoteNamespaceSuffix: reg.RemoteNamespaceSuffix, LocalNamespaceSuffix: reg.LocalNamespaceSuffix,
			LabelSelector: reg.LabelSelector,
		},
	}
	if opts.AnnotationDomain == "" {
		opts.AnnotationDomain = o.annotationDomain
	}
	for _, kind := range reg.Kinds {
		mapping, err := mapper.RESTMapping(schema.ParseGroupKind(kind))
		if err != nil {
			return regionsync.Options{}, fmt.Errorf("kind %s of Region %s's spec.shard: %w", kind, r.Name, err)
		}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(mapping.GroupVersionKind)
		// Decommission only releases and deletes; the kinds' privileges were judged when the
		// region was set up.
		opts.Resources = append(opts.Resources, regionsync.Resource{Object: obj, AllowPrivileged: true})
	}
	return opts, nil
}

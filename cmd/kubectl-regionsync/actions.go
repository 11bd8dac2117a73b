package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/regionsync/regionsync/internal/inspect"
	"github.com/regionsync/regionsync/internal/shard"
)

func newReleaseCommand(o *options) *cobra.Command {
	var region, before string
	cmd := &cobra.Command{
		Use:   "release (<kind>/<name> -n <namespace> --region-context <context> | --region <region> --before <time|now>)",
		Short: "Release held deletions: one copy in its region, or a region's holds that started before a time",
		Long: "release writes the annotations the agent reads (docs/operations/holds-and-releases.md, Releasing deletion holds):\n" +
			"  - a copy: <domain>/release-deletion=true on the copy in the region (--region-context), which lets\n" +
			"    that one held deletion through;\n" +
			"  - a region: <domain>/release-deletions-before=<RFC 3339 time> on its Region on management, which\n" +
			"    releases every hold that started before that time (no access to the region needed).",
		Example: "  kubectl regionsync release tenant/web -n acme --region-context us-east-1\n" +
			"  kubectl regionsync release --region us-east-1 --before now\n" +
			"  kubectl regionsync release --region us-east-1 --before 2026-01-02T15:04:05Z",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := releaseArgs(args, region, before); err != nil {
				return err
			}
			if len(args) == 1 {
				return o.releaseCopy(cmd.Context(), args[0])
			}
			return o.releaseRegion(cmd.Context(), region, before)
		},
	}
	cmd.Flags().StringVar(&region, "region", "", "release the holds of this region (with --before)")
	cmd.Flags().StringVar(&before, "before", "", "release the holds that started before this RFC 3339 time, or \"now\"")
	return cmd
}

// releaseArgs checks that release names either one copy or a region and a time.
func releaseArgs(args []string, region, before string) error {
	switch {
	case len(args) == 1 && (region != "" || before != ""):
		return errors.New("release takes either <kind>/<name> (a copy) or --region with --before, not both")
	case len(args) == 1:
		return nil
	case region == "" && before == "":
		return errors.New("name a copy (<kind>/<name> -n <namespace> --region-context <context>) or a region (--region <region> --before <time|now>)")
	case region == "":
		return errors.New("--before needs --region: name the region whose holds to release")
	case before == "":
		return errors.New("--region needs --before: an RFC 3339 time, or \"now\"; holds that started before it are released")
	}
	return nil
}

// releaseCopy annotates one copy in the region with the release annotation.
func (o *options) releaseCopy(ctx context.Context, arg string) error {
	k := o.keys()
	ref, err := o.annotateObject(ctx, arg, true, k.ReleaseDeletion, ptr.To("true"), func(labels map[string]string, ref string) error {
		if labels[k.Region] == "" {
			return fmt.Errorf("%s is not a regionsync copy (no label %s): there is no held deletion to release", ref, k.Region)
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(o.streams.Out, "%s: %s=true; the agent lets its held deletion through at its next look (within about 30 s)\n", ref, k.ReleaseDeletion)
	return nil
}

// releaseRegion sets the release time on a Region on management.
func (o *options) releaseRegion(ctx context.Context, region, before string) error {
	t := o.now().UTC()
	if before != "now" {
		var err error
		if t, err = time.Parse(time.RFC3339, before); err != nil {
			return fmt.Errorf("--before %q: want an RFC 3339 time (2006-01-02T15:04:05Z) or \"now\"", before)
		}
	}
	mc, err := o.management()
	if err != nil {
		return err
	}
	k := o.keys()
	value := t.UTC().Format(time.RFC3339Nano) // "now" exactly: a hold that started within this second is released too
	patch, err := annotationPatch(k.ReleaseDeletionsBefore, &value)
	if err != nil {
		return err
	}
	_, err = mc.Dynamic.Resource(inspect.RegionResource).Patch(ctx, region, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("there is no Region %s on management", region)
	case err != nil:
		return fmt.Errorf("annotating Region %s on management: %w", region, err)
	}
	fmt.Fprintf(o.streams.Out, "Region %s: %s=%s; region %s's agent releases every hold that started before it (read within about 40 s)\n", region, k.ReleaseDeletionsBefore, value, region)
	return nil
}

// newPauseCommand is pause (pause true) or resume.
func newPauseCommand(o *options, pause bool) *cobra.Command {
	verb, short := "resume", "Resume an object (remove <domain>/paused) or a Distribution's rollout (spec.paused)"
	if pause {
		verb, short = "pause", "Pause an object (<domain>/paused=true stops the agent's writes) or a Distribution's rollout (spec.paused)"
	}
	return &cobra.Command{
		Use:   verb + " <kind>/<name> -n <namespace> [--region-context <context>]",
		Short: short,
		Long: short + ".\nThe object is the one on management, or with --region-context the copy in the region (a pause on\n" +
			"either side stops the agent's writes for the object, deletion included; docs/operations/holds-and-releases.md, Pausing an object).\n" +
			"A Distribution on management is paused through its spec.paused instead: the hub stops its rollout where it is\n" +
			"(no new wave, no rollback) and resume lets it go on.",
		Example: fmt.Sprintf("  kubectl regionsync %s tenant/web-us-east-1 -n acme\n  kubectl regionsync %s tenant/web -n acme --region-context us-east-1\n"+
			"  kubectl regionsync %s distribution/storefront -n tenant-fleet", verb, verb, verb),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			k := o.keys()
			if o.regionContext == "" {
				if gk, name, ok := o.distributionArg(args[0]); ok {
					return o.pauseDistribution(cmd.Context(), gk, name, pause)
				}
			}
			var value *string
			if pause {
				value = ptr.To("true")
			}
			ref, err := o.annotateObject(cmd.Context(), args[0], o.regionContext != "", k.Paused, value, nil)
			if err != nil {
				return err
			}
			if pause {
				fmt.Fprintf(o.streams.Out, "%s paused (%s=true)\n", ref, k.Paused)
			} else {
				fmt.Fprintf(o.streams.Out, "%s resumed (%s removed)\n", ref, k.Paused)
			}
			return nil
		},
	}
}

// distributionArg reports whether <kind>/<name> names the hub's Distribution kind.
func (o *options) distributionArg(arg string) (schema.GroupVersionResource, string, bool) {
	mapping, name, err := o.resolveObject(arg)
	if err != nil || mapping.GroupVersionKind.GroupKind() != inspect.DistributionKind {
		return schema.GroupVersionResource{}, "", false
	}
	return mapping.Resource, name, true
}

// pauseDistribution sets (pause) or removes spec.paused on a Distribution, with strict field
// validation so that a hub CRD without rollouts refuses the field instead of dropping it.
func (o *options) pauseDistribution(ctx context.Context, res schema.GroupVersionResource, name string, pause bool) error {
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	mc, err := o.management()
	if err != nil {
		return err
	}
	ref := fmt.Sprintf("Distribution %s/%s", ns, name)
	var value any
	if pause {
		value = true
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"paused": value}})
	if err != nil {
		return err
	}
	_, err = mc.Dynamic.Resource(res).Namespace(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager, FieldValidation: "Strict"})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s not found on management", ref)
	case (apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)) && strings.Contains(err.Error(), `unknown field "spec.paused"`):
		// The server's message quotes the whole object: say it in one line instead.
		return fmt.Errorf("%s: the Distribution CRD on management has no spec.paused (a hub without rollouts; the server refused the field): upgrade the Distribution CRD (deploy/kustomize/management)", ref)
	case err != nil:
		return fmt.Errorf("pausing %s: %w", ref, err)
	}
	if pause {
		fmt.Fprintf(o.streams.Out, "%s: spec.paused=true; the hub holds its rollout where it is\n", ref)
	} else {
		fmt.Fprintf(o.streams.Out, "%s: spec.paused removed; the hub goes on with its rollout\n", ref)
	}
	return nil
}

// fieldManager is the field manager of the plugin's writes.
const fieldManager = "kubectl-regionsync"

// annotateObject sets (value nil: removes) one annotation on <kind>/<name> in the -n namespace,
// on management or (inRegion) in the region of --region-context, after check (nil: none) accepts
// the object's labels. It returns how it named the object.
func (o *options) annotateObject(ctx context.Context, arg string, inRegion bool, key string, value *string, check func(labels map[string]string, ref string) error) (string, error) {
	mapping, name, err := o.resolveObject(arg)
	if err != nil {
		return "", err
	}
	ns, err := o.namespace()
	if err != nil {
		return "", err
	}
	c, where := (*inspect.Clients)(nil), "management"
	if inRegion {
		where = "region " + o.regionContext
		c, err = o.region()
	} else {
		c, err = o.management()
	}
	if err != nil {
		return "", err
	}
	ref := fmt.Sprintf("%s %s/%s in %s", shard.KindName(mapping.GroupVersionKind), ns, name, where)
	res := c.Dynamic.Resource(mapping.Resource).Namespace(ns)
	obj, err := res.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("%s not found", ref)
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", ref, err)
	}
	if check != nil {
		if err := check(obj.GetLabels(), ref); err != nil {
			return "", err
		}
	}
	patch, err := annotationPatch(key, value)
	if err != nil {
		return "", err
	}
	if _, err := res.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
		return "", fmt.Errorf("annotating %s: %w", ref, err)
	}
	return ref, nil
}

// annotationPatch is a merge patch that sets (nil: removes) one annotation.
func annotationPatch(key string, value *string) ([]byte, error) {
	var v any
	if value != nil {
		v = *value
	}
	return json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: v}}})
}

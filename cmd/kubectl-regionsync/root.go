package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/inspect"
	"github.com/regionsync/regionsync/internal/shard"
)

// options are the flags every command shares.
type options struct {
	streams genericiooptions.IOStreams
	// config reads management: the user's kubeconfig, --context, -n.
	config *genericclioptions.ConfigFlags
	// regionContext names the kubeconfig context of a region, for commands that read or write
	// there.
	regionContext string
	// managementNamespace holds the shard Leases on management.
	managementNamespace string
	// annotationDomain prefixes the agent's annotations, labels and finalizer.
	annotationDomain string
	// wrap wraps every client config (tests count requests with it); nil: none.
	wrap func(*rest.Config) *rest.Config
	// now is the clock ages are computed against.
	now func() time.Time
}

// newRootCommand is `kubectl regionsync`. wrap, when not nil, wraps every client config.
func newRootCommand(streams genericiooptions.IOStreams, wrap func(*rest.Config) *rest.Config) *cobra.Command {
	o := &options{
		streams: streams,
		config:  genericclioptions.NewConfigFlags(true),
		wrap:    wrap,
		now:     time.Now,
	}
	if wrap != nil {
		o.config = o.config.WithWrapConfigFn(wrap)
	}
	cmd := &cobra.Command{
		Use:   "kubectl-regionsync",
		Short: "Inspect and operate a regionsync fleet from the management cluster",
		Long: "kubectl regionsync reads the management cluster through your kubeconfig (--kubeconfig, --context, -n):\n" +
			"the Regions the agents publish, the shard Leases they claim, the synced objects and their Events.\n" +
			"Commands that need a region read or write it through --region-context, a context of the same kubeconfig.",
		SilenceUsage:  true,
		SilenceErrors: false,
		Version:       Version,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl regionsync",
		},
	}
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	cmd.SetIn(streams.In)
	o.config.AddFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().StringVar(&o.regionContext, "region-context", "", "kubeconfig context of the region, for commands that look at or write the regional copy")
	cmd.PersistentFlags().StringVar(&o.managementNamespace, "management-namespace", fleetspec.DefaultManagementNamespace, "namespace of the shard Leases on management (the agents' management.namespace)")
	cmd.PersistentFlags().StringVar(&o.annotationDomain, "annotation-domain", fleetspec.DefaultAnnotationDomain, "the agents' annotationDomain")
	cmd.AddCommand(newStatusCommand(o), newExplainCommand(o), newReleaseCommand(o), newPauseCommand(o, true), newPauseCommand(o, false),
		newRetryCommand(o), newDecommissionCommand(o), newDoctorCommand(o), newDiffCommand(o))
	return cmd
}

// keys are the agent's annotation keys under the configured domain.
func (o *options) keys() shard.Keys { return shard.NewKeys(o.annotationDomain) }

// management returns the clients of the management cluster.
func (o *options) management() (*inspect.Clients, error) {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("management cluster: %w", err)
	}
	return newClients(cfg)
}

// managementWithMapper returns the clients of the management cluster with kubectl's REST mapper
// (discovery cached in --cache-dir), for the inspections that look kinds up.
func (o *options) managementWithMapper() (*inspect.Clients, error) {
	c, err := o.management()
	if err != nil {
		return nil, err
	}
	if c.Mapper, err = o.config.ToRESTMapper(); err != nil {
		return nil, fmt.Errorf("management cluster: %w", err)
	}
	return c, nil
}

// region returns the clients of the region named by --region-context.
func (o *options) region() (*inspect.Clients, error) {
	cfg, err := o.regionConfig()
	if err != nil {
		return nil, err
	}
	return newClients(cfg)
}

// regionConfig returns the client config of the region named by --region-context.
func (o *options) regionConfig() (*rest.Config, error) {
	if o.regionContext == "" {
		return nil, errors.New("--region-context is required: name the kubeconfig context of the region")
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.config.KubeConfig != nil && *o.config.KubeConfig != "" {
		rules.ExplicitPath = *o.config.KubeConfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.regionContext}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("region context %q: %w", o.regionContext, err)
	}
	if o.wrap != nil {
		cfg = o.wrap(cfg)
	}
	return cfg, nil
}

// namespace is -n, or the namespace of the kubeconfig's context.
func (o *options) namespace() (string, error) {
	ns, _, err := o.config.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// newClients returns the clients of the cluster of cfg, without a REST mapper.
func newClients(cfg *rest.Config) (*inspect.Clients, error) {
	cfg = rest.CopyConfig(cfg)
	// One command makes a handful of requests: client-side throttling would only add latency.
	cfg.QPS, cfg.Burst = -1, 0
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &inspect.Clients{Kube: kube, Dynamic: dyn, Metadata: md}, nil
}

// resolveObject parses "<kind>/<name>" (the kind as kubectl takes it: tenant, tenants,
// tenants.demo.regionsync.dev, Tenant) against the management cluster's API and checks that
// the kind is namespaced.
func (o *options) resolveObject(arg string) (*meta.RESTMapping, string, error) {
	res, name, ok := strings.Cut(arg, "/")
	if !ok || res == "" || name == "" || strings.Contains(name, "/") {
		return nil, "", fmt.Errorf("want <kind>/<name>, got %q", arg)
	}
	mapper, err := o.config.ToRESTMapper()
	if err != nil {
		return nil, "", fmt.Errorf("management cluster: %w", err)
	}
	res = strings.ToLower(res)
	var gvk schema.GroupVersionKind
	gvr, gr := schema.ParseResourceArg(res)
	if gvr != nil {
		gvk, err = mapper.KindFor(*gvr)
	}
	if gvr == nil || err != nil {
		gvk, err = mapper.KindFor(gr.WithVersion(""))
	}
	if err != nil {
		return nil, "", fmt.Errorf("kind %q of %s: %w", res, arg, err)
	}
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, "", fmt.Errorf("kind %s of %s: %w", gvk.Kind, arg, err)
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return nil, "", fmt.Errorf("%s is cluster-scoped; regionsync syncs namespaced kinds only", shard.KindName(gvk))
	}
	return mapping, name, nil
}

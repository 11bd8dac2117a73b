// Package demo brings up a local regionsync fleet on real control planes: a management cluster
// and two regions (each a kube-apiserver, etcd and kube-controller-manager), the demo tenant
// operator in every region, and one regionsync agent process per region. It then creates a Tenant
// per region on management and narrates its round trip.
package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/scheme"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/tenantoperator"
	"github.com/regionsync/regionsync/internal/testenv"
	"github.com/regionsync/regionsync/pkg/config"
)

// Management is the demo's management cluster name.
const Management = "management"

// Regions of the demo fleet.
var Regions = []string{"us-east-1", "eu-west-1"}

// DemoNamespace is the management namespace holding the demo tenants; it starts with the
// agents' shard.namespacePrefix, as in the shipped overlays.
const DemoNamespace = "tenant-acme"

// Options configures Run.
type Options struct {
	// Dir receives kubeconfigs, agent configurations and logs; it is emptied first.
	Dir string
	// AgentBinary is the agent executable (bin/agent).
	AgentBinary string
	// Out receives the demo's narration.
	Out io.Writer
	// Exit, when set, makes Run return after the round trip instead of waiting for ctx (used by
	// the demo's own test).
	Exit bool
}

// Run starts the fleet, shows a round trip per region, and blocks until ctx is cancelled; then it
// stops everything it started.
func Run(ctx context.Context, opts Options) error {
	say := func(format string, args ...any) { fmt.Fprintf(opts.Out, format+"\n", args...) }
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if _, err := os.Stat(opts.AgentBinary); err != nil {
		return fmt.Errorf("agent binary: %w (run make build)", err)
	}
	say("starting %s + %v (kube-apiserver, etcd and kube-controller-manager each) ...", Management, Regions)
	fleet, err := testenv.Start(ctx, append([]string{Management}, Regions...), testenv.Options{Dir: dir, Log: func(f string, a ...any) { say("  "+f, a...) }})
	if err != nil {
		return err
	}
	var agents []*agentProcess
	defer func() {
		say("stopping agents (SIGTERM) and the fleet ...")
		for _, a := range agents {
			a.stop()
		}
		if err := fleet.Stop(); err != nil {
			say("stop: %v", err)
		}
		say("stopped; nothing left running.")
	}()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(Regions))
	mgmt := fleet.Cluster(Management)
	if err := prepareManagement(ctx, mgmt.Client); err != nil {
		return err
	}
	for i, region := range Regions {
		c := fleet.Cluster(region)
		if err := startOperator(runCtx, c, region, errc); err != nil {
			return err
		}
		// The agents elect a leader through a Lease in this namespace.
		if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: config.DefaultLeaderNamespace}}); err != nil {
			return err
		}
		a, err := startAgent(opts.AgentBinary, filepath.Join(dir, region), c, agentConfig(region, i, mgmt.Kubeconfig))
		if err != nil {
			return err
		}
		agents = append(agents, a)
		say("%s: tenant operator running; agent started (config %s, log %s)", region, filepath.Join(dir, region, "agent.yaml"), a.log)
	}

	say("")
	say("creating on management, namespace %s: one Tenant per region (acme-<region>) and the empty", DemoNamespace)
	say("secrets tenant-token-<region> their tokens are uploaded to ...")
	if err := createDemoTenants(ctx, mgmt.Client); err != nil {
		return err
	}
	keys := shard.NewKeys(config.DefaultAnnotationDomain)
	for _, region := range Regions {
		if err := showRoundTrip(ctx, say, mgmt.Client, fleet.Cluster(region).Client, region, keys); err != nil {
			for _, a := range agents {
				if a.exited() {
					say("agent of %s exited; see %s", a.region, a.log)
				}
			}
			return err
		}
	}

	say("")
	say("kubectl get regions (on management):")
	if err := waitRegionsReady(ctx, mgmt.Client); err != nil {
		return err
	}
	if err := printTable(ctx, opts.Out, mgmt.Config, "/apis/regionsync.dev/v1alpha1/regions"); err != nil {
		return err
	}
	say("")
	say("fleet is up. kubeconfigs:")
	for _, c := range fleet.Clusters {
		say("  %-10s export KUBECONFIG=%s", c.Name, c.Kubeconfig)
	}
	for i, region := range Regions {
		cfg := agentConfig(region, i, "")
		say("  %-10s agent metrics http://%s/metrics, health http://%s/healthz", region, cfg.Telemetry.MetricsAddr, cfg.Telemetry.HealthAddr)
	}
	say("")
	say("try: kubectl --kubeconfig %s get regions", mgmt.Kubeconfig)
	say("     kubectl --kubeconfig %s -n %s edit tenant acme-us-east-1   (change spec.replicas,", mgmt.Kubeconfig, DemoNamespace)
	say("     then watch the copy in us-east-1 and the generation annotations on management)")
	if opts.Exit {
		return nil
	}
	say("press Ctrl-C to tear everything down.")
	select {
	case <-ctx.Done():
	case err := <-errc:
		return fmt.Errorf("tenant operator stopped: %w", err)
	}
	return nil
}

func startOperator(ctx context.Context, c *testenv.Cluster, region string, errc chan<- error) error {
	mgr, err := ctrl.NewManager(c.Config, ctrl.Options{
		Scheme:  scheme.New(),
		Metrics: metricsserver.Options{BindAddress: "0"},
		// One operator per region in one process: same controller name, distinct managers.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return err
	}
	if err := (&tenantoperator.Reconciler{Client: mgr.GetClient(), Region: region}).SetupWithManager(mgr); err != nil {
		return err
	}
	go func() { errc <- mgr.Start(ctx) }()
	return nil
}

// prepareManagement creates what the operator sets up on management before adding regions: the
// namespace of the shard Leases and one Region object per region.
func prepareManagement(ctx context.Context, mgmt client.Client) error {
	if err := mgmt.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: config.DefaultManagementNamespace}}); err != nil {
		return err
	}
	for _, region := range Regions {
		r := &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: region}, Spec: regionsyncv1alpha1.RegionSpec{Description: "demo region " + region}}
		if err := mgmt.Create(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// waitRegionsReady waits until every region's agent reports Ready on its Region.
func waitRegionsReady(ctx context.Context, mgmt client.Client) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range Regions {
			r := &regionsyncv1alpha1.Region{}
			if err := mgmt.Get(ctx, client.ObjectKey{Name: name}, r); err != nil {
				return false, nil
			}
			if !meta.IsStatusConditionTrue(r.Status.Conditions, regionsyncv1alpha1.ConditionReady) {
				return false, nil
			}
		}
		return true, nil
	})
}

func createDemoTenants(ctx context.Context, mgmt client.Client) error {
	if err := mgmt.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: DemoNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for _, region := range Regions {
		// Labelled for the region, as management-side tooling does: the agents select on it.
		labels := map[string]string{config.RegionLabel: region}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: DemoNamespace, Name: tenantoperator.TokenSecretName + "-" + region, Labels: labels}}
		if err := mgmt.Create(ctx, secret); err != nil {
			return err
		}
		t := &demov1alpha1.Tenant{
			ObjectMeta: metav1.ObjectMeta{Namespace: DemoNamespace, Name: "acme-" + region, Labels: labels},
			Spec:       demov1alpha1.TenantSpec{DisplayName: "Acme Corp", Plan: "team", Replicas: 2},
		}
		if err := mgmt.Create(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// showRoundTrip waits for a region's Tenant to be copied down, reconciled by the tenant operator,
// its status and token returned, and its generation annotations current; and says so.
func showRoundTrip(ctx context.Context, say func(string, ...any), mgmt, local client.Client, region string, keys shard.Keys) error {
	start := time.Now()
	remote, copy := &demov1alpha1.Tenant{}, &demov1alpha1.Tenant{}
	token := &corev1.Secret{}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := mgmt.Get(ctx, client.ObjectKey{Namespace: DemoNamespace, Name: "acme-" + region}, remote); err != nil {
			last = err.Error()
			return false, nil
		}
		if err := local.Get(ctx, client.ObjectKey{Namespace: DemoNamespace, Name: "acme"}, copy); err != nil {
			last = "local copy: " + err.Error()
			return false, nil
		}
		if err := mgmt.Get(ctx, client.ObjectKey{Namespace: DemoNamespace, Name: tenantoperator.TokenSecretName + "-" + region}, token); err != nil {
			last = err.Error()
			return false, nil
		}
		current := keys.GenerationsCurrent(remote.Annotations, remote.Generation, copy.Generation) &&
			remote.Status.ObservedGeneration == copy.Generation && remote.Status.Phase == tenantoperator.PhaseReady &&
			len(token.Data["token"]) > 0
		last = fmt.Sprintf("status %+v, annotations %v", remote.Status, remote.Annotations)
		return current, nil
	})
	if err != nil {
		return fmt.Errorf("%s: round trip not complete: %w (last seen: %s)", region, err, last)
	}
	say("")
	say("%s: round trip complete in %s", region, time.Since(start).Round(10*time.Millisecond))
	say("  management %s/%s  generation %d, finalizer %v", DemoNamespace, remote.Name, remote.Generation, remote.Finalizers)
	say("  region     %s/%s  (copy, generation %d) spec %+v", DemoNamespace, copy.Name, copy.Generation, copy.Spec)
	say("  status up  phase=%s endpoint=%s observedGeneration=%d", remote.Status.Phase, remote.Status.Endpoint, remote.Status.ObservedGeneration)
	say("  token up   secret %s: %d bytes, uploaded hash %s", token.Name, len(token.Data["token"]), token.Annotations[keys.LastUploadedHash])
	say("  %s=%s = metadata.generation and %s=%s = the copy's generation, observed in status: current",
		keys.RemoteGeneration, remote.Annotations[keys.RemoteGeneration], keys.LocalGeneration, remote.Annotations[keys.LocalGeneration])
	return nil
}

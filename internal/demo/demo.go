// Package demo brings up a local regionsync fleet on real control planes: a management cluster
// and two regions (each a kube-apiserver, etcd and kube-controller-manager), the demo tenant
// operator in every region, and one regionsync agent process per region. It then creates a Tenant
// per region on management under a span of its own, narrates the round trip, prints the trace
// each change produced across the clusters (received by an in-process OTLP receiver the agents and
// operators export to) and each agent's key metrics.
package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/telemetry"
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
	// OperatorBinary is the tenant operator executable (bin/tenant-operator).
	OperatorBinary string
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
	// SIGUSR1 prints the metrics and traces again; until the fleet is up it is only remembered.
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)

	recv, err := startReceiver()
	if err != nil {
		return err
	}
	defer recv.Stop()
	say("OTLP receiver: gRPC %s, HTTP %s/v1/traces (agents and tenant operators export here)", recv.GRPCAddr(), "http://"+recv.HTTPAddr())
	if fwd := recv.Forwarder(); fwd != nil {
		say("  and every span received is forwarded to %s (OTEL_EXPORTER_OTLP_ENDPOINT)", fwd.Endpoint())
		defer func() {
			recv.Stop() // flushes the forwarder
			sent, failed, dropped, lastErr := fwd.Stats()
			say("forwarded %d export requests to %s (%d failed, %d dropped)", sent, fwd.Endpoint(), failed, dropped)
			if lastErr != nil {
				say("  last forwarding error: %v", lastErr)
			}
		}()
	}
	tracer, shutdownTracer, err := newDemoTracer(ctx, recv)
	if err != nil {
		return err
	}
	defer func() { _ = shutdownTracer(context.Background()) }()
	say("starting %s + %v (kube-apiserver, etcd and kube-controller-manager each) ...", Management, Regions)
	fleet, err := testenv.Start(append([]string{Management}, Regions...), testenv.Options{Dir: dir, Log: func(f string, a ...any) { say("  "+f, a...) }})
	if err != nil {
		return err
	}
	var agents []*agentProcess
	defer func() {
		say("stopping agents and tenant operators (SIGTERM) and the fleet ...")
		for _, a := range agents {
			a.stop()
		}
		if err := fleet.Stop(); err != nil {
			say("stop: %v", err)
		}
		say("stopped; nothing left running.")
	}()

	mgmt := fleet.Cluster(Management)
	if err := prepareManagement(ctx, mgmt.Client); err != nil {
		return err
	}
	for i, region := range Regions {
		c := fleet.Cluster(region)
		op, err := startOperator(opts.OperatorBinary, filepath.Join(dir, region), c, region, tracingEnv(recv.Endpoint(), "tenant-operator-"+region))
		if err != nil {
			return fmt.Errorf("tenant operator: %w", err)
		}
		agents = append(agents, op)
		// The agents elect a leader through a Lease in this namespace.
		if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: config.DefaultLeaderNamespace}}); err != nil {
			return err
		}
		a, err := startAgent(opts.AgentBinary, filepath.Join(dir, region), c, agentConfig(region, i, mgmt.Kubeconfig), tracingEnv(recv.Endpoint(), "agent-"+region))
		if err != nil {
			return err
		}
		agents = append(agents, a)
		say("%s: tenant operator started (log %s); agent started (config %s, log %s)", region, op.log, filepath.Join(dir, region, "agent.yaml"), a.log)
	}
	exited := func() {
		for _, a := range agents {
			if a.exited() {
				say("a process of %s exited; see %s", a.region, a.log)
			}
		}
	}

	say("")
	say("creating on management, namespace %s: one Tenant per region (acme-<region>), each under a", DemoNamespace)
	say("span of the demo's whose context it carries in %s, and the empty secrets", tenantoperator.DefaultTraceAnnotation)
	say("tenant-token-<region> their tokens are uploaded to ...")
	traces, err := createDemoTenants(ctx, mgmt.Client, tracer)
	if err != nil {
		return err
	}
	keys := shard.NewKeys(config.DefaultAnnotationDomain)
	for _, region := range Regions {
		if err := showRoundTrip(ctx, say, mgmt.Client, fleet.Cluster(region).Client, region, keys); err != nil {
			exited()
			return err
		}
	}
	showTraces := func() error {
		for _, region := range Regions {
			say("")
			if err := printTrace(opts.Out, region, waitTrace(ctx, recv, traces[region], 20*time.Second)); err != nil {
				return err
			}
		}
		return nil
	}
	showMetrics := func() {
		for i, region := range Regions {
			say("")
			url := "http://" + agentConfig(region, i, "").Telemetry.MetricsAddr + "/metrics"
			m, err := ScrapeAgent(ctx, url)
			if err != nil {
				say("%s: agent metrics: %v", region, err)
				continue
			}
			_ = printMetrics(opts.Out, region, url, m)
		}
	}
	if err := showTraces(); err != nil {
		return err
	}
	showMetrics()

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
	say("")
	say("kill -USR1 %d prints the traces (with any spans that arrived since) and the metrics again.", os.Getpid())
	say("press Ctrl-C to tear everything down.")
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-usr1:
			if err := showTraces(); err != nil {
				return err
			}
			showMetrics()
		case <-tick.C:
			for _, a := range agents {
				if a.exited() {
					return fmt.Errorf("a process of %s exited; see %s", a.region, a.log)
				}
			}
		}
	}
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

// createDemoTenants creates each region's Tenant (and the secret its token goes to) as a
// management controller would: under a span whose W3C context the Tenant carries in
// D/traceparent. It returns each region's trace ID.
func createDemoTenants(ctx context.Context, mgmt client.Client, tracer trace.Tracer) (map[string]trace.TraceID, error) {
	if err := mgmt.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: DemoNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	traces := map[string]trace.TraceID{}
	for _, region := range Regions {
		// Labelled for the region, as management-side tooling does: the agents select on it.
		labels := map[string]string{config.RegionLabel: region}
		name := "acme-" + region
		sctx, span := tracer.Start(ctx, "create tenant "+DemoNamespace+"/"+name, trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(attribute.String("regionsync.remote", DemoNamespace+"/"+name)))
		traces[region] = span.SpanContext().TraceID()
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: DemoNamespace, Name: tenantoperator.TokenSecretName + "-" + region, Labels: labels}}
		err := mgmt.Create(sctx, secret)
		if err == nil {
			t := &demov1alpha1.Tenant{
				ObjectMeta: metav1.ObjectMeta{Namespace: DemoNamespace, Name: name, Labels: labels,
					Annotations: map[string]string{tenantoperator.DefaultTraceAnnotation: telemetry.Traceparent(sctx)}},
				Spec: demov1alpha1.TenantSpec{DisplayName: "Acme Corp", Plan: "team", Replicas: 2},
			}
			err = mgmt.Create(sctx, t)
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		if err != nil {
			return nil, fmt.Errorf("creating tenant %s/%s: %w", DemoNamespace, name, err)
		}
	}
	return traces, nil
}

// showRoundTrip waits for a region's Tenant to be copied down, reconciled by the tenant operator,
// its status and token returned, and its generation annotations current; and says so.
func showRoundTrip(ctx context.Context, say func(string, ...any), mgmt, local client.Client, region string, keys shard.Keys) error {
	start := time.Now()
	remote, localCopy := &demov1alpha1.Tenant{}, &demov1alpha1.Tenant{}
	token := &corev1.Secret{}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := mgmt.Get(ctx, client.ObjectKey{Namespace: DemoNamespace, Name: "acme-" + region}, remote); err != nil {
			last = err.Error()
			return false, nil
		}
		if err := local.Get(ctx, client.ObjectKey{Namespace: DemoNamespace, Name: "acme"}, localCopy); err != nil {
			last = "local copy: " + err.Error()
			return false, nil
		}
		if err := mgmt.Get(ctx, client.ObjectKey{Namespace: DemoNamespace, Name: tenantoperator.TokenSecretName + "-" + region}, token); err != nil {
			last = err.Error()
			return false, nil
		}
		current := keys.GenerationsCurrent(remote.Annotations, remote.Generation, localCopy.Generation) &&
			remote.Status.ObservedGeneration == localCopy.Generation && remote.Status.Phase == tenantoperator.PhaseReady &&
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
	say("  region     %s/%s  (copy, generation %d) spec %+v", DemoNamespace, localCopy.Name, localCopy.Generation, localCopy.Spec)
	say("  status up  phase=%s endpoint=%s observedGeneration=%d", remote.Status.Phase, remote.Status.Endpoint, remote.Status.ObservedGeneration)
	say("  token up   secret %s: %d bytes, uploaded hash %s", token.Name, len(token.Data["token"]), token.Annotations[keys.LastUploadedHash])
	say("  %s=%s = metadata.generation and %s=%s = the copy's generation, observed in status: current",
		keys.RemoteGeneration, remote.Annotations[keys.RemoteGeneration], keys.LocalGeneration, remote.Annotations[keys.LocalGeneration])
	return nil
}

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
	"strings"
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
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/telemetry"
	"github.com/regionsync/regionsync/test/framework/fleet"
	"github.com/regionsync/regionsync/test/framework/otlpsink"
	"github.com/regionsync/regionsync/test/framework/tenantoperator"
	"github.com/regionsync/regionsync/test/framework/testenv"
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
	// HubBinary is the hub executable (bin/hub); it places the demo's Distribution.
	HubBinary string
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
	dir, err := prepareDir(opts)
	if err != nil {
		return err
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
	defer announceReceiver(say, recv)()
	tracer, shutdownTracer, err := newDemoTracer(ctx, recv)
	if err != nil {
		return err
	}
	defer func() { _ = shutdownTracer(context.Background()) }()
	say("starting %s + %v (kube-apiserver, etcd and kube-controller-manager each) ...", Management, Regions)
	// The clusters only (no DeployDir): the demo registers its regions itself and runs its
	// processes in the fleet with Run, as admin, without the overlays.
	f, err := fleet.StartLocal(ctx, fleet.LocalOptions{Dir: dir, ClusterDir: dir, Regions: Regions,
		Log: func(format string, a ...any) { say("  "+format, a...) }})
	if err != nil {
		return err
	}
	d := &demoRun{ctx: ctx, opts: opts, say: say, dir: dir, recv: recv, fleet: f, mgmt: f.Cluster(Management)}
	defer d.stop()

	if err := d.startProcesses(); err != nil {
		return err
	}
	if err := d.roundTrips(tracer); err != nil {
		return err
	}
	if err := d.showTraces(); err != nil {
		return err
	}
	d.showMetrics()
	if err := d.showRegions(); err != nil {
		return err
	}
	if err := d.distribute(); err != nil {
		return err
	}
	d.showAccess()
	if opts.Exit {
		return nil
	}
	return d.serve(usr1)
}

// prepareDir empties the demo's directory (made absolute) and checks that the agent binary exists.
func prepareDir(opts Options) (string, error) {
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return "", err
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if _, err := os.Stat(opts.AgentBinary); err != nil {
		return "", fmt.Errorf("agent binary: %w (run make build)", err)
	}
	return dir, nil
}

// announceReceiver says where the receiver listens. It returns what to run at the end: when the
// receiver forwards spans, stopping it (which flushes the forwarder) and reporting the forwarding.
func announceReceiver(say func(string, ...any), recv *otlpsink.Receiver) func() {
	say("OTLP receiver: gRPC %s, HTTP %s/v1/traces (agents and tenant operators export here)", recv.GRPCAddr(), "http://"+recv.HTTPAddr())
	fwd := recv.Forwarder()
	if fwd == nil {
		return func() {}
	}
	say("  and every span received is forwarded to %s (OTEL_EXPORTER_OTLP_ENDPOINT)", fwd.Endpoint())
	return func() {
		recv.Stop() // flushes the forwarder
		sent, failed, dropped, lastErr := fwd.Stats()
		say("forwarded %d export requests to %s (%d failed, %d dropped)", sent, fwd.Endpoint(), failed, dropped)
		if lastErr != nil {
			say("  last forwarding error: %v", lastErr)
		}
	}
}

// demoRun is one Run once its fleet is up: the processes it started and the traces it made.
type demoRun struct {
	ctx    context.Context
	opts   Options
	say    func(string, ...any)
	dir    string
	recv   *otlpsink.Receiver
	fleet  *fleet.LocalFleet
	mgmt   *testenv.Cluster
	agents []agentProcess
	traces map[string]trace.TraceID
}

// stop stops the agents, the tenant operators and the hub (the fleet's processes), then the
// fleet's clusters.
func (d *demoRun) stop() {
	d.say("stopping agents and tenant operators (SIGTERM) and the fleet ...")
	if err := d.fleet.Stop(); err != nil {
		d.say("stop: %v", err)
	}
	d.say("stopped; nothing left running.")
}

// startProcesses prepares management and starts the tenant operator and the agent of every region.
func (d *demoRun) startProcesses() error {
	if err := prepareManagement(d.ctx, d.mgmt.Client); err != nil {
		return err
	}
	for i, region := range Regions {
		c := d.fleet.Cluster(region)
		op, err := d.startOperator(filepath.Join(d.dir, region), c, region)
		if err != nil {
			return fmt.Errorf("tenant operator: %w", err)
		}
		// The agents elect a leader through a Lease in this namespace.
		if err := c.Client.Create(d.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetspec.DefaultLeaderNamespace}}); err != nil {
			return err
		}
		a, err := d.startAgent(filepath.Join(d.dir, region), c, agentConfig(region, i, d.mgmt.Kubeconfig))
		if err != nil {
			return err
		}
		d.say("%s: tenant operator started (log %s); agent started (config %s, log %s)", region, op.Log, filepath.Join(d.dir, region, "agent.yaml"), a.Log)
	}
	return d.startHub()
}

// roundTrips creates the demo tenants on management and shows each region's round trip.
func (d *demoRun) roundTrips(tracer trace.Tracer) error {
	d.say("")
	d.say("creating on management, namespace %s: one Tenant per region (acme-<region>), each under a", DemoNamespace)
	d.say("span of the demo's whose context it carries in %s, and the empty secrets", tenantoperator.DefaultTraceAnnotation)
	d.say("tenant-token-<region> their tokens are uploaded to ...")
	traces, err := createDemoTenants(d.ctx, d.mgmt.Client, tracer)
	if err != nil {
		return err
	}
	d.traces = traces
	keys := shard.NewKeys(fleetspec.DefaultAnnotationDomain)
	for _, region := range Regions {
		if err := showRoundTrip(d.ctx, d.say, d.mgmt.Client, d.fleet.Cluster(region).Client, region, keys); err != nil {
			for _, a := range d.agents {
				if !a.Alive() {
					d.say("a process of %s exited; see %s", a.of, a.Log)
				}
			}
			return err
		}
	}
	return nil
}

// showTraces prints the trace of each region's tenant.
func (d *demoRun) showTraces() error {
	for _, region := range Regions {
		d.say("")
		if err := printTrace(d.opts.Out, region, waitTrace(d.ctx, d.recv, d.traces[region], 20*time.Second)); err != nil {
			return err
		}
	}
	return nil
}

// showMetrics prints each agent's key metrics.
func (d *demoRun) showMetrics() {
	for i, region := range Regions {
		d.say("")
		url := "http://" + agentConfig(region, i, "").Telemetry.MetricsAddr + "/metrics"
		m, err := ScrapeAgent(d.ctx, url)
		if err != nil {
			d.say("%s: agent metrics: %v", region, err)
			continue
		}
		_ = printMetrics(d.opts.Out, region, url, m)
	}
}

// showRegions waits for every Region to be Ready and prints them as kubectl would.
func (d *demoRun) showRegions() error {
	d.say("")
	d.say("kubectl get regions (on management):")
	if err := waitRegionsReady(d.ctx, d.mgmt.Client); err != nil {
		return err
	}
	return printTable(d.ctx, d.opts.Out, d.mgmt.Config, "/apis/regionsync.dev/v1alpha1/regions")
}

// showAccess prints the kubeconfigs, the agents' endpoints and what to try.
func (d *demoRun) showAccess() {
	d.say("")
	d.say("fleet is up. kubeconfigs:")
	clusters := d.fleet.Clusters()
	for _, c := range clusters {
		d.say("  %-10s export KUBECONFIG=%s", c.Name, c.Kubeconfig)
	}
	for i, region := range Regions {
		cfg := agentConfig(region, i, "")
		d.say("  %-10s agent metrics http://%s/metrics, health http://%s/healthz", region, cfg.Telemetry.MetricsAddr, cfg.Telemetry.HealthAddr)
	}
	d.say("")
	d.say("try: kubectl --kubeconfig %s get regions", d.mgmt.Kubeconfig)
	d.say("     kubectl --kubeconfig %s -n %s edit tenant acme-us-east-1   (change spec.replicas,", d.mgmt.Kubeconfig, DemoNamespace)
	d.say("     then watch the copy in us-east-1 and the generation annotations on management)")
	paths := make([]string, 0, len(clusters))
	for _, c := range clusters {
		paths = append(paths, c.Kubeconfig)
	}
	kc := "KUBECONFIG=" + strings.Join(paths, string(os.PathListSeparator))
	d.say("     %s kubectl regionsync --context management status       (go install ./cmd/kubectl-regionsync)", kc)
	d.say("     %s kubectl regionsync --context management explain tenant/acme-us-east-1 -n %s --region-context us-east-1", kc, DemoNamespace)
	d.say("     %s kubectl regionsync --context management doctor", kc)
	d.say("     %s kubectl regionsync --context management diff -f %s   (a change of Distribution %s/%s, previewed)",
		kc, filepath.Join(d.dir, ChangeFile), FleetNamespace, DistributionName)
}

// serve keeps the fleet up until ctx is cancelled or a process exits; SIGUSR1 prints the traces
// and the metrics again.
func (d *demoRun) serve(usr1 <-chan os.Signal) error {
	d.say("")
	d.say("kill -USR1 %d prints the traces (with any spans that arrived since) and the metrics again.", os.Getpid())
	d.say("press Ctrl-C to tear everything down.")
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return nil
		case <-usr1:
			if err := d.showTraces(); err != nil {
				return err
			}
			d.showMetrics()
		case <-tick.C:
			for _, a := range d.agents {
				if !a.Alive() {
					return fmt.Errorf("a process of %s exited; see %s", a.of, a.Log)
				}
			}
		}
	}
}

// prepareManagement creates what the operator sets up on management before adding regions: the
// namespace of the shard Leases and one Region object per region.
func prepareManagement(ctx context.Context, mgmt client.Client) error {
	if err := mgmt.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetspec.DefaultManagementNamespace}}); err != nil {
		return err
	}
	for _, region := range Regions {
		r := &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: region},
			Spec: regionsyncv1alpha1.RegionSpec{Description: "demo region " + region, Shard: regionShard(region)}}
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
		labels := map[string]string{regionsyncv1alpha1.RegionLabel: region}
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

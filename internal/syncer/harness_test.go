//go:build integration

package syncer_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/scheme"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/telemetry/tracer"
	"github.com/regionsync/regionsync/pkg/regionsync"
	"github.com/regionsync/regionsync/test/framework/agentconfig"
	"github.com/regionsync/regionsync/test/framework/tenantoperator"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// The integration tests share one management cluster and one regional cluster (real API servers
// with kube-controller-manager). Every test runs its own agent with its own region name and
// suffix, so shards and local marks never overlap between tests.
var (
	fleet      *testenv.Fleet
	management *testenv.Cluster
	region     *testenv.Cluster
	testSeq    atomic.Int32
	// operatorSpans records the tenant operator's spans.
	operatorSpans = tracetest.NewSpanRecorder()
)

func TestMain(m *testing.M) {
	testenv.SetProcessLoggers()
	code := m.Run()
	stopFleet()
	os.Exit(code)
}

var (
	fleetOnce sync.Once
	fleetErr  error
	// stopFleet stops the shared clusters, if they were started.
	stopFleet = func() {}
)

// needFleet starts the shared clusters on the first integration test that needs them: the
// pure-logic tests and the fuzzers start no API server (under make test-unit and make fuzz, a
// test that needs them fails: see testenv.NoControlPlaneEnv).
func needFleet(tb testing.TB) {
	tb.Helper()
	fleetOnce.Do(func() { fleetErr = startFleet() })
	if fleetErr != nil {
		tb.Fatalf("starting the shared test clusters: %v", fleetErr)
	}
}

// startFleet starts the management and regional clusters and the region's tenant operator.
func startFleet() error {
	ctx, cancel := context.WithCancel(context.Background())
	f, err := testenv.Start([]string{"management", "region"}, testenv.Options{})
	if err != nil {
		cancel()
		return err
	}
	fleet = f
	stopFleet = func() {
		cancel()
		if err := fleet.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	management, region = fleet.Cluster("management"), fleet.Cluster("region")
	// Shard Leases live in this management namespace.
	if err := management.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetspec.DefaultManagementNamespace}}); err != nil {
		return err
	}
	// The region runs the demo tenant operator, unaware of regionsync, as a real region would.
	// It continues traces; its spans are recorded in memory for the trace tests.
	tp, _, _ := tracer.NewTestTracerProvider(operatorSpans, tracer.Identity{ServiceName: "tenant-operator", Region: "region"})
	return testenv.StartTenantOperator(ctx, region.Config, "region", tp.Tracer("tenant-operator"))
}

// writeCounter counts the successful API writes (create, update, patch, delete) a client makes,
// leaving out Events and Leases, which are bookkeeping, not sync writes.
type writeCounter struct {
	mu     sync.Mutex
	writes []string
	// events counts the Event writes (creates, and the patches that bump a repeated one's count).
	events int
}

func (w *writeCounter) wrap(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			// A write is a successful create, update, patch or delete; a request refused with a
			// conflict changed nothing.
			if err == nil && resp.StatusCode < 300 && req.Method != http.MethodGet && !strings.Contains(req.URL.Path, "/leases") {
				w.mu.Lock()
				if strings.Contains(req.URL.Path, "/events") {
					w.events++
				} else {
					w.writes = append(w.writes, req.Method+" "+req.URL.Path)
				}
				w.mu.Unlock()
			}
			return resp, err
		})
	})
	return c
}

// count is how many writes were counted since the last take.
func (w *writeCounter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.writes)
}

// settle waits until neither of the agent's clients has written for quiet.
func (e *env) settle(quiet time.Duration) {
	e.t.Helper()
	testenv.Settled(e.t, "the agent's writes settle", quiet, time.Minute, func() [2]int {
		return [2]int{e.localWrites.count(), e.remoteWrites.count()}
	})
}

// eventWrites is how many Event writes were counted in all.
func (w *writeCounter) eventWrites() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.events
}

func (w *writeCounter) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.writes
	w.writes = nil
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// env is one test's agent and its view of both clusters.
type env struct {
	t   testing.TB
	ctx context.Context
	// opts describe the agent under test, as its host would give them to regionsync.New:
	// Management.Config is what it uses to reach management (each start counts its writes
	// there), TracerProvider the one of withTracerProvider (nil: built from tracing at each
	// start). A test may change them between stop and start.
	opts regionsync.Options
	// tracing is the OTLP exporter of the agent's tracer provider when opts have none, as the
	// agent binary builds it from telemetry.tracing (zero: no exporter, a no-op provider).
	tracing fleetspec.Tracing
	keys    shard.Keys
	name    string // unique per test: region name, suffix and namespace stem
	suffix  string
	mgmt    client.Client // admin on management
	local   client.Client // admin on the region
	// remoteWrites and localWrites count the agent's own writes.
	remoteWrites, localWrites writeCounter
	proxy                     *testenv.Proxy
	localCfg                  *rest.Config // what the agent uses to reach the region
	syncer                    *regionsync.Syncer
	mgr                       ctrl.Manager
	// log is what the test's agents logged, printed when the test fails.
	log    *testenv.TestLog
	starts int
	cancel context.CancelFunc
	done   chan error
}

type envOption func(*envSetup)

type envSetup struct {
	edit          func(*regionsync.Options)
	managementCfg *rest.Config // what the agent uses to reach management (default: admin)
	localCfg      *rest.Config // what the agent uses to reach the region (default: admin)
	proxyDown     bool         // start with management unreachable behind a proxy
	useProxy      bool
	tracer        trace.TracerProvider
	tracing       fleetspec.Tracing // the exporter when no tracer provider is given
	startLater    bool              // the test calls e.start() itself (after creating what the agent must find at its start)
}

// withOptions changes the agent's Options (agentconfig.TenantOptions with the tenant-token Secret)
// before its first start; regionsync.New validates the result, and a test whose options are
// invalid fails at the start.
func withOptions(edit func(*regionsync.Options)) envOption {
	return func(s *envSetup) { s.edit = edit }
}
func withManagementConfig(c *rest.Config) envOption {
	return func(s *envSetup) { s.managementCfg = c }
}
func withLocalConfig(c *rest.Config) envOption {
	return func(s *envSetup) { s.localCfg = c }
}
func withTracerProvider(tp trace.TracerProvider) envOption {
	return func(s *envSetup) { s.tracer = tp }
}

// withTracing has the agent's tracer provider built with this OTLP exporter, as the agent binary
// builds it from its configuration's telemetry.tracing.
func withTracing(t fleetspec.Tracing) envOption {
	return func(s *envSetup) { s.tracing = t }
}
func withProxy(down bool) envOption {
	return func(s *envSetup) { s.useProxy, s.proxyDown = true, down }
}
func withStartLater() envOption { return func(s *envSetup) { s.startLater = true } }

// newEnv configures an agent for this test (Tenants, the tenant-token secret) and starts it
// (withStartLater: the test starts it).
func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	needFleet(t)
	setup := envSetup{}
	for _, o := range opts {
		o(&setup)
	}
	n := testSeq.Add(1)
	name := fmt.Sprintf("t%02d", n)
	e := &env{
		t: t, ctx: context.Background(), tracing: setup.tracing, name: name, suffix: "-" + name,
		mgmt: management.Client, local: region.Client, log: testenv.NewTestLog(t),
	}
	remoteCfg := management.Config
	if setup.managementCfg != nil {
		remoteCfg = setup.managementCfg
	}
	if setup.useProxy {
		p, err := testenv.NewProxy(remoteCfg)
		if err != nil {
			t.Fatal(err)
		}
		e.proxy = p
		remoteCfg = p.Config(remoteCfg)
		if !setup.proxyDown {
			if err := p.Up(); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(p.Down)
	}
	// The agent runs without leader election and without metrics or health servers (startAgent's
	// manager): those are the agent process's, not the library's.
	agent := agentconfig.TenantOptions("region-"+name, "-"+name, remoteCfg)
	agent.Resources[0].Secrets = []string{tenantoperator.TokenSecretName}
	agent.TracerProvider = setup.tracer
	if setup.edit != nil {
		setup.edit(&agent)
	}
	e.opts, e.keys = agent, shard.NewKeys(agent.WithDefaults().AnnotationDomain)
	e.localCfg = region.Config
	if setup.localCfg != nil {
		e.localCfg = setup.localCfg
	}
	if !setup.startLater {
		e.start()
	}
	t.Cleanup(e.stop)
	return e
}

// start runs a new agent process (in-process) with the test's options.
func (e *env) start() {
	e.t.Helper()
	e.starts++
	opts := e.opts
	opts.Management.Config = e.remoteWrites.wrap(opts.Management.Config)
	s, mgr, flush, err := startAgent(opts, e.tracing, e.localWrites.wrap(e.localCfg), e.log.Logger(fmt.Sprintf("agent-%d", e.starts)))
	if errors.Is(err, regionsync.ErrInvalidOptions) {
		e.t.Fatalf("the test's agent options: %v", err)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.syncer, e.mgr, e.cancel, e.done = s, mgr, cancel, make(chan error, 1)
	go func() {
		err := mgr.Start(ctx)
		e.done <- errors.Join(err, flush(context.Background()))
	}()
}

// startAgent builds an agent in-process as cmd/agent does: opts, a manager whose cache holds only
// the copies, and the public package. Without a tracer provider in opts it builds one with the
// tracing exporter, as cmd/agent does; the returned function flushes it.
func startAgent(opts regionsync.Options, tracing fleetspec.Tracing, local *rest.Config, log logr.Logger) (*regionsync.Syncer, ctrl.Manager, func(context.Context) error, error) {
	opts.Logger = log.WithName("regionsync")
	shutdown := func(context.Context) error { return nil }
	var err error
	if opts.TracerProvider == nil { // as cmd/agent does: the exporter the configuration asks for
		if opts.TracerProvider, shutdown, err = tracer.NewTracerProvider(context.Background(), tracing, tracer.Identity{
			Version: "test", Region: opts.Region, ClusterName: opts.Region,
		}); err != nil {
			return nil, nil, nil, err
		}
	}
	local = rest.CopyConfig(local)
	local.QPS, local.Burst = 50, 100
	mgr, err := ctrl.NewManager(local, ctrl.Options{
		Scheme:                 scheme.New(),
		Logger:                 log,
		Cache:                  regionsync.LocalCacheOptions(opts),
		NewCache:               regionsync.LocalNewCache(opts),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, nil, nil, err
	}
	s, err := regionsync.New(mgr, opts)
	return s, mgr, shutdown, err
}

// stop stops the agent (idempotent).
func (e *env) stop() {
	if e.cancel == nil {
		return
	}
	e.cancel()
	e.cancel = nil
	select {
	case err := <-e.done:
		if err != nil {
			e.t.Errorf("agent exited with error: %v", err)
		}
	case <-time.After(30 * time.Second):
		e.t.Error("agent did not stop within 30s")
	}
}

// ns returns a per-test namespace name.
func (e *env) ns(stem string) string { return e.name + "-" + stem }

// remoteNamespace creates a namespace on management.
func (e *env) remoteNamespace(stem string) string {
	e.t.Helper()
	name := e.ns(stem)
	if err := e.mgmt.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
	return name
}

// remoteSecret creates the (empty) remote secret the tenant-token upload targets.
func (e *env) remoteSecret(ns string) {
	e.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tenantoperator.TokenSecretName + e.suffix}}
	if err := e.mgmt.Create(e.ctx, s); err != nil {
		e.t.Fatal(err)
	}
}

// tenant creates a Tenant on management in ns with the test's suffix.
func (e *env) tenant(ns, name, display string, mutate ...func(*demov1alpha1.Tenant)) {
	e.t.Helper()
	t := testenv.Tenant(ns, name+e.suffix, display, append([]func(*demov1alpha1.Tenant){func(t *demov1alpha1.Tenant) {
		t.Labels, t.Annotations = map[string]string{"tier": "gold"}, map[string]string{"example.com/note": "hello"}
		t.Spec.Replicas = 2
	}}, mutate...)...)
	if err := e.mgmt.Create(e.ctx, t); err != nil {
		e.t.Fatal(err)
	}
}

// eventually polls cond until it returns nil, failing the test with its last error after 30s.
func (e *env) eventually(what string, cond func() error) {
	e.t.Helper()
	testenv.Eventually(e.t, what, 30*time.Second, cond)
}

// never checks that cond stays false for d.
func (e *env) never(what string, d time.Duration, cond func() bool) {
	e.t.Helper()
	testenv.Consistently(e.t, what+" must not happen", d, func() error {
		if cond() {
			return fmt.Errorf("%s happened", what)
		}
		return nil
	})
}

func (e *env) getLocal(ns, name string) (*demov1alpha1.Tenant, error) {
	t := &demov1alpha1.Tenant{}
	return t, e.local.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: name}, t)
}

func (e *env) getRemote(ns, name string) (*demov1alpha1.Tenant, error) {
	t := &demov1alpha1.Tenant{}
	return t, e.mgmt.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: name + e.suffix}, t)
}

// waitSynced waits until the remote object's status and generation annotations say the region
// is current (the full round trip) and returns both objects.
func (e *env) waitSynced(ns, name string) (remote, local *demov1alpha1.Tenant) {
	e.t.Helper()
	e.eventually("round trip of "+ns+"/"+name, func() error {
		var err error
		if remote, err = e.getRemote(ns, name); err != nil {
			return err
		}
		if local, err = e.getLocal(ns, name); err != nil {
			return err
		}
		a := remote.Annotations
		if a[e.keys.RemoteGeneration] != fmt.Sprint(remote.Generation) {
			return fmt.Errorf("remote generation annotation %q, generation %d", a[e.keys.RemoteGeneration], remote.Generation)
		}
		if a[e.keys.LocalGeneration] != fmt.Sprint(local.Generation) {
			return fmt.Errorf("local generation annotation %q, local generation %d", a[e.keys.LocalGeneration], local.Generation)
		}
		if remote.Status.ObservedGeneration != local.Generation || remote.Status.Phase != tenantoperator.PhaseReady {
			return fmt.Errorf("remote status %+v, local generation %d", remote.Status, local.Generation)
		}
		return nil
	})
	return remote, local
}

// events returns the reasons of the events regarding an object on a cluster.
func events(ctx context.Context, c client.Client, ns, name string) ([]string, error) {
	list := &eventsv1.EventList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing events in %s: %w", ns, err)
	}
	var out []string
	for _, ev := range list.Items {
		if ev.Regarding.Name == name {
			out = append(out, ev.Reason)
		}
	}
	return out, nil
}

func (e *env) waitEvent(c client.Client, ns, name, reason string) {
	e.t.Helper()
	e.eventually("event "+reason+" on "+ns+"/"+name, func() error {
		reasons, err := events(e.ctx, c, ns, name)
		if err != nil {
			return err
		}
		if slices.Contains(reasons, reason) {
			return nil
		}
		return fmt.Errorf("events so far: %v", reasons)
	})
}

//go:build integration

package main_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/pkg/config"
	"github.com/regionsync/regionsync/test/framework/agentconfig"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// These tests run the agent binary as separate processes (as in production) against real API
// servers: leader election among replicas, the shard claim between fleets, the Region status and
// management outages.

// freeAddrs returns n distinct free local addresses.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	// Every listener stays open until all are picked: closed one by one, the kernel may hand the
	// same port out twice (the agent's metrics and health servers then collide).
	out := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		out = append(out, l.Addr().String())
	}
	return out
}

// proc is one agent process.
type proc struct {
	name    string
	p       *testenv.Process
	metrics string
	healthz string
	mu      sync.Mutex
	log     strings.Builder
}

func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

func (p *proc) alive() bool { return p.p.Alive() }

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	start := time.Now()
	p.p.Stop(sig, 30*time.Second)
	if time.Since(start) >= 30*time.Second {
		t.Fatalf("%s did not exit after %v", p.name, sig)
	}
}

// errNoSeries: the metrics were scraped and no series matched.
var errNoSeries = errors.New("no such series")

// metric returns the value of an unlabelled metric (no label parts), or of the first series whose
// labels contain every label part. A failed scrape is an error; a scrape without the series is
// errNoSeries.
func (p *proc) metric(name string, labelParts ...string) (float64, error) {
	resp, err := http.Get("http://" + p.metrics + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("scraping %s: %w", p.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("scraping %s: %s", p.name, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if len(labelParts) == 0 && !strings.HasPrefix(rest, " ") {
			continue
		}
		if len(labelParts) > 0 && !strings.HasPrefix(rest, "{") {
			continue
		}
		match := true
		for _, part := range labelParts {
			match = match && strings.Contains(rest, part)
		}
		if !match {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: series %q: %w", p.name, line, err)
		}
		return v, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("scraping %s: %w", p.name, err)
	}
	return 0, fmt.Errorf("%s%v on %s: %w", name, labelParts, p.name, errNoSeries)
}

// counter is a counter's value: 0 while it has no series (nothing counted yet); only a failed
// scrape is an error.
func (p *proc) counter(name string, labelParts ...string) (float64, error) {
	v, err := p.metric(name, labelParts...)
	if errors.Is(err, errNoSeries) {
		return 0, nil
	}
	return v, err
}

// startAgent writes cfg and runs the agent against the local cluster (as its admin).
func startAgent(t *testing.T, name string, local *testenv.Cluster, cfg *config.AgentConfig) *proc {
	t.Helper()
	return startAgentWith(t, name, local.Kubeconfig, cfg)
}

// startAgentWith writes cfg and runs the agent with the local cluster's kubeconfig localKC.
func startAgentWith(t *testing.T, name, localKC string, cfg *config.AgentConfig) *proc {
	t.Helper()
	addrs := freeAddrs(t, 2)
	p := &proc{name: name, metrics: addrs[0], healthz: addrs[1]}
	c := *cfg
	c.Telemetry.MetricsAddr, c.Telemetry.HealthAddr = p.metrics, p.healthz
	path, err := agentconfig.WriteConfig(filepath.Join(t.TempDir(), name+".yaml"), &c)
	if err != nil {
		t.Fatal(err)
	}
	out, w := io.Pipe()
	p.p, err = testenv.StartReplica(testenv.Replica{Binary: agentBin, Name: name, Config: path, Kubeconfig: localKC, Out: w, OnExit: func() { w.Close() }})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		p.p.Stop(syscall.SIGKILL, 10*time.Second)
		if t.Failed() {
			t.Logf("--- log of %s (last 3000 bytes) ---\n%s", name, testenv.Tail(p.logs(), 3000))
		}
	})
	return p
}

// fleet is a management cluster with regional clusters for the process tests.
type fleetEnv struct {
	t          *testing.T
	fleet      *testenv.Fleet
	management *testenv.Cluster
	ctx        context.Context
}

func newFleet(t *testing.T, regions ...string) *fleetEnv {
	f := testenv.StartT(t, append([]string{"management"}, regions...)...)
	e := &fleetEnv{t: t, fleet: f, management: f.Cluster("management"), ctx: context.Background()}
	e.create(e.management.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetspec.DefaultManagementNamespace}})
	for _, r := range regions {
		e.create(f.Cluster(r).Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetspec.DefaultLeaderNamespace}})
	}
	return e
}

func (e *fleetEnv) create(c client.Client, o client.Object) {
	e.t.Helper()
	if err := c.Create(e.ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
}

// agentConfig is a region's configuration with short leader-election and claim durations.
func agentConfig(region, suffix, managementKubeconfig string) *config.AgentConfig {
	cfg := agentconfig.TenantConfig(region, suffix, managementKubeconfig)
	short := fleetspec.LeaseTimings{
		LeaseDuration: metav1.Duration{Duration: 4 * time.Second},
		RenewDeadline: metav1.Duration{Duration: 3 * time.Second},
		RetryPeriod:   metav1.Duration{Duration: 500 * time.Millisecond},
	}
	cfg.LeaderElection = fleetspec.LeaderElection{LeaseDuration: short.LeaseDuration, RenewDeadline: short.RenewDeadline, RetryPeriod: short.RetryPeriod}
	cfg.Management.Claim = short
	cfg.Telemetry = config.TelemetryConfig{HeartbeatInterval: metav1.Duration{Duration: time.Second}}
	return cfg
}

func (e *fleetEnv) tenant(ns, name string) {
	e.t.Helper()
	e.create(e.management.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	e.create(e.management.Client, testenv.Tenant(ns, name, name))
}

func (e *fleetEnv) waitLocal(c *testenv.Cluster, ns, name string, timeout time.Duration) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("%s/%s reaches %s", ns, name, c.Name), timeout, func() error {
		return c.Client.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: name}, &demov1alpha1.Tenant{})
	})
}

func (e *fleetEnv) eventually(what string, timeout time.Duration, cond func() error) {
	e.t.Helper()
	testenv.Eventually(e.t, what, timeout, cond)
}

// leaderOf waits until exactly one of the processes syncs (holds the shard claim) and returns it.
func (e *fleetEnv) leaderOf(procs ...*proc) *proc {
	e.t.Helper()
	var leader *proc
	e.eventually("exactly one replica syncs", 30*time.Second, func() error {
		leader = nil
		n := 0
		for _, p := range procs {
			if !p.alive() {
				continue
			}
			v, err := p.metric("regionsync_shard_claimed")
			if err != nil {
				return err
			}
			if v == 1 {
				leader, n = p, n+1
			}
		}
		if n != 1 {
			return fmt.Errorf("%d replicas hold the claim", n)
		}
		return nil
	})
	return leader
}

// Two replicas of one region: exactly one writes. SIGTERM on the leader hands over (the leases are
// released), SIGKILL within the lease duration plus a few seconds; both measured several times.
func TestLeaderFailover(t *testing.T) {
	e := newFleet(t, "us-east-1")
	local := e.fleet.Cluster("us-east-1")
	cfg := agentConfig("us-east-1", "-us-east-1", e.management.Kubeconfig)
	// The claim on management keeps its shipped timings (renewed every 10 s, 60 s lease): a new
	// local leader of the fleet takes it over at once, whatever they are.
	cfg.Management.Claim = fleetspec.LeaseTimings{}
	// As the shipped overlays do: a local secret per Tenant, whose cache a standby keeps warm too.
	cfg.Resources[0].Secrets = []string{"tenant-token"}
	e.create(e.management.Client, &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: "us-east-1"}})
	procs := []*proc{startAgent(t, "replica-a", local, cfg), startAgent(t, "replica-b", local, cfg)}
	// Every replica, the standby too, has the kind warm (both clusters' caches and the secret's)
	// before it leads: a takeover lists nothing.
	waitWarm := func(procs []*proc) {
		t.Helper()
		for _, p := range procs {
			e.eventually(p.name+" warm", 30*time.Second, func() error {
				if v, err := p.metric("regionsync_kind_warm", `resource="Tenant.demo.regionsync.dev"`); err != nil || v != 1 {
					return fmt.Errorf("regionsync_kind_warm = %v (%v)", v, err)
				}
				return nil
			})
		}
	}
	e.tenant("acme", "t0-us-east-1")
	e.waitLocal(local, "acme", "t0", 30*time.Second)

	leader := e.leaderOf(procs...)
	for _, p := range procs {
		written, err := p.counter("regionsync_syncs_total", `result="written"`)
		if err != nil {
			t.Fatal(err)
		}
		if p != leader && written > 0 {
			t.Fatalf("standby %s wrote: regionsync_syncs_total{result=written} = %v", p.name, written)
		}
		if p == leader && written <= 0 {
			t.Fatalf("leader %s reports no writes", p.name)
		}
	}

	next := 3
	for round := 1; round <= 4; round++ {
		waitWarm(procs)
		sig := syscall.SIGTERM
		if round%2 == 0 {
			sig = syscall.SIGKILL
		}
		start := time.Now()
		leader.signal(t, sig)
		name := fmt.Sprintf("t%d", round)
		e.tenant("acme", name+"-us-east-1")
		limit := 2*time.Second + 10*time.Second // crash: lease duration (4s) local + management, plus margin
		e.waitLocal(local, "acme", name, limit+20*time.Second)
		handover := time.Since(start)
		t.Logf("round %d: %v on the leader %s -> new object synced by the standby after %s", round, sig, leader.name, handover.Round(10*time.Millisecond))
		if sig == syscall.SIGKILL && handover > cfg.LeaderElection.LeaseDuration.Duration+10*time.Second {
			t.Errorf("crash handover took %s, want within the lease duration + a few seconds", handover)
		}
		if sig == syscall.SIGTERM && handover > 10*time.Second {
			t.Errorf("graceful handover took %s, want a few seconds (the leases are released, the standby is warm)", handover)
		}
		// Replace the stopped replica so that the next round has a standby again.
		var alive []*proc
		for _, p := range procs {
			if p.alive() {
				alive = append(alive, p)
			}
		}
		procs = append(alive, startAgent(t, fmt.Sprintf("replica-%d", next), local, cfg))
		next++
		leader = e.leaderOf(procs...)
	}
}

// A second fleet for the same region waits and says why; an overlapping shard refuses, naming
// the shard it collides with; when the first fleet dies and its claim expires, the second takes over.
func TestShardConflicts(t *testing.T) {
	e := newFleet(t, "us-east-1", "us-east-1-bis")
	first, second := e.fleet.Cluster("us-east-1"), e.fleet.Cluster("us-east-1-bis")
	e.create(e.management.Client, &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: "east-1"}})
	cfg := agentConfig("us-east-1", "-us-east-1", e.management.Kubeconfig)
	a := startAgent(t, "fleet-a", first, cfg)
	e.tenant("acme", "t1-us-east-1")
	e.waitLocal(first, "acme", "t1", 30*time.Second)

	b := startAgent(t, "fleet-b", second, cfg)
	overlap := startAgent(t, "east-1", second, agentConfig("east-1", "-east-1", e.management.Kubeconfig))
	e.eventually("the second fleet reports the conflict", 30*time.Second, func() error {
		if v, err := b.metric("regionsync_shard_conflict", `reason="`+regionsyncv1alpha1.ReasonHeldByOtherFleet+`"`); err != nil || v != 1 {
			return fmt.Errorf("shard_conflict{HeldByOtherFleet} = %v (%v)", v, err)
		}
		if !strings.Contains(b.logs(), "another fleet syncs region us-east-1") {
			return fmt.Errorf("log does not say why")
		}
		return nil
	})
	e.eventually("the overlapping shard refuses and names the collision", 30*time.Second, func() error {
		if v, err := overlap.metric("regionsync_shard_conflict", `reason="`+regionsyncv1alpha1.ReasonShardOverlap+`"`); err != nil || v != 1 {
			return fmt.Errorf("shard_conflict{ShardOverlap} = %v (%v)", v, err)
		}
		r := &regionsyncv1alpha1.Region{}
		if err := e.management.Client.Get(e.ctx, client.ObjectKey{Name: "east-1"}, r); err != nil {
			return err
		}
		c := meta.FindStatusCondition(r.Status.Conditions, regionsyncv1alpha1.ConditionShardClaimed)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != regionsyncv1alpha1.ReasonShardOverlap || !strings.Contains(c.Message, "region us-east-1") {
			return fmt.Errorf("ShardClaimed condition %+v", c)
		}
		return nil
	})
	// Neither wrote: the second fleet did not copy the first fleet's object.
	if err := second.Client.Get(e.ctx, client.ObjectKey{Namespace: "acme", Name: "t1"}, &demov1alpha1.Tenant{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused agent copied an object: %v", err)
	}
	for _, p := range []*proc{b, overlap} {
		w, err := p.counter("regionsync_syncs_total", `result="written"`)
		if err != nil {
			t.Fatal(err)
		}
		if w > 0 {
			t.Fatalf("%s wrote %v times without the claim", p.name, w)
		}
	}

	start := time.Now()
	a.signal(t, syscall.SIGKILL) // its claim must expire
	e.tenant("acme", "t2-us-east-1")
	e.waitLocal(second, "acme", "t2", 60*time.Second)
	e.waitLocal(second, "acme", "t1", 10*time.Second)
	t.Logf("second fleet took over %s after the first was killed", time.Since(start).Round(10*time.Millisecond))
}

// The Region status on management: readiness, leader, counts matching the objects synced, a
// heartbeat that stops when the agent stops; with management down the agent stays alive and
// keeps its copies, and it reclaims and resumes when management is back.
func TestRegionStatusAndManagementOutage(t *testing.T) {
	e := newFleet(t, "eu-west-1")
	local := e.fleet.Cluster("eu-west-1")
	e.create(e.management.Client, &regionsyncv1alpha1.Region{ObjectMeta: metav1.ObjectMeta{Name: "eu-west-1"}})
	proxy, err := testenv.NewProxy(e.management.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := proxy.Up(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Down)
	kc := filepath.Join(t.TempDir(), "management-via-proxy")
	if err := testenv.WriteKubeconfig(kc, "management", proxy.Config(e.management.Config)); err != nil {
		t.Fatal(err)
	}
	p := startAgent(t, "eu-replica", local, agentConfig("eu-west-1", "-eu-west-1", kc))
	for i := range 3 {
		e.tenant("acme", fmt.Sprintf("t%d-eu-west-1", i))
	}
	for i := range 3 {
		e.waitLocal(local, "acme", fmt.Sprintf("t%d", i), 30*time.Second)
	}
	region := &regionsyncv1alpha1.Region{}
	e.eventually("Region status ready with matching counts", 30*time.Second, func() error {
		if err := e.management.Client.Get(e.ctx, client.ObjectKey{Name: "eu-west-1"}, region); err != nil {
			return err
		}
		st := region.Status
		if !meta.IsStatusConditionTrue(st.Conditions, regionsyncv1alpha1.ConditionReady) {
			return fmt.Errorf("not ready: %+v", st.Conditions)
		}
		if st.Leader != "eu-replica" || st.ClusterID == "" || st.HeartbeatTime == nil || st.LastSyncTime == nil {
			return fmt.Errorf("leader %q clusterID %q heartbeat %v lastSync %v", st.Leader, st.ClusterID, st.HeartbeatTime, st.LastSyncTime)
		}
		if len(st.Resources) != 1 || st.Resources[0].Synced != 3 || st.Resources[0].Failed+st.Resources[0].Pending+st.Resources[0].Invalid != 0 {
			return fmt.Errorf("counts %+v, want 3 synced", st.Resources)
		}
		return nil
	})
	if v, err := p.metric("regionsync_objects", `state="synced"`); err != nil || v != 3 {
		t.Fatalf("regionsync_objects{state=synced} = %v (%v), want 3", v, err)
	}

	// Management down: liveness stays 200, the process stays up, copies stay.
	proxy.Down()
	testenv.Eventually(t, "regionsync_management_connected 0 with management down", 30*time.Second, func() error {
		if v, err := p.metric("regionsync_management_connected"); err != nil || v != 0 {
			return fmt.Errorf("regionsync_management_connected = %v (%v)", v, err)
		}
		return nil
	})
	// Beyond the claim's renew deadline: the process stays up and live.
	testenv.Consistently(t, "alive and live with management down", 6*time.Second, func() error {
		if !p.alive() {
			return errors.New("agent exited while management was down")
		}
		resp, err := http.Get("http://" + p.healthz + "/healthz")
		if err != nil {
			return fmt.Errorf("liveness: %w", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("liveness answered %s", resp.Status)
		}
		return nil
	})
	for i := range 3 {
		if err := local.Client.Get(e.ctx, client.ObjectKey{Namespace: "acme", Name: fmt.Sprintf("t%d", i)}, &demov1alpha1.Tenant{}); err != nil {
			t.Fatalf("local copy lost during the outage: %v", err)
		}
	}
	// Back: it reclaims the shard and resumes.
	if err := proxy.Up(); err != nil {
		t.Fatal(err)
	}
	e.tenant("acme", "t9-eu-west-1")
	e.waitLocal(local, "acme", "t9", 60*time.Second)

	// Stopped: the heartbeat no longer moves.
	p.signal(t, syscall.SIGTERM)
	if err := e.management.Client.Get(e.ctx, client.ObjectKey{Name: "eu-west-1"}, region); err != nil {
		t.Fatal(err)
	}
	beat := region.Status.HeartbeatTime.Time
	testenv.Consistently(t, "the heartbeat stays where the stopped agent left it", 3*time.Second, func() error {
		if err := e.management.Client.Get(e.ctx, client.ObjectKey{Name: "eu-west-1"}, region); err != nil {
			return err
		}
		if hb := region.Status.HeartbeatTime.Time; !hb.Equal(beat) {
			return fmt.Errorf("heartbeat moved from %s to %s", beat, hb)
		}
		return nil
	})
}

// The agent's /metrics after a sync, an error and a hold: the values, not just the names.
func TestMetricsAfterSyncErrorAndHold(t *testing.T) {
	e := newFleet(t, "ap-southeast-1")
	local := e.fleet.Cluster("ap-southeast-1")
	// The region rejects Tenants named "reject-me" (a ValidatingAdmissionPolicy): a write error.
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "reject-tenants"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"demo.regionsync.dev"}, APIVersions: []string{"*"}, Resources: []string{"tenants"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.spec.displayName != 'reject-me'", Message: "rejected by the region's policy"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "reject-tenants"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: "reject-tenants", ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	e.create(local.Client, policy)
	e.create(local.Client, binding)
	e.create(local.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "probe"}})
	e.eventually("the policy is in force", 30*time.Second, func() error {
		probe := &demov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "probe", GenerateName: "p-"}, Spec: demov1alpha1.TenantSpec{DisplayName: "reject-me"}}
		if err := local.Client.Create(e.ctx, probe); err == nil {
			_ = local.Client.Delete(e.ctx, probe)
			return fmt.Errorf("not yet rejecting")
		}
		return nil
	})

	cfg := agentConfig("ap-southeast-1", "-ap", e.management.Kubeconfig)
	cfg.DeletionBudget = config.DeletionBudgetConfig{MaxFraction: ptr.To(0.5), MinObjects: ptr.To(0)}
	p := startAgent(t, "ap-replica", local, cfg)
	// The Tenants are created once the agent syncs, so that their creation reaches it as live
	// watch events (what the watch-to-write lag measures), not in its informer's initial list.
	e.eventually("the agent syncing", 30*time.Second, func() error {
		if !strings.Contains(p.logs(), "Starting workers") {
			return fmt.Errorf("no workers yet")
		}
		return nil
	})
	for _, n := range []string{"a", "b"} {
		e.tenant("team-"+n, n+"-ap")
	}
	for _, n := range []string{"a", "b"} {
		e.waitLocal(local, "team-"+n, n, 30*time.Second)
	}
	const kind = `resource="Tenant.demo.regionsync.dev"`
	e.eventually("sync metrics", 30*time.Second, func() error {
		for _, c := range []struct {
			parts []string
			want  float64
		}{
			{[]string{kind, `direction="claim"`, `result="written"`}, 2},
			{[]string{kind, `direction="down"`, `result="written"`}, 2},
			{[]string{kind, `direction="generations"`, `result="written"`}, 2},
			{[]string{kind, `state="synced"`}, 2},
		} {
			name := "regionsync_syncs_total"
			if strings.HasPrefix(c.parts[1], "state=") {
				name = "regionsync_objects"
			}
			if v, err := p.metric(name, c.parts...); err != nil || v != c.want {
				return fmt.Errorf("%s%v = %v (%v), want %v", name, c.parts, v, err, c.want)
			}
		}
		if v, err := p.metric("regionsync_watch_to_write_seconds_count", kind, `write="create local"`); err != nil || v != 2 {
			return fmt.Errorf("watch-to-write lag observations for create local = %v (%v), want 2", v, err)
		}
		if v, err := p.metric("regionsync_management_connected"); err != nil || v != 1 {
			return fmt.Errorf("management_connected = %v (%v)", v, err)
		}
		return nil
	})

	// An error: the region refuses the copy.
	e.create(e.management.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-r"}})
	e.create(e.management.Client, &demov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "team-r", Name: "r-ap"}, Spec: demov1alpha1.TenantSpec{DisplayName: "reject-me"}})
	e.eventually("error metrics", 30*time.Second, func() error {
		if v, err := p.metric("regionsync_syncs_total", kind, `direction="down"`, `result="error"`); err != nil || v < 1 {
			return fmt.Errorf("down errors = %v (%v)", v, err)
		}
		if v, err := p.metric("regionsync_objects", kind, `state="failed"`); err != nil || v != 1 {
			return fmt.Errorf("failed objects = %v (%v)", v, err)
		}
		return nil
	})

	// A hold: the agent restarts to a management that lost both synced objects.
	p.signal(t, syscall.SIGTERM)
	for _, n := range []string{"a", "b"} {
		o := &demov1alpha1.Tenant{}
		if err := e.management.Client.Get(e.ctx, client.ObjectKey{Namespace: "team-" + n, Name: n + "-ap"}, o); err != nil {
			t.Fatal(err)
		}
		o.Finalizers = nil
		if err := e.management.Client.Update(e.ctx, o); err != nil {
			t.Fatal(err)
		}
		if err := e.management.Client.Delete(e.ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	p = startAgent(t, "ap-replica-2", local, cfg)
	e.eventually("hold metrics", 60*time.Second, func() error {
		if v, err := p.metric("regionsync_deletions_held", kind); err != nil || v != 2 {
			return fmt.Errorf("deletions_held = %v (%v), want 2", v, err)
		}
		if v, err := p.metric("regionsync_syncs_total", kind, `direction="delete"`, `result="held"`); err != nil || v < 2 {
			return fmt.Errorf("held deletes = %v (%v)", v, err)
		}
		return nil
	})
	for _, n := range []string{"a", "b"} {
		if err := local.Client.Get(e.ctx, client.ObjectKey{Namespace: "team-" + n, Name: n}, &demov1alpha1.Tenant{}); err != nil {
			t.Fatalf("held copy deleted: %v", err)
		}
	}
}

//go:build bench

package bench

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/scheme"
	"github.com/regionsync/regionsync/pkg/config"
	"github.com/regionsync/regionsync/pkg/regionsync"
	"github.com/regionsync/regionsync/test/framework/agentconfig"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// The fleet simulator: many regions' agents in this process, each a regionsync.Syncer built from
// the shipped configuration exactly as bin/agent builds it (config.AgentConfig.Options), with
// its own management client (its own identity and connection), its own management caches
// (watches filtered by its selector), shard claim, Region status and identity checks. Only the
// regional side is shared: one manager, one cache and one regional API server for all of them,
// so the machine's cores go to management, the side being measured. Management sees what it
// would see from as many agent processes (checked against real processes at the same count).

// simFleet is one running simulated fleet.
type simFleet struct {
	regions []string
	syncers []*regionsync.Syncer
	cancel  context.CancelFunc
	done    chan struct{}
}

// fleetRegionName names the i-th simulated region (fixed width: no suffix ends another).
func fleetRegionName(i int) string { return fmt.Sprintf("sim-%04d", i) }

// registerRegions registers regions on management from the shipped registration and returns their
// agent configurations, 8 at a time.
func (b *suite) registerRegions(names []string) (map[string]*config.AgentConfig, error) {
	cfgs := make(map[string]*config.AgentConfig, len(names))
	var mu sync.Mutex
	err := forEach(len(names), 8, func(i int) error {
		cfg, err := b.e.deriveRegion(b.ctx, names[i])
		if err != nil {
			return err
		}
		cfg.Management.CredentialRenewal = config.CredentialRenewalConfig{} // it impersonates: no token to renew
		if j := b.p.FleetStartJitter; j != nil {
			cfg.Management.StartJitter = &metav1.Duration{Duration: *j}
		}
		mu.Lock()
		cfgs[names[i]] = cfg
		mu.Unlock()
		return nil
	})
	return cfgs, err
}

// withStartJitter returns copies of cfgs with management.startJitter set to d.
func withStartJitter(cfgs map[string]*config.AgentConfig, d time.Duration) map[string]*config.AgentConfig {
	out := make(map[string]*config.AgentConfig, len(cfgs))
	for r, cfg := range cfgs {
		c := *cfg
		c.Management.StartJitter = &metav1.Duration{Duration: d}
		out[r] = &c
	}
	return out
}

// createRegionObjects creates perRegion Tenants for each region on management, in a namespace of
// the region's own (tenant-<region>, so that the copies of regions sharing one regional API
// server never meet), labelled for the region.
func (b *suite) createRegionObjects(names []string, perRegion int) error {
	return forEach(len(names), 8, func(i int) error {
		r := names[i]
		ns := "tenant-" + r
		if err := b.mgmtAdmin.Create(b.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		for j := range perRegion {
			t := testenv.Tenant(ns, fmt.Sprintf("t%d-%s", j, r), fmt.Sprintf("tenant %d of %s", j, r))
			t.Labels = map[string]string{"regionsync.dev/region": r}
			if err := b.mgmtAdmin.Create(b.ctx, t); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
		return nil
	})
}

// forEach runs fn(0..n-1) on workers goroutines and returns the first error.
func forEach(n, workers int, fn func(int) error) error {
	var next atomic.Int64
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || first.Load() != nil {
					return
				}
				if err := fn(i); err != nil {
					first.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return nil
}

// regionManagementConfig is what a region's management kubeconfig gives bin/agent: the region's
// identity, no client-side limit (the shipped default), and a connection of its own (a dialer of
// its own keeps client-go from sharing one transport among the simulated regions).
func (b *suite) regionManagementConfig(region string) *rest.Config {
	c := b.e.regionConfig(region)
	c.QPS = fleetspec.DefaultManagementQPS
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	c.Dial = d.DialContext
	return c
}

// fleetLogger writes the simulated fleets' logs (and client-go's, which the leader elections of
// hundreds of regions would otherwise print on the suite's output) to path.
func fleetLogger(path string) (logr.Logger, error) {
	logFile, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return logr.Logger{}, err
	}
	var logMu sync.Mutex
	log := funcr.New(func(prefix, args string) {
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintf(logFile, "%s %s %s\n", time.Now().Format("15:04:05.000"), prefix, args)
	}, funcr.Options{Verbosity: 0})
	ctrl.SetLogger(log.WithName("controller-runtime"))
	klog.SetLogger(log.WithName("client-go"))
	return log, nil
}

// startSimFleet starts every region's syncer in one manager on the regional API server (as the
// agent's ServiceAccount, without local leader election: only the local side is shared).
func (b *suite) startSimFleet(names []string, cfgs map[string]*config.AgentConfig, log logr.Logger) (*simFleet, error) {
	mgr, err := ctrl.NewManager(b.e.agentLocalConfig(), ctrl.Options{
		Scheme:                 scheme.New(),
		Logger:                 log.WithName("host"),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("fleet manager: %w", err)
	}
	f := &simFleet{regions: names, done: make(chan struct{})}
	for _, r := range names {
		opts := cfgs[r].Options(b.regionManagementConfig(r))
		opts.Logger = log.WithName(r)
		opts.Version = "bench"
		s, err := regionsync.New(mgr, opts)
		if err != nil {
			return nil, fmt.Errorf("region %s: %w", r, err)
		}
		f.syncers = append(f.syncers, s)
	}
	ctx, cancel := context.WithCancel(b.ctx)
	f.cancel = cancel
	go func() {
		defer close(f.done)
		if err := mgr.Start(ctx); err != nil {
			log.Error(err, "fleet manager stopped")
		}
	}()
	return f, nil
}

// stop stops every syncer (gracefully: the claims are released) and waits.
func (f *simFleet) stop() {
	f.cancel()
	select {
	case <-f.done:
	case <-time.After(2 * time.Minute):
	}
}

// unsynced counts the regions that do not sync their shard with perRegion objects in sync yet.
func (f *simFleet) unsynced(perRegion int) (n int, example string) {
	for i, s := range f.syncers {
		ok := s.Claim().Syncing
		if ok && perRegion > 0 {
			synced := 0
			for _, st := range s.Stats() {
				synced += st.Counts["synced"]
			}
			ok = synced >= perRegion
		}
		if !ok {
			if n == 0 {
				c := s.Claim()
				example = fmt.Sprintf("%s: claim %s (%s)", f.regions[i], c.Reason, c.Message)
			}
			n++
		}
	}
	return n, example
}

// waitSynced waits until every region syncs with its objects in sync; it returns how long that
// took.
func (f *simFleet) waitSynced(ctx context.Context, perRegion int, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		n, example := f.unsynced(perRegion)
		if n == 0 {
			return time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return 0, fmt.Errorf("%d of %d regions not synced after %s (e.g. %s)", n, len(f.regions), timeout, example)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// settle is how long the idle figures wait after the regions started before they measure: the
// start-up writes are over and every claim has been renewed once (the first renewal after a claim
// meets the Lease changed by the claim's own bookkeeping: one conflict, a read and a second
// write, once per claim).
func (b *suite) settle() time.Duration {
	return max(15*time.Second, agentconfig.Effective(b.e.mainConfig).Claim.RetryPeriod+10*time.Second)
}

// idleWindow is BENCH_IDLE_WINDOW rounded up to whole claim renewal periods: regions started
// together renew in step, and a window of another length would count one renewal more or less of
// all of them.
func (b *suite) idleWindow() time.Duration {
	period := agentconfig.Effective(b.e.mainConfig).Claim.RetryPeriod
	if period <= 0 {
		return b.p.IdleWindow
	}
	n := (b.p.IdleWindow + period - 1) / period
	return max(n, 1) * period
}

// idleCost is management's cost per idle region over a window, against a window without regions.
type idleCost struct {
	regions                   int
	reqs, writes, cpu         float64 // per region: requests/s, writes/s, API-server CPU seconds/s
	rss, heap                 float64 // per region: API-server resident memory and Go heap in use (bytes)
	busy, background          delta
	backgroundRSS, backgrHeap float64
}

func newIdleCost(regions int, background, busy delta) idleCost {
	k := float64(regions)
	per := func(d delta, match func(reqKey) bool) float64 { return d.count(match) / d.seconds }
	all := func(reqKey) bool { return true }
	return idleCost{
		regions: regions, busy: busy, background: background,
		reqs:   (per(busy, all) - per(background, all)) / k,
		writes: (per(busy, isWrite) - per(background, isWrite)) / k,
		cpu:    (busy.steadyCPU()/busy.seconds - background.steadyCPU()/background.seconds) / k,
		rss:    (busy.end.rss - background.end.rss) / k, heap: (busy.end.heap - background.end.heap) / k,
		backgroundRSS: background.end.rss, backgrHeap: background.end.heap,
	}
}

func (c idleCost) text() string {
	return fmt.Sprintf("%.3f; %.3f; %.2f ms/s; %s; %s", c.reqs, c.writes, c.cpu*1000, mb(c.rss), mb(c.heap))
}

func (c idleCost) baselineText() string {
	per := func(d delta, match func(reqKey) bool) float64 { return d.count(match) / d.seconds }
	return fmt.Sprintf("no agent: %.2f req/s, %.2f writes/s, %.0f ms/s CPU, RSS %s, heap %s",
		per(c.background, func(reqKey) bool { return true }), per(c.background, isWrite), c.background.steadyCPU()/c.background.seconds*1000,
		mb(c.backgroundRSS), mb(c.backgrHeap))
}

func kbText(b float64) string { return fmt.Sprintf("%.1f KB", b/1024) }

func mb(b float64) string { return fmt.Sprintf("%.2f MB", b/(1<<20)) }

// idleCostFigure is the row's name for n regions of a kind ("agent processes", "simulated").
func idleCostFigure(n int, kind string) string {
	return fmt.Sprintf("management cost per idle region, %d %s (requests/s; writes/s; API-server CPU; RSS; heap)", n, kind)
}

// fleet: the simulated fleet at each BENCH_FLEET_REGIONS count: its idle cost per region (and,
// where the idle figure ran real agent processes at the same count, the ratio to theirs), then,
// at the largest count, every region restarting at once.
func (b *suite) fleet() {
	for _, a := range b.agents {
		a.Stop(syscall.SIGTERM)
	}
	counts := append([]int(nil), b.p.FleetRegions...)
	sort.Ints(counts)
	largest := counts[len(counts)-1]
	names := make([]string, largest)
	for i := range names {
		names[i] = fleetRegionName(i)
	}
	log, err := fleetLogger(filepath.Join(b.dir, "fleet.log"))
	if err != nil {
		b.errorf("fleet: %v", err)
		return
	}
	// Each count's regions are registered just before its windows, so that management holds as
	// many registrations as the figure runs regions: every request's RBAC authorization walks
	// the registered regions' bindings, and 500 registrations would make 50 regions' requests
	// dearer than 50 agent processes'.
	cfgs := map[string]*config.AgentConfig{}
	registered := 0
	for _, n := range counts {
		if n > registered {
			added, err := b.registerFleet(names[registered:n])
			if err != nil {
				b.errorf("fleet: %v", err)
				return
			}
			maps.Copy(cfgs, added)
			registered = n
		}
		time.Sleep(b.settle()) // the registrations, or the previous fleet's stop, are over
		background, err := b.mgmtWindow(b.idleWindow())
		if err != nil {
			b.errorf("fleet: %v", err)
			return
		}
		f, err := b.startSimFleet(names[:n], cfgs, log.WithName(fmt.Sprintf("fleet-%d", n)))
		if err != nil {
			b.errorf("fleet: %v", err)
			return
		}
		took, err := f.waitSynced(b.ctx, b.p.FleetObjects, 5*time.Minute)
		if err != nil {
			f.stop()
			b.errorf("fleet: %v", err)
			return
		}
		b.r.note("fleet of %d simulated regions: every region synced %s after the start", n, took.Round(100*time.Millisecond))
		// Started together, the regions renew, probe and check management's identity in step,
		// which costs the API server less per request than independently started agents do
		// (their requests arrive spread out). Restarted with their starts spread at random over
		// one claim renewal period, they stand for agents started at independent times.
		spread := agentconfig.Effective(b.e.mainConfig).Claim.RetryPeriod
		f.stop()
		if f, err = b.startSimFleet(names[:n], withStartJitter(cfgs, spread), log.WithName(fmt.Sprintf("fleet-%d-spread", n))); err != nil {
			b.errorf("fleet: %v", err)
			return
		}
		if _, err := f.waitSynced(b.ctx, b.p.FleetObjects, 5*time.Minute); err != nil {
			f.stop()
			b.errorf("fleet: %v", err)
			return
		}
		b.r.note("fleet of %d simulated regions: restarted with their starts spread at random over %s (management.startJitter) before the idle window, as agents started at independent times", n, spread)
		time.Sleep(b.settle()) // start-up writes (Region status, Lease registration, the first renewal) are over
		busy, err := b.mgmtWindowProfiled(b.idleWindow(), fmt.Sprintf("cpu-apiserver-management-idle-simulated-%d.pb.gz", n), fmt.Sprintf("idle, %d simulated regions", n))
		if err != nil {
			f.stop()
			b.errorf("fleet: %v", err)
			return
		}
		b.saveLease(names[0], fmt.Sprintf("lease-idle-simulated-%d.yaml", n))
		cost := newIdleCost(n, background, busy)
		b.r.add(idleCostFigure(n, "simulated regions"), cost.text(), cost.baselineText(), "-", "writes "+target("idle-writes-per-region").RowText(), verdict(target("idle-writes-per-region").Met(cost.writes)))
		b.r.note("fleet of %d simulated regions, idle: management writes %s; other requests %s over %.0f s",
			n, busy.writesSummary(), busy.readsSummary(), busy.seconds)
		if procs, ok := b.realIdle[n]; ok {
			ratio := func(sim, proc float64) string { return fmt.Sprintf("%.2f", sim/proc) }
			simT := target("simulator-vs-processes")
			within := func(sim, proc float64) bool { return proc > 0 && simT.Met(sim/proc) }
			b.r.add(fmt.Sprintf("simulator against agent processes, %d idle regions (requests/s; writes/s; API-server CPU)", n),
				fmt.Sprintf("%.3f; %.3f; %.2f ms/s", cost.reqs, cost.writes, cost.cpu*1000),
				fmt.Sprintf("processes: %.3f; %.3f; %.2f ms/s", procs.reqs, procs.writes, procs.cpu*1000),
				fmt.Sprintf("%s; %s; %s", ratio(cost.reqs, procs.reqs), ratio(cost.writes, procs.writes), ratio(cost.cpu, procs.cpu)),
				"each "+simT.RowText(), verdict(within(cost.reqs, procs.reqs) && within(cost.writes, procs.writes) && within(cost.cpu, procs.cpu)))
		}
		if n == largest {
			// Twice: with every process at the same priority (a note), then with management's API
			// server and etcd ahead of the simulated fleet (the figures).
			f = b.restartStorm(f, names[:n], cfgs, log.WithName(fmt.Sprintf("fleet-%d-restarted", n)), false)
			if f != nil {
				f = b.restartStorm(f, names[:n], cfgs, log.WithName(fmt.Sprintf("fleet-%d-restarted-again", n)), true)
			}
		}
		if f != nil {
			f.stop()
		}
	}
}

// registerFleet registers names on management from the shipped registration and creates their
// Tenants, noting what that cost management's etcd database and the API server's memory. It
// returns the regions' agent configurations.
func (b *suite) registerFleet(names []string) (map[string]*config.AgentConfig, error) {
	start := time.Now()
	s0, err := b.mgmtM.read(b.ctx)
	if err != nil {
		return nil, err
	}
	cfgs, err := b.registerRegions(names)
	if err != nil {
		return nil, err
	}
	s1, err := b.mgmtM.read(b.ctx)
	if err != nil {
		return nil, err
	}
	if err := b.createRegionObjects(names, b.p.FleetObjects); err != nil {
		return nil, err
	}
	if s2, err := b.mgmtM.read(b.ctx); err == nil {
		n, objects := float64(len(names)), float64(len(names)*b.p.FleetObjects)
		b.r.note("fleet: management's etcd database (apiserver_storage_size_bytes) %s before, %s with %d more regions registered (%s per region: Region, ServiceAccount, RBAC), %s with their %.0f Tenants and namespaces (%s per Tenant, its namespace's share included); API-server RSS %s, %s, %s",
			mb(s0.db), mb(s1.db), len(names), kbText((s1.db-s0.db)/n), mb(s2.db), objects, kbText((s2.db-s1.db)/objects),
			mb(s0.rss), mb(s1.rss), mb(s2.rss))
	}
	b.r.note("fleet: %d regions registered from the shipped registration and %d Tenants each created on management in %s",
		len(names), b.p.FleetObjects, time.Since(start).Round(time.Second))
	return cfgs, nil
}

// restartStorm restarts every region of f at once and measures what management's other clients
// see meanwhile (an outside client's request latency), the writes to synced objects on either
// cluster while the regions re-verify their shards, and the time until every region is synced
// again. It returns the restarted fleet (nil when it could not start).
//
// With prioritized, management's API server and etcd run at nice managementNice during the storm
// and its results are the table's figures: the simulated fleet shares this machine's cores with
// management, which a real fleet, whose agents run in their regions, does not. Without, every
// process runs at the same priority and the results are a note, for comparison.
func (b *suite) restartStorm(f *simFleet, names []string, cfgs map[string]*config.AgentConfig, log logr.Logger, prioritized bool) *simFleet {
	priority := "at the fleet's priority"
	if prioritized {
		var undo func()
		priority, undo = prioritizeManagement(b.e.mgmt.Config.Host, b.r.note)
		defer undo()
	}
	kubeconfig, err := b.outsideKubeconfig()
	if err != nil {
		b.errorf("restart storm: %v", err)
		return f
	}
	probeCtx, stopProbe := context.WithCancel(b.ctx)
	defer stopProbe()
	probe, err := startLatencyProbe(probeCtx, kubeconfig, 20, filepath.Join(b.dir, "outside-probe.log"))
	if err != nil {
		b.errorf("restart storm: %v", err)
		return f
	}
	time.Sleep(15 * time.Second) // the outside client's latency with the fleet idle
	quiet := probe.since(time.Time{})
	m0, err := b.mgmtM.read(b.ctx)
	if err != nil {
		b.errorf("restart storm: %v", err)
		return f
	}
	l0, err := b.localM.read(b.ctx)
	if err != nil {
		b.errorf("restart storm: %v", err)
		return f
	}
	stormStart := time.Now()
	// Where the storm's CPU goes: management's API server and the simulated fleet (this
	// process), over the storm's first 30 s, for go tool pprof.
	var profiles sync.WaitGroup
	defer profiles.Wait()
	if prioritized { // the storm of the figures
		profiles.Go(func() {
			path := filepath.Join(b.dir, fmt.Sprintf("cpu-apiserver-management-storm-%d.pb.gz", len(names)))
			if err := saveAPIServerProfile(b.ctx, b.e.mgmt.Config, 30, path); err != nil {
				b.r.note("restart storm: no CPU profile of management's API server: %v", err)
			}
		})
		profiles.Go(func() {
			path := filepath.Join(b.dir, fmt.Sprintf("cpu-fleet-storm-%d.pb.gz", len(names)))
			if err := saveOwnProfile(b.ctx, 30*time.Second, path); err != nil {
				b.r.note("restart storm: no CPU profile of the simulated fleet: %v", err)
			}
		})
	}
	f.stop()
	stopped := time.Since(stormStart)
	f, err = b.startSimFleet(names, cfgs, log)
	if err != nil {
		b.errorf("restart storm: %v", err)
		return nil
	}
	_, err = f.waitSynced(b.ctx, b.p.FleetObjects, 5*time.Minute)
	allSynced := time.Since(stormStart)
	storm := probe.since(stormStart)
	if err != nil {
		b.errorf("restart storm: %v", err)
		return f
	}
	time.Sleep(5 * time.Second) // writes in flight land
	m1, err := b.mgmtM.read(b.ctx)
	if err != nil {
		b.errorf("restart storm: %v", err)
		return f
	}
	l1, err := b.localM.read(b.ctx)
	if err != nil {
		b.errorf("restart storm: %v", err)
		return f
	}
	dm, dl := diff(m0, m1), diff(l0, l1)
	tenantM := dm.count(func(k reqKey) bool { return isWrite(k) && k.Resource == "tenants" })
	tenantL := dl.count(func(k reqKey) bool { return isWrite(k) && k.Resource == "tenants" })
	n := len(names)
	p99 := storm.quantile(0.99)
	latency := fmt.Sprintf("%s / %s (max %s, %d errors)", ms(storm.quantile(0.5)), ms(p99), ms(storm.quantile(1)), storm.errors)
	idle := fmt.Sprintf("fleet idle: %s / %s", ms(quiet.quantile(0.5)), ms(quiet.quantile(0.99)))
	if !prioritized {
		b.r.note("restart storm of %d simulated regions with every process at the same priority (management's API server and etcd sharing the two cores with the simulated fleet): the outside client's p50 / p99 %s over %d requests (%s); writes to synced objects %.0f / %.0f; every region synced again after %.1f s; its slowest requests: %s",
			n, latency, storm.n(), idle, tenantM, tenantL, allSynced.Seconds(), probe.slowest(stormStart, 5))
		return f
	}
	b.r.add(fmt.Sprintf("restart storm, %d simulated regions at once, management's API server and etcd %s: p50 / p99 of an outside client on management (%d requests)", n, priority, storm.n()),
		latency, idle, "-", "p99 "+target("storm-outside-p99").RowText(), verdict(storm.n() > 0 && target("storm-outside-p99").MetDuration(p99) && storm.errors == 0))
	b.r.add(fmt.Sprintf("restart storm, %d simulated regions: writes to synced objects during re-verification (management / region)", n),
		fmt.Sprintf("%.0f / %.0f", tenantM, tenantL), "-", "-", target("storm-writes-to-synced").RowText()+" (each side)", verdict(target("storm-writes-to-synced").Met(tenantM) && target("storm-writes-to-synced").Met(tenantL)))
	b.r.add(fmt.Sprintf("restart storm, %d simulated regions (%d objects): time until every region is synced again", n, n*b.p.FleetObjects),
		fmt.Sprintf("%.1f s (the old fleet stopped in %.1f s)", allSynced.Seconds(), stopped.Seconds()), "-", "-", target("storm-resync-time").RowText(), "")
	b.r.note("restart storm: management answered %s; all management writes %s; the region's writes %s; management's other requests %s",
		requestsSince(m0, m1), dm.writesSummary(), dl.writesSummary(), dm.readsSummary())
	b.r.note("restart storm: the outside client's slowest requests (started seconds after the stop): %s", probe.slowest(stormStart, 5))
	probe.mu.Lock()
	firstErr := probe.firstErr
	probe.mu.Unlock()
	if firstErr != "" {
		b.r.note("restart storm: the outside client's first error: %s", firstErr)
	}
	b.r.note("restart storm: the outside client is a user outside the regions' FlowSchemas (API Priority and Fairness level global-default) listing ConfigMaps of one namespace 20 times a second, one request at a time, from a process of its own")
	b.r.note("restart storm: management's API server and etcd ran %s, the simulated fleet and the regional API server at nice 0: on this machine the simulated regions' agents share management's two cores, which in a real fleet they do not", priority)
	return f
}

// outsideKubeconfig writes the kubeconfig of a client of management that is none of the
// regions: the user bench-outside (group system:authenticated), allowed to list the ConfigMaps
// of the namespace default.
func (b *suite) outsideKubeconfig() (string, error) {
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "bench-outside"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "bench-outside"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "bench-outside"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bench-outside"}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := b.mgmtAdmin.Create(b.ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", err
		}
	}
	path := filepath.Join(b.dir, "outside-kubeconfig")
	return path, testenv.WriteKubeconfig(path, "management", b.e.mgmt.ImpersonatingConfig("bench-outside"))
}

// latencyProbe is the outside client: a process of its own (this test binary run again in
// probe mode, see TestMain) that lists the ConfigMaps of the namespace default one request at
// a time at a fixed rate, and reports each request's start and latency on its standard output.
// A process of its own, because in the bench's process its requests would wait behind the
// simulated fleet's goroutines and garbage collections, a cost no real client of management
// shares.
type latencyProbe struct {
	mu   sync.Mutex
	at   []time.Time
	took []time.Duration
	errs []time.Time
	// firstErr is the first failure's message.
	firstErr string
}

// startLatencyProbe starts the probe process against the cluster of kubeconfig at rate requests
// per second; it runs until ctx ends. Its standard error goes to logPath.
func startLatencyProbe(ctx context.Context, kubeconfig string, rate int, logPath string) (*latencyProbe, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), probeKubeconfigEnv+"="+kubeconfig, fmt.Sprintf("%s=%d", probeRateEnv, rate))
	cmd.Stderr = logFile
	out, err := cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	p := &latencyProbe{}
	go func() {
		defer logFile.Close()
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			p.record(lines.Text())
		}
		// A probe that ends before the bench stops it is a failure of the figure, not silence.
		if err := cmd.Wait(); err != nil && ctx.Err() == nil {
			p.mu.Lock()
			p.errs = append(p.errs, time.Now())
			if p.firstErr == "" {
				p.firstErr = fmt.Sprintf("the probe process ended: %v (its log: %s)", err, logPath)
			}
			p.mu.Unlock()
		}
	}()
	return p, nil
}

// record takes one line of the probe process: "<start, Unix ns> <latency, ns> <error or ->".
func (p *latencyProbe) record(line string) {
	fields := strings.SplitN(line, " ", 3)
	if len(fields) != 3 {
		return
	}
	at, err1 := strconv.ParseInt(fields[0], 10, 64)
	took, err2 := strconv.ParseInt(fields[1], 10, 64)
	if err1 != nil || err2 != nil {
		return
	}
	start := time.Unix(0, at)
	p.mu.Lock()
	defer p.mu.Unlock()
	if fields[2] != "-" {
		p.errs = append(p.errs, start)
		if p.firstErr == "" {
			p.firstErr = fields[2]
		}
		return
	}
	p.at, p.took = append(p.at, start), append(p.took, time.Duration(took))
}

const (
	probeKubeconfigEnv = "REGIONSYNC_BENCH_PROBE_KUBECONFIG"
	probeRateEnv       = "REGIONSYNC_BENCH_PROBE_RATE"
)

// TestMain runs the suite, or, when the bench started this binary as its outside client
// (probeKubeconfigEnv set), the probe until its parent ends it.
func TestMain(m *testing.M) {
	if kubeconfig := os.Getenv(probeKubeconfigEnv); kubeconfig != "" {
		os.Exit(runProbe(kubeconfig, os.Getenv(probeRateEnv)))
	}
	os.Exit(m.Run())
}

// runProbe is the probe process: one List of the ConfigMaps of default at a time, rate per
// second, each reported on standard output as latencyProbe.record reads it.
func runProbe(kubeconfig, rateText string) int {
	rate, err := strconv.Atoi(rateText)
	if err != nil || rate <= 0 {
		fmt.Fprintf(os.Stderr, "probe: %s=%q: want a positive number of requests per second\n", probeRateEnv, rateText)
		return 2
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "probe: %v\n", err)
		return 2
	}
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		fmt.Fprintf(os.Stderr, "probe: %v\n", err)
		return 2
	}
	out := bufio.NewWriter(os.Stdout)
	t := time.NewTicker(time.Second / time.Duration(rate))
	defer t.Stop()
	for range t.C {
		start := time.Now()
		err := c.List(context.Background(), &corev1.ConfigMapList{}, client.InNamespace(metav1.NamespaceDefault))
		took := time.Since(start)
		msg := "-"
		if err != nil {
			msg = strings.ReplaceAll(err.Error(), "\n", " ")
		}
		fmt.Fprintf(out, "%d %d %s\n", start.UnixNano(), took.Nanoseconds(), msg)
		if out.Flush() != nil {
			return 0 // the bench is gone
		}
	}
	return 0
}

// latencies are a probe's samples over a period.
type latencies struct {
	sorted []time.Duration
	errors int
}

// since returns the samples of requests started at or after from.
func (p *latencyProbe) since(from time.Time) latencies {
	p.mu.Lock()
	defer p.mu.Unlock()
	var l latencies
	for i, at := range p.at {
		if !at.Before(from) {
			l.sorted = append(l.sorted, p.took[i])
		}
	}
	for _, at := range p.errs {
		if !at.Before(from) {
			l.errors++
		}
	}
	sort.Slice(l.sorted, func(i, j int) bool { return l.sorted[i] < l.sorted[j] })
	return l
}

// slowest describes the n slowest requests started at or after from: their latency and when
// they started, in seconds after from.
func (p *latencyProbe) slowest(from time.Time, n int) string {
	p.mu.Lock()
	var idx []int
	for i, at := range p.at {
		if !at.Before(from) {
			idx = append(idx, i)
		}
	}
	sort.Slice(idx, func(a, b int) bool { return p.took[idx[a]] > p.took[idx[b]] })
	parts := make([]string, 0, n)
	for _, i := range idx[:min(n, len(idx))] {
		parts = append(parts, fmt.Sprintf("%s at +%.1f s", ms(p.took[i]), p.at[i].Sub(from).Seconds()))
	}
	p.mu.Unlock()
	return strings.Join(parts, ", ")
}

func (l latencies) n() int { return len(l.sorted) }

// quantile returns the q-quantile (nearest rank; 1 is the maximum), 0 without samples.
func (l latencies) quantile(q float64) time.Duration {
	if len(l.sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(l.sorted))+0.999999) - 1
	i = max(0, min(i, len(l.sorted)-1))
	return l.sorted[i]
}

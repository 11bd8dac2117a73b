//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/regionsync/regionsync/pkg/config"
	"github.com/regionsync/regionsync/test/framework/agentconfig"
	"github.com/regionsync/regionsync/test/framework/fleet"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// params are the suite's knobs, from BENCH_* environment variables (defaults: a quick run).
type params struct {
	Sizes        []int           // BENCH_SIZES: initial-sync sizes; the last is the synced set of every later figure (default 1000)
	Figures      map[string]bool // BENCH_FIGURES: comma list of live,heap,rest,writes,latency,other,failover,fanout,rollout,idle,fleet,hub,explain or "all" (initial sync always runs)
	Rates        []int           // BENCH_RATES: changes/s of the latency figures (default 20,100)
	Churn        time.Duration   // BENCH_CHURN: how long each latency churn lasts (default 30s)
	Grace        time.Duration   // BENCH_GRACE: how long after a churn a change may still arrive (default 10s)
	Rest         time.Duration   // BENCH_REST: the at-rest window (default 30s)
	WritesWindow time.Duration   // BENCH_WRITES_WINDOW: each writes-per-change window at 20/s (default 10s)
	Other        int             // BENCH_OTHER: other regions' objects for the selector figure (default 3× the last size)
	Idle         int             // BENCH_IDLE_REGIONS: idle regions (default 50)
	IdleWindow   time.Duration   // BENCH_IDLE_WINDOW: the idle-cost window (default 120s)
	PerNamespace int             // BENCH_PER_NAMESPACE: objects per namespace (default 100)
	FleetRegions []int           // BENCH_FLEET_REGIONS: simulated fleet sizes (default 50,500); the largest restarts at once
	FleetObjects int             // BENCH_FLEET_OBJECTS: Tenants per idle or simulated region (default 2)
	// BENCH_FLEET_START_JITTER: the simulated regions' management.startJitter (default: the
	// shipped configuration's)
	FleetStartJitter *time.Duration
	// BENCH_ROLLOUT_REGIONS: simulated regions of the rollout figure (default 20: a first wave of 1 is 5 %)
	RolloutRegions   int
	RolloutSoak      time.Duration // BENCH_ROLLOUT_SOAK: the rollout figure's soak per wave (default 10s)
	HubRegions       int           // BENCH_HUB_REGIONS: simulated regions of the hub figures (default 50)
	HubChanges       int           // BENCH_HUB_CHANGES: template changes timed by the hub figure (default 10)
	HubDistributions int           // BENCH_HUB_DISTRIBUTIONS: Distributions over the hub regions of the scale figure (default 200)
	ExplainRegions   int           // BENCH_EXPLAIN_REGIONS: Regions created for the explain figure (default 1000)
	ExplainObjects   int           // BENCH_EXPLAIN_OBJECTS: Tenants on management in the explain figure (default 10000)
	Out              string        // BENCH_OUT: also append the table to this file
	// BENCH_PLACEMENT: the CPUs of the initial sync's timed runs, split (the default with two
	// CPUs or more: the control planes on one half, the clients on the other) or shared
	Placement string
}

func loadParams(t *testing.T) params {
	p := params{Sizes: []int{1000}, Rates: []int{20, 100}, Churn: 30 * time.Second, Grace: 10 * time.Second, Rest: 30 * time.Second,
		WritesWindow: 10 * time.Second, Idle: 50, IdleWindow: 120 * time.Second, PerNamespace: 100, Out: os.Getenv("BENCH_OUT"),
		Placement: os.Getenv("BENCH_PLACEMENT"), FleetRegions: []int{50, 500}, FleetObjects: 2, RolloutRegions: 20, RolloutSoak: 10 * time.Second,
		HubRegions: 50, HubChanges: 10, HubDistributions: 200, ExplainRegions: 1000, ExplainObjects: 10000}
	ints := func(name string, dst *[]int) {
		if v := os.Getenv(name); v != "" {
			*dst = nil
			for _, f := range strings.Split(v, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil || n <= 0 {
					t.Fatalf("%s=%q: want positive integers separated by commas", name, v)
				}
				*dst = append(*dst, n)
			}
		}
	}
	dur := func(name string, dst *time.Duration) {
		if v := os.Getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatalf("%s=%q: %v", name, v, err)
			}
			*dst = d
		}
	}
	one := func(name string, dst *int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				t.Fatalf("%s=%q: want a non-negative integer", name, v)
			}
			*dst = n
		}
	}
	ints("BENCH_SIZES", &p.Sizes)
	ints("BENCH_RATES", &p.Rates)
	ints("BENCH_FLEET_REGIONS", &p.FleetRegions)
	one("BENCH_FLEET_OBJECTS", &p.FleetObjects)
	if os.Getenv("BENCH_FLEET_START_JITTER") != "" {
		p.FleetStartJitter = new(time.Duration)
		dur("BENCH_FLEET_START_JITTER", p.FleetStartJitter)
	}
	dur("BENCH_CHURN", &p.Churn)
	dur("BENCH_GRACE", &p.Grace)
	dur("BENCH_REST", &p.Rest)
	dur("BENCH_WRITES_WINDOW", &p.WritesWindow)
	dur("BENCH_IDLE_WINDOW", &p.IdleWindow)
	dur("BENCH_ROLLOUT_SOAK", &p.RolloutSoak)
	one("BENCH_ROLLOUT_REGIONS", &p.RolloutRegions)
	one("BENCH_EXPLAIN_REGIONS", &p.ExplainRegions)
	one("BENCH_EXPLAIN_OBJECTS", &p.ExplainObjects)
	if p.ExplainRegions == 0 {
		t.Fatal("BENCH_EXPLAIN_REGIONS must be positive")
	}
	if p.RolloutRegions == 0 {
		t.Fatal("BENCH_ROLLOUT_REGIONS must be positive")
	}
	one("BENCH_HUB_REGIONS", &p.HubRegions)
	one("BENCH_HUB_CHANGES", &p.HubChanges)
	one("BENCH_HUB_DISTRIBUTIONS", &p.HubDistributions)
	if p.HubRegions == 0 || p.HubChanges == 0 || p.HubDistributions == 0 {
		t.Fatal("BENCH_HUB_REGIONS, BENCH_HUB_CHANGES and BENCH_HUB_DISTRIBUTIONS must be positive")
	}
	p.Other = 3 * p.Sizes[len(p.Sizes)-1]
	one("BENCH_OTHER", &p.Other)
	one("BENCH_IDLE_REGIONS", &p.Idle)
	one("BENCH_PER_NAMESPACE", &p.PerNamespace)
	if p.PerNamespace == 0 {
		t.Fatal("BENCH_PER_NAMESPACE must be positive")
	}
	all := []string{"live", "heap", "rest", "writes", "latency", "other", "failover", "fanout", "rollout", "idle", "fleet", "hub", "explain"}
	p.Figures = map[string]bool{}
	figs := os.Getenv("BENCH_FIGURES")
	if figs == "" || figs == "all" {
		figs = strings.Join(all, ",")
	}
	for _, f := range strings.Split(figs, ",") {
		f = strings.TrimSpace(f)
		if f == "initial" {
			continue
		}
		known := false
		for _, a := range all {
			known = known || a == f
		}
		if !known {
			t.Fatalf("BENCH_FIGURES: unknown figure %q (known: initial, %s, all)", f, strings.Join(all, ", "))
		}
		p.Figures[f] = true
	}
	return p
}

// row is one line of the table.
type row struct{ figure, regionsync, baseline, ratio, target, verdict string }

type report struct {
	mu    sync.Mutex // figures run goroutines (profiles) that add notes
	rows  []row
	notes []string
}

func (r *report) add(figure, rs, base, ratio, target, verdict string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rows = append(r.rows, row{figure, rs, base, ratio, target, verdict})
	fmt.Printf("BENCH %s: %s (baseline %s, ratio %s, target %s) %s\n", figure, rs, base, ratio, target, verdict)
}

func (r *report) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
	fmt.Printf("BENCH note: %s\n", r.notes[len(r.notes)-1])
}

// print renders the table as Markdown (docs/performance.md holds it as printed), then the notes.
func (r *report) print(header string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	b.WriteString(header + "\n")
	b.WriteString("| figure | regionsync | baseline (same run) | ratio | target |\n|---|---|---|---|---|\n")
	for _, x := range r.rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s %s |\n", x.figure, x.regionsync, x.baseline, x.ratio, x.target, x.verdict)
	}
	b.WriteString("\n")
	for _, n := range r.notes {
		b.WriteString("- " + n + "\n")
	}
	return b.String()
}

func verdict(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}

// ms formats a latency: milliseconds below a second, seconds above.
func ms(d time.Duration) string {
	if d >= time.Second {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
}

func kb(b float64) string { return fmt.Sprintf("%.2f KB", b/1024) }

// TestBench is the whole suite (make bench). It fails on setup errors, never skips.
func TestBench(t *testing.T) {
	p := loadParams(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The checkout the suite and the agent are built from, read before the build.
	commit, _ := exec.Command("git", "-C", must(testenv.RepoRoot()), "describe", "--always", "--dirty").Output()
	dir, err := os.MkdirTemp("", "regionsync-bench-")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("BENCH logs, kubeconfigs and heap profiles in %s\n", dir)
	logf := func(format string, args ...any) { fmt.Printf(time.Now().Format("15:04:05 ")+format+"\n", args...) }
	e, err := setupEnv(ctx, dir, logf)
	if err != nil {
		t.Fatal(err)
	}
	defer e.stopAll()
	mgmtAdmin, err := unlimited(e.mgmt)
	if err != nil {
		t.Fatal(err)
	}
	localAdmin, err := unlimited(e.reg)
	if err != nil {
		t.Fatal(err)
	}
	plainMgmt, err := client.New(e.regionConfig(e.baseRegion), client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	plainLocal, err := client.New(e.agentLocalConfig(), client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	mgmtM, err := newAPIMetrics(e.mgmt.Config)
	if err != nil {
		t.Fatal(err)
	}
	localM, err := newAPIMetrics(e.reg.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr := newTracker()
	readyM, readyL := make(chan struct{}), make(chan struct{})
	go watchTenants(ctx, mgmtAdmin, sideMgmt, tr, readyM)
	go watchTenants(ctx, localAdmin, sideLocal, tr, readyL)
	<-readyM
	<-readyL

	b := &suite{t: t, p: p, e: e, tr: tr, mgmtAdmin: mgmtAdmin, localAdmin: localAdmin, plainMgmt: plainMgmt, plainLocal: plainLocal,
		mgmtM: mgmtM, localM: localM, r: &report{}, ctx: ctx, dir: dir, realIdle: map[int]idleCost{}}
	if b.place, err = newPlacement(p.Placement); err != nil {
		t.Fatal(err)
	}
	b.r.note("placement of the initial sync's timed runs (the plain client's and the agent's): %s", b.place)
	b.concurrency = agentconfig.Effective(e.mainConfig).Resources[0].Concurrency
	b.r.note("agent: bin/agent as %d process(es) per region with deploy/regions/%s's configuration (%d workers, management qps/burst %s); plain client: the same identities, no client-side limit, %d workers",
		e.replicas, e.mainRegion, b.concurrency, qpsText(e.mainConfig), b.concurrency)

	for i, n := range p.Sizes {
		b.initialSync(n, i == len(p.Sizes)-1)
	}
	steps := []struct {
		name string
		fn   func()
	}{
		{"heap", b.heap}, {"rest", b.atRest}, {"writes", b.writesPerChange}, {"latency", b.latency},
		{"other", b.otherRegions}, {"failover", b.failover}, {"fanout", b.fanOut}, {"rollout", b.rollout}, {"idle", b.idle},
		{"fleet", b.fleet}, {"hub", b.hubFigures}, {"explain", b.explain}, // explain last: its 1,000 Regions would weigh on the others
	}
	for _, s := range steps {
		if p.Figures[s.name] {
			logf("figure %s", s.name)
			s.fn()
		}
	}
	header := fmt.Sprintf("regionsync bench, %s, commit %s, %d CPUs (GOMAXPROCS %d); sizes %v, objects/namespace %d\n",
		time.Now().UTC().Format(time.RFC3339), strings.TrimSpace(string(commit)), runtime.NumCPU(), runtime.GOMAXPROCS(0), p.Sizes, p.PerNamespace)
	table := b.r.print(header)
	fmt.Println()
	fmt.Print(table)
	if p.Out != "" {
		f, err := os.OpenFile(p.Out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fmt.Fprintln(f, table)
	}
	if b.failed {
		t.Fail()
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

func qpsText(c *config.AgentConfig) string {
	if c.Management.QPS == 0 {
		return "default: no client-side limit (API Priority and Fairness on management)"
	}
	return fmt.Sprintf("%g/%d", c.Management.QPS, c.Management.Burst)
}

// suite holds the state shared by the figures.
type suite struct {
	t                     *testing.T
	p                     params
	e                     *env
	tr                    *tracker
	mgmtAdmin, localAdmin client.WithWatch
	plainMgmt, plainLocal client.Client
	mgmtM, localM         *apiMetrics
	r                     *report
	ctx                   context.Context
	dir                   string
	concurrency           int
	failed                bool
	pairs, basePairs      []pair
	agents                []*fleet.Replica // the main region's replicas
	region                string
	heapSynced            uint64
	cfgPath               string
	// realIdle is the idle cost per region measured with agent processes, by region count.
	realIdle map[int]idleCost
	// place is the placement of the initial sync's timed runs on CPUs.
	place placement
	// restarts counts the times the main region's agents were started again after a figure
	// stopped them (their names and claim identities carry it).
	restarts int
}

// applyPlacement puts the processes on their CPUs for a timed run of the initial sync.
func (b *suite) applyPlacement() {
	if err := b.place.apply(); err != nil {
		b.t.Fatal(err)
	}
}

// releasePlacement gives every process every CPU back after a timed run of the initial sync.
func (b *suite) releasePlacement() {
	if err := b.place.release(); err != nil {
		b.t.Fatal(err)
	}
}

// errorf records a failure of a figure (the table is still printed).
func (b *suite) errorf(format string, args ...any) {
	b.failed = true
	b.r.note("ERROR: "+format, args...)
}

// initialSync measures the plain client's minimal writes over n fresh objects, then the agent's
// initial sync of n other fresh objects (started as processes, timed from their start until the
// last object's generation annotations are on management). The last size's region is the shipped
// us-east-1 and stays running; smaller sizes run as regions derived from it and are stopped.
func (b *suite) initialSync(n int, last bool) {
	ctx, e := b.ctx, b.e
	// Both API servers profiled over the first 20 s of the plain client's sync and of the agent's
	// (last size, at least 1,000 objects): where their CPU per write goes, compared.
	var apiProfiles sync.WaitGroup
	defer apiProfiles.Wait()
	profileAPIServers := func(who string) {
		if !last || n < 1000 {
			return
		}
		for _, c := range []struct {
			name    string
			cluster *testenv.Cluster
		}{{"management", e.mgmt}, {"region", e.reg}} {
			apiProfiles.Go(func() {
				path := filepath.Join(b.dir, fmt.Sprintf("cpu-apiserver-%s-%s-%d.pb.gz", c.name, who, n))
				if err := saveAPIServerProfile(ctx, c.cluster.Config, 20, path); err != nil {
					b.r.note("initial sync of %d: no CPU profile of the %s API server (%s): %v", n, c.name, who, err)
				}
			})
		}
	}
	before := b.runPlain(n, fmt.Sprintf("tenant-base%d", n), "", func() { profileAPIServers("plain") })
	basePairs, plain := before.pairs, before.took

	region, cfg := e.mainRegion, e.mainConfig
	var err error
	if !last {
		region = fmt.Sprintf("size-%d", n)
		if cfg, err = e.deriveRegion(ctx, region); err != nil {
			b.t.Fatal(err)
		}
	}
	set := fmt.Sprintf("tenant-sync%d", n)
	pairs, err := seed(ctx, b.mgmtAdmin, region, set, n, b.p.PerNamespace)
	if err != nil {
		b.t.Fatalf("seeding: %v", err)
	}
	cfgPath, err := e.writeAgentConfig(cfg)
	if err != nil {
		b.t.Fatal(err)
	}
	var probes [3]*probe
	var marks []milestone
	if last && b.p.Figures["live"] {
		for i := range probes {
			marks = append(marks, milestone{at: n * (i + 1) / 4, fn: func() {
				k, ok := b.tr.randomSynced()
				if !ok {
					return
				}
				value := fmt.Sprintf("live-%d", i)
				pr := b.tr.expect(sideLocal, k, value)
				patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"displayName":"`+value+`"}}`))
				if err := b.mgmtAdmin.Patch(ctx, tenantRef(k.Namespace, k.Name+"-"+region), patch); err != nil {
					b.errorf("live change: %v", err)
					return
				}
				probes[i] = pr
			}})
		}
	}
	// Both replicas' CPU profiles over 15 s of the last size's initial sync (from a fifth of
	// it), for go tool pprof: where the agent's time per object goes, leader and warm standby.
	var started atomic.Pointer[[]*fleet.Replica]
	var profiling sync.WaitGroup
	if last && n >= 1000 {
		marks = append(marks, milestone{at: n / 5, fn: func() {
			agents := started.Load()
			if agents == nil {
				b.r.note("initial sync of %d: no CPU profiles (synced before the agents were recorded)", n)
				return
			}
			for _, a := range *agents {
				profiling.Go(func() {
					path := filepath.Join(b.dir, fmt.Sprintf("cpu-initial-%d-%s.pb.gz", n, a.Name))
					if err := saveProfile(ctx, a.Pprof, "profile?seconds=15", path); err != nil {
						b.r.note("initial sync of %d: no CPU profile of %s: %v", n, a.Name, err)
					}
				})
			}
		}})
	}
	var first time.Time
	firstDone := make(chan struct{})
	marks = append(marks, milestone{at: 1, fn: func() { first = time.Now(); close(firstDone) }})
	am0, al0, err := b.scrapeBoth()
	if err != nil {
		b.t.Fatal(err)
	}
	apiProfiles.Wait() // the plain client's profile ends before the agents start
	b.applyPlacement()
	cpu0 := b.place.read() // after the wait: an idle wait would dilute the busy shares
	profileAPIServers("agent")
	done := b.tr.startCount(region, n, marks...)
	start := time.Now()
	agents := make([]*fleet.Replica, 0, e.replicas)
	for i := range e.replicas {
		a, err := e.startAgent(fmt.Sprintf("%s-replica-%d", region, i), cfgPath)
		if err != nil {
			b.t.Fatal(err)
		}
		agents = append(agents, a)
	}
	started.Store(&agents)
	timeout := 5*time.Minute + time.Duration(n)*60*time.Millisecond
	var elapsed time.Duration
	select {
	case <-done:
		_, at := b.tr.progress()
		elapsed = at.Sub(start)
	case <-time.After(timeout):
		count, _ := b.tr.progress()
		elapsed = time.Since(start)
		b.errorf("initial sync of %d: only %d synced after %s", n, count, timeout)
		n = count
	}
	agentBusy := b.place.busySince(cpu0)
	b.releasePlacement()
	time.Sleep(2 * time.Second) // the last writes land
	profiling.Wait()
	am1, al1, err := b.scrapeBoth()
	if err != nil {
		b.t.Fatal(err)
	}
	select {
	case <-firstDone:
		b.r.note("initial sync of %d: the first object was synced %.1f s after the agents started (start-up, election, cache sync)", n, first.Sub(start).Seconds())
	default:
	}
	// The plain client once more, over n other fresh objects, now that the agent's are synced:
	// the baseline is the mean of its two times, before and after the agent's. The machine's
	// speed drifts over minutes, and the API servers' stores grow with every set (the agent's
	// sync ran with one set more than the first plain one, and one fewer than the second): both
	// biases fall on both sides alike.
	after := b.runPlain(n, fmt.Sprintf("tenant-rebase%d", n), ", after the agent", nil)
	baseline := (plain + after.took) / 2
	plainRate := float64(n) / baseline.Seconds()
	b.r.note("initial sync of %d, the plain client: %.0f/s before the agent's sync, %.0f/s after it (then management answered %s, the region %s, the machine's CPU %s busy); the baseline is the mean of the two times",
		n, float64(n)/plain.Seconds(), float64(n)/after.took.Seconds(), requestsSince(after.m0, after.m1), requestsSince(after.l0, after.l1), after.busy)
	rate := float64(n) / elapsed.Seconds()
	ratio := rate / plainRate
	b.r.add(fmt.Sprintf("initial sync, %d objects (objects/s; time)", n), fmt.Sprintf("%.0f/s; %.1f s", rate, elapsed.Seconds()),
		fmt.Sprintf("%.0f/s; %.1f s", plainRate, baseline.Seconds()), fmt.Sprintf("%.2f", ratio), target("initial-sync").RowText(), verdict(target("initial-sync").Met(ratio)))
	live := 0 // the live changes: the suite's management write, the copy's update, the annotations
	for _, pr := range probes {
		if pr != nil {
			live++
		}
	}
	perCopy := func(m0, m1, l0, l1 scrape, live int) ([2]float64, string) {
		dm, dl := diff(m0, m1), diff(l0, l1)
		mw := dm.count(tenantWrites("")) + dm.count(tenantWrites("status")) - float64(2*live)
		lw := dl.count(tenantWrites("")) + dl.count(tenantWrites("status")) - float64(live)
		ns := dl.count(func(k reqKey) bool { return isWrite(k) && k.Resource == "namespaces" })
		return [2]float64{mw / float64(n), lw / float64(n)}, fmt.Sprintf("%.2f / %.2f (+%.0f namespaces)", mw/float64(n), lw/float64(n), ns)
	}
	agentW, agentText := perCopy(am0, am1, al0, al1, live)
	plainW, plainText := perCopy(before.m0, before.m1, before.l0, before.l1, 0)
	perCopyT := target("initial-sync-writes-per-copy")
	b.r.add(fmt.Sprintf("Tenant writes per new copy, initial sync of %d (management / region)", n), agentText, plainText, "-",
		perCopyT.RowText()+" (each side)", verdict(perCopyT.MetAgainst(round2(agentW[0]), round2(plainW[0])) && perCopyT.MetAgainst(round2(agentW[1]), round2(plainW[1]))))
	b.r.note("initial sync of %d, all management writes: %s", n, diff(am0, am1).writesSummary())
	b.r.note("initial sync of %d, all region writes: %s", n, diff(al0, al1).writesSummary())
	b.r.note("initial sync of %d, the agent's other requests: management %s; the region %s", n, diff(am0, am1).readsSummary(), diff(al0, al1).readsSummary())
	b.r.note("initial sync of %d: management answered %s, the region %s, the machine's CPU %s busy; the plain client's: management %s, the region %s, the machine's CPU %s busy",
		n, requestsSince(am0, am1), requestsSince(al0, al1), agentBusy, requestsSince(before.m0, before.m1), requestsSince(before.l0, before.l1), before.busy)
	// The API servers' CPU per object bounds the rate where nothing else runs on their CPUs: the
	// split placement, and a fleet, where the agents run on the region's nodes. With the shared
	// placement every CPU is busy in both halves, and the ratio above is one of CPU per object on
	// the whole machine, the agent processes' own (their warm standby's included) counted in it.
	agentCPU := (am1.cpu - am0.cpu) + (al1.cpu - al0.cpu)
	plainCPU := (before.apiCPU() + after.apiCPU()) / 2
	if agentCPU > 0 && n > 0 {
		b.r.note("initial sync of %d: the API servers' CPU per object (management + region): the agent's %.2f ms, the plain client's %.2f ms (mean of its two runs); ratio %.2f, the bound of the initial sync's where only the API servers' CPU counts",
			n, 1000*agentCPU/float64(n), 1000*plainCPU/float64(n), plainCPU/agentCPU)
	}
	if last && b.p.Figures["live"] {
		var worst time.Duration
		var parts []string
		missing := 0
		for i, pr := range probes {
			if pr == nil {
				parts = append(parts, fmt.Sprintf("%d%%: not made", 25*(i+1)))
				missing++
				continue
			}
			d, ok := pr.wait(10 * time.Second)
			if !ok {
				missing++
				parts = append(parts, fmt.Sprintf("%d%%: not arrived", 25*(i+1)))
				continue
			}
			worst = max(worst, d)
			parts = append(parts, fmt.Sprintf("%d%%: %s", 25*(i+1), ms(d)))
		}
		b.r.add(fmt.Sprintf("live change during the initial sync of %d (spec, management → copy)", n), fmt.Sprintf("worst %s (%s)", ms(worst), strings.Join(parts, ", ")),
			"-", "-", target("live-change-during-initial-sync").RowText(), verdict(missing == 0 && target("live-change-during-initial-sync").MetDuration(worst)))
	}
	if !last {
		for _, a := range agents {
			a.Stop(syscall.SIGTERM)
		}
		return
	}
	b.pairs, b.basePairs, b.agents, b.region, b.cfgPath = pairs, basePairs, agents, region, cfgPath
}

// plainRun is one run of the plain client's initial sync.
type plainRun struct {
	pairs []pair
	took  time.Duration
	// The API servers' metrics before and after, and how busy the machine was meanwhile.
	m0, m1, l0, l1 scrape
	busy           string
}

// apiCPU is the CPU seconds both API servers spent during the run.
func (r plainRun) apiCPU() float64 { return (r.m1.cpu - r.m0.cpu) + (r.l1.cpu - r.l0.cpu) }

// runPlain seeds n fresh objects of the plain client's region as set and runs the plain client's
// initial sync over them, with the API servers' metrics scraped around it; start, when set, is
// called just before the sync starts. what tells the printed line's run apart.
func (b *suite) runPlain(n int, set, what string, start func()) plainRun {
	ctx, e := b.ctx, b.e
	var r plainRun
	var err error
	if r.pairs, err = seed(ctx, b.mgmtAdmin, e.baseRegion, set, n, b.p.PerNamespace); err != nil {
		b.t.Fatalf("seeding: %v", err)
	}
	if r.m0, r.l0, err = b.scrapeBoth(); err != nil {
		b.t.Fatal(err)
	}
	b.applyPlacement()
	cpu0 := b.place.read()
	if start != nil {
		start()
	}
	if r.took, err = plainSync(ctx, b.plainMgmt, b.plainLocal, b.tr.keys, e.baseRegion, set, r.pairs, b.concurrency); err != nil {
		b.t.Fatalf("plain client%s: %v", what, err)
	}
	r.busy = b.place.busySince(cpu0)
	b.releasePlacement()
	if r.m1, r.l1, err = b.scrapeBoth(); err != nil {
		b.t.Fatal(err)
	}
	fmt.Printf("BENCH plain client%s: %d objects in %s (%.0f/s)\n", what, n, r.took.Round(time.Millisecond), float64(n)/r.took.Seconds())
	return r
}

// leader returns the main region's replica that syncs and another running one (nil when none).
func (b *suite) leader() (*fleet.Replica, *fleet.Replica) {
	var leader, standby *fleet.Replica
	deadline := time.Now().Add(30 * time.Second)
	for leader == nil && time.Now().Before(deadline) {
		h := b.e.holder(b.ctx, b.region)
		for _, a := range b.agents {
			if a.Name == h && a.Alive() {
				leader = a
			}
		}
		if leader == nil {
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, a := range b.agents {
		if a != leader && a.Alive() {
			standby = a
		}
	}
	return leader, standby
}

func contextWithCancel(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithCancel(ctx)
}

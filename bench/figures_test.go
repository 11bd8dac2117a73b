//go:build bench

package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	"github.com/regionsync/regionsync/test/framework/agentconfig"
	"github.com/regionsync/regionsync/test/framework/fleet"
)

func tenantRef(namespace, name string) *demov1alpha1.Tenant {
	return &demov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
}

// heap: the syncing replica's live heap after GC ÷ synced objects, against the reference.
func (b *suite) heap() {
	leader, standby := b.leader()
	if leader == nil {
		b.errorf("heap: no replica holds the shard")
		return
	}
	time.Sleep(5 * time.Second) // the last events are processed
	h, err := liveHeap(b.ctx, leader.Pprof)
	if err != nil {
		b.errorf("heap: %v", err)
		return
	}
	b.heapSynced = h
	n := len(b.pairs)
	per := float64(h) / float64(n)
	_ = saveHeapProfile(b.ctx, leader.Pprof, filepath.Join(b.dir, fmt.Sprintf("heap-leader-%d.pb.gz", n)))
	extra := fmt.Sprintf("RSS %.0f MB", float64(rss(leader.Proc.Cmd.Process.Pid))/(1<<20))
	if standby != nil {
		if sh, err := liveHeap(b.ctx, standby.Pprof); err == nil {
			extra += fmt.Sprintf("; warm standby %s/object, RSS %.0f MB", kb(float64(sh)/float64(n)), float64(rss(standby.Proc.Cmd.Process.Pid))/(1<<20))
		}
	}
	// The reference is gravitational/sync-controller's live heap per synced object at 10,000
	// Widgets, measured once beside it (not re-measured here: sync-controller is not on the
	// module proxy); targets.yaml holds it.
	heapT := target("heap-per-object")
	reference := heapT.Reference.Value * 1024
	b.r.add(fmt.Sprintf("live heap per synced object after GC, %d objects (syncing replica)", n), fmt.Sprintf("%s (%.1f MB; %s)", kb(per), float64(h)/(1<<20), extra),
		"sync-controller "+kb(reference)+" (reference, not re-measured)", fmt.Sprintf("%.2f", per/reference), heapT.RowText(), verdict(heapT.MetAgainst(per, reference)))
}

// atRest: writes on each side while nothing changes.
func (b *suite) atRest() {
	m0, l0, err := b.scrapeBoth()
	if err != nil {
		b.errorf("at rest: %v", err)
		return
	}
	time.Sleep(b.p.Rest)
	m1, l1, err := b.scrapeBoth()
	if err != nil {
		b.errorf("at rest: %v", err)
		return
	}
	dm, dl := diff(m0, m1), diff(l0, l1)
	tm, tl := dm.count(tenantWrites("")), dl.count(tenantWrites(""))
	tm += dm.count(tenantWrites("status"))
	tl += dl.count(tenantWrites("status"))
	b.r.add(fmt.Sprintf("writes at rest, %d objects, %s (Tenant writes management / region)", len(b.pairs), b.p.Rest), fmt.Sprintf("%.0f / %.0f", tm, tl),
		"0", "-", target("writes-at-rest").RowText(), verdict(target("writes-at-rest").Met(tm) && target("writes-at-rest").Met(tl)))
	b.r.note("all writes at rest over %s: management %.2f/s (%s); region %.2f/s (%s)", b.p.Rest,
		dm.count(isWrite)/dm.seconds, dm.writesSummary(), dl.count(isWrite)/dl.seconds, dl.writesSummary())
}

func (b *suite) scrapeBoth() (scrape, scrape, error) {
	m, err := b.mgmtM.read(b.ctx)
	if err != nil {
		return m, scrape{}, err
	}
	l, err := b.localM.read(b.ctx)
	return m, l, err
}

// writesPerChange: spec changes only, then status changes only, at 20/s; the API servers' write
// counts minus the suite's own writes, per change.
func (b *suite) writesPerChange() {
	for _, spec := range []bool{true, false} {
		m0, l0, err := b.scrapeBoth()
		if err != nil {
			b.errorf("writes: %v", err)
			return
		}
		tag := "ws"
		if !spec {
			tag = "wt"
		}
		res := churn(b.ctx, b.tr, b.mgmtAdmin, b.localAdmin, b.pairs, 20, b.p.WritesWindow, b.p.Grace, spec, !spec, tag)
		time.Sleep(3 * time.Second)
		m1, l1, err := b.scrapeBoth()
		if err != nil {
			b.errorf("writes: %v", err)
			return
		}
		dm, dl := diff(m0, m1), diff(l0, l1)
		mMain, mStatus := dm.count(tenantWrites("")), dm.count(tenantWrites("status"))
		lMain, lStatus := dl.count(tenantWrites("")), dl.count(tenantWrites("status"))
		if spec {
			n := float64(res.specSent)
			mMain -= n // the suite's own spec changes
			local, mg := lMain/n, (mMain+mStatus)/n
			b.r.add(fmt.Sprintf("writes per spec change at 20/s (region / management), %d changes", res.specSent),
				fmt.Sprintf("%.2f / %.2f", local, mg), "1 / 0 (plain relay)", "-", rowTargets(target("writes-per-spec-change-region"), target("writes-per-spec-change-management")),
				verdict(target("writes-per-spec-change-region").Met(round2(local)) && target("writes-per-spec-change-management").Met(round2(mg))))
			if lStatus > 0 {
				b.r.note("spec changes caused %.0f Tenant status writes in the region", lStatus)
			}
		} else {
			n := float64(res.statusSent)
			lStatus -= n // the suite's own status changes
			mg, local := (mStatus+mMain)/n, (lMain+lStatus)/n
			b.r.add(fmt.Sprintf("writes per status change at 20/s (management / region), %d changes", res.statusSent),
				fmt.Sprintf("%.2f / %.2f", mg, local), "1 / 0 (plain relay)", "-", rowTargets(target("writes-per-status-change-management"), target("writes-per-status-change-region")),
				verdict(target("writes-per-status-change-management").Met(round2(mg)) && target("writes-per-status-change-region").Met(round2(local))))
		}
		if res.specLate+res.statusLate+res.errs > 0 {
			b.r.note("writes window %s: %d late, %d write errors", tag, res.specLate+res.statusLate, res.errs)
		}
		b.r.note("writes during the %s window (%s, own changes included): management %s; region %s", map[bool]string{true: "spec", false: "status"}[spec], b.p.WritesWindow, dm.writesSummary(), dl.writesSummary())
	}
}

// latency: spec propagation and status return at each rate, half spec half status, over the
// synced set: first the plain relay over the baseline's objects, then the agent.
func (b *suite) latency() {
	suffix := "-" + b.e.baseRegion
	for _, rate := range b.p.Rates {
		tag := fmt.Sprintf("b%d", rate)
		b.tr.mu.Lock()
		b.tr.relayPrefix = tag + "-"
		b.tr.mu.Unlock()
		b.tr.relayOn.Store(true)
		relayCtx, stop := contextWithCancel(b.ctx)
		runRelay(relayCtx, b.tr, b.plainMgmt, b.plainLocal, suffix, b.concurrency)
		bm0, errBM0 := b.mgmtM.read(b.ctx)
		bl0, errBL0 := b.localM.read(b.ctx)
		cb0, ct0 := machineCPU()
		base := churn(b.ctx, b.tr, b.mgmtAdmin, b.localAdmin, b.basePairs, float64(rate), b.p.Churn, b.p.Grace, true, true, tag)
		if m1, errM1 := b.mgmtM.read(b.ctx); errBM0 == nil && errM1 == nil {
			if l1, errL1 := b.localM.read(b.ctx); errBL0 == nil && errL1 == nil {
				b.r.note("relay's churn at %d/s (%d changes, the suite's own writes included): management answered %s, the region %s; the machine's CPU %s busy",
					rate, base.specSent+base.statusSent, requestsSince(bm0, m1), requestsSince(bl0, l1), busySince(cb0, ct0))
			}
		}
		b.tr.relayOn.Store(false)
		stop()
		// The syncing replica's CPU profile over the agent's churn, for go tool pprof.
		profiled := make(chan struct{})
		go func() {
			defer close(profiled)
			if leader, _ := b.leader(); leader != nil {
				path := filepath.Join(b.dir, fmt.Sprintf("cpu-leader-%dps.pb.gz", rate))
				if err := saveProfile(b.ctx, leader.Pprof, fmt.Sprintf("profile?seconds=%d", int(b.p.Churn.Seconds())), path); err != nil {
					b.r.note("latency at %d/s: no CPU profile: %v", rate, err)
				}
			}
		}()
		m0, errM0 := b.mgmtM.read(b.ctx)
		l0, errL0 := b.localM.read(b.ctx)
		ca0, cta0 := machineCPU()
		agent := churn(b.ctx, b.tr, b.mgmtAdmin, b.localAdmin, b.pairs, float64(rate), b.p.Churn, b.p.Grace, true, true, fmt.Sprintf("a%d", rate))
		<-profiled
		if m1, errM1 := b.mgmtM.read(b.ctx); errM0 == nil && errM1 == nil {
			if l1, errL1 := b.localM.read(b.ctx); errL0 == nil && errL1 == nil {
				b.r.note("agent's churn at %d/s (%d changes, the suite's own writes included): management answered %s, the region %s; the machine's CPU %s busy",
					rate, agent.specSent+agent.statusSent, requestsSince(m0, m1), requestsSince(l0, l1), busySince(ca0, cta0))
			}
		}
		for _, dir := range []string{"spec propagation", "status return"} {
			a, p := agent.spec, base.spec
			aLate, aSent, pLate := agent.specLate, agent.specSent, base.specLate
			if dir == "status return" {
				a, p = agent.status, base.status
				aLate, aSent, pLate = agent.statusLate, agent.statusSent, base.statusLate
			}
			a99, p99 := quantile(a, 0.99), quantile(p, 0.99)
			ratio := "-"
			if p99 > 0 {
				ratio = fmt.Sprintf("%.2f", float64(a99)/float64(p99))
			}
			b.r.add(fmt.Sprintf("%s at %d changes/s over %d objects, p50 / p90 / p99", dir, rate, len(b.pairs)),
				fmt.Sprintf("%s / %s / %s; %d of %d late", ms(quantile(a, 0.5)), ms(quantile(a, 0.9)), ms(a99), aLate, aSent),
				fmt.Sprintf("%s / %s / %s; %d late", ms(quantile(p, 0.5)), ms(quantile(p, 0.9)), ms(p99), pLate),
				ratio+" (p99)", "p99 "+target("latency-p99").RowText(), verdict(aLate == 0 && len(a) > 0 && target("latency-p99").MetDuration(a99)))
		}
		b.r.note("at %d changes/s the suite's own writes took p50 / p99 %s / %s (baseline run), %s / %s (agent run): the API servers' load", rate,
			ms(quantile(base.writes, 0.5)), ms(quantile(base.writes, 0.99)), ms(quantile(agent.writes, 0.5)), ms(quantile(agent.writes, 0.99)))
		if agent.errs+base.errs > 0 {
			b.r.note("latency at %d/s: %d write errors (agent run), %d (baseline run)", rate, agent.errs, base.errs)
		}
	}
	b.r.note("latency: a change's time from just before the suite's write until a watch of the other cluster sees the value (late: not seen %s after the churn of %s ended); baseline: a plain relay (watch → 1 write, %d workers) over the plain client's objects", b.p.Grace, b.p.Churn, b.concurrency)
}

// otherRegions: the syncing replica's live heap once management also holds p.Other objects of
// other regions (filtered out by the shipped labelSelector), against the heap without them.
func (b *suite) otherRegions() {
	if b.heapSynced == 0 {
		h, ok := b.leaderHeap("other regions")
		if !ok {
			return
		}
		b.heapSynced = h
	}
	start := time.Now()
	if _, err := seed(b.ctx, b.mgmtAdmin, "ap-southeast-1", "tenant-other", b.p.Other, b.p.PerNamespace); err != nil {
		b.errorf("other regions: seeding: %v", err)
		return
	}
	fmt.Printf("BENCH %d other-region objects created in %s\n", b.p.Other, time.Since(start).Round(time.Second))
	time.Sleep(10 * time.Second)
	h, ok := b.leaderHeap("other regions")
	if !ok {
		return
	}
	ratio := float64(h) / float64(b.heapSynced)
	b.r.add(fmt.Sprintf("live heap with %d other regions' objects on management (selector)", b.p.Other), fmt.Sprintf("%.1f MB", float64(h)/(1<<20)),
		fmt.Sprintf("%.1f MB without", float64(b.heapSynced)/(1<<20)), fmt.Sprintf("%.2f", ratio), target("heap-other-regions").RowText(), verdict(target("heap-other-regions").Met(ratio)))
}

// failover: graceful handover (SIGTERM) and crash (SIGKILL) of the syncing replica, each with a
// spec change made at the moment of the signal; a replacement replica is started after each (as
// a Deployment would) and given time to warm up.
func (b *suite) failover() {
	if b.e.replicas < 2 {
		b.r.note("failover: the overlay runs %d replica: no standby to fail over to", b.e.replicas)
		return
	}
	firstSync := target("failover-first-sync")
	for _, c := range []struct {
		name     string
		sig      syscall.Signal
		takeover Target
		over     time.Duration // what the takeover's bound is added to
	}{{"graceful handover (SIGTERM)", syscall.SIGTERM, target("failover-graceful-takeover"), 0},
		{"crash (SIGKILL)", syscall.SIGKILL, target("failover-crash-takeover"), b.e.mainConfig.LeaderElection.LeaseDuration.Duration}} {
		leader, standby := b.leader()
		if leader == nil || standby == nil {
			b.errorf("failover %s: leader %v standby %v", c.name, leader != nil, standby != nil)
			return
		}
		k, ok := b.tr.randomSynced()
		if !ok {
			b.errorf("failover: no synced object")
			return
		}
		value := fmt.Sprintf("failover-%d", c.sig)
		pr := b.tr.expect(sideLocal, k, value)
		t0 := pr.t0
		go leader.Stop(c.sig)
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"displayName": value}})
		if err := b.mgmtAdmin.Patch(b.ctx, tenantRef(k.Namespace, k.Name+"-"+b.region), client.RawPatch(types.MergePatchType, patch)); err != nil {
			b.errorf("failover: %v", err)
			return
		}
		var takeover time.Duration
		for time.Since(t0) < 60*time.Second {
			if h := b.e.holder(b.ctx, b.region); h != "" && h != leader.Name {
				takeover = time.Since(t0)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		arrival, ok := pr.wait(60 * time.Second)
		after := "-"
		if ok && takeover > 0 {
			after = ms(max(arrival-takeover, 0))
		}
		b.r.add(fmt.Sprintf("failover at %d objects: %s; takeover / change made at the signal arrives / after takeover", len(b.pairs), c.name),
			fmt.Sprintf("%s / %s / %s", secs(takeover), secsOK(arrival, ok), after), "-", "-",
			fmt.Sprintf("%s ≤ %s; %s", c.takeover.Label, c.takeover.Limit(c.over), firstSync.RowText()),
			verdict(ok && takeover > 0 && takeover <= c.takeover.Limit(c.over) && firstSync.MetDuration(arrival-takeover)))
		<-leader.Proc.Done()
		repl, err := b.e.startAgent(leader.Name+"-next", b.cfgPath)
		if err != nil {
			b.errorf("failover: %v", err)
			return
		}
		for i, a := range b.agents {
			if a == leader {
				b.agents[i] = repl
			}
		}
		if err := waitPprof(b.ctx, repl, time.Minute); err != nil {
			b.errorf("failover: %v", err)
			return
		}
		time.Sleep(15 * time.Second) // the replacement's caches fill (warm standby)
	}
	b.r.note("failover: takeover is the time from the signal until the shard Lease on management names another replica")
}

func secs(d time.Duration) string {
	if d == 0 {
		return "none in 60 s"
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func secsOK(d time.Duration, ok bool) string {
	if !ok {
		return "not in 60 s"
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// mainAgentsRunning starts the main region's agents again when an earlier figure stopped them
// (idle and fleet do, to measure management without them), as many as the overlay has replicas,
// each with a name (and claim identity) of its own, waits until one of them holds the shard
// Lease, then as long as a region's claim and its pass over the synced set take to settle.
func (b *suite) mainAgentsRunning() error {
	for _, a := range b.agents {
		if a.Alive() {
			return nil
		}
	}
	b.restarts++
	agents := make([]*fleet.Replica, 0, b.e.replicas)
	for i := range b.e.replicas {
		a, err := b.e.startAgent(fmt.Sprintf("%s-replica-%d-restart-%d", b.region, i, b.restarts), b.cfgPath)
		if err != nil {
			return fmt.Errorf("starting the main region's agents again: %w", err)
		}
		agents = append(agents, a)
	}
	b.agents = agents
	if leader, _ := b.leader(); leader == nil {
		return fmt.Errorf("the main region's agents were started again, but none holds the shard Lease after 30 s")
	}
	time.Sleep(b.settle())
	return nil
}

// idle: management's cost of idle regions. The main region's agents are stopped; management's
// requests are counted over a window with no agent, then with p.Idle regions, each one agent
// process with the shipped configuration (its own region name, identity and registration,
// BENCH_FLEET_OBJECTS synced Tenants), all sharing one regional API server.
func (b *suite) idle() {
	for _, a := range b.agents {
		a.Stop(syscall.SIGTERM)
	}
	time.Sleep(b.settle()) // the agents' release and the API server's work after it are over
	background, err := b.mgmtWindow(b.idleWindow())
	if err != nil {
		b.errorf("idle: %v", err)
		return
	}
	var agents []*fleet.Replica
	var names []string
	for i := range b.p.Idle {
		names = append(names, fmt.Sprintf("idle-%02d", i))
	}
	if err := b.createRegionObjects(names, b.p.FleetObjects); err != nil {
		b.errorf("idle: %v", err)
		return
	}
	for i := range b.p.Idle {
		name := fmt.Sprintf("idle-%02d", i)
		cfg, err := b.e.deriveRegion(b.ctx, name)
		if err != nil {
			b.errorf("idle: %v", err)
			return
		}
		cfgPath, err := b.e.writeAgentConfig(cfg)
		if err != nil {
			b.errorf("idle: %v", err)
			return
		}
		a, err := b.e.startAgent(name+"-replica-0", cfgPath)
		if err != nil {
			b.errorf("idle: %v", err)
			return
		}
		agents = append(agents, a)
		// One start every claim renewal period ÷ regions: the agents' periodic requests spread
		// over the period as independently started agents' are (the simulated fleet is spread
		// the same way before its idle window).
		time.Sleep(agentconfig.Effective(b.e.mainConfig).Claim.RetryPeriod / time.Duration(b.p.Idle))
	}
	deadline := time.Now().Add(3 * time.Minute)
	for i := 0; i < len(agents); {
		if b.e.holder(b.ctx, fmt.Sprintf("idle-%02d", i)) != "" {
			i++
			continue
		}
		if time.Now().After(deadline) || !agents[i].Alive() {
			b.errorf("idle: region idle-%02d has no shard holder (agent alive: %v; log %s)", i, agents[i].Alive(), agents[i].Log)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(b.settle()) // start-up writes (Region status, Lease registration, the first renewal) are over
	busy, err := b.mgmtWindowProfiled(b.idleWindow(), fmt.Sprintf("cpu-apiserver-management-idle-processes-%d.pb.gz", len(agents)), fmt.Sprintf("idle, %d agent processes", len(agents)))
	if err != nil {
		b.errorf("idle: %v", err)
		return
	}
	b.saveLease(names[0], "lease-idle-processes.yaml")
	cost := newIdleCost(len(agents), background, busy)
	b.realIdle[len(agents)] = cost
	b.r.add(idleCostFigure(len(agents), "agent processes"), cost.text(), cost.baselineText(), "-", "writes "+target("idle-writes-per-region").RowText(), verdict(target("idle-writes-per-region").Met(cost.writes)))
	b.r.note("idle regions: management writes with %d idle regions: %s over %.0f s", len(agents), busy.writesSummary(), busy.seconds)
	b.r.note("idle regions: management's other requests with %d idle regions: %s over %.0f s", len(agents), busy.readsSummary(), busy.seconds)
	if h, err := liveHeap(b.ctx, agents[0].Pprof); err == nil {
		b.r.note("an idle agent's live heap after GC: %.1f MB; RSS %.0f MB", float64(h)/(1<<20), float64(rss(agents[0].Proc.Cmd.Process.Pid))/(1<<20))
		if b.heapSynced > h && len(b.pairs) > 0 {
			b.r.note("heap per synced object without the idle agent's heap: (%.1f MB − %.1f MB) ÷ %d = %s",
				float64(b.heapSynced)/(1<<20), float64(h)/(1<<20), len(b.pairs), kb(float64(b.heapSynced-h)/float64(len(b.pairs))))
		}
	}
	for _, a := range agents {
		go a.Stop(syscall.SIGTERM)
	}
}

// round2 rounds to the two decimals the table shows (a conflict retry among hundreds of changes is
// counted, as the API server served it, but does not fail the figure).
func round2(f float64) float64 { return math.Round(f*100) / 100 }

// mgmtWindow is what management's API server served over the next d.
// mgmtWindowProfiled is mgmtWindow with management's API server CPU-profiled over the window's
// first minute at most, into profile in the run's directory (a note says why when it cannot be).
// A note gives what else loaded the machine over the window (name says which): its CPU busy
// and the regional API server's CPU, against which management's CPU per region is read.
func (b *suite) mgmtWindowProfiled(d time.Duration, profile, name string) (delta, error) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		seconds := int(min(d, time.Minute) / time.Second)
		if err := saveAPIServerProfile(b.ctx, b.e.mgmt.Config, seconds, filepath.Join(b.dir, profile)); err != nil {
			b.r.note("no CPU profile %s of management's API server: %v", profile, err)
		}
	})
	l0, lerr := b.localM.read(b.ctx)
	c0, t0 := machineCPU()
	dm, err := b.mgmtWindow(d)
	busy := busySince(c0, t0)
	if l1, err := b.localM.read(b.ctx); err == nil && lerr == nil && dm.seconds > 0 {
		b.r.note("%s: over the %.0f s window the machine's CPU was %s busy, management's API server used %.1f ms/s of CPU (%.1f ms/s of it garbage collection, %.0f collections; %.1f ms/s with collection counted by allocation) and the regional API server %.1f ms/s (%.1f writes/s)",
			name, dm.seconds, busy, dm.cpu/dm.seconds*1000, dm.gcCPU/dm.seconds*1000, dm.gcCycles, dm.steadyCPU()/dm.seconds*1000,
			(l1.cpu-l0.cpu)/dm.seconds*1000, diff(l0, l1).count(isWrite)/dm.seconds)
	}
	return dm, err
}

func (b *suite) mgmtWindow(d time.Duration) (delta, error) {
	m0, err := b.mgmtM.read(b.ctx)
	if err != nil {
		return delta{}, err
	}
	time.Sleep(d)
	m1, err := b.mgmtM.read(b.ctx)
	return diff(m0, m1), err
}

// leaderHeap is the syncing replica's live heap after GC; ok is false (and the figure's error
// recorded) when there is no leader or its heap cannot be read.
func (b *suite) leaderHeap(figure string) (h uint64, ok bool) {
	leader, _ := b.leader()
	if leader == nil {
		b.errorf("%s: no leader", figure)
		return 0, false
	}
	h, err := liveHeap(b.ctx, leader.Pprof)
	if err != nil {
		b.errorf("%s: %v", figure, err)
		return 0, false
	}
	return h, true
}

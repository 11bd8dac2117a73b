//go:build integration

package syncer_test

import (
	"bytes"
	"fmt"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	"github.com/regionsync/regionsync/pkg/regionsync"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// informerHandlers counts the event handlers registered on every shared informer of the process:
// client-go runs each in a processorListener whose run loop is one goroutine.
func informerHandlers() int {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 2)
	return strings.Count(buf.String(), "cache.(*processorListener).run(")
}

// goroutineStacks returns the process's goroutines counted by stack (the functions of each
// stack, without addresses or arguments), the smallest count of each over a second of samples
// (short-lived goroutines of requests in flight come and go).
func goroutineStacks() map[string]int {
	low := map[string]int{}
	for i := range 10 {
		if i > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		var buf bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
		now := map[string]int{}
		text := buf.String()
		if _, rest, ok := strings.Cut(text, "\n"); ok && strings.HasPrefix(text, "goroutine profile:") {
			text = rest
		}
		for _, block := range strings.Split(text, "\n\n") {
			var n int
			if _, err := fmt.Sscanf(block, "%d @", &n); err != nil {
				continue
			}
			var funcs []string
			for _, line := range strings.Split(block, "\n")[1:] {
				if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" {
					funcs = append(funcs, f[2])
				}
			}
			now[strings.Join(funcs, " <- ")] += n
		}
		if i == 0 {
			low = now
			continue
		}
		for k, n := range low {
			low[k] = min(n, now[k])
		}
	}
	return low
}

// stackGrowth returns the stacks whose goroutines grew by at least by from before to after,
// with before and after counts.
func stackGrowth(before, after map[string]int, by int) []string {
	var out []string
	for k, n := range after {
		if n-before[k] >= by {
			out = append(out, fmt.Sprintf("%d -> %d: %s", before[k], n, k))
		}
	}
	return out
}

// TestGoroutineStacksSeeALeak: the leak check of TestClaimFlapsDoNotLeak sees goroutines left
// blocked on one stack, and nothing where nothing was left.
func TestGoroutineStacksSeeALeak(t *testing.T) {
	before := goroutineStacks()
	if grown := stackGrowth(before, goroutineStacks(), 5); len(grown) > 0 {
		t.Fatalf("growth with nothing started: %v", grown)
	}
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{})
	for range 7 {
		go func() {
			started <- struct{}{}
			<-release
		}()
	}
	for range 7 {
		<-started // every one runs, and is about to wait on release
	}
	grown := stackGrowth(before, goroutineStacks(), 5)
	if len(grown) != 1 || !strings.Contains(grown[0], "TestGoroutineStacksSeeALeak") {
		t.Fatalf("7 goroutines left blocked: growth %v, want their stack", grown)
	}
}

// TestClaimFlapsDoNotLeak: 20 claim losses and regains (management cut for longer than the renew
// deadline) leave the process's goroutines flat within a small constant and its informers' event
// handlers exactly as many as before; while the claim is lost the agent writes nothing locally
// (a drifted copy is not reverted), and after the last regain it syncs creates and updates again.
// Not parallel: it counts the goroutines and informer handlers of the whole test process.
func TestClaimFlapsDoNotLeak(t *testing.T) {
	e := newEnv(t, withProxy(false), withOptions(func(o *regionsync.Options) {
		o.Claim.LeaseDuration = 2 * time.Second
		o.Claim.RenewDeadline = time.Second
		o.Claim.RetryPeriod = 200 * time.Millisecond
	}))
	ns := e.remoteNamespace("flaps")
	e.tenant(ns, "acme", "Acme")
	e.waitSynced(ns, "acme")
	claim := func(syncing bool) {
		t.Helper()
		testenv.Eventually(t, fmt.Sprintf("claim syncing=%v", syncing), 20*time.Second, func() error {
			if c := e.syncer.Claim(); c.Syncing != syncing {
				return fmt.Errorf("claim %+v", c)
			}
			return nil
		})
	}
	claim(true)
	// One flap first, so that every lazily built client and informer of both paths exists.
	e.proxy.Down()
	claim(false)
	if err := e.proxy.Up(); err != nil {
		t.Fatal(err)
	}
	claim(true)
	e.setRemote(ns, "acme", func(o *demov1alpha1.Tenant) { o.Spec.Replicas = 3 })
	e.waitSynced(ns, "acme")
	stacks, handlers := goroutineStacks(), informerHandlers()

	const flaps = 20
	for i := range flaps {
		e.proxy.Down()
		claim(false)
		if i == flaps-1 {
			// Without the claim nothing is written locally, not even a revert of drift.
			e.localWrites.take()
			e.setLocal(ns, "acme", func(o *demov1alpha1.Tenant) { o.Spec.DisplayName = "drifted" })
			e.never("a local write without the claim", 2*time.Second, func() bool { return len(e.localWrites.take()) > 0 })
		}
		if err := e.proxy.Up(); err != nil {
			t.Fatal(err)
		}
		claim(true)
	}

	e.eventually("drift reverted after the regain", func() error {
		l, err := e.getLocal(ns, "acme")
		if err != nil {
			return err
		}
		if l.Spec.DisplayName != "Acme" {
			return fmt.Errorf("display name %q", l.Spec.DisplayName)
		}
		return nil
	})
	e.setRemote(ns, "acme", func(o *demov1alpha1.Tenant) { o.Spec.Replicas = 5 })
	if _, local := e.waitSynced(ns, "acme"); local.Spec.Replicas != 5 {
		t.Fatalf("replicas %d after %d flaps", local.Spec.Replicas, flaps)
	}
	other := e.remoteNamespace("flaps-after") // one Tenant per namespace: the demo operator's token
	e.tenant(other, "beta", "Beta")
	// client-go's reflector backs off re-watching a cluster that kept failing (up to 30 s, with
	// jitter): the management cache may see the new object only then.
	testenv.Eventually(t, "a new object copied after the flaps", 2*time.Minute, func() error {
		_, err := e.getLocal(other, "beta")
		return err
	})
	e.waitSynced(other, "beta")

	// Flat: a leak of anything per flap adds at least one goroutine per flap of the same stack
	// (every flap runs the same code), which noise does not: connections and timers of client-go
	// come and go by a few per stack. The informers' handlers must be exactly as many as before.
	testenv.Eventually(t, "goroutines and handlers back to their level before the flaps", 30*time.Second, func() error {
		if h := informerHandlers(); h > handlers {
			return fmt.Errorf("after %d flaps: %d informer handlers (before %d)", flaps, h, handlers)
		}
		if grown := stackGrowth(stacks, goroutineStacks(), flaps); len(grown) > 0 {
			return fmt.Errorf("after %d flaps, goroutines grew by %d or more on these stacks:\n%s", flaps, flaps, strings.Join(grown, "\n"))
		}
		return nil
	})
}

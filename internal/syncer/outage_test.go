//go:build integration

package syncer_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// A management outage reads as an outage in the log: a line when it starts and one when it ends,
// per-object retries at V(1), and no error line for any expected failure (connection refused,
// a lost claim's refused writes, timeouts); and it is not news on management: at most 0.1
// management Event writes per operation. Objects keep changing locally during the outage, so
// every one of them fails and retries its status upload throughout; the outage outlasts the
// claim's renew deadline, so the claim is lost and regained too.
func TestOutageLogsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withProxy(false))
	const objects = 8 // one per namespace: the tenant operator's token Secret has one name
	namespaces := make([]string, objects)
	for i := range objects {
		namespaces[i] = e.remoteNamespace(fmt.Sprintf("outage-log-%d", i))
		e.remoteSecret(namespaces[i])
		e.tenant(namespaces[i], "acme", "Acme")
	}
	for _, ns := range namespaces {
		e.waitSynced(ns, "acme")
	}
	errorsBefore := len(e.log.ErrorLines())
	e.remoteWrites.take()
	e.localWrites.take()
	eventsBefore := e.remoteWrites.eventWrites()

	const outage = 50 * time.Second
	e.proxy.Down()
	start := time.Now()
	for round := 0; time.Since(start) < outage; round++ {
		for _, ns := range namespaces {
			o, err := e.getLocal(ns, "acme")
			if err != nil {
				t.Fatal(err)
			}
			o.Status.Endpoint = fmt.Sprintf("https://round-%d.example", round)
			if err := e.local.Status().Update(e.ctx, o); err != nil {
				t.Logf("local status in %s: %v", ns, err) // a conflict with the operator: the next round writes
			}
			// Management users go on working (the test's client reaches management directly).
			e.setRemote(ns, "acme", func(o *demov1alpha1.Tenant) { o.Spec.Replicas = int32(round + 2) })
		}
		time.Sleep(5 * time.Second)
	}
	if err := e.proxy.Up(); err != nil {
		t.Fatal(err)
	}
	down := time.Since(start)
	e.eventually("every status uploaded after the outage", func() error {
		for _, ns := range namespaces {
			l, err := e.getLocal(ns, "acme")
			if err != nil {
				return err
			}
			r, err := e.getRemote(ns, "acme")
			if err != nil {
				return err
			}
			if r.Status.Endpoint != l.Status.Endpoint {
				return fmt.Errorf("%s: remote endpoint %q, local %q", ns, r.Status.Endpoint, l.Status.Endpoint)
			}
		}
		return nil
	})
	// A spec change after the outage flows once the management watch is back: client-go's
	// reflector backs off while management is down (up to 30 s between attempts), so allow it.
	e.setRemote(namespaces[0], "acme", func(o *demov1alpha1.Tenant) { o.Spec.Replicas = 40 })
	testenv.Eventually(t, "the spec changed after the outage reaches the copy", 90*time.Second, func() error {
		l, err := e.getLocal(namespaces[0], "acme")
		if err != nil {
			return err
		}
		if l.Spec.Replicas != 40 {
			return fmt.Errorf("replicas %d", l.Spec.Replicas)
		}
		return nil
	})

	e.settle(3 * time.Second)
	// Management Events per operation (a sync write on either cluster): an Event is for a
	// person, and an outage is not news about every object.
	ops := e.remoteWrites.count() + e.localWrites.count()
	events := e.remoteWrites.eventWrites() - eventsBefore
	t.Logf("%d operations, %d management Event writes (%.2f per operation)", ops, events, float64(events)/float64(max(ops, 1)))
	if ops == 0 {
		t.Fatal("no operation counted: the test measured nothing")
	}
	if float64(events) > 0.1*float64(ops) {
		t.Errorf("%d management Event writes for %d operations, want at most 0.1 per operation", events, ops)
	}

	errorLines := e.log.ErrorLines()[errorsBefore:]
	perMinute := float64(len(errorLines)) / down.Minutes()
	t.Logf("%.0f s of outage: %d error lines (%.1f per minute), %d lines saying management went down, %d saying it came back",
		down.Seconds(), len(errorLines), perMinute, e.log.Count(`"msg"="management unreachable:`), e.log.Count(`"msg"="management reachable again`))
	for _, l := range errorLines {
		t.Logf("error line: %s", l)
	}
	if perMinute >= 10 {
		t.Errorf("%.1f error lines per minute of outage, want single digits", perMinute)
	}
	for _, l := range errorLines {
		for _, expected := range []string{"connection refused", "connect: ", "EOF", "i/o timeout", "context deadline exceeded", "shard claim not held"} {
			if strings.Contains(l, expected) {
				t.Errorf("an expected failure logged as an error: %s", l)
			}
		}
	}
	if n := e.log.Count(`"msg"="management unreachable:`); n != 1 {
		t.Errorf("%d lines saying management became unreachable, want 1", n)
	}
	if n := e.log.Count(`"msg"="management reachable again`); n != 1 {
		t.Errorf("%d lines saying management is reachable again, want 1", n)
	}
}

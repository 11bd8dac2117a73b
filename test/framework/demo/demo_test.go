//go:build integration

package demo_test

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/regionsync/regionsync/test/framework/demo"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// The demo brings up the fleet, runs one agent process per region, shows every region's round
// trip, and tears everything down.
func TestDemoRoundTrip(t *testing.T) {
	bins := t.TempDir()
	if err := testenv.Build(bins, "./cmd/agent", "./test/cmd/tenant-operator", "./cmd/hub"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := demo.Run(ctx, demo.Options{Dir: filepath.Join(t.TempDir(), "demo"), AgentBinary: filepath.Join(bins, "agent"),
		OperatorBinary: filepath.Join(bins, "tenant-operator"), HubBinary: filepath.Join(bins, "hub"), Out: &out, Exit: true})
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	// The Distribution reached every region, with the override in the last one.
	for i, region := range demo.Regions {
		want := "replicas 2"
		if i == len(demo.Regions)-1 {
			want = "replicas 3"
		}
		if !strings.Contains(out.String(), "  "+region+": Applied, object "+demo.DistributionName+"-"+region) ||
			!strings.Contains(between(out.String(), "  "+region+": Applied", "\n"), want) {
			t.Errorf("%s: the Distribution's line is missing or its copy does not have %s", region, want)
		}
	}
	for _, region := range demo.Regions {
		if !strings.Contains(out.String(), region+": round trip complete") {
			t.Errorf("no round trip reported for %s", region)
		}
	}
	if !strings.Contains(out.String(), "READY") || strings.Count(out.String(), "   True   ") < len(demo.Regions) {
		t.Error("regions table missing or a region not ready")
	}
	// Per region, the trace printed from the spans received: the demo's change, the agent's sync
	// and writes, the tenant operator's reconcile, the status upload, from three processes.
	for _, region := range demo.Regions {
		section := between(out.String(), region+": the trace of this change", region+": agent metrics")
		m := regexp.MustCompile(`trace ([0-9a-f]{32}): (\d+) spans from (\d+) processes`).FindStringSubmatch(section)
		if m == nil {
			t.Errorf("%s: no trace printed", region)
			continue
		}
		if n, _ := strconv.Atoi(m[3]); n < 3 {
			t.Errorf("%s: trace %s has spans from %d processes, want at least 3", region, m[1], n)
		}
		for _, want := range []string{
			"create tenant " + demo.DemoNamespace + "/acme-" + region, "regionsync-demo/demo @ management",
			"└─ sync Tenant.demo.regionsync.dev", "create local", "regionsync-agent",
			"tenant-operator reconcile", "tenant-operator", "upload status",
		} {
			if !strings.Contains(section, want) {
				t.Errorf("%s: trace tree lacks %q", region, want)
			}
		}
		if strings.Contains(section, "<missing") {
			t.Errorf("%s: a span of the trace did not arrive", region)
		}
		metrics := between(out.String(), region+": agent metrics", "kubectl get regions")
		for _, want := range []string{`syncs written\s+\d+\s+\(.*claim 1`, `watch-to-write lag p50 / p99\s+[0-9.]+ms / [0-9.]+ms`,
			`objects by state\s+.*synced 1`, `shard claimed\s+1\n`, `management connected\s+1\n`} {
			if !regexp.MustCompile(want).MatchString(metrics) {
				t.Errorf("%s: metrics table lacks %q:\n%s", region, want, metrics)
			}
		}
	}
	if !strings.Contains(out.String(), "stopped; nothing left running.") {
		t.Error("demo did not report its teardown")
	}
}

// between returns the text from the first from to the next to after it (or the end).
func between(s, from, to string) string {
	i := strings.Index(s, from)
	if i < 0 {
		return ""
	}
	s = s[i:]
	if j := strings.Index(s[len(from):], to); j >= 0 {
		return s[:len(from)+j]
	}
	return s
}

package demo_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/regionsync/regionsync/internal/demo"
	"github.com/regionsync/regionsync/internal/testenv"
)

// The demo brings up the fleet, runs one agent process per region, shows every region's round
// trip, and tears everything down.
func TestDemoRoundTrip(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "agent")
	build := exec.Command("go", "build", "-o", bin, "./cmd/agent")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the agent: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err = demo.Run(ctx, demo.Options{Dir: filepath.Join(t.TempDir(), "demo"), AgentBinary: bin, Out: &out, Exit: true})
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, region := range demo.Regions {
		if !strings.Contains(out.String(), region+": round trip complete") {
			t.Errorf("no round trip reported for %s", region)
		}
	}
	if !strings.Contains(out.String(), "READY") || strings.Count(out.String(), "   True   ") < len(demo.Regions) {
		t.Error("regions table missing or a region not ready")
	}
	if !strings.Contains(out.String(), "stopped; nothing left running.") {
		t.Error("demo did not report its teardown")
	}
}

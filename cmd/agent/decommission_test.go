//go:build integration

package main_test

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	"github.com/regionsync/regionsync/test/framework/agentconfig"
)

// "agent decommission" as an operator runs it, against a region whose agent ran as a process:
// refused while the agent holds the shard Lease; after the agent stopped, a dry run lists the
// plan and a real run deletes the copy (its namespace, created for it), releases the finalizer
// and deletes the Lease; the object then deletes cleanly on management.
func TestAgentDecommissionCommand(t *testing.T) {
	e := newFleet(t, "dc-east")
	local := e.fleet.Cluster("dc-east")
	cfg := agentConfig("dc-east", "-dce", e.management.Kubeconfig)
	agent := startAgent(t, "dc-east-0", local, cfg)
	e.tenant("acme", "t0-dce")
	e.waitLocal(local, "acme", "t0", 30*time.Second)

	path, err := agentconfig.WriteConfig(filepath.Join(t.TempDir(), "dc-east.yaml"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	run := func(extra ...string) (int, string) {
		args := append([]string{"decommission", "--config", path, "--kubeconfig", local.Kubeconfig, "--delete-copies", "--timeout", "1m"}, extra...)
		cmd := exec.Command(agentBin, args...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), stdout.String() + stderr.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, stdout.String()
	}
	remote := client.ObjectKey{Namespace: "acme", Name: "t0-dce"}
	finalized := func() bool {
		o := &demov1alpha1.Tenant{}
		if err := e.management.Client.Get(e.ctx, remote, o); err != nil {
			t.Fatal(err)
		}
		return len(o.Finalizers) == 1 && o.Finalizers[0] == "regionsync.dev/sync-local"
	}
	e.eventually("t0 claimed", 30*time.Second, func() error {
		if !finalized() {
			return errors.New("no finalizer yet")
		}
		return nil
	})

	if code, out := run(); code != 1 || !strings.Contains(out, "held by dc-east/") || !finalized() {
		t.Fatalf("with the agent running: exit %d, output %q; want exit 1, refused, nothing released", code, out)
	}
	agent.signal(t, syscall.SIGTERM)
	select {
	case <-agent.p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the agent did not stop on SIGTERM")
	}
	if code, out := run("--dry-run"); code != 0 || !strings.Contains(out, "would release Tenant.demo.regionsync.dev acme/t0-dce: local namespace acme of acme/t0 would be deleted") || !finalized() {
		t.Fatalf("dry run: exit %d, output %q", code, out)
	}
	code, out := run()
	if code != 0 || !strings.Contains(out, "released Tenant.demo.regionsync.dev acme/t0-dce: local namespace acme of acme/t0 deleted") ||
		!strings.Contains(out, "1 object(s) released, 0 kept; 0 local copies and 1 namespaces deleted; shard Lease regionsync-system/region-dc-east deleted") {
		t.Fatalf("decommission: exit %d, output %q", code, out)
	}
	if err := local.Client.Get(e.ctx, client.ObjectKey{Namespace: "acme", Name: "t0"}, &demov1alpha1.Tenant{}); !apierrors.IsNotFound(err) {
		t.Errorf("local copy after decommission: %v, want not found", err)
	}
	if err := e.management.Client.Delete(e.ctx, &demov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: remote.Namespace, Name: remote.Name}}); err != nil {
		t.Fatal(err)
	}
	e.eventually("t0 deleted on management", 30*time.Second, func() error {
		err := e.management.Client.Get(e.ctx, remote, &demov1alpha1.Tenant{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errors.Join(errors.New("still there"), err)
	})
}

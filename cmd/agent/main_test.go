package main_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The agent binary rejects bad configuration files with a field-named error and a non-zero exit,
// and accepts a valid one.
func TestAgentConfigErrors(t *testing.T) {
	dir := t.TempDir()
	bin := agentBin // built once by TestMain
	const head = "apiVersion: regionsync.dev/v1alpha1\nkind: AgentConfig\nmanagement: {kubeconfig: /k}\n"
	cases := map[string]struct{ yaml, want string }{
		"suffix":        {head + "region: us\nshard: {remoteResourceSuffix: -US}\nresources: [{version: v1, kind: ConfigMap}]\n", "shard.remoteResourceSuffix: Invalid value"},
		"second kind":   {head + "region: us\nresources: [{version: v1, kind: ConfigMap}, {version: v1, kind: tenant}]\n", "resources[1].kind: Invalid value"},
		"unknown field": {head + "region: us\nregoin: x\nresources: [{version: v1, kind: ConfigMap}]\n", `unknown field "regoin"`},
		"no region":     {head + "resources: [{version: v1, kind: ConfigMap}]\n", "region: Required value"},
		"strategy":      {head + "region: us\nresources: [{version: v1, kind: ConfigMap, strategy: Merge}]\n", "resources[0].strategy: Unsupported value"},
		"budget":        {head + "region: us\nresources: [{version: v1, kind: ConfigMap}]\ndeletionBudget: {maxFraction: 2}\n", "deletionBudget.maxFraction: Invalid value"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(bin, "--config", path, "--check-config").CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("exit %v, want non-zero; output:\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("output %q does not name %q", out, tc.want)
			}
		})
	}
	out, err := exec.Command(bin, "--config", "../../pkg/config/testdata/valid.yaml", "--check-config").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "is valid") {
		t.Fatalf("valid config: %v\n%s", err, out)
	}
}

// "agent decommission" parses its own flags: usage errors exit 2 and say what is wrong; a valid
// invocation loads the configuration as the agent does (here its management kubeconfig does not
// exist, so it fails, exit 1, naming it).
func TestAgentDecommissionFlags(t *testing.T) {
	const valid = "../../pkg/config/testdata/valid.yaml"
	cases := map[string]struct {
		args []string
		code int
		want string
	}{
		"no config":          {[]string{"decommission", "--dry-run"}, 2, "--config is required"},
		"unknown flag":       {[]string{"decommission", "--config", valid, "--delete-copy"}, 2, "flag provided but not defined: -delete-copy"},
		"argument":           {[]string{"decommission", "--config", valid, "us-east-1"}, 2, `unexpected argument "us-east-1"`},
		"region gone copies": {[]string{"decommission", "--config", valid, "--without-region", "--delete-copies"}, 2, "--without-region excludes --delete-copies"},
		"bad config":         {[]string{"decommission", "--config", "/nonexistent.yaml"}, 1, "/nonexistent.yaml"},
		"valid":              {[]string{"decommission", "--config", valid, "--without-region", "--dry-run", "--force", "--timeout", "10s"}, 1, "management.kubeconfig /etc/regionsync/management/kubeconfig"},
		"admin kubeconfig":   {[]string{"decommission", "--config", valid, "--management-kubeconfig", "/admin.kubeconfig", "--out-of-shard-only"}, 1, "management.kubeconfig /admin.kubeconfig"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := exec.Command(agentBin, tc.args...).CombinedOutput()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || !strings.Contains(string(out), tc.want) {
				t.Fatalf("exit %d, output %q; want exit %d naming %q", code, out, tc.code, tc.want)
			}
		})
	}
}

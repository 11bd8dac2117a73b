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

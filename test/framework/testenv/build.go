package testenv

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

// BuildAgent builds the agent binary (./cmd/agent) into dir and returns its path.
func BuildAgent(dir string) (string, error) { return buildOne(dir, "./cmd/agent") }

// BuildHub builds the hub binary (./cmd/hub) into dir and returns its path.
func BuildHub(dir string) (string, error) { return buildOne(dir, "./cmd/hub") }

// BuildPlugin builds the kubectl plugin (./cmd/kubectl-regionsync) into dir and returns its path.
func BuildPlugin(dir string) (string, error) { return buildOne(dir, "./cmd/kubectl-regionsync") }

// BuildTenantOperator builds the demo's tenant operator (./test/cmd/tenant-operator) into dir
// and returns its path.
func BuildTenantOperator(dir string) (string, error) {
	return buildOne(dir, "./test/cmd/tenant-operator")
}

// buildOne builds one command package (relative to the repository) into dir and returns the
// binary's path.
func buildOne(dir, pkg string) (string, error) {
	if err := Build(dir, pkg); err != nil {
		return "", err
	}
	return filepath.Join(dir, filepath.Base(pkg)), nil
}

// Build builds command packages (paths relative to the repository, e.g. ./cmd/agent) into dir,
// each binary named as its package's folder: the one way tests, the benchmarks and the demo build
// the project's binaries.
func Build(dir string, pkgs ...string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %v: %w\n%s", pkgs, err, out)
	}
	return nil
}

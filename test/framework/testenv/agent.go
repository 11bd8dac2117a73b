package testenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/scheme"
	"github.com/regionsync/regionsync/pkg/config"
	"github.com/regionsync/regionsync/test/framework/tenantoperator"
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

// StartAgent runs the agent binary bin as the replica name (POD_NAME) with the configuration
// file configPath against the local cluster of kubeconfig, its output to out; onExit runs once
// it has exited (to close out).
func StartAgent(bin, name, configPath, kubeconfig string, out io.Writer, onExit func(), env ...string) (*Process, error) {
	return StartProcess(bin, []string{"--config", configPath, "--kubeconfig", kubeconfig},
		append([]string{"POD_NAME=" + name}, env...), out, onExit)
}

// TenantAgentConfig is a region's agent configuration that syncs the demo Tenants with the
// suffix, before defaults; tests set what they need on top.
func TenantAgentConfig(region, suffix, managementKubeconfig string) *config.AgentConfig {
	return &config.AgentConfig{
		TypeMeta: config.TypeMeta(),
		Region:   region,
		// No start jitter: tests restart agents and wait for them (it has its own test).
		Management: config.ManagementConfig{Kubeconfig: managementKubeconfig, StartJitter: &metav1.Duration{}},
		Shard:      fleetspec.Shard{RemoteResourceSuffix: suffix},
		Resources:  []fleetspec.Resource{{Group: "demo.regionsync.dev", Version: "v1alpha1", Kind: "Tenant"}},
	}
}

// StartTenantOperator runs the demo tenant operator of region on the cluster of cfg until ctx
// ends, as a real region would (unaware of regionsync). tracer, when set, continues the traces
// found under tenantoperator.DefaultTraceAnnotation.
func StartTenantOperator(ctx context.Context, cfg *rest.Config, region string, tracer trace.Tracer) error {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: Scheme(), Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return err
	}
	r := &tenantoperator.Reconciler{Client: mgr.GetClient(), Region: region}
	if tracer != nil {
		r.Tracer, r.TraceAnnotation = tracer, tenantoperator.DefaultTraceAnnotation
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	go func() { _ = mgr.Start(ctx) }()
	return nil
}

// PollInterval is how often the wait helpers look.
const PollInterval = 100 * time.Millisecond

// Eventually polls cond every PollInterval until it returns nil, and fails tb with its last error
// (what it last saw) when it has not within timeout. Every test that waits for something to
// happen waits with it: no fixed sleep stands in for "it happened".
func Eventually(tb testing.TB, what string, timeout time.Duration, cond func() error) {
	tb.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), PollInterval, timeout, true, func(context.Context) (bool, error) {
		last = cond()
		return last == nil, nil
	})
	if err != nil {
		tb.Fatalf("%s: %v (last: %v)", what, err, last)
	}
}

// Consistently polls cond every PollInterval for d and fails tb the first time it returns an
// error (what it saw): a test that asserts something does not happen watches for it over a
// window, and says what broke it and when.
func Consistently(tb testing.TB, what string, d time.Duration, cond func() error) {
	tb.Helper()
	start := time.Now()
	for {
		if err := cond(); err != nil {
			tb.Fatalf("%s: broken after %s: %v", what, time.Since(start).Round(time.Millisecond), err)
		}
		if time.Since(start) >= d {
			return
		}
		time.Sleep(PollInterval)
	}
}

// Settled waits until sample has returned the same value for quiet (a counter of writes or
// events has stopped moving), and fails tb when it has not within timeout.
func Settled[T comparable](tb testing.TB, what string, quiet, timeout time.Duration, sample func() T) {
	tb.Helper()
	last, since := sample(), time.Now()
	Eventually(tb, what, timeout, func() error {
		if v := sample(); v != last {
			last, since = v, time.Now()
		}
		if q := time.Since(since); q < quiet {
			return fmt.Errorf("still moving (%v, quiet for %s)", last, q.Round(time.Millisecond))
		}
		return nil
	})
}

// Tail is the last n bytes of s (a log's end).
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// Scheme is the scheme of the harness: the shipped binaries' (internal/scheme) plus the demo's
// Tenant API, which the production agent does not link.
func Scheme() *runtime.Scheme {
	s := scheme.New()
	utilruntime.Must(demov1alpha1.AddToScheme(s))
	return s
}

// Tenant is the tests' Tenant fixture: the demo's Tenant ns/name with a display name and the
// "team" plan, changed by each of mutate in order.
func Tenant(ns, name, display string, mutate ...func(*demov1alpha1.Tenant)) *demov1alpha1.Tenant {
	t := &demov1alpha1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       demov1alpha1.TenantSpec{DisplayName: display, Plan: "team"},
	}
	for _, m := range mutate {
		m(t)
	}
	return t
}

// WriteAgentConfig writes cfg as the agent's configuration file path (the YAML a Deployment
// mounts) and returns path.
func WriteAgentConfig(path string, cfg *config.AgentConfig) (string, error) {
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("agent configuration %s: %w", path, err)
	}
	return path, os.WriteFile(path, data, 0o644)
}

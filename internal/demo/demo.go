// Package demo brings up a local regionsync fleet on real control planes: a management cluster
// and two regions (each a kube-apiserver, etcd and kube-controller-manager), the demo tenant
// operator in every region, and (once the engine is built) one agent per region.
package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/regionsync/regionsync/internal/scheme"
	"github.com/regionsync/regionsync/internal/tenantoperator"
	"github.com/regionsync/regionsync/internal/testenv"
)

// Management is the demo's management cluster name; Regions are its regional clusters.
const Management = "management"

// Regions of the demo fleet.
var Regions = []string{"us-east-1", "eu-west-1"}

// Options configures Run.
type Options struct {
	// Dir receives kubeconfigs and logs; it is emptied first.
	Dir string
	// Out receives the demo's narration.
	Out io.Writer
}

// Run starts the fleet, narrates what runs where, and blocks until ctx is cancelled; then it stops
// everything it started.
func Run(ctx context.Context, opts Options) error {
	say := func(format string, args ...any) { fmt.Fprintf(opts.Out, format+"\n", args...) }
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return err
	}
	opts.Dir = dir
	if err := os.RemoveAll(opts.Dir); err != nil {
		return err
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return err
	}
	say("starting %s + %v (kube-apiserver, etcd and kube-controller-manager each) ...", Management, Regions)
	fleet, err := testenv.Start(ctx, append([]string{Management}, Regions...), testenv.Options{Dir: opts.Dir, Log: func(f string, a ...any) { say("  "+f, a...) }})
	if err != nil {
		return err
	}
	defer func() {
		say("stopping the fleet ...")
		if err := fleet.Stop(); err != nil {
			say("stop: %v", err)
		}
		say("stopped; nothing left running.")
	}()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(Regions))
	for _, region := range Regions {
		c := fleet.Cluster(region)
		mgr, err := ctrl.NewManager(c.Config, ctrl.Options{
			Scheme:  scheme.New(),
			Metrics: metricsserver.Options{BindAddress: "0"},
			// One operator per region in one process: same controller name, distinct managers.
			Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		})
		if err != nil {
			return err
		}
		if err := (&tenantoperator.Reconciler{Client: mgr.GetClient(), Region: region}).SetupWithManager(mgr); err != nil {
			return err
		}
		go func() { errc <- mgr.Start(runCtx) }()
		say("tenant operator running in %s", region)
	}

	say("")
	say("fleet is up. kubeconfigs:")
	for _, c := range fleet.Clusters {
		say("  %-10s export KUBECONFIG=%s", c.Name, c.Kubeconfig)
	}
	say("")
	say("regionsync agents are not started yet: the sync engine is built in the core-engine issue.")
	say("Until then, a Tenant created in a region is reconciled by its tenant operator, e.g.:")
	say("  kubectl --kubeconfig %s create -f - <<< '{\"apiVersion\":\"demo.regionsync.dev/v1alpha1\",\"kind\":\"Tenant\",\"metadata\":{\"name\":\"acme\",\"namespace\":\"default\"},\"spec\":{\"displayName\":\"Acme\"}}'",
		filepath.Join(opts.Dir, Regions[0], "kubeconfig"))
	say("")
	say("press Ctrl-C to tear everything down.")
	select {
	case <-ctx.Done():
	case err := <-errc:
		return fmt.Errorf("tenant operator stopped: %w", err)
	}
	cancel()
	time.Sleep(100 * time.Millisecond)
	return nil
}

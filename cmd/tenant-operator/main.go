// Command tenant-operator runs the demo's regional tenant operator against one cluster. It knows
// nothing about regionsync; `make demo` and the e2e suite run it in every region.
package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/regionsync/regionsync/internal/scheme"
	"github.com/regionsync/regionsync/internal/tenantoperator"
)

func main() {
	region := flag.String("region", "local", "region name used in the tenants' endpoints")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse() // --kubeconfig is registered by controller-runtime's config package
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:  scheme.New(),
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err == nil {
		err = (&tenantoperator.Reconciler{Client: mgr.GetClient(), Region: *region}).SetupWithManager(mgr)
	}
	if err == nil {
		err = mgr.Start(ctrl.SetupSignalHandler())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tenant-operator:", err)
		os.Exit(1)
	}
}

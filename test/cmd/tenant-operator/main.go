// Command tenant-operator runs the demo's regional tenant operator against one cluster. It knows
// nothing about regionsync; `make demo` and the e2e suite run it in every region.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/scheme"
	"github.com/regionsync/regionsync/internal/telemetry/tracer"
	"github.com/regionsync/regionsync/test/framework/tenantoperator"
)

var one = 1.0

func main() {
	region := flag.String("region", "local", "region name used in the tenants' endpoints")
	traceAnnotation := flag.String("trace-annotation", tenantoperator.DefaultTraceAnnotation, "annotation holding the W3C traceparent to continue")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse() // --kubeconfig is registered by controller-runtime's config package
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:  tenantScheme(),
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	// Traces go to the collector named by the standard OTEL_EXPORTER_OTLP_* variables, if any.
	tp, shutdown, terr := tracer.NewTracerProvider(context.Background(), fleetspec.Tracing{SamplingRatio: &one},
		tracer.Identity{ServiceName: "tenant-operator", Region: *region, ClusterName: *region})
	if err == nil {
		err = terr
	}
	if err == nil {
		defer func() { _ = shutdown(context.Background()) }()
		err = (&tenantoperator.Reconciler{Client: mgr.GetClient(), Region: *region,
			Tracer: tp.Tracer("tenant-operator"), TraceAnnotation: *traceAnnotation}).SetupWithManager(mgr)
	}
	if err == nil {
		err = mgr.Start(ctrl.SetupSignalHandler())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tenant-operator:", err)
		os.Exit(1)
	}
}

// tenantScheme is the shipped scheme plus the demo's Tenant API.
func tenantScheme() *runtime.Scheme {
	s := scheme.New()
	utilruntime.Must(demov1alpha1.AddToScheme(s))
	return s
}

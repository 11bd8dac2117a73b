package testenv

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	"github.com/regionsync/regionsync/internal/scheme"
	"github.com/regionsync/regionsync/test/framework/tenantoperator"
)

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

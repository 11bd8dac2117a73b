//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/regionsync/regionsync/test/framework/fleet"
	"github.com/regionsync/regionsync/test/framework/testenv"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/telemetry"
	"github.com/regionsync/regionsync/test/framework/otlpsink"
	"github.com/regionsync/regionsync/test/framework/tenantoperator"
)

// traceNamespace holds the traced tenants on management.
const traceNamespace = "tenant-traced" // inside the overlays' namespacePrefix

// RunTraceScenario checks what the deployed agents export to recv: for every region, a change
// made on management under a management-side span is one trace across management, the region's
// agent (its spans carrying cloud.region and k8s.cluster.name) and the regional controller, down
// to the status upload; and no span carries a token.
func RunTraceScenario(t *testing.T, f fleet.Fleet, recv *otlpsink.Receiver) {
	ctx := context.Background()
	tracer, shutdown, err := recv.Tracer(ctx, "e2e-management", "e2e", "management")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(ctx) }()
	if err := f.Management().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: traceNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	keys := shard.NewKeys("regionsync.dev")
	traces := map[string]trace.TraceID{}
	parents := map[string]trace.SpanID{}
	for _, r := range f.Regions() {
		sctx, span := tracer.Start(ctx, "create tenant "+traceNamespace+"/acme-"+r)
		traces[r], parents[r] = span.SpanContext().TraceID(), span.SpanContext().SpanID()
		for _, o := range []client.Object{
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: traceNamespace, Name: tenantoperator.TokenSecretName + "-" + r, Labels: regionLabels(r)}},
			&demov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: traceNamespace, Name: "acme-" + r, Labels: regionLabels(r),
				Annotations: map[string]string{keys.TraceParent: telemetry.Traceparent(sctx)}},
				Spec: demov1alpha1.TenantSpec{DisplayName: "Traced " + r, Plan: "team"}},
		} {
			if err := f.Management().Create(sctx, o); err != nil {
				t.Fatal(err)
			}
		}
		span.End()
	}
	for _, r := range f.Regions() {
		t.Run(r, func(t *testing.T) {
			waitRoundTrip(t, f, keys, traceNamespace, r)
			defer func() {
				var tree bytes.Buffer
				_ = otlpsink.PrintTrace(&tree, "  ", recv.Trace(traces[r]))
				t.Logf("%s: trace received\n%s", r, tree.String())
			}()
			testenv.Eventually(t, fmt.Sprintf("%s: trace %s complete", r, traces[r]), time.Minute, func() error {
				return checkTrace(recv.Trace(traces[r]), r, parents[r])
			})
		})
	}
	t.Run("no secret data in spans", func(t *testing.T) {
		for _, r := range f.Regions() {
			tok := &corev1.Secret{}
			if err := f.Region(r).Get(ctx, client.ObjectKey{Namespace: traceNamespace, Name: tenantoperator.TokenSecretName}, tok); err != nil {
				t.Fatal(err)
			}
			value := string(tok.Data["token"])
			if len(value) < 16 {
				t.Fatalf("%s: token too short to search for", r)
			}
			for _, s := range recv.Spans() {
				fields := map[string]string{"name": s.Name, "status message": s.Error}
				for k, v := range s.Attributes {
					fields["attribute "+k] = v
				}
				for k, v := range s.Resource {
					fields["resource attribute "+k] = v
				}
				for where, v := range fields {
					if strings.Contains(v, value) {
						t.Errorf("span %q %s holds %s's token", s.Name, where, r)
					}
				}
			}
		}
	})
}

// checkTrace says what a region's trace lacks: the agent's sync span as the management span's
// child, from a process whose resource names the region; the agent's status upload; the regional
// controller's reconcile under one of the agent's spans.
func checkTrace(spans []otlpsink.Span, region string, managementSpan trace.SpanID) error {
	byID := map[trace.SpanID]otlpsink.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	if _, ok := byID[managementSpan]; !ok {
		return fmt.Errorf("management span not received (%d spans)", len(spans))
	}
	var sync, upload, operator bool
	for _, s := range spans {
		agent := s.Resource["service.name"] == "regionsync-agent"
		if agent && (s.Resource["cloud.region"] != region || s.Resource["k8s.cluster.name"] != region) {
			return fmt.Errorf("agent span %q has cloud.region=%q k8s.cluster.name=%q, want %q", s.Name, s.Resource["cloud.region"], s.Resource["k8s.cluster.name"], region)
		}
		switch {
		case agent && s.Name == "sync Tenant.demo.regionsync.dev" && s.ParentID == managementSpan:
			sync = true
		case agent && s.Name == "upload status":
			upload = true
		case s.Resource["service.name"] == "tenant-operator" && s.Name == "tenant-operator reconcile":
			if p, ok := byID[s.ParentID]; ok && p.Resource["service.name"] == "regionsync-agent" {
				operator = true
			}
		}
	}
	if !sync || !upload || !operator {
		return fmt.Errorf("agent sync under the management span %v, status upload %v, regional controller under the agent %v (%d spans)", sync, upload, operator, len(spans))
	}
	return nil
}

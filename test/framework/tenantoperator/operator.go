// Package tenantoperator is the demo's regional "tenant operator": an ordinary controller that
// knows nothing about regionsync. It reconciles a local Tenant, writes its status (observed
// generation, phase, an endpoint derived from the spec, and the standard conditions kstatus
// reads: Ready, and Stalled for a spec it cannot serve, such as an unknown plan) and creates the
// tenant-token Secret it controls, which regionsync uploads to the management cluster.
package tenantoperator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	"github.com/regionsync/regionsync/internal/telemetry"
)

// TokenSecretName is the Secret the operator creates for every Tenant.
const TokenSecretName = "tenant-token"

// conflictRetry is how soon a reconcile whose status update met a conflict runs again (the watch
// usually delivers the newer version first).
const conflictRetry = 100 * time.Millisecond

// Phases the operator reports.
const (
	PhaseReady  = "Ready"
	PhaseFailed = "Failed"
)

// The standard conditions the operator reports (kstatus reads them: Stalled=True is Failed,
// Ready=False is InProgress, Ready=True is Current).
const (
	ConditionReady   = "Ready"
	ConditionStalled = "Stalled"
)

// Reasons of the operator's conditions.
const (
	// ReasonProvisioned: the tenant is served (Ready=True).
	ReasonProvisioned = "Provisioned"
	// ReasonUnknownPlan: spec.plan is not a plan the operator serves (Stalled=True, Ready=False);
	// nothing changes until the spec does.
	ReasonUnknownPlan = "UnknownPlan"
	// ReasonTokenFailed: the token Secret could not be created (Ready=False; retried).
	ReasonTokenFailed = "TokenFailed"
)

// Plans are the plans the operator serves (an empty plan is the CRD's default, free).
var Plans = []string{"free", "team", "enterprise"}

// Reconciler reconciles Tenants in one regional cluster.
type Reconciler struct {
	Client client.Client
	// Region is used in the endpoint the operator reports.
	Region string
	// Tracer, when set, traces each reconcile as a continuation of the W3C trace context found
	// in the Tenant's TraceAnnotation (which regionsync writes on the copies it syncs).
	Tracer          trace.Tracer
	TraceAnnotation string
}

// DefaultTraceAnnotation is where regionsync (with its default annotation domain) writes the
// trace context of the sync that wrote a Tenant.
const DefaultTraceAnnotation = "regionsync.dev/traceparent"

// SetupWithManager registers the controller (watching Tenants and the Secrets they own).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&demov1alpha1.Tenant{}).
		Owns(&corev1.Secret{}).
		Named("tenant").
		Complete(r)
}

// Reconcile provisions one Tenant.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	tenant := &demov1alpha1.Tenant{}
	if err := r.Client.Get(ctx, req.NamespacedName, tenant); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !tenant.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // the garbage collector removes the token with its owner
	}
	if r.Tracer != nil {
		ctx = telemetry.ContextFromTraceparent(ctx, tenant.Annotations[r.TraceAnnotation])
		var span trace.Span
		ctx, span = r.Tracer.Start(ctx, "tenant-operator reconcile", trace.WithAttributes(
			attribute.String("tenant", req.String()), attribute.Int64("generation", tenant.Generation)))
		defer span.End()
	}
	status := demov1alpha1.TenantStatus{
		ObservedGeneration: tenant.Generation,
		Phase:              PhaseReady,
		Endpoint:           Endpoint(tenant, r.Region),
		TokenSecret:        TokenSecretName,
		Conditions:         slices.Clone(tenant.Status.Conditions),
	}
	if plan := tenant.Spec.Plan; plan != "" && !slices.Contains(Plans, plan) {
		// A spec this operator cannot serve: stalled until the spec changes (no retry).
		status.Phase, status.Endpoint, status.TokenSecret = PhaseFailed, "", tenant.Status.TokenSecret
		msg := fmt.Sprintf("spec.plan %q is not a plan this region serves (%s)", plan, strings.Join(Plans, ", "))
		setCondition(&status, tenant.Generation, ConditionStalled, metav1.ConditionTrue, ReasonUnknownPlan, msg)
		setCondition(&status, tenant.Generation, ConditionReady, metav1.ConditionFalse, ReasonUnknownPlan, msg)
		if err := r.updateStatus(ctx, tenant, status); err != nil {
			if apierrors.IsConflict(err) {
				return ctrl.Result{RequeueAfter: conflictRetry}, nil
			}
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, nil
	}
	meta.RemoveStatusCondition(&status.Conditions, ConditionStalled)
	if err := r.ensureToken(ctx, tenant); err != nil {
		status.Phase = PhaseFailed
		status.TokenSecret = ""
		setCondition(&status, tenant.Generation, ConditionReady, metav1.ConditionFalse, ReasonTokenFailed, err.Error())
		if uerr := r.updateStatus(ctx, tenant, status); uerr != nil {
			return ctrl.Result{}, uerr
		}
		return ctrl.Result{}, err
	}
	setCondition(&status, tenant.Generation, ConditionReady, metav1.ConditionTrue, ReasonProvisioned, "served at "+status.Endpoint)
	if err := r.updateStatus(ctx, tenant, status); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: conflictRetry}, nil // a newer version is on its way; act on it
		}
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// setCondition sets a condition of the status, for the generation acted on (its transition time
// changes only with its status).
func setCondition(status *demov1alpha1.TenantStatus, generation int64, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: generation})
}

func (r *Reconciler) updateStatus(ctx context.Context, tenant *demov1alpha1.Tenant, status demov1alpha1.TenantStatus) error {
	if equality.Semantic.DeepEqual(tenant.Status, status) {
		return nil
	}
	tenant.Status = status
	if r.Tracer != nil {
		var span trace.Span
		ctx, span = r.Tracer.Start(ctx, "update tenant status")
		defer span.End()
	}
	if err := r.Client.Status().Update(ctx, tenant); err != nil {
		return fmt.Errorf("updating status of tenant %s/%s: %w", tenant.Namespace, tenant.Name, err)
	}
	return nil
}

// ensureToken creates the tenant's token Secret once; an existing one it controls is kept.
func (r *Reconciler) ensureToken(ctx context.Context, tenant *demov1alpha1.Tenant) error {
	secret := &corev1.Secret{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: tenant.Namespace, Name: TokenSecretName}, secret)
	if err == nil {
		if !metav1.IsControlledBy(secret, tenant) {
			return fmt.Errorf("secret %s/%s exists and is not controlled by tenant %s", tenant.Namespace, TokenSecretName, tenant.Name)
		}
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	token := make([]byte, 24)
	if _, err := rand.Read(token); err != nil {
		return err
	}
	secret = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant.Namespace, Name: TokenSecretName},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"token": []byte(hex.EncodeToString(token))},
	}
	if err := controllerutil.SetControllerReference(tenant, secret, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating secret %s/%s: %w", tenant.Namespace, TokenSecretName, err)
	}
	return nil
}

var nonLabel = regexp.MustCompile(`[^a-z0-9]+`)

// Endpoint is where a tenant is served: derived from its spec (display name and plan) and the
// region, e.g. "https://acme-corp.team.us-east-1.tenants.example".
func Endpoint(t *demov1alpha1.Tenant, region string) string {
	slug := strings.Trim(nonLabel.ReplaceAllString(strings.ToLower(t.Spec.DisplayName), "-"), "-")
	plan := t.Spec.Plan
	if plan == "" {
		plan = "free"
	}
	return fmt.Sprintf("https://%s.%s.%s.tenants.example", slug, plan, region)
}

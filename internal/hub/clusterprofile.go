package hub

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/clusterinventory"
	"github.com/regionsync/regionsync/internal/fleetspec"
)

// ClusterProfilesConfig turns on the publication of one ClusterProfile per Region
// (multicluster.x-k8s.io/v1alpha1, SIG-Multicluster's cluster inventory), off by default.
type ClusterProfilesConfig struct {
	// Namespace receives the ClusterProfiles (the cluster set's namespace, which tools reading
	// the inventory are pointed at). Empty: no ClusterProfile is published.
	Namespace string `json:"namespace,omitempty"`
}

// Validate checks the section; p is its path.
func (c ClusterProfilesConfig) Validate(p *field.Path) field.ErrorList {
	if c.Namespace == "" {
		return nil
	}
	return fleetspec.ValidateDNSLabel(p.Child("namespace"), c.Namespace)
}

// ClusterProfileRefresh is how long a ClusterProfile's properties may keep an older observation
// time: a Region's heartbeat alone rewrites its ClusterProfile at most this often, any other
// change at once.
const ClusterProfileRefresh = 5 * time.Minute

// SetupClusterProfiles adds the ClusterProfile controller (regionsync-hub-clusterprofiles) to a
// manager when c names a namespace, and does nothing otherwise: it keeps one ClusterProfile per
// Region in that namespace (clusterinventory.ForRegion: owned by the cluster manager regionsync,
// ControlPlaneHealthy following the Region's liveness, the Region's Ready mirrored, the regional
// Kubernetes version, properties), deletes the ClusterProfile of a Region that is gone, and never
// touches a ClusterProfile another cluster manager owns. Its ClusterProfiles are cached by their
// cluster-manager label in that namespace only (warm on every replica).
func SetupClusterProfiles(mgr manager.Manager, c ClusterProfilesConfig) error {
	if c.Namespace == "" {
		return nil
	}
	if s := mgr.GetScheme(); !s.Recognizes(clusterinventory.GroupVersion.WithKind("ClusterProfile")) {
		if err := clusterinventory.AddToScheme(s); err != nil {
			return fmt.Errorf("hub: ClusterProfile scheme: %w", err)
		}
	}
	profiles, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient(),
		DefaultNamespaces:    map[string]cache.Config{c.Namespace: {}},
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{clusterinventory.LabelClusterManagerKey: clusterinventory.ClusterManagerName}),
	})
	if err != nil {
		return fmt.Errorf("hub: the ClusterProfiles' cache: %w", err)
	}
	if err := mgr.Add(warmCache{profiles}); err != nil {
		return err
	}
	r := &ClusterProfileReconciler{Client: mgr.GetClient(), Profiles: profiles, APIReader: mgr.GetAPIReader(), Namespace: c.Namespace}
	toRegion := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, p *clusterinventory.ClusterProfile) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: p.Name}}}
	})
	return builder.ControllerManagedBy(mgr).
		For(&regionsyncv1alpha1.Region{}).
		WatchesRawSource(source.Kind(profiles, &clusterinventory.ClusterProfile{}, toRegion)).
		Named("regionsync-hub-clusterprofiles").
		Complete(r)
}

// ClusterProfileReconciler keeps a Region's ClusterProfile.
type ClusterProfileReconciler struct {
	// Client reads Regions (cached) and writes ClusterProfiles.
	Client client.Client
	// Profiles reads the ClusterProfiles regionsync owns (cached).
	Profiles client.Reader
	// APIReader reads a ClusterProfile another cluster manager may own (not cached).
	APIReader client.Reader
	// Namespace receives the ClusterProfiles.
	Namespace string
	// Now is the clock (time.Now).
	Now func() time.Time
}

// Reconcile creates, updates or deletes the ClusterProfile of one Region.
func (r *ClusterProfileReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	key := types.NamespacedName{Namespace: r.Namespace, Name: req.Name}
	region := &regionsyncv1alpha1.Region{}
	err := r.Client.Get(ctx, req.NamespacedName, region)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	found := err == nil && region.DeletionTimestamp == nil
	current := &clusterinventory.ClusterProfile{}
	err = r.Profiles.Get(ctx, key, current)
	switch {
	case apierrors.IsNotFound(err):
		current = nil
	case err != nil:
		return reconcile.Result{}, err
	}
	if !found {
		if current == nil || current.Spec.ClusterManager.Name != clusterinventory.ClusterManagerName {
			return reconcile.Result{}, nil
		}
		// The Region is gone: so is its ClusterProfile (UID precondition: only the one read).
		err := r.Client.Delete(ctx, current, client.Preconditions{UID: &current.UID})
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	desired := clusterinventory.ForRegion(region, r.Namespace)
	if current == nil {
		// Not cached: none labelled as ours. One of another cluster manager's may hold the name,
		// or one of ours that lost its label (restored below).
		other := &clusterinventory.ClusterProfile{}
		switch err := r.APIReader.Get(ctx, key, other); {
		case err == nil && other.Spec.ClusterManager.Name == clusterinventory.ClusterManagerName:
			current = other
		case err == nil:
			return reconcile.Result{}, nil
		case !apierrors.IsNotFound(err):
			return reconcile.Result{}, err
		}
	}
	if current == nil {
		created := desired.DeepCopy()
		created.Status = clusterinventory.ClusterProfileStatus{}
		if err := r.Client.Create(ctx, created); err != nil {
			return reconcile.Result{}, client.IgnoreAlreadyExists(err)
		}
		created.Status = desired.Status
		return reconcile.Result{}, r.Client.Status().Update(ctx, created)
	}
	if current.Spec.ClusterManager.Name != clusterinventory.ClusterManagerName {
		return reconcile.Result{}, nil
	}
	if current.Spec.DisplayName != desired.Spec.DisplayName || current.Labels[clusterinventory.LabelClusterManagerKey] != clusterinventory.ClusterManagerName ||
		current.Labels[regionsyncv1alpha1.RegionLabel] != region.Name {
		updated := current.DeepCopy()
		updated.Spec.DisplayName = desired.Spec.DisplayName
		if updated.Labels == nil {
			updated.Labels = map[string]string{}
		}
		for k, v := range desired.Labels {
			updated.Labels[k] = v
		}
		if err := r.Client.Update(ctx, updated); err != nil {
			return reconcile.Result{}, err
		}
		current = updated
	}
	if sameProfileStatus(&current.Status, &desired.Status, now()) {
		return reconcile.Result{}, nil
	}
	updated := current.DeepCopy()
	updated.Status = desired.Status
	return reconcile.Result{}, r.Client.Status().Update(ctx, updated)
}

// sameProfileStatus reports whether the ClusterProfile's status needs no write: equal to the
// desired one but for the properties' observation times, and those not older than
// ClusterProfileRefresh (a heartbeat alone does not rewrite every ClusterProfile every minute).
func sameProfileStatus(current, desired *clusterinventory.ClusterProfileStatus, now time.Time) bool {
	a, b := &clusterinventory.ClusterProfileStatus{}, &clusterinventory.ClusterProfileStatus{}
	current.DeepCopyInto(a)
	desired.DeepCopyInto(b)
	var oldest time.Time
	for _, s := range []*clusterinventory.ClusterProfileStatus{a, b} {
		for i := range s.Properties {
			if s == a && (oldest.IsZero() || s.Properties[i].LastObservedTime.Time.Before(oldest)) {
				oldest = s.Properties[i].LastObservedTime.Time
			}
			s.Properties[i].LastObservedTime = metav1.Time{}
		}
		for i := range s.Conditions {
			s.Conditions[i].LastTransitionTime = metav1.NewTime(s.Conditions[i].LastTransitionTime.Truncate(time.Second))
		}
	}
	if !equality.Semantic.DeepEqual(a, b) {
		return false
	}
	return oldest.IsZero() || now.Sub(oldest) < ClusterProfileRefresh
}

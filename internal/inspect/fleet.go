package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/shard/claim"
)

// RegionResource is the Region kind's resource on management.
var RegionResource = regionsyncv1alpha1.GroupVersion.WithResource("regions")

// DistributionKind is the hub's Distribution kind, served only where the hub is installed.
var DistributionKind = schema.GroupKind{Group: regionsyncv1alpha1.GroupVersion.Group, Kind: "Distribution"}

// Clients are the clients of one cluster that the inspections read it with.
type Clients struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Metadata lists objects' metadata only (Doctor).
	Metadata metadata.Interface
	// Mapper maps kinds to resources (Status and Doctor, for the Distribution kind and the synced
	// kinds); ReadExplainInput does without.
	Mapper meta.RESTMapper
}

// ShardRecord is one region's shard, as its shard Lease records it (and, where the operator
// registered it, its Region's spec.shard).
type ShardRecord struct {
	// Region is the region the Lease is named after ("region-<region>").
	Region string
	// Lease is the Lease's namespace/name.
	Lease string
	// Def is the recorded shard definition; DefErr says why there is none.
	Def    shard.Definition
	DefErr error
	// State is the recorded claim state (claim.StateSyncing or claim.StateRefused; "" before the
	// agent recorded one).
	State string
	// Holder is the Lease's holder identity; Replica the replica that syncs (for people).
	Holder, Replica string
	// Live: the holder holds the Lease and its lease has not run out.
	Live bool
	// Renewed is the Lease's last renewal (zero: never); Duration its lease duration (zero:
	// none recorded).
	Renewed  time.Time
	Duration time.Duration
	// Registered is when the shard was first recorded (zero: not yet).
	Registered time.Time
	// NoLease: the record comes from the Region's spec.shard alone; no agent holds a Lease for it.
	NoLease bool
	// RegisteredShard is the Region's spec.shard when the operator registered one (it is what
	// the agent must run with: the agent refuses to claim otherwise): it adds the region's
	// localNamespaceSuffix and annotation domain, which the Lease does not record.
	RegisteredShard *regionsyncv1alpha1.RegionShard
}

// localSuffix returns the region's localNamespaceSuffix and whether it is known (registered).
func (s *ShardRecord) localSuffix() (string, bool) {
	if s.RegisteredShard == nil {
		return "", false
	}
	return s.RegisteredShard.LocalNamespaceSuffix, true
}

// keys are the region's annotation keys: its registered annotation domain, else def.
func (s *ShardRecord) keys(def shard.Keys) shard.Keys {
	if s.RegisteredShard == nil || s.RegisteredShard.AnnotationDomain == "" || s.RegisteredShard.AnnotationDomain == def.Domain {
		return def
	}
	return shard.NewKeys(s.RegisteredShard.AnnotationDomain)
}

// Fleet is what one inspection read from management: every shard Lease and every Region, listed
// once each (never one request per region).
type Fleet struct {
	// Shards by region name.
	Shards map[string]*ShardRecord
	// Regions by name.
	Regions map[string]*regionsyncv1alpha1.Region
}

// names returns every region that has a Lease or a Region, sorted.
func (f *Fleet) names() []string {
	return sets.List(sets.KeySet(f.Shards).Union(sets.KeySet(f.Regions)))
}

// shardList returns the shard records sorted by region.
func (f *Fleet) shardList() []*ShardRecord {
	out := make([]*ShardRecord, 0, len(f.Shards))
	for _, s := range f.Shards {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Region < out[j].Region })
	return out
}

// LoadFleet lists the shard Leases in namespace and the Regions on management, two requests, and
// judges the Leases' liveness at now.
func LoadFleet(ctx context.Context, c *Clients, namespace string, now time.Time) (*Fleet, error) {
	leases, err := c.Kube.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{LabelSelector: claim.LeaseLabel + "=true"})
	if err != nil {
		return nil, fmt.Errorf("listing the shard Leases in namespace %s on management: %w", namespace, err)
	}
	f := &Fleet{Shards: map[string]*ShardRecord{}, Regions: map[string]*regionsyncv1alpha1.Region{}}
	for i := range leases.Items {
		if s, ok := shardOf(&leases.Items[i], now); ok {
			f.Shards[s.Region] = s
		}
	}
	list, err := c.Dynamic.Resource(RegionResource).List(ctx, metav1.ListOptions{})
	switch {
	case isNotServed(err):
		// No Region CRD on management: the agents publish no health; the Leases still tell.
	case err != nil:
		return nil, fmt.Errorf("listing the Regions on management: %w", err)
	default:
		for i := range list.Items {
			r := &regionsyncv1alpha1.Region{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, r); err != nil {
				return nil, fmt.Errorf("reading Region %s: %w", list.Items[i].GetName(), err)
			}
			f.Regions[r.Name] = r
			f.register(r)
		}
	}
	return f, nil
}

// register adds a Region's spec.shard to its shard record: to the Lease's when both describe the
// same shard, as the only record when the region has no Lease or its Lease records no shard (its
// agent has not claimed: it may be down, or refuse because its configuration differs).
func (f *Fleet) register(r *regionsyncv1alpha1.Region) {
	reg := r.Spec.Shard
	if reg == nil {
		return
	}
	def := shard.Definition{
		Region:                r.Name,
		NamespacePrefix:       reg.NamespacePrefix,
		RemoteNamespaceSuffix: reg.RemoteNamespaceSuffix,
		RemoteResourceSuffix:  reg.RemoteResourceSuffix,
		LabelSelector:         reg.LabelSelector,
		Kinds:                 slices.Sorted(slices.Values(reg.Kinds)),
	}
	s := f.Shards[r.Name]
	switch {
	case s == nil:
		f.Shards[r.Name] = &ShardRecord{Region: r.Name, Lease: none, Def: def, NoLease: true, RegisteredShard: reg}
	case s.DefErr != nil:
		s.Def, s.DefErr, s.RegisteredShard = def, nil, reg
	case reflect.DeepEqual(s.Def, def):
		s.RegisteredShard = reg
	}
}

// shardOf reads a shard Lease; ok is false for a Lease not named "region-<region>".
func shardOf(l *coordinationv1.Lease, now time.Time) (*ShardRecord, bool) {
	region, ok := strings.CutPrefix(l.Name, claim.LeaseName(""))
	if !ok || region == "" {
		return nil, false
	}
	s := &ShardRecord{
		Region:  region,
		Lease:   l.Namespace + "/" + l.Name,
		State:   l.Annotations[claim.StateAnnotation],
		Replica: l.Annotations[claim.HolderAnnotation],
	}
	s.Holder, s.Live = claim.LiveHolder(l, now)
	if l.Spec.RenewTime != nil {
		s.Renewed = l.Spec.RenewTime.Time
	}
	if l.Spec.LeaseDurationSeconds != nil {
		s.Duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	if t, err := time.Parse(time.RFC3339Nano, l.Annotations[claim.RegisteredAnnotation]); err == nil {
		s.Registered = t
	}
	raw, ok := l.Annotations[claim.DefinitionAnnotation]
	switch {
	case !ok:
		s.DefErr = fmt.Errorf("shard Lease %s records no shard (annotation %s missing: the agent has not claimed yet)", s.Lease, claim.DefinitionAnnotation)
	default:
		if err := json.Unmarshal([]byte(raw), &s.Def); err != nil {
			s.DefErr = fmt.Errorf("shard Lease %s: annotation %s is not a shard definition: %w", s.Lease, claim.DefinitionAnnotation, err)
		} else if s.Def.Region != region {
			s.DefErr = fmt.Errorf("shard Lease %s records the shard of region %q", s.Lease, s.Def.Region)
		}
	}
	return s, true
}

// isNotServed reports whether a list failed because the API server does not serve the resource
// (a list answers NotFound for nothing else).
func isNotServed(err error) bool { return apierrors.IsNotFound(err) }

// condition returns the condition of type t, or nil.
func condition(r *regionsyncv1alpha1.Region, t string) *metav1.Condition {
	if r == nil {
		return nil
	}
	for i := range r.Status.Conditions {
		if r.Status.Conditions[i].Type == t {
			return &r.Status.Conditions[i]
		}
	}
	return nil
}

// countsOf returns a Region's counts of kind, or nil.
func countsOf(r *regionsyncv1alpha1.Region, kind string) *regionsyncv1alpha1.ResourceCounts {
	if r == nil {
		return nil
	}
	for i := range r.Status.Resources {
		if r.Status.Resources[i].Resource == kind {
			return &r.Status.Resources[i]
		}
	}
	return nil
}

// none stands for a missing value in text.
const none = "(none)"

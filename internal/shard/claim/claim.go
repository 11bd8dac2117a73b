// Package claim holds a region's shard on management: client-go leader election on the region's
// shard Lease, and a refusal to sync while another live shard overlaps this one (the overlap
// itself is decided by the pure logic of package shard).
package claim

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clientretry "k8s.io/client-go/util/retry"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/retry"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/telemetry"
)

// Lease bookkeeping on management. These keys are regionsync's own (not under the configurable
// annotation domain): every agent of every fleet must read them alike.
const (
	// LeaseLabel marks shard Leases so that agents can list each other's.
	LeaseLabel = "regionsync.dev/shard-lease"
	// DefinitionAnnotation holds the claimed Definition as JSON.
	DefinitionAnnotation = "regionsync.dev/shard"
	// StateAnnotation is "Syncing" or "Refused".
	StateAnnotation = "regionsync.dev/shard-state"
	// HolderAnnotation names the replica that syncs (for people; the Lease holder is the fleet).
	HolderAnnotation = "regionsync.dev/holder"
	// RegisteredAnnotation is when the shard was first recorded on its Lease (RFC 3339, ns): of
	// two overlapping shards the one registered first keeps syncing.
	RegisteredAnnotation = "regionsync.dev/registered"
)

// Shard states recorded on the Lease.
const (
	StateSyncing = "Syncing"
	StateRefused = "Refused"
)

// LeaseName is the name of a region's shard Lease.
func LeaseName(region string) string { return "region-" + region }

// State is the claim as this agent sees it.
type State struct {
	// Held: this agent holds the region's Lease.
	Held bool
	// Syncing: held and no overlapping live shard; the agent syncs.
	Syncing bool
	// Reason is one of the shard claim reasons of the Region API (regionsyncv1alpha1.ReasonClaimed, …).
	Reason  string
	Message string
}

// Claimer claims a region's shard on management with client-go's leader election on the Lease
// "region-<region>" and refuses to sync while another live shard overlaps its own.
type Claimer struct {
	// Client talks to management.
	Client kubernetes.Interface
	// Namespace holds the shard Leases on management.
	Namespace string
	Def       shard.Definition
	// Identity is the fleet's identity: every replica of one fleet (one local cluster, one
	// leader-election namespace) shares it, so a new local leader takes the claim over at once;
	// another fleet for the same region waits.
	Identity string
	// Holder names this replica (recorded on the Lease, shown on the Region).
	Holder string

	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	Log                                       logr.Logger

	// WhileHeld runs while the Lease is held (the Region status reporter).
	WhileHeld func(ctx context.Context)
	// WhileSyncing runs while the Lease is held and no live shard overlaps (the controllers). Its
	// ctx ends the moment the claim is lost.
	WhileSyncing func(ctx context.Context) error

	mu    sync.Mutex
	state State
}

// State returns the current claim state.
func (c *Claimer) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

func (c *Claimer) set(s State) {
	c.mu.Lock()
	changed := c.state != s
	c.state = s
	c.mu.Unlock()
	if !changed {
		return
	}
	c.Log.Info("shard claim", "held", s.Held, "syncing", s.Syncing, "reason", s.Reason, "message", s.Message)
	telemetry.ShardClaimed.Set(boolGauge(s.Syncing))
	for _, r := range []string{regionsyncv1alpha1.ReasonHeldByOtherFleet, regionsyncv1alpha1.ReasonShardOverlap} {
		telemetry.ShardConflict.WithLabelValues(r).Set(boolGauge(s.Reason == r))
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Start claims the shard until ctx ends, retrying after every loss. It releases the Lease when
// ctx ends.
func (c *Claimer) Start(ctx context.Context) error {
	c.set(State{Reason: regionsyncv1alpha1.ReasonWaiting, Message: "waiting for the shard Lease " + c.Namespace + "/" + LeaseName(c.Def.Region)})
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: c.Namespace, Name: LeaseName(c.Def.Region)},
		Client:     c.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: c.Identity},
		Labels:     map[string]string{LeaseLabel: "true"},
	}
	return retry.Until(ctx, retry.Every(c.RetryPeriod), func(ctx context.Context, _ time.Duration) (bool, error) {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			Name:            LeaseName(c.Def.Region),
			LeaseDuration:   c.LeaseDuration,
			RenewDeadline:   c.RenewDeadline,
			RetryPeriod:     c.RetryPeriod,
			ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: c.held,
				OnStoppedLeading: func() {
					c.set(State{Reason: regionsyncv1alpha1.ReasonWaiting, Message: "shard Lease lost; writes to management stopped"})
				},
				OnNewLeader: func(identity string) {
					if identity != c.Identity {
						c.set(State{Reason: regionsyncv1alpha1.ReasonHeldByOtherFleet,
							Message: fmt.Sprintf("shard Lease %s/%s is held by %s; another fleet syncs region %s", c.Namespace, LeaseName(c.Def.Region), identity, c.Def.Region)})
					}
				},
			},
		})
		if err != nil {
			return false, err
		}
		le.Run(ctx)
		return false, nil
	})
}

// held runs while the Lease is held: it records the shard on the Lease, refuses while another
// live Syncing shard overlaps, and otherwise runs WhileSyncing.
func (c *Claimer) held(ctx context.Context) {
	var wg sync.WaitGroup
	if c.WhileHeld != nil {
		wg.Add(1)
		go func() { defer wg.Done(); c.WhileHeld(ctx) }()
	}
	defer wg.Wait()
	var after time.Duration
	_ = retry.Paced(ctx, func() time.Duration { return after }, func(ctx context.Context) (bool, error) {
		after = c.round(ctx)
		return false, nil
	})
}

// round is one round of held; it returns how long to wait before the next.
func (c *Claimer) round(ctx context.Context) time.Duration {
	collision, marked, err := c.collision(ctx)
	if err != nil {
		c.Log.Error(err, "reading other shards; retrying")
		return c.RetryPeriod
	}
	if collision != "" {
		c.set(State{Held: true, Reason: regionsyncv1alpha1.ReasonShardOverlap, Message: collision})
		if _, err := c.annotate(ctx, StateRefused); err != nil {
			c.Log.Error(err, "recording the refused shard on its Lease")
		}
		return 3 * c.RetryPeriod
	}
	remarked, err := c.annotate(ctx, StateSyncing)
	if err != nil {
		c.Log.Error(err, "recording the shard on its Lease; retrying")
		return c.RetryPeriod
	}
	// Two overlapping shards that started together both got here: the older registration
	// keeps syncing, the younger steps back (collision sees the older one as Syncing). What
	// settles it is a list made after the shard was marked Syncing on its Lease: the list
	// above already was one when the Lease said so before it (a restart over the shard's own
	// record, as every region of a fleet restarting at once does), and the record did not
	// change since; otherwise the shard lists again.
	if !marked || remarked {
		if collision, _, err = c.collision(ctx); err == nil && collision != "" {
			return 0
		}
	}
	c.set(State{Held: true, Syncing: true, Reason: regionsyncv1alpha1.ReasonClaimed, Message: "syncing " + c.Def.String()})
	if c.WhileSyncing == nil {
		<-ctx.Done()
		return 0
	}
	if err := c.WhileSyncing(ctx); err != nil && ctx.Err() == nil {
		c.Log.Error(err, "sync stopped; restarting")
		return c.RetryPeriod
	}
	return 0
}

// ReservationGrace is how long a shard stays reserved after its Lease expired: a region whose
// fleet is being replaced keeps its objects; an overlapping shard does not take them over. A
// region that is gone for good releases its reservation when its Lease is deleted (or after this
// grace).
const ReservationGrace = 10 * time.Minute

// collision returns a description of another region's syncing shard that overlaps ours and was
// registered first (its Lease is older), or "". marked reports whether our own Lease, in the
// same list, already recorded this shard as Syncing (its definition, state and registration).
func (c *Claimer) collision(ctx context.Context) (collision string, marked bool, err error) {
	leases, err := c.Client.CoordinationV1().Leases(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LeaseLabel + "=true"})
	if err != nil {
		return "", false, err
	}
	var own *coordinationv1.Lease
	for i := range leases.Items {
		if leases.Items[i].Name == LeaseName(c.Def.Region) {
			own = &leases.Items[i]
		}
	}
	if own != nil {
		def, err := c.definition()
		if err != nil {
			return "", false, err
		}
		marked = records(own, def, StateSyncing)
	}
	sort.Slice(leases.Items, func(i, j int) bool { return leases.Items[i].Name < leases.Items[j].Name })
	now := time.Now()
	for i := range leases.Items {
		l := &leases.Items[i]
		if l.Name == LeaseName(c.Def.Region) || !reserved(l, now) || l.Annotations[StateAnnotation] != StateSyncing {
			continue
		}
		var other shard.Definition
		if json.Unmarshal([]byte(l.Annotations[DefinitionAnnotation]), &other) != nil {
			continue
		}
		overlap, why := shard.Overlap(c.Def, other)
		if overlap && (own == nil || !registeredBefore(own, l)) {
			return fmt.Sprintf("shard of %s collides with the shard of %s (Lease %s/%s, held by %s): %s",
				c.Def, other, c.Namespace, l.Name, orNone(deref(l.Spec.HolderIdentity)), why), marked, nil
		}
	}
	return "", marked, nil
}

// definition is the shard definition as its Lease records it.
func (c *Claimer) definition() (string, error) {
	def, err := json.Marshal(c.Def)
	return string(def), err
}

// records reports whether Lease l records the shard definition def in state, with a
// registration (the replica named on it aside).
func records(l *coordinationv1.Lease, def, state string) bool {
	_, registered := registeredAt(l)
	return registered && l.Annotations[DefinitionAnnotation] == def && l.Annotations[StateAnnotation] == state
}

// registeredBefore reports whether the shard of lease a was registered before that of lease b:
// the first region to claim a shard keeps it, whichever fleet holds it now. A Lease not yet
// registered is the newest; names break exact ties.
func registeredBefore(a, b *coordinationv1.Lease) bool {
	ta, oka := registeredAt(a)
	tb, okb := registeredAt(b)
	switch {
	case !oka && !okb:
		return a.Name < b.Name
	case !oka:
		return false
	case !okb:
		return true
	case !ta.Equal(tb):
		return ta.Before(tb)
	}
	return a.Name < b.Name
}

func registeredAt(l *coordinationv1.Lease) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, l.Annotations[RegisteredAnnotation])
	return t, err == nil
}

// reserved reports whether a shard Lease is held, or expired less than ReservationGrace ago.
func reserved(l *coordinationv1.Lease, now time.Time) bool {
	expiry, ok := Expiry(l)
	return ok && expiry.Add(ReservationGrace).After(now)
}

// Expiry is when a Lease's lease runs out (its last renewal plus its duration); ok is false for
// a Lease that was never renewed or has no duration.
func Expiry(l *coordinationv1.Lease) (time.Time, bool) {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return time.Time{}, false
	}
	return l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second), true
}

// LiveHolder returns a Lease's holder and whether that holder is live at now: it holds the Lease
// and its lease has not run out. A Lease released on a graceful shutdown has no holder.
func LiveHolder(l *coordinationv1.Lease, now time.Time) (string, bool) {
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	expiry, ok := Expiry(l)
	return holder, holder != "" && ok && expiry.After(now)
}

func orNone(s string) string {
	if s == "" {
		return "nobody (released)"
	}
	return s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// annotate records the shard definition, its state and this replica on the Lease, only when
// they changed; remarked reports whether the definition, the state or the registration did (not
// only the replica). The patch is conditional on the Lease read; a renewal that lands between
// the read and the patch (client-go's elector writes the same Lease) is read again at once, not
// retried a whole RetryPeriod later.
func (c *Claimer) annotate(ctx context.Context, state string) (remarked bool, err error) {
	err = clientretry.RetryOnConflict(clientretry.DefaultRetry, func() error {
		var err error
		remarked, err = c.annotateOnce(ctx, state)
		return err
	})
	return remarked, err
}

func (c *Claimer) annotateOnce(ctx context.Context, state string) (remarked bool, err error) {
	leases := c.Client.CoordinationV1().Leases(c.Namespace)
	l, err := leases.Get(ctx, LeaseName(c.Def.Region), metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	def, err := c.definition()
	if err != nil {
		return false, err
	}
	recorded := records(l, def, state)
	want := map[string]string{DefinitionAnnotation: def, StateAnnotation: state, HolderAnnotation: c.Holder}
	if _, ok := registeredAt(l); !ok {
		want[RegisteredAnnotation] = time.Now().UTC().Format(time.RFC3339Nano)
	}
	same := true
	for k, v := range want {
		if l.Annotations[k] != v {
			same = false
		}
	}
	if same {
		return false, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": want, "resourceVersion": l.ResourceVersion}})
	if err != nil {
		return false, err
	}
	_, err = leases.Patch(ctx, l.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: shard.FieldManager})
	return !recorded, err
}

package syncer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/regionsync/regionsync/internal/telemetry"
)

// Management identity pinning (docs/design/safety.md#management-identity-pinning). When it first claims
// the shard, the agent records the management cluster's identity (the UID of its kube-system
// namespace) in a ConfigMap of the region. On every check afterwards — before the first claim,
// every IdentityCheckInterval while syncing, before the first write after every new connection
// to management (connVerifier), and again until a refused identity is accepted —
// it compares what management says with the record (or with management.clusterID, which an
// operator sets to confirm a new identity). On a mismatch nothing is written to either cluster
// and nothing is deleted. The same check notices management's resourceVersion moving backwards
// (an etcd restore keeps the identity). Either episode ends with a fresh list of every
// management informer, so nothing the agent saw during it outlives it.

// ReasonManagementIdentityMismatch is the reason of the local Warning event the agent emits when
// the management cluster's identity differs from the recorded or configured one.
const ReasonManagementIdentityMismatch = "ManagementIdentityMismatch"

// IdentityCheckInterval is how often a syncing agent checks management's identity and
// resourceVersion: one list request (a single namespace, by name) per interval.
const IdentityCheckInterval = 15 * time.Second

// identityRecordKey is the ConfigMap key holding the recorded identity.
const identityRecordKey = "clusterID"

// IdentityRecordName is the name of the ConfigMap, in the agent's namespace, recording the
// management identity of region.
func IdentityRecordName(region string) string { return "regionsync-management-identity-" + region }

// IdentityState is the outcome of the last identity check.
type IdentityState struct {
	// Checked is false until management answered a check.
	Checked bool
	// Accepted is true when management's identity is the recorded (or confirmed) one.
	Accepted bool
	// Observed is management's identity (its kube-system namespace UID); Expected the recorded
	// or configured one ("" when none is recorded yet).
	Observed, Expected string
	// Message explains a refusal: what differs and how an operator confirms.
	Message string
}

// identityPin keeps the management identity check's state.
type identityPin struct {
	// base reaches management; every check uses a fresh connection of its own (freshClient).
	base *rest.Config
	// guard opens management writes after a check that accepted management, for the
	// connections made before that check started.
	guard     *connVerifier
	local     client.Client // writes the record (never gated: it is the agent's own state)
	reader    client.Reader // reads the record uncached
	record    types.NamespacedName
	confirmed string // management.clusterID
	events    func(eventType, reason, note string)

	mu    sync.Mutex
	state IdentityState
	// maxRV is the highest management resourceVersion observed while the identity was accepted.
	maxRV uint64
	// episode is set when a mismatch or a resourceVersion going backwards was observed; the
	// next acceptance lists management afresh first.
	episode bool
	// recordErr is why the record could not be written at the last claim (nil: written or not due).
	recordErr error
}

// observe reads management's identity and current resourceVersion in one request.
func (p *identityPin) observe(ctx context.Context) (uid string, rv uint64, err error) {
	mgmt, done, err := freshClient(p.base)
	if err != nil {
		return "", 0, fmt.Errorf("management client: %w", err)
	}
	defer done()
	l, err := mgmt.CoreV1().Namespaces().List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", metav1.NamespaceSystem).String(),
	})
	if err != nil {
		return "", 0, fmt.Errorf("reading management's identity (namespace kube-system): %w", err)
	}
	if len(l.Items) != 1 {
		return "", 0, errors.New("reading management's identity: namespace kube-system not found")
	}
	rv, err = strconv.ParseUint(l.ResourceVersion, 10, 64)
	if err != nil {
		// An API server whose resourceVersions are not etcd revisions: no ordering to check.
		rv = 0
	}
	return string(l.Items[0].UID), rv, nil
}

// recorded returns the recorded identity ("" when there is none).
func (p *identityPin) recorded(ctx context.Context) (string, error) {
	cm := &corev1.ConfigMap{}
	if err := p.reader.Get(ctx, p.record, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("reading the management identity record %s: %w", p.record, err)
	}
	return cm.Data[identityRecordKey], nil
}

// write records uid (creating or updating the record).
func (p *identityPin) write(ctx context.Context, uid, host string) error {
	cm := &corev1.ConfigMap{}
	err := p.reader.Get(ctx, p.record, cm)
	data := map[string]string{identityRecordKey: uid, "host": host, "recordedAt": time.Now().UTC().Format(time.RFC3339)}
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: p.record.Namespace, Name: p.record.Name,
			Labels: map[string]string{"app.kubernetes.io/part-of": "regionsync"}}, Data: data}
		err = p.local.Create(ctx, cm)
		if apierrors.IsNotFound(err) {
			// The fleet's namespace does not exist (a host without leader election that never
			// created it): create it for the record.
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.record.Namespace, Labels: cm.Labels}}
			if err = p.local.Create(ctx, ns); err == nil || apierrors.IsAlreadyExists(err) {
				err = p.local.Create(ctx, cm)
			}
		}
	case err == nil:
		cm.Data = data
		err = p.local.Update(ctx, cm)
	}
	if err != nil {
		return fmt.Errorf("recording the management identity in %s: %w", p.record, err)
	}
	return nil
}

// verdict is what one check concluded.
type identityVerdict int

const (
	// identityUnknown: management or the record could not be read; nothing changes.
	identityUnknown identityVerdict = iota
	// identityAccepted: management is the recorded (or confirmed) cluster.
	identityAccepted
	// identityRefused: another identity; nothing may be written or deleted.
	identityRefused
	// identityRewound: the identity is the same but management's resourceVersion went backwards.
	identityRewound
)

// judge is the pure decision of one check: observed against the record and the configured
// confirmation, and rv against the highest accepted resourceVersion.
func judge(observed, record, confirmed string, rv, maxRV uint64) (identityVerdict, string) {
	expected := record
	if confirmed != "" {
		expected = confirmed
	}
	switch {
	case expected == "":
		return identityAccepted, "" // first connection: recorded when the agent first syncs
	case observed != expected && confirmed != "":
		return identityRefused, fmt.Sprintf("management cluster identity %s differs from management.clusterID %s: writing and deleting nothing; correct management.kubeconfig, or set management.clusterID to %s if this is the right cluster", observed, confirmed, observed)
	case observed != expected:
		return identityRefused, fmt.Sprintf("management cluster identity %s differs from the one recorded at the first sync, %s: writing and deleting nothing; if this cluster is the right one, confirm it with management.clusterID=%s or by deleting the record", observed, record, observed)
	case rv > 0 && maxRV > 0 && rv < maxRV:
		return identityRewound, fmt.Sprintf("management resourceVersion went backwards (%d after %d): restored from a backup? listing afresh before syncing again", rv, maxRV)
	}
	return identityAccepted, ""
}

// check runs one identity check and returns its verdict; it writes nothing (recordAccepted does,
// once the shard is claimed). Missing rights to read the identity, or a record that could not be
// written, refuse like a mismatch (nothing is synced unchecked), with a message naming the rule
// to grant.
func (p *identityPin) check(ctx context.Context) identityVerdict {
	snapshot := p.guard.snapshot()
	uid, rv, err := p.observe(ctx)
	if err == nil {
		var record string
		if record, err = p.recorded(ctx); err == nil {
			v := p.judge(uid, record, rv)
			if v == identityAccepted || v == identityRewound { // the same cluster (a rewind is handled by the relist)
				p.guard.accepted(snapshot)
			} else {
				p.guard.refused()
			}
			return v
		}
	}
	if apierrors.IsForbidden(err) {
		p.set(IdentityState{Checked: true, Message: "cannot check management's identity, so nothing is synced: " + err.Error() +
			" (the region identity needs list on namespaces resourceNames [kube-system] on management, the agent get/create/update on ConfigMaps in its namespace: deploy/kustomize)"},
			identityRefused, 0)
		return identityRefused
	}
	return identityUnknown
}

func (p *identityPin) judge(uid, record string, rv uint64) identityVerdict {
	v, msg := judge(uid, record, p.confirmed, rv, p.rewindBase())
	p.mu.Lock()
	recordErr := p.recordErr
	p.mu.Unlock()
	if v == identityAccepted && record != uid && recordErr != nil {
		// The record could not be written at the last claim: still refused, with the reason.
		p.set(IdentityState{Checked: true, Observed: uid, Expected: record, Message: recordErr.Error()}, identityRefused, 0)
		return identityRefused
	}
	p.set(IdentityState{Checked: true, Accepted: v != identityRefused, Observed: uid, Expected: record, Message: msg}, v, rv)
	return v
}

// recordAccepted records the accepted identity where the record differs (none yet, or an
// operator confirmed a new identity); only the replica that claimed the shard calls it, before
// its first write. A failure refuses like a mismatch until a later claim period records it.
func (p *identityPin) recordAccepted(ctx context.Context, host string) error {
	p.mu.Lock()
	s := p.state
	p.mu.Unlock()
	if !s.Accepted || s.Observed == "" {
		return fmt.Errorf("management identity not accepted: %s", s.Message)
	}
	if s.Expected == s.Observed {
		return nil
	}
	err := p.write(ctx, s.Observed, host)
	p.mu.Lock()
	p.recordErr = nil
	if err != nil {
		p.recordErr = fmt.Errorf("nothing is synced until management's identity is recorded: %w", err)
	} else {
		p.state.Expected = s.Observed
	}
	p.mu.Unlock()
	if err != nil {
		p.set(IdentityState{Checked: true, Observed: s.Observed, Expected: s.Expected, Message: p.recordErr.Error()}, identityRefused, 0)
	}
	return err
}

func (p *identityPin) rewindBase() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.maxRV
}

// set records a check's outcome, reporting the start of a refusal once (event, metric).
func (p *identityPin) set(s IdentityState, v identityVerdict, rv uint64) {
	p.mu.Lock()
	wasRefused := p.state.Checked && !p.state.Accepted
	p.state = s
	switch v {
	case identityAccepted:
		p.maxRV = max(p.maxRV, rv)
	case identityRewound:
		p.maxRV = rv // the restored cluster's history is the one to follow from now on
		p.episode = true
	case identityRefused:
		p.episode = true
	}
	p.mu.Unlock()
	refused := s.Checked && !s.Accepted
	if refused {
		telemetry.ManagementIdentityMismatch.Set(1)
	} else {
		telemetry.ManagementIdentityMismatch.Set(0)
	}
	if refused && !wasRefused && p.events != nil {
		p.events(corev1.EventTypeWarning, ReasonManagementIdentityMismatch, s.Message)
	}
}

// takeEpisode reports (and clears) whether an episode happened since the last call.
func (p *identityPin) takeEpisode() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.episode
	p.episode = false
	return e
}

// State returns the last check's outcome.
func (p *identityPin) State() IdentityState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// identityAwaitInterval paces the checks while management's identity is refused or unknown, so
// that an operator's confirmation (deleting the record) is noticed within seconds.
var identityAwaitInterval = 5 * time.Second

// ManagementIdentity returns the outcome of the last management identity check.
func (e *Engine) ManagementIdentity() IdentityState { return e.identity.State() }

// AwaitManagementIdentity returns true once management's identity is accepted, false when ctx
// ends first. While it is refused, nothing is claimed, written or deleted; after a refusal or a
// resourceVersion that went backwards, every management informer lists afresh before it returns.
func (e *Engine) AwaitManagementIdentity(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-e.sessionReady:
	}
	refusedLogged := false
	for {
		switch e.identity.check(ctx) {
		case identityAccepted, identityRewound:
			if !e.identity.takeEpisode() {
				return true
			}
			if err := e.relist(ctx); err != nil {
				e.log.Error(err, "listing management afresh after an identity episode; retrying")
				e.identity.markEpisode()
				break
			}
			e.log.Info("management listed afresh; syncing again", "clusterID", e.identity.State().Observed)
			return true
		case identityRefused:
			if s := e.identity.State(); !refusedLogged {
				e.log.Error(errors.New(s.Message), "management identity refused", "observed", s.Observed, "expected", s.Expected, "host", e.remoteConfig.Host)
				refusedLogged = true
			}
		case identityUnknown:
			e.log.V(1).Info("management identity not checked yet; retrying")
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(identityAwaitInterval):
		}
	}
}

// WatchManagementIdentity checks management's identity every IdentityCheckInterval until ctx
// ends; on a refused identity or a resourceVersion that went backwards it calls stop (which ends
// the claim period: the write gate closes at once) and returns.
func (e *Engine) WatchManagementIdentity(ctx context.Context, stop func()) {
	t := time.NewTicker(IdentityCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-e.guard.dialed: // a new connection: verified before anything is written over it
		}
		switch e.identity.check(ctx) {
		case identityRefused, identityRewound:
			s := e.identity.State()
			e.log.Error(errors.New(s.Message), "management changed under the agent: syncing stopped", "observed", s.Observed, "expected", s.Expected)
			stop()
			return
		}
	}
}

func (p *identityPin) markEpisode() {
	p.mu.Lock()
	p.episode = true
	p.mu.Unlock()
}

// relist replaces every available kind's management informer with a new one (a fresh list) and
// forgets the kind's deletion holds, which were judged on what the agent saw before.
func (e *Engine) relist(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, cacheWaitTimeout)
	defer cancel()
	c := (*e.session.Load()).GetCache()
	for _, k := range e.kinds {
		select {
		case <-k.r.available:
		default:
			continue // its informers are still being started: they will list afresh anyway
		}
		obj := unstructuredFor(k.r.GVK)
		if err := c.RemoveInformer(ctx, obj); err != nil {
			return fmt.Errorf("dropping the %s informer: %w", k.r.Name(), err)
		}
		inf, err := synced(ctx, c, obj)
		if err != nil {
			return fmt.Errorf("listing %s afresh: %w", k.r.Name(), err)
		}
		onRemote, _, _ := e.handlers(k)
		if _, err := inf.AddEventHandler(onRemote); err != nil {
			return fmt.Errorf("registering the %s handler: %w", k.r.Name(), err)
		}
		k.r.Budget.Reset()
	}
	return nil
}

//go:build integration

package syncer_test

import (
	"testing"

	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/syncer"
	"github.com/regionsync/regionsync/pkg/regionsync"
)

// TestNamespaceScope: a management object that maps into one of the region's system namespaces,
// the agent's own namespace or an excluded one is refused with a Warning event on it, never claimed, and nothing
// is written in that namespace; the shard's other objects keep syncing.
func TestNamespaceScope(t *testing.T) {
	t.Parallel()
	excluded := "t-excluded"
	e := newEnv(t, withOptions(func(o *regionsync.Options) { o.Shard.ExcludedNamespaces = []string{excluded} }))
	if err := e.mgmt.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: excluded}}); err != nil {
		t.Fatal(err)
	}
	protected := fleetspec.ProtectedNamespaces(e.opts.Claim.FleetNamespace, e.opts.Shard.ExcludedNamespaces) // system, the agent's own, the excluded one
	for _, ns := range protected {
		e.tenant(ns, "intruder", "takeover attempt")
	}
	ok := e.remoteNamespace("scope")
	e.tenant(ok, "fine", "Fine")
	e.waitSynced(ok, "fine")
	for _, ns := range protected {
		e.waitEvent(e.mgmt, ns, "intruder"+e.suffix, syncer.ReasonProtectedNamespace)
	}
	e.never("a copy written in a protected namespace", 2*time.Second, func() bool {
		for _, ns := range protected {
			if _, err := e.getLocal(ns, "intruder"); err == nil {
				return true
			}
		}
		return false
	})
	for _, ns := range protected {
		remote, err := e.getRemote(ns, "intruder")
		if err != nil {
			t.Fatal(err)
		}
		if controllerutil.ContainsFinalizer(remote, e.keys.Finalizer) {
			t.Errorf("%s/%s was claimed (finalizer %s)", ns, remote.Name, e.keys.Finalizer)
		}
	}
}

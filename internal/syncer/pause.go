// Rule: pause. D/paused: "true" on either side stops every write for the object.

package syncer

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/regionsync/regionsync/internal/telemetry"
)

// skipPaused ends the pass for an object paused on either side: on management, on its copy, or
// on the unmarked object at the mapped name (a copy sync-controller left is never taken over
// while paused; the pass looks at it again every unmarkedRecheck, as a local cache holding only
// marked copies sends no event when its pause is removed).
func (r *Reconciler) skipPaused(_ context.Context, s *scope) (bool, error) {
	unmarkedPaused := s.unmarked != nil && r.Keys.IsPaused(s.unmarked.GetAnnotations())
	if !r.Keys.IsPaused(s.remote.GetAnnotations()) && (s.local == nil || !r.Keys.IsPaused(s.local.GetAnnotations())) && !unmarkedPaused {
		return false, nil
	}
	s.state = StatePaused
	r.count(telemetry.DirectionDown, telemetry.ResultPaused)
	if unmarkedPaused {
		s.result = reconcile.Result{RequeueAfter: unmarkedRecheck}
	}
	return true, nil
}

package syncer

import (
	"errors"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/regionsync/regionsync/internal/retry"
)

// Retries after an expected failure back off per object from outageRetryBase, doubling up to
// outageRetryMax (client-go's per-item exponential limiter, as a controller's own would).
const (
	outageRetryBase = 500 * time.Millisecond
	outageRetryMax  = 2 * time.Minute
)

// newOutageBackoff is the per-object backoff of retries after expected failures.
func newOutageBackoff() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](outageRetryBase, outageRetryMax)
}

// expectedFailure reports whether err is an outage's (retry.Transient) or a write refused
// because the shard claim was just lost: retried with backoff and logged at V(1) per object, the
// outage being reported once by the management connection's transitions (the management session).
func expectedFailure(err error) bool {
	return retry.Transient(err) || errors.Is(err, ErrNotClaimed) || errors.Is(err, ErrIdentityUnverified)
}

// outageRetry is how long req waits before its next retry after an expected failure.
func (r *Reconciler) outageRetry(req reconcile.Request) time.Duration {
	r.retriesOnce.Do(func() { r.retries = newOutageBackoff() })
	return r.retries.When(req)
}

// outageOver forgets req's backoff: its pass ended without an expected failure.
func (r *Reconciler) outageOver(req reconcile.Request) {
	r.retriesOnce.Do(func() { r.retries = newOutageBackoff() })
	r.retries.Forget(req)
}

// quietOutages returns log with its error lines about transient failures (retry.Transient)
// written as V(1) info lines instead: for loggers handed to client-go (the event broadcaster
// logs every event it could not write during an outage as an error).
func quietOutages(log logr.Logger) logr.Logger {
	return logr.New(&outageSink{LogSink: log.GetSink()})
}

// outageSink demotes the error lines of transient failures to V(1).
type outageSink struct{ logr.LogSink }

// Error logs err at error level unless it is transient.
func (s *outageSink) Error(err error, msg string, kv ...any) {
	if retry.Transient(err) {
		if s.Enabled(1) {
			s.Info(1, msg, append(kv, "error", err.Error())...)
		}
		return
	}
	s.LogSink.Error(err, msg, kv...)
}

// WithValues keeps the demotion.
func (s *outageSink) WithValues(kv ...any) logr.LogSink {
	return &outageSink{LogSink: s.LogSink.WithValues(kv...)}
}

// WithName keeps the demotion.
func (s *outageSink) WithName(name string) logr.LogSink {
	return &outageSink{LogSink: s.LogSink.WithName(name)}
}

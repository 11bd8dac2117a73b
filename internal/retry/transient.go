package retry

import (
	"context"
	"errors"
	"io"
	"net"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Transient reports whether err is what an outage or a busy API server produces, not a bug: a
// network error (refused, reset, EOF, timeout), a request deadline or cancellation, or an API
// server that is unavailable, throttling, timing out or failing internally (an etcd leader
// change, a failing webhook). Such a failure is retried and logged at V(1): the outage itself is
// reported once, when it starts and when it ends, so that minutes of it do not become thousands
// of error lines with stack traces. Anything else is a bug or a refusal a person must read.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	if apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) {
		return true
	}
	if utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}

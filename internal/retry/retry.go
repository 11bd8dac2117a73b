// Package retry is regionsync's one way to wait between attempts: apimachinery's wait loop,
// paced by a wait.Backoff.
package retry

import (
	"context"
	"errors"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Exponential waits initial, doubling after every attempt up to limit, for as long as it takes.
func Exponential(initial, limit time.Duration) wait.Backoff {
	return wait.Backoff{Duration: initial, Factor: 2, Cap: limit, Steps: math.MaxInt32}
}

// Every waits d between attempts.
func Every(d time.Duration) wait.Backoff { return wait.Backoff{Duration: d} }

// Until runs attempt until it is done or fails, or ctx ends, waiting b's next delay after every
// attempt that is not done; attempt is told that delay (to report it). It returns attempt's
// error, or nil when ctx ended.
func Until(ctx context.Context, b wait.Backoff, attempt func(ctx context.Context, next time.Duration) (done bool, err error)) error {
	delay := b.DelayFunc()
	var next time.Duration
	return Paced(ctx, func() time.Duration { return next }, func(ctx context.Context) (bool, error) {
		next = delay()
		return attempt(ctx, next)
	})
}

// Paced runs attempt until it is done or fails, or ctx ends, waiting after every attempt that is
// not done the delay that after returns then. It returns attempt's error, or nil when ctx ended.
func Paced(ctx context.Context, after func() time.Duration, attempt func(ctx context.Context) (done bool, err error)) error {
	if ctx.Err() != nil {
		return nil
	}
	err := wait.DelayFunc(after).Until(ctx, true, true, attempt)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	return err
}

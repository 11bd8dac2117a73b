package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Eventually polls cond every PollInterval until it returns nil, and fails tb with its last error
// (what it last saw) when it has not within timeout. Every test that waits for something to
// happen waits with it: no fixed sleep stands in for "it happened".
func Eventually(tb testing.TB, what string, timeout time.Duration, cond func() error) {
	tb.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), PollInterval, timeout, true, func(context.Context) (bool, error) {
		last = cond()
		return last == nil, nil
	})
	if err != nil {
		tb.Fatalf("%s: %v (last: %v)", what, err, last)
	}
}

// Consistently polls cond every PollInterval for d and fails tb the first time it returns an
// error (what it saw): a test that asserts something does not happen watches for it over a
// window, and says what broke it and when.
func Consistently(tb testing.TB, what string, d time.Duration, cond func() error) {
	tb.Helper()
	start := time.Now()
	for {
		if err := cond(); err != nil {
			tb.Fatalf("%s: broken after %s: %v", what, time.Since(start).Round(time.Millisecond), err)
		}
		if time.Since(start) >= d {
			return
		}
		time.Sleep(PollInterval)
	}
}

// Settled waits until sample has returned the same value for quiet (a counter of writes or
// events has stopped moving), and fails tb when it has not within timeout.
func Settled[T comparable](tb testing.TB, what string, quiet, timeout time.Duration, sample func() T) {
	tb.Helper()
	last, since := sample(), time.Now()
	Eventually(tb, what, timeout, func() error {
		if v := sample(); v != last {
			last, since = v, time.Now()
		}
		if q := time.Since(since); q < quiet {
			return fmt.Errorf("still moving (%v, quiet for %s)", last, q.Round(time.Millisecond))
		}
		return nil
	})
}

// Tail is the last n bytes of s (a log's end).
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// PollInterval is how often the wait helpers look.
const PollInterval = 100 * time.Millisecond

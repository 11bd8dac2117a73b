package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestExponentialTimings(t *testing.T) {
	b := Exponential(500*time.Millisecond, 10*time.Second)
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second}
	delay := b.DelayFunc()
	for i, w := range want {
		if got := delay(); got != w {
			t.Fatalf("delay %d = %v, want %v", i, got, w)
		}
	}
	every := Every(2 * time.Second).DelayFunc()
	for i := range 3 {
		if got := every(); got != 2*time.Second {
			t.Fatalf("constant delay %d = %v, want 2s", i, got)
		}
	}
}

func TestUntil(t *testing.T) {
	var nexts []time.Duration
	err := Until(context.Background(), Exponential(time.Millisecond, 4*time.Millisecond), func(_ context.Context, next time.Duration) (bool, error) {
		nexts = append(nexts, next)
		return len(nexts) == 4, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond}
	if len(nexts) != len(want) {
		t.Fatalf("attempts told %v, want %v", nexts, want)
	}
	for i := range want {
		if nexts[i] != want[i] {
			t.Fatalf("attempts told %v, want %v", nexts, want)
		}
	}

	boom := errors.New("boom")
	if err := Until(context.Background(), Every(time.Millisecond), func(context.Context, time.Duration) (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Fatalf("Until = %v, want the attempt's error", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	calls := 0
	if err := Until(ctx, Every(time.Millisecond), func(context.Context, time.Duration) (bool, error) { calls++; return false, nil }); err != nil {
		t.Fatalf("Until after ctx ended = %v, want nil", err)
	}
	if calls < 2 {
		t.Fatalf("%d attempts before ctx ended, want several", calls)
	}
	if err := Until(ctx, Every(time.Millisecond), func(context.Context, time.Duration) (bool, error) {
		t.Fatal("attempt ran with ctx already ended")
		return false, nil
	}); err != nil {
		t.Fatal(err)
	}
}

package claim

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// lease is a Lease of name, registered and last renewed at the given times, for 15 seconds.
func lease(name string, registered, renewed time.Time) *coordinationv1.Lease {
	seconds := int32(15)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{RegisteredAnnotation: registered.Format(time.RFC3339Nano)}},
		Spec:       coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: renewed}, LeaseDurationSeconds: &seconds},
	}
}

func TestReservationAndPrecedence(t *testing.T) {
	now := time.Now()
	cases := map[string]struct {
		l    *coordinationv1.Lease
		want bool
	}{
		"held":                     {lease("a", now, now), true},
		"expired within the grace": {lease("a", now, now.Add(-5*time.Minute)), true},
		"expired beyond the grace": {lease("a", now, now.Add(-ReservationGrace-time.Minute)), false},
		"never renewed":            {&coordinationv1.Lease{}, false},
	}
	for name, tc := range cases {
		if got := reserved(tc.l, now); got != tc.want {
			t.Errorf("%s: reserved = %v", name, got)
		}
	}
	older := lease("region-b", now.Add(-time.Hour), now)
	newer := lease("region-a", now, now)
	if !registeredBefore(older, newer) || registeredBefore(newer, older) {
		t.Error("the older Lease must take precedence")
	}
	tieA, tieB := lease("region-a", now, now), lease("region-b", now, now)
	if !registeredBefore(tieA, tieB) || registeredBefore(tieB, tieA) {
		t.Error("names must break ties, one way only")
	}
	// Nanoseconds count: the first registration wins even within one second.
	first, second := lease("region-z", now, now), lease("region-a", now.Add(time.Millisecond), now)
	if !registeredBefore(first, second) {
		t.Error("a registration 1ms earlier lost")
	}
	unregistered := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "region-0"}}
	if registeredBefore(unregistered, older) || !registeredBefore(older, unregistered) {
		t.Error("a Lease not yet registered must be the newest")
	}
}

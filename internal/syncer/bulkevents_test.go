package syncer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
)

// Routine events are one per window: a lone object gets its own note, many get one count.
func TestBulkEvents(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	b := newBulkEvents(rec, ReasonCreated, "Sync", "Tenant copies created from management")
	obj := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	}
	next := func() string {
		select {
		case e := <-rec.Events:
			return e
		case <-time.After(3 * bulkWindow):
			t.Fatal("no event")
			return ""
		}
	}
	b.add(obj("alone"), "ns/alone", "created from management object ns/alone-us")
	if got, want := next(), "Normal Created created from management object ns/alone-us"; got != want {
		t.Fatalf("event %q, want %q", got, want)
	}
	for i := range 12 {
		b.add(obj(fmt.Sprint("t", i)), fmt.Sprint("ns/t", i), "one note")
	}
	got := next()
	for _, want := range []string{"Normal Created 12 Tenant copies created from management within 2s:", "ns/t0, ns/t1, ns/t2, ns/t3, ns/t4 and 7 more"} {
		if !strings.Contains(got, want) {
			t.Errorf("event %q does not say %q", got, want)
		}
	}
	select {
	case e := <-rec.Events:
		t.Fatalf("a second event for one window: %q", e)
	case <-time.After(bulkWindow + time.Second):
	}
	var nilBulk *bulkEvents
	nilBulk.add(obj("x"), "ns/x", "ignored") // a reconciler built without events reports nothing
}

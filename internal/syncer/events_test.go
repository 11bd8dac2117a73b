package syncer

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
)

// recordingSink keeps the Events created and patched through it.
type recordingSink struct {
	mu      sync.Mutex
	created []*corev1.Event
	patched int
}

func (s *recordingSink) Create(e *corev1.Event) (*corev1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.created = append(s.created, e)
	c := *e
	c.ResourceVersion = fmt.Sprint(len(s.created))
	return &c, nil
}

func (s *recordingSink) Update(e *corev1.Event) (*corev1.Event, error) { return e, nil }

func (s *recordingSink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.patched++
	return e, nil
}

// Every Event created through the labelling sink carries the labels, also the aggregate Event
// client-go's correlator creates of its own once an object repeats similar Events (which a
// recorder's annotations would not reach); a repeated Event is patched, not created again.
func TestLabellingSinkLabelsAggregates(t *testing.T) {
	sink := &recordingSink{}
	b := record.NewBroadcaster(record.WithCorrelatorOptions(record.CorrelatorOptions{LRUCacheSize: eventCorrelatorEntries}))
	defer b.Shutdown()
	b.StartRecordingToSink(labellingSink{EventSink: sink, labels: map[string]string{regionsyncv1alpha1.RegionLabel: "us-east-1"}})
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: EventSource})
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-acme", Name: "acme-us-east-1", UID: "uid"}}
	rec.Eventf(obj, corev1.EventTypeWarning, ReasonStatusRefused, "refused")
	rec.Eventf(obj, corev1.EventTypeWarning, ReasonStatusRefused, "refused")
	// The correlator aggregates after 10 similar Events (same reason, other messages).
	for i := range 12 {
		rec.Eventf(obj, corev1.EventTypeWarning, ReasonWriteFight, "fight %d", i)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		sink.mu.Lock()
		created, patched := append([]*corev1.Event(nil), sink.created...), sink.patched
		sink.mu.Unlock()
		aggregated := slices.ContainsFunc(created, func(e *corev1.Event) bool {
			return strings.HasPrefix(e.Message, "(combined from similar events)")
		})
		if aggregated && patched >= 2 { // the repeated StatusRefused, and the aggregate's repetition
			for _, e := range created {
				if e.Labels[regionsyncv1alpha1.RegionLabel] != "us-east-1" {
					t.Errorf("Event %s %q created without the region label: %v", e.Reason, e.Message, e.Labels)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no aggregate Event and two patches after 10 s: %d created, %d patched", len(created), patched)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

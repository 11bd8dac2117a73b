package syncer

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"

	"github.com/go-logr/logr"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
)

// eventCorrelatorEntries bounds each of the event correlator's caches (client-go's
// record.CorrelatorOptions.LRUCacheSize; its default is 4096): the recent events it folds into a
// count when an object repeats one, and the per-object spam filter. A repeating event comes from
// an object the agent keeps working on, which stays among the most recent entries. An entry of
// the three caches costs ~1.7 KB together: at 1,024 entries they held 1.7 MB after an initial
// sync's 10,000 Created events (make bench's heap profile), 256 hold ~0.45 MB.
const eventCorrelatorEntries = 256

// EventRecorder writes the engine's Kubernetes Events to one cluster through client-go's record
// broadcaster, whose correlator remembers a bounded number of recent events (LRU).
//
// controller-runtime's GetEventRecorder uses client-go's events.k8s.io broadcaster instead, which
// keeps a copy of every event it sent for six minutes to build series: an initial sync of 10,000
// objects sends 10,000 Created events, and that cache alone held ~10 MB (1 KB per synced object)
// until it aged out, as much as the compacted caches of both clusters together. The Events are
// the same to a reader (core/v1 Events are served by events.k8s.io too, with reason, note,
// regarding object, type and reporting controller); only the action and related object, which
// the core API has no place for in this recorder, are not recorded.
type EventRecorder struct {
	broadcaster record.EventBroadcaster
	rec         record.EventRecorder
}

var _ events.EventRecorder = (*EventRecorder)(nil)

// NewManagementEventRecorder starts the recorder of the engine's Events on management (cfg,
// through httpClient): every Event it creates is labelled regionsyncv1alpha1.RegionLabel=<region>, the label
// by which management's admission policy (deploy/kustomize/management/admission.yaml) tells the
// Events a region's identity wrote, the only ones it may patch (the correlator bumps the count of
// a repeated Event with a patch), from everyone else's.
func NewManagementEventRecorder(cfg *rest.Config, httpClient *http.Client, scheme *runtime.Scheme, region string, log logr.Logger) (*EventRecorder, error) {
	return newEventRecorder(cfg, httpClient, scheme, map[string]string{regionsyncv1alpha1.RegionLabel: region}, log)
}

// newEventRecorder starts a broadcaster that writes Events to the cluster of cfg (through
// httpClient), reported by EventSource from this host, each created with labels. An Event the
// cluster refuses or that cannot be written after the broadcaster's retries is logged to log.
// Shutdown stops it.
func newEventRecorder(cfg *rest.Config, httpClient *http.Client, scheme *runtime.Scheme, labels map[string]string, log logr.Logger) (*EventRecorder, error) {
	cs, err := kubernetes.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("events client: %w", err)
	}
	b := record.NewBroadcaster(record.WithCorrelatorOptions(record.CorrelatorOptions{LRUCacheSize: eventCorrelatorEntries}),
		record.WithContext(logr.NewContext(context.Background(), quietOutages(log))))
	var sink record.EventSink = &typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")}
	if len(labels) > 0 {
		sink = labellingSink{EventSink: sink, labels: labels}
	}
	b.StartRecordingToSink(sink)
	host, _ := os.Hostname()
	return &EventRecorder{broadcaster: b, rec: b.NewRecorder(scheme, corev1.EventSource{Component: EventSource, Host: host})}, nil
}

// labellingSink creates every Event with labels. It labels at the sink rather than through the
// recorder because the correlator writes an aggregate of similar Events as a new Event of its
// own, without the annotations a recorder could set; every creation goes through Create.
type labellingSink struct {
	record.EventSink
	labels map[string]string
}

func (s labellingSink) Create(e *corev1.Event) (*corev1.Event, error) {
	return s.EventSink.Create(s.labelled(e))
}

func (s labellingSink) Update(e *corev1.Event) (*corev1.Event, error) {
	return s.EventSink.Update(s.labelled(e))
}

// labelled returns a copy of e (the correlator's, which it keeps) with s.labels set.
func (s labellingSink) labelled(e *corev1.Event) *corev1.Event {
	c := *e
	c.Labels = make(map[string]string, len(e.Labels)+len(s.labels))
	maps.Copy(c.Labels, e.Labels)
	maps.Copy(c.Labels, s.labels)
	return &c
}

// Eventf records an event regarding regarding (related and action are not recorded).
func (r *EventRecorder) Eventf(regarding, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	r.rec.Eventf(regarding, eventtype, reason, note, args...)
}

// Shutdown stops the broadcaster; events recorded afterwards are dropped.
func (r *EventRecorder) Shutdown() { r.broadcaster.Shutdown() }

// Event reasons: every write decision a person may need to see.
const (
	ReasonCreated               = "Created"
	ReasonNamespaceCreated      = "NamespaceCreated"
	ReasonAdopted               = "Adopted"
	ReasonAdoptionRefused       = "AdoptionRefused"
	ReasonInvalidMapping        = "InvalidMapping"
	ReasonProtectedNamespace    = "ProtectedNamespace"
	ReasonDeleted               = "Deleted"
	ReasonDeletionHeld          = "DeletionHeld"
	ReasonOutOfShard            = "OutOfShard"
	ReasonSecretTakeoverRefused = "SecretTakeoverRefused"
	ReasonRemoteSecretMissing   = "RemoteSecretMissing"
	ReasonStatusUploadFailed    = "StatusUploadFailed"
	ReasonStatusRefused         = "StatusRefused"
	ReasonWriteFight            = "WriteFight"
)

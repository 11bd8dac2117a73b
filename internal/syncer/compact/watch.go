package compact

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	jsonserializer "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	kjson "sigs.k8s.io/json"
)

// NewCache is the cache.NewCacheFunc of a cache holding kinds compacted (Transform): it is
// cache.New, except that the informers of those kinds, for unstructured objects, watch through
// a decoder of their own. client-go reads every watch event five times (its JSON framer to find
// where the event ends, then the event and its object, each once to find its kind and once to
// decode it into a tree of maps) and the transform then converts the tree into the compact form;
// this decoder reads the event's object straight into the compact form, 5× faster for a small
// object. During an initial sync that was most of a warm standby's CPU.
//
// Only informers whose request controller-runtime builds from the cache's default label selector
// alone are given the decoder: a kind with options of its own (ByObject), a default field
// selector, namespaces or bookmarks turned off keeps controller-runtime's list-watch, which
// applies them. A client, scheme or mapper the options lack is filled in as cache.New would,
// and the decoder's requests use the same. Lists (when
// the API server cannot stream the initial list) always go through controller-runtime's
// list-watch; the transform compacts their items.
func NewCache(kinds []schema.GroupVersionKind) cache.NewCacheFunc {
	compacted := make(map[schema.GroupVersionKind]bool, len(kinds))
	for _, gvk := range kinds {
		compacted[gvk] = true
	}
	if len(compacted) == 0 {
		return cache.New
	}
	return newCache(func(gvk schema.GroupVersionKind) bool { return compacted[gvk] })
}

// NewCacheAllUnstructured is NewCache for a cache whose unstructured objects are all held
// compacted, whatever their kind (TransformAllUnstructured: the hub's per-region objects).
func NewCacheAllUnstructured() cache.NewCacheFunc {
	return newCache(func(schema.GroupVersionKind) bool { return true })
}

func newCache(compacted func(schema.GroupVersionKind) bool) cache.NewCacheFunc {
	return func(config *rest.Config, opts cache.Options) (cache.Cache, error) {
		if opts.NewInformer == nil {
			// The defaults cache.New gives these, given here first: the decoder's requests
			// need them too (the same client, credentials and mapping as the cache's).
			var err error
			if opts.HTTPClient == nil {
				if opts.HTTPClient, err = rest.HTTPClientFor(config); err != nil {
					return nil, fmt.Errorf("the cache's HTTP client: %w", err)
				}
			}
			if opts.Scheme == nil {
				opts.Scheme = clientgoscheme.Scheme
			}
			if opts.Mapper == nil {
				if opts.Mapper, err = apiutil.NewDynamicRESTMapper(config, opts.HTTPClient); err != nil {
					return nil, fmt.Errorf("the cache's REST mapper: %w", err)
				}
			}
			own, err := ownedKinds(compacted, opts)
			if err != nil {
				return nil, err
			}
			if own != nil {
				opts.NewInformer = newInformer(config, opts, own)
			}
		}
		return cache.New(config, opts)
	}
}

// ownedKinds says which kinds' informers the decoder may serve under opts: the compacted kinds
// without options of their own (ByObject), when the cache's only restriction is a default label
// selector; nil (none) when it has namespaces or a default field selector, or turns bookmarks off
// (the decoder's watches always ask for them, as controller-runtime's do by default).
func ownedKinds(compacted func(schema.GroupVersionKind) bool, opts cache.Options) (func(schema.GroupVersionKind) bool, error) {
	if len(opts.DefaultNamespaces) > 0 || (opts.DefaultFieldSelector != nil && !opts.DefaultFieldSelector.Empty()) ||
		(opts.DefaultEnableWatchBookmarks != nil && !*opts.DefaultEnableWatchBookmarks) {
		return nil, nil
	}
	own := map[schema.GroupVersionKind]bool{}
	for obj := range opts.ByObject {
		gvk, err := apiutil.GVKForObject(obj, opts.Scheme)
		if err != nil {
			return nil, fmt.Errorf("cache options for %T: %w", obj, err)
		}
		own[gvk] = false
	}
	return func(gvk schema.GroupVersionKind) bool {
		if served, listed := own[gvk]; listed {
			return served
		}
		return compacted(gvk)
	}, nil
}

// newInformer is the informer constructor of a cache under opts: client-go's, with the
// decoder's list-watch for the unstructured informers of the kinds in own.
func newInformer(config *rest.Config, opts cache.Options, own func(schema.GroupVersionKind) bool) func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
	label := ""
	if opts.DefaultLabelSelector != nil {
		label = opts.DefaultLabelSelector.String()
	}
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
		}
		gvk := u.GroupVersionKind()
		if !own(gvk) {
			return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
		}
		watcher, err := newListWatch(config, opts, gvk, label, lw)
		if err != nil {
			// The kind's mapping or client could not be made now; controller-runtime's
			// list-watch (which needs the same mapping) reports the error on its own.
			return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
		}
		example := &compactObject{}
		example.setType(gvk.ToAPIVersionAndKind())
		return toolscache.NewSharedIndexInformerWithOptions(watcher, example, toolscache.SharedIndexInformerOptions{
			ResyncPeriod: resync, Indexers: indexers, ObjectDescription: gvk.String(),
		})
	}
}

// listWatch lists through controller-runtime's list-watch (lists are rare: the initial list
// streams over a watch) and watches with the compact decoder, with the cache's label selector,
// cluster-wide, as controller-runtime would.
type listWatch struct {
	list     toolscache.ListerWatcherWithContext
	client   rest.Interface
	resource string
	label    string
}

var (
	_ toolscache.ListerWatcher            = &listWatch{}
	_ toolscache.ListerWatcherWithContext = &listWatch{}
)

func newListWatch(config *rest.Config, opts cache.Options, gvk schema.GroupVersionKind, label string, lw toolscache.ListerWatcher) (*listWatch, error) {
	mapping, err := opts.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(config)
	gv := gvk.GroupVersion()
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	cfg.ContentType, cfg.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = watchSerializer
	client, err := rest.RESTClientForConfigAndClient(cfg, opts.HTTPClient)
	if err != nil {
		return nil, err
	}
	return &listWatch{list: toolscache.ToListerWatcherWithContext(lw), client: client, resource: mapping.Resource.Resource, label: label}, nil
}

// List lists through controller-runtime's list-watch.
func (lw *listWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), opts)
}

// Watch watches with the compact decoder.
func (lw *listWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}

// ListWithContext lists through controller-runtime's list-watch, which applies the cache's
// selector.
func (lw *listWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	return lw.list.ListWithContext(ctx, opts)
}

// WatchWithContext watches the kind cluster-wide with the cache's label selector, the events'
// objects decoded compacted.
func (lw *listWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	opts.AllowWatchBookmarks = true
	opts.LabelSelector = lw.label
	return lw.client.Get().Resource(lw.resource).SpecificallyVersionedParams(&opts, parameterCodec, versionV1).Watch(ctx)
}

// parameterCodec encodes list options as query parameters, as the dynamic client does.
var (
	versionV1      = schema.GroupVersion{Version: "v1"}
	parameterCodec = runtime.NewParameterCodec(metaScheme)
	metaScheme     = func() *runtime.Scheme {
		s := runtime.NewScheme()
		metav1.AddToGroupVersion(s, versionV1)
		return s
	}()
	// metaJSON decodes what is not a compacted object: a Status in an error answer.
	metaJSON = jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, metaScheme, metaScheme, jsonserializer.SerializerOptions{})
	// watchSerializer is the compact decoder's negotiated serializer: JSON only.
	watchSerializer runtime.NegotiatedSerializer = negotiated{runtime.SerializerInfo{
		MediaType: runtime.ContentTypeJSON, MediaTypeType: "application", MediaTypeSubType: "json", EncodesAsText: true,
		Serializer: objectSerializer{metaJSON},
		StreamSerializer: &runtime.StreamSerializerInfo{
			EncodesAsText: true, Serializer: eventSerializer{metaJSON}, Framer: lineFramer{},
		},
	}}
)

// negotiated offers one serializer and converts nothing.
type negotiated struct{ info runtime.SerializerInfo }

// SupportedMediaTypes is the one serializer.
func (n negotiated) SupportedMediaTypes() []runtime.SerializerInfo {
	return []runtime.SerializerInfo{n.info}
}

// EncoderForVersion returns e.
func (negotiated) EncoderForVersion(e runtime.Encoder, _ runtime.GroupVersioner) runtime.Encoder {
	return e
}

// DecoderToVersion returns d.
func (negotiated) DecoderToVersion(d runtime.Decoder, _ runtime.GroupVersioner) runtime.Decoder {
	return d
}

// decoded counts the objects the compact decoder has read, for the tests that prove which
// informers it serves.
var decoded atomic.Uint64

// objectSerializer decodes a watch event's object compacted (decodeWatched); a decode into a
// given object (an error answer's Status) and every encode are JSON's.
type objectSerializer struct{ runtime.Serializer }

// Decode decodes data compacted when into is nil, else as JSON into into.
func (s objectSerializer) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if into != nil {
		return s.Serializer.Decode(data, defaults, into)
	}
	obj, err := decodeWatched(data)
	if err != nil {
		return nil, nil, err
	}
	decoded.Add(1)
	gvk := obj.GetObjectKind().GroupVersionKind()
	return obj, &gvk, nil
}

// eventSerializer decodes a watch event's envelope: the API server's, {"type":"…","object":…},
// by its shape, without reading the object (the object decoder validates and reads it once);
// anything else as JSON.
type eventSerializer struct{ runtime.Serializer }

// watchEventKind is what a decoded envelope is.
var watchEventKind = versionV1.WithKind("WatchEvent")

// Decode decodes data into into when it is a *metav1.WatchEvent, else as JSON.
func (s eventSerializer) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	event, ok := into.(*metav1.WatchEvent)
	if !ok {
		return s.Serializer.Decode(data, defaults, into)
	}
	*event = metav1.WatchEvent{}
	if typ, object, ok := envelope(data); ok {
		// data is the stream decoder's buffer, reused for the next event.
		event.Type, event.Object.Raw = typ, bytes.Clone(object)
		return event, &watchEventKind, nil
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, event); err != nil {
		return nil, nil, fmt.Errorf("watch event: %w", err)
	}
	return event, &watchEventKind, nil
}

// envelope splits an event as the API server encodes it, {"type":"<type>","object":<object>}
// (whitespace around it aside), into its type and its object's JSON, unvalidated; ok is false
// for any other shape.
func envelope(data []byte) (typ string, object []byte, ok bool) {
	const head, mid = `{"type":"`, `","object":`
	data = bytes.TrimSpace(data)
	tail, found := bytes.CutPrefix(data, []byte(head))
	if !found || len(tail) == 0 || tail[len(tail)-1] != '}' {
		return "", nil, false
	}
	end := bytes.IndexByte(tail, '"')
	if end < 0 || bytes.IndexByte(tail[:end], '\\') >= 0 {
		return "", nil, false
	}
	object, found = bytes.CutPrefix(tail[end:], []byte(mid))
	if !found {
		return "", nil, false
	}
	return string(tail[:end]), object[:len(object)-1], true
}

// lineFramer frames a watch answer by lines: the API server writes each event as one line of
// compact JSON (a string's newlines are escaped). client-go's JSON framer reads every event
// once more to find where it ends.
type lineFramer struct{}

// NewFrameReader returns a reader whose every Read returns (the next part of) one line.
func (lineFramer) NewFrameReader(r io.ReadCloser) io.ReadCloser {
	return &lineReader{r: bufio.NewReaderSize(r, 16<<10), closer: r} // longer lines are gathered
}

// NewFrameWriter is JSON's (the decoder never sends events).
func (lineFramer) NewFrameWriter(w io.Writer) io.Writer {
	return jsonserializer.Framer.NewFrameWriter(w)
}

// lineReader returns one line per Read, the way client-go's stream decoder reads frames: a line
// longer than the buffer it is given is returned in parts, each part but the last with
// io.ErrShortBuffer. Blank lines are skipped.
type lineReader struct {
	r       *bufio.Reader
	closer  io.Closer
	pending []byte // the rest of the current line
}

// Read copies the next line, or its next part, into p.
func (l *lineReader) Read(p []byte) (int, error) {
	for len(l.pending) == 0 {
		line, err := l.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer (a large object): gathered into a slice of its own,
			// which goes once the line is read, so the watch keeps no large buffer.
			long := bytes.Clone(line)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = l.r.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil {
			if errors.Is(err, io.EOF) && len(bytes.TrimSpace(line)) > 0 {
				// The answer ended inside an event (the API server ends each with a newline):
				// an early end of the stream, which the watch ends on quietly and the reflector
				// resumes from the last resourceVersion, as with client-go's JSON framer.
				return 0, io.ErrUnexpectedEOF
			}
			return 0, err
		}
		l.pending = bytes.TrimSpace(line)
	}
	n := copy(p, l.pending)
	l.pending = l.pending[n:]
	if len(l.pending) > 0 {
		return n, io.ErrShortBuffer
	}
	return n, nil
}

// Close closes the answer's body.
func (l *lineReader) Close() error { return l.closer.Close() }

package otlpsink

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Protocols a Forwarder speaks (the values of OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolGRPC         = "grpc"
	ProtocolHTTPProtobuf = "http/protobuf"
	ProtocolHTTPJSON     = "http/json"
)

// ForwardConfig says where a Forwarder sends.
type ForwardConfig struct {
	// Endpoint is, for gRPC, [http://|https://]host:port; for HTTP, the full URL of the traces
	// resource (…/v1/traces).
	Endpoint string
	// Protocol is grpc (default), http/protobuf or http/json.
	Protocol string
	// Insecure uses plaintext gRPC for an endpoint without a scheme.
	Insecure bool
	// Headers are sent with every request (gRPC metadata or HTTP headers).
	Headers map[string]string
}

// ForwardConfigFromEnv reads the standard OTLP exporter variables: OTEL_EXPORTER_OTLP_ENDPOINT
// (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, used as is), OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL,
// OTEL_EXPORTER_OTLP_(TRACES_)HEADERS and OTEL_EXPORTER_OTLP_(TRACES_)INSECURE. ok is false when
// no endpoint is set.
func ForwardConfigFromEnv() (cfg ForwardConfig, ok bool, err error) {
	env := func(name string) string {
		if v := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_" + name); v != "" {
			return v
		}
		return os.Getenv("OTEL_EXPORTER_OTLP_" + name)
	}
	cfg.Protocol = env("PROTOCOL")
	if cfg.Protocol == "" {
		cfg.Protocol = ProtocolGRPC // as the agent's exporter
	}
	cfg.Insecure = strings.EqualFold(env("INSECURE"), "true")
	if h := env("HEADERS"); h != "" {
		cfg.Headers = map[string]string{}
		for _, kv := range strings.Split(h, ",") {
			k, v, found := strings.Cut(kv, "=")
			k, _ = url.QueryUnescape(strings.TrimSpace(k))
			v, _ = url.QueryUnescape(strings.TrimSpace(v))
			if !found || k == "" {
				return cfg, false, fmt.Errorf("OTEL_EXPORTER_OTLP_HEADERS: %q is not key=value", kv)
			}
			cfg.Headers[k] = v
		}
	}
	if e := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); e != "" {
		cfg.Endpoint = e
	} else if e := os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); e != "" {
		cfg.Endpoint = e
		if cfg.Protocol != ProtocolGRPC {
			cfg.Endpoint = strings.TrimSuffix(e, "/") + "/v1/traces"
		}
	} else {
		return cfg, false, nil
	}
	switch cfg.Protocol {
	case ProtocolGRPC, ProtocolHTTPProtobuf, ProtocolHTTPJSON:
	default:
		return cfg, false, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: %q is not grpc, http/protobuf or http/json", cfg.Protocol)
	}
	return cfg, true, nil
}

// Forwarder sends copies of export requests to another OTLP endpoint, in the background: a slow
// or absent backend never slows the exporters sending to the Receiver. When its queue is full,
// requests are dropped and counted.
type Forwarder struct {
	cfg   ForwardConfig
	send  func(context.Context, *collectortrace.ExportTraceServiceRequest) error
	close func()
	queue chan *collectortrace.ExportTraceServiceRequest
	done  chan struct{}

	mu                    sync.Mutex
	closed                bool
	sent, failed, dropped int
	lastErr               error
}

// NewForwarder returns a running Forwarder.
func NewForwarder(cfg ForwardConfig) (*Forwarder, error) {
	f := &Forwarder{cfg: cfg, queue: make(chan *collectortrace.ExportTraceServiceRequest, 1024), done: make(chan struct{})}
	switch cfg.Protocol {
	case "", ProtocolGRPC:
		target, creds := cfg.Endpoint, credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
		switch {
		case strings.HasPrefix(target, "http://"):
			target, creds = strings.TrimPrefix(target, "http://"), insecure.NewCredentials()
		case strings.HasPrefix(target, "https://"):
			target = strings.TrimPrefix(target, "https://")
		case cfg.Insecure:
			creds = insecure.NewCredentials()
		}
		target = strings.TrimSuffix(target, "/")
		conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
		if err != nil {
			return nil, fmt.Errorf("OTLP/gRPC forwarding to %s: %w", cfg.Endpoint, err)
		}
		client := collectortrace.NewTraceServiceClient(conn)
		f.send = func(ctx context.Context, req *collectortrace.ExportTraceServiceRequest) error {
			if len(cfg.Headers) > 0 {
				ctx = metadata.NewOutgoingContext(ctx, metadata.New(cfg.Headers))
			}
			_, err := client.Export(ctx, req)
			return err
		}
		f.close = func() { conn.Close() }
	case ProtocolHTTPProtobuf, ProtocolHTTPJSON:
		if _, err := url.ParseRequestURI(cfg.Endpoint); err != nil {
			return nil, fmt.Errorf("OTLP/HTTP forwarding endpoint %q: %w", cfg.Endpoint, err)
		}
		hc := &http.Client{}
		f.send = func(ctx context.Context, req *collectortrace.ExportTraceServiceRequest) error {
			return postHTTP(ctx, hc, cfg, req)
		}
		f.close = hc.CloseIdleConnections
	default:
		return nil, fmt.Errorf("forwarding protocol %q is not grpc, http/protobuf or http/json", cfg.Protocol)
	}
	go f.run()
	return f, nil
}

func postHTTP(ctx context.Context, hc *http.Client, cfg ForwardConfig, req *collectortrace.ExportTraceServiceRequest) error {
	ct, marshal := "application/x-protobuf", proto.Marshal
	if cfg.Protocol == ProtocolHTTPJSON {
		ct, marshal = "application/json", protojson.Marshal
	}
	body, err := marshal(req)
	if err != nil {
		return err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.Endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hr.Header.Set("Content-Type", ct)
	for k, v := range cfg.Headers {
		hr.Header.Set(k, v)
	}
	resp, err := hc.Do(hr)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s", cfg.Endpoint, resp.Status)
	}
	return nil
}

// Endpoint is where the Forwarder sends.
func (f *Forwarder) Endpoint() string { return f.cfg.Endpoint }

// Send queues a copy of req (dropped and counted when the queue is full or the forwarder closed).
func (f *Forwarder) Send(req *collectortrace.ExportTraceServiceRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		f.dropped++
		f.lastErr = errClosed
		return
	}
	select {
	case f.queue <- proto.Clone(req).(*collectortrace.ExportTraceServiceRequest):
	default:
		f.dropped++
	}
}

func (f *Forwarder) run() {
	defer close(f.done)
	for req := range f.queue {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := f.send(ctx, req)
		cancel()
		f.mu.Lock()
		if err != nil {
			f.failed++
			f.lastErr = err
		} else {
			f.sent++
		}
		f.mu.Unlock()
	}
}

// Stats returns how many export requests were sent, failed and dropped, and the last error.
func (f *Forwarder) Stats() (sent, failed, dropped int, lastErr error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent, f.failed, f.dropped, f.lastErr
}

// Close sends what is queued (for up to 15 s) and closes the connection.
func (f *Forwarder) Close() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	close(f.queue)
	f.mu.Unlock()
	select {
	case <-f.done:
	case <-time.After(15 * time.Second):
	}
	f.close()
}

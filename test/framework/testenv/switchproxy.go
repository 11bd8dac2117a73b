package testenv

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"sync"

	"k8s.io/client-go/rest"
)

// SwitchProxy is one API server address that a test can move to another cluster while clients
// use it, as a disaster-recovery failover does (a VIP or DNS name moved to a cluster restored
// with the same PKI): clients trust the proxy's certificate and present no credentials of their
// own; the proxy forwards each request to the current backend with that backend's credentials.
// Switch cuts every open client connection, so clients reconnect, over the same address and the
// same trust, to the other cluster.
type SwitchProxy struct {
	srv *httptest.Server

	mu      sync.Mutex
	backend *httputil.ReverseProxy
	host    string
	writes  map[string][]string // per backend host: the mutating requests forwarded
}

// NewSwitchProxy starts a proxy in front of the API server of cfg.
func NewSwitchProxy(cfg *rest.Config) (*SwitchProxy, error) {
	p := &SwitchProxy{writes: map[string][]string{}}
	if err := p.set(cfg); err != nil {
		return nil, err
	}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	p.srv.EnableHTTP2 = true
	p.srv.StartTLS()
	return p, nil
}

func (p *SwitchProxy) set(cfg *rest.Config) error {
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return err
	}
	u, err := neturl.Parse(cfg.Host)
	if err != nil {
		return err
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Header.Del("Authorization")
		},
		Transport:     rt,
		FlushInterval: -1, // watches stream
	}
	p.mu.Lock()
	p.backend, p.host = rp, u.Host
	p.mu.Unlock()
	return nil
}

func (p *SwitchProxy) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	backend, host := p.backend, p.host
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		p.writes[host] = append(p.writes[host], r.Method+" "+r.URL.Path)
	}
	p.mu.Unlock()
	backend.ServeHTTP(w, r)
}

// Switch moves the address to the API server of cfg and cuts every open client connection.
func (p *SwitchProxy) Switch(cfg *rest.Config) error {
	if err := p.set(cfg); err != nil {
		return err
	}
	p.srv.CloseClientConnections()
	return nil
}

// Writes returns the mutating requests (method and path) forwarded to the API server of cfg.
func (p *SwitchProxy) Writes(cfg *rest.Config) []string {
	u, _ := neturl.Parse(cfg.Host)
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.writes[u.Host]...)
}

// Config is a client config for the proxy's address: its certificate trusted, no credentials.
func (p *SwitchProxy) Config() *rest.Config {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
	return &rest.Config{Host: p.srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
}

// Close stops the proxy.
func (p *SwitchProxy) Close() { p.srv.Close() }

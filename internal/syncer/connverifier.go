package syncer

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// ErrIdentityUnverified refuses a write while management's identity has not been verified since
// the engine's last new connection to management: the address may now lead to another cluster
// (a disaster-recovery cluster restored with the same PKI, a DNS or VIP failover).
var ErrIdentityUnverified = errors.New("management's identity not verified since the last new connection: write refused")

// connVerifier ties every write to management's verified identity, per connection. Every new
// connection of the engine's management clients (a watch re-established, a relist, a client
// reconnecting after an outage) opens an epoch in which nothing is written to either cluster,
// until an identity check made over a connection of its own, started after that dial, accepts
// management. Writes over a connection that existed when management was verified need no new
// check: a TCP connection does not move to another server. So an address moved to another
// cluster while the agent runs yields no write on that cluster and no copy changed from what it
// serves (a remote object whose UID changed included): its first request arrives over a new
// connection.
type connVerifier struct {
	// dials counts new connections; verifiedAt is 1 + the dial count at the start of the last
	// check that accepted management (0: never), so the guard is open only while no connection
	// was made since that check started.
	dials, verifiedAt atomic.Uint64
	// dialed wakes the identity watcher after a new connection.
	dialed chan struct{}
	// verify runs one identity check (set by the engine: identityPin.check); ensure runs it,
	// one at a time, when a write finds the guard closed.
	verify func(ctx context.Context)
	mu     sync.Mutex
}

func newConnVerifier() *connVerifier { return &connVerifier{dialed: make(chan struct{}, 1)} }

// wrap returns a copy of cfg whose connections are counted and whose mutating requests (every
// method but GET and HEAD) are refused with ErrIdentityUnverified while the guard is closed.
func (g *connVerifier) wrap(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	dial := c.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	c.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := dial(ctx, network, address)
		if err == nil {
			g.dials.Add(1)
			select {
			case g.dialed <- struct{}{}:
			default:
			}
		}
		return conn, err
	}
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodGet && req.Method != http.MethodHead {
				if err := g.ensure(req.Context()); err != nil {
					return nil, err
				}
			}
			return rt.RoundTrip(req)
		})
	})
	return c
}

// snapshot is taken before an identity check; accepted(snapshot) opens the guard if no
// connection was made since.
func (g *connVerifier) snapshot() uint64 { return g.dials.Load() }

func (g *connVerifier) accepted(snapshot uint64) { g.verifiedAt.Store(snapshot + 1) }

// refused closes the guard until the next accepted check.
func (g *connVerifier) refused() { g.verifiedAt.Store(0) }

// ensure returns nil when management's identity holds for every connection made, checking it
// first (over a fresh connection) if a connection was made since the last check: a write after a
// reconnection waits for one identity check, milliseconds, rather than failing.
func (g *connVerifier) ensure(ctx context.Context) error {
	if g.err() == nil || g.verify == nil {
		return g.err()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err() == nil { // another writer's check just opened it
		return nil
	}
	g.verify(ctx)
	return g.err()
}

// err is nil while management's identity holds for every connection made.
func (g *connVerifier) err() error {
	if g.verifiedAt.Load() != g.dials.Load()+1 {
		return ErrIdentityUnverified
	}
	return nil
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// freshClient returns a management client whose requests use a connection of their own (its
// transport is not shared with any other client), and the function that closes that connection
// once the caller is done: an identity check must not ride a connection made before the dial it
// verifies, and must not leave one behind (an idle connection is a TLS session the API server
// keeps, one per check and region until its idle timeout).
//
// The close goes to the transport itself: client-go's round trippers (impersonation, bearer
// token, user agent) do not pass http.Client.CloseIdleConnections on, so through the client it
// closes nothing when cfg has any of them.
func freshClient(cfg *rest.Config) (kubernetes.Interface, func(), error) {
	c := rest.CopyConfig(cfg)
	c.Dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext // a Dial of its own: an uncached transport
	c.Timeout = 10 * time.Second
	var base http.RoundTripper
	// First of the wrappers: it is handed the transport client-go built, before any other wraps it.
	c.WrapTransport = transport.Wrappers(func(rt http.RoundTripper) http.RoundTripper {
		base = rt
		return rt
	}, c.WrapTransport)
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfigAndClient(c, hc)
	if err != nil {
		return nil, nil, err
	}
	return cs, func() { utilnet.CloseIdleConnectionsFor(base) }, nil
}

// Package credential keeps a region's management credential, a ServiceAccount token, valid. With
// renewal on it asks management for a new token of its own ServiceAccount (the TokenRequest
// API, authenticated by the current token) well before the current one expires, hands it to
// every management client at once (the clients read the token from here on every request, so
// nothing restarts), and writes it into the kubeconfig Secret the agent's kubeconfig file is
// mounted from, so that a restart, even after the first token expired, starts with it. Renewed
// tokens are bound to the ServiceAccount like the first: deleting the ServiceAccount revokes them
// all. Either way the token's expiry is published (regionsync_management_credential_expiry_
// timestamp_seconds, the Region status). No token is ever logged.
package credential

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/oauth2"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/regionsync/regionsync/internal/telemetry"
)

// MinLifetime is the shortest token the TokenRequest API issues.
const MinLifetime = 10 * time.Minute

// Renewal says how the credential is renewed and where the renewed one is kept.
type Renewal struct {
	// Local writes the Secret (in the regional cluster); LocalReader reads it uncached (no
	// Secret informer: the agent may read this one Secret only).
	Local       client.Writer
	LocalReader client.Reader
	// Secret holds the management kubeconfig under Key; its current user's token is replaced by
	// every renewal.
	Secret types.NamespacedName
	Key    string
	// Lifetime is requested for every new token (0: the current token's own lifetime).
	Lifetime time.Duration
	// RenewBefore: a token is renewed when less than this is left of it (0, or not less than
	// the token's lifetime: a third of its lifetime).
	RenewBefore time.Duration
}

// Params build a Credential.
type Params struct {
	// Config is the management client config holding the token (BearerToken, or BearerTokenFile
	// read once).
	Config *rest.Config
	// Renew turns renewal on; nil uses the credential as it is and only publishes its expiry.
	Renew *Renewal
	Log   logr.Logger
}

// Credential is the management credential in use. It is a manager.Runnable that runs on every
// replica (each replica's management clients use it), and an oauth2.TokenSource that the
// management clients' transport asks on every request.
type Credential struct {
	renew *Renewal
	log   logr.Logger
	token atomic.Pointer[Token]
	known bool // the credential is a ServiceAccount token whose expiry is known
	// refused is signalled when management answers 401 Unauthorized.
	refused chan struct{}
	// tokens creates TokenRequests with the current token.
	tokens kubernetes.Interface

	mu          sync.Mutex
	refusedOnce bool // "management refuses the credential" was logged
	// since is when the token in use was taken; refusedCh is closed at the next refusal of it.
	since     time.Time
	refusedCh chan struct{}
}

// New returns the credential and the config every management client must be built from. Without
// renewal that is p.Config itself; with it, a copy whose requests carry the current token. With
// renewal, the credential must be a ServiceAccount token.
func New(p Params) (*Credential, *rest.Config, error) {
	c := &Credential{renew: p.Renew, log: p.Log, refused: make(chan struct{}, 1), refusedCh: make(chan struct{}), since: time.Now()}
	value := p.Config.BearerToken
	if value == "" && p.Config.BearerTokenFile != "" {
		data, err := os.ReadFile(p.Config.BearerTokenFile)
		if err != nil {
			return nil, nil, fmt.Errorf("management token file: %w", err)
		}
		value = string(data)
	}
	t, err := Parse(value)
	if err != nil {
		if p.Renew != nil {
			return nil, nil, fmt.Errorf("renewing the management credential: it is %w (a kubeconfig made by scripts/region-kubeconfig.sh holds one)", err)
		}
		return c, p.Config, nil // a certificate, an exec plugin, ...: its expiry is not ours to know
	}
	c.known = true
	c.token.Store(&t)
	if p.Renew == nil {
		return c, p.Config, nil
	}
	cfg := rest.CopyConfig(p.Config)
	cfg.BearerToken, cfg.BearerTokenFile = "", ""
	cfg.Wrap(transport.ResettableTokenSourceWrapTransport(c))
	tc := rest.CopyConfig(cfg)
	tc.Timeout = 30 * time.Second
	if c.tokens, err = kubernetes.NewForConfig(tc); err != nil {
		return nil, nil, fmt.Errorf("management client: %w", err)
	}
	return c, cfg, nil
}

// Token is the current token (oauth2.TokenSource): the management clients' transport asks for
// it on every request.
func (c *Credential) Token() (*oauth2.Token, error) {
	t := c.token.Load()
	if t == nil {
		return nil, errNotServiceAccountToken
	}
	return &oauth2.Token{AccessToken: t.Value}, nil
}

// ResetTokenOlderThan is called by the transport when management answered 401 Unauthorized to a
// request sent at start: the token was revoked or expired. Unless the token was replaced since,
// Refused's channel is closed, and the renewal loop looks for a newer token in the Secret (an
// operator may have stored one).
func (c *Credential) ResetTokenOlderThan(start time.Time) {
	c.mu.Lock()
	if start.Before(c.since) {
		c.mu.Unlock()
		return // refused a token no longer in use
	}
	close(c.refusedCh)
	c.refusedCh = make(chan struct{})
	c.mu.Unlock()
	select {
	case c.refused <- struct{}{}:
	default:
	}
}

// Refused returns a channel that is closed the next time management refuses the token in use
// (401 Unauthorized: the region was revoked, or the token expired). It is never closed without
// renewal (the credential is then not this package's to watch).
func (c *Credential) Refused() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refusedCh
}

// Expiry is when the credential in use expires (zero when unknown: not a ServiceAccount token).
func (c *Credential) Expiry() time.Time {
	if t := c.token.Load(); t != nil {
		return t.Expiry
	}
	return time.Time{}
}

// NeedLeaderElection is false: every replica talks to management, so every replica keeps its token.
func (c *Credential) NeedLeaderElection() bool { return false }

// refusedCheckInterval bounds how often a refused credential sends the agent to the Secret.
const refusedCheckInterval = 30 * time.Second

// Start publishes the expiry and, with renewal on, first takes the Secret's token when it
// outlives the file's (the mounted file lags the Secret by up to a minute or so), then renews
// before every expiry until ctx ends.
func (c *Credential) Start(ctx context.Context) error {
	c.publish()
	if c.renew == nil || !c.known {
		<-ctx.Done()
		return nil
	}
	if err := c.adoptStored(ctx); err != nil {
		c.log.Error(err, "reading the stored management credential; renewing the one from the kubeconfig file")
	}
	var lastRefusedCheck time.Time
	failures := 0
	next := c.due(*c.token.Load())
	for {
		timer := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-c.refused:
			timer.Stop()
			if time.Since(lastRefusedCheck) < refusedCheckInterval {
				continue
			}
			lastRefusedCheck = time.Now()
			c.logRefused()
			if err := c.adoptStored(ctx); err != nil {
				c.log.V(1).Info("reading the stored management credential", "error", err.Error())
			}
			if failures == 0 {
				next = c.due(*c.token.Load())
			}
			continue
		case <-timer.C:
		}
		if err := c.step(ctx); err != nil {
			failures++
			delay := min(10*time.Second<<min(failures-1, 5), 5*time.Minute)
			telemetry.CredentialRenewals.WithLabelValues(telemetry.ResultError).Inc()
			t := c.token.Load()
			c.log.Error(err, "renewing the management credential; retrying", "serviceAccount", t.Namespace+"/"+t.ServiceAccount,
				"expires", t.Expiry.UTC().Format(time.RFC3339), "retryIn", delay.String())
			next = time.Now().Add(delay)
			continue
		}
		failures = 0
		next = c.due(*c.token.Load())
	}
}

// logRefused says once (until a renewal succeeds) that management refuses the credential.
func (c *Credential) logRefused() {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.token.Load()
	if c.refusedOnce {
		c.log.V(1).Info("management still refuses the credential", "serviceAccount", t.Namespace+"/"+t.ServiceAccount)
		return
	}
	c.refusedOnce = true
	c.log.Info("management refuses the region's credential (401 Unauthorized): its ServiceAccount was deleted (the region is revoked) or the token expired; "+
		"nothing is synced until a valid credential is stored in the Secret (scripts/region-kubeconfig.sh)",
		"serviceAccount", t.Namespace+"/"+t.ServiceAccount, "expires", t.Expiry.UTC().Format(time.RFC3339), "secret", c.renew.Secret.String())
}

// due is when t is to be renewed.
func (c *Credential) due(t Token) time.Time {
	lifetime := t.Lifetime()
	before := c.renew.RenewBefore
	if before <= 0 || before >= lifetime {
		before = lifetime / 3
	}
	return t.Expiry.Add(-before)
}

// step renews the token when it is due (unless the Secret already holds a newer one that is not),
// then makes sure the Secret holds it.
func (c *Credential) step(ctx context.Context) error {
	if !time.Now().Before(c.due(*c.token.Load())) {
		if err := c.adoptStored(ctx); err != nil {
			c.log.V(1).Info("reading the stored management credential", "error", err.Error())
		}
	}
	if !time.Now().Before(c.due(*c.token.Load())) {
		if err := c.request(ctx); err != nil {
			return err
		}
	}
	return c.store(ctx)
}

// request asks management for a new token of the credential's own ServiceAccount, with the
// current token, and uses it from now on.
func (c *Credential) request(ctx context.Context) error {
	cur := *c.token.Load()
	lifetime := c.renew.Lifetime
	if lifetime == 0 {
		lifetime = cur.Lifetime().Round(time.Second)
	}
	secs := int64(max(lifetime, MinLifetime) / time.Second)
	tr, err := c.tokens.CoreV1().ServiceAccounts(cur.Namespace).CreateToken(ctx, cur.ServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("requesting a token for ServiceAccount %s/%s on management: %w", cur.Namespace, cur.ServiceAccount, err)
	}
	t, err := Parse(tr.Status.Token)
	if err != nil {
		return fmt.Errorf("the token management issued for ServiceAccount %s/%s: %w", cur.Namespace, cur.ServiceAccount, err)
	}
	c.use(t)
	telemetry.CredentialRenewals.WithLabelValues(telemetry.CredentialRenewed).Inc()
	c.log.Info("renewed the management credential", "serviceAccount", t.Namespace+"/"+t.ServiceAccount,
		"expires", t.Expiry.UTC().Format(time.RFC3339), "previousExpiry", cur.Expiry.UTC().Format(time.RFC3339))
	return nil
}

// use makes t the token of every management request from now on.
func (c *Credential) use(t Token) {
	c.mu.Lock()
	c.token.Store(&t)
	c.refusedOnce, c.since = false, time.Now()
	c.mu.Unlock()
	c.publish()
}

// stored reads the Secret and the token its kubeconfig holds.
func (c *Credential) stored(ctx context.Context) (*corev1.Secret, string, error) {
	s := &corev1.Secret{}
	if err := c.renew.LocalReader.Get(ctx, c.renew.Secret, s); err != nil {
		return nil, "", fmt.Errorf("reading Secret %s: %w", c.renew.Secret, err)
	}
	data, ok := s.Data[c.renew.Key]
	if !ok {
		return nil, "", fmt.Errorf("secret %s has no key %q", c.renew.Secret, c.renew.Key)
	}
	token, err := KubeconfigToken(data)
	if err != nil {
		return s, "", fmt.Errorf("secret %s, key %q: %w", c.renew.Secret, c.renew.Key, err)
	}
	return s, token, nil
}

// adoptStored uses the Secret's token when it is of the same ServiceAccount and outlives the one
// in use (another replica renewed it, or the agent restarted before the mounted file caught up).
func (c *Credential) adoptStored(ctx context.Context) error {
	_, value, err := c.stored(ctx)
	if err != nil {
		return err
	}
	cur := *c.token.Load()
	t, err := Parse(value)
	if err != nil {
		return fmt.Errorf("the token in Secret %s: %w", c.renew.Secret, err)
	}
	if t.Namespace != cur.Namespace || t.ServiceAccount != cur.ServiceAccount || !t.Expiry.After(cur.Expiry) {
		return nil
	}
	c.use(t)
	telemetry.CredentialRenewals.WithLabelValues(telemetry.CredentialLoaded).Inc()
	c.log.Info("using the management credential stored in the Secret", "secret", c.renew.Secret.String(),
		"serviceAccount", t.Namespace+"/"+t.ServiceAccount, "expires", t.Expiry.UTC().Format(time.RFC3339))
	return nil
}

// store writes the token in use into the Secret unless it already holds one that lives as long.
func (c *Credential) store(ctx context.Context) error {
	s, value, err := c.stored(ctx)
	if s == nil {
		return err
	}
	cur := *c.token.Load()
	if t, err := Parse(value); err == nil && !t.Expiry.Before(cur.Expiry) {
		return nil
	}
	data, err := WithToken(s.Data[c.renew.Key], cur.Value)
	if err != nil {
		return fmt.Errorf("secret %s, key %q: %w", c.renew.Secret, c.renew.Key, err)
	}
	s.Data[c.renew.Key] = data
	if err := c.renew.Local.Update(ctx, s); err != nil {
		return fmt.Errorf("writing the renewed credential to Secret %s: %w", c.renew.Secret, err)
	}
	c.log.Info("stored the renewed management credential", "secret", c.renew.Secret.String(), "expires", cur.Expiry.UTC().Format(time.RFC3339))
	return nil
}

// publish sets the expiry metric (0 while unknown).
func (c *Credential) publish() {
	if e := c.Expiry(); !e.IsZero() {
		telemetry.ManagementCredentialExpiry.Set(float64(e.Unix()))
	}
}

package credential

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
)

// A refusal (401) of the token in use closes Refused's channel, once per refusal; a refusal of a
// request sent before the token was replaced does not.
func TestRefused(t *testing.T) {
	now := time.Now()
	value := jwt(t, map[string]any{"sub": "system:serviceaccount:ns:sa", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	c, cfg, err := New(Params{Config: &rest.Config{Host: "https://management", BearerToken: value}, Renew: &Renewal{}, Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BearerToken != "" || cfg.WrapTransport == nil {
		t.Fatal("the management config must take its token from the credential, not hold one")
	}
	if tok, err := c.Token(); err != nil || tok.AccessToken != value {
		t.Fatalf("Token() = %v, %v", tok, err)
	}
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	first := c.Refused()
	c.ResetTokenOlderThan(now.Add(-time.Minute)) // sent before the credential was built
	if closed(first) {
		t.Fatal("a refusal of a token no longer in use closed Refused")
	}
	c.ResetTokenOlderThan(time.Now())
	if !closed(first) {
		t.Fatal("a refusal of the token in use did not close Refused")
	}
	if second := c.Refused(); closed(second) {
		t.Fatal("Refused after a refusal is already closed")
	}

	// Without renewal the config is the host's, and a credential that is not a ServiceAccount
	// token is used as it is; with renewal it is refused.
	static := &rest.Config{Host: "https://management", BearerToken: "opaque"}
	if c, cfg, err := New(Params{Config: static, Log: logr.Discard()}); err != nil || cfg != static || !c.Expiry().IsZero() {
		t.Fatalf("static: %v, %v, expiry %v", cfg, err, c.Expiry())
	}
	if _, _, err := New(Params{Config: static, Renew: &Renewal{}, Log: logr.Discard()}); err == nil {
		t.Fatal("renewal of a credential that is not a ServiceAccount token accepted")
	}
}

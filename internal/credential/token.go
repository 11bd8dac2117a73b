package credential

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Token is a ServiceAccount token and what its claims say. The claims are read, not verified:
// the API server verifies every token it is handed; the agent only learns from them whose token
// it holds and when it expires.
type Token struct {
	// Value is the token itself: never log it.
	Value string
	// Namespace and ServiceAccount name the identity (the claim "sub",
	// system:serviceaccount:<namespace>:<name>).
	Namespace, ServiceAccount string
	// IssuedAt and Expiry are the claims "iat" and "exp" (a token issued by the TokenRequest API
	// has both).
	IssuedAt, Expiry time.Time
}

// Lifetime is how long the token was issued for.
func (t Token) Lifetime() time.Duration { return t.Expiry.Sub(t.IssuedAt) }

// String names the identity and the expiry, never the token.
func (t Token) String() string {
	return fmt.Sprintf("ServiceAccount %s/%s, expires %s", t.Namespace, t.ServiceAccount, t.Expiry.UTC().Format(time.RFC3339))
}

// errNotServiceAccountToken: the credential is not a ServiceAccount token (a client certificate,
// an exec plugin, an OIDC token, a legacy token without expiry).
var errNotServiceAccountToken = errors.New("not a ServiceAccount token with an expiry")

const serviceAccountSubject = "system:serviceaccount:"

// Parse reads a ServiceAccount token's claims (a JWT issued by the TokenRequest API).
func Parse(value string) (Token, error) {
	parts := strings.Split(value, ".")
	if len(parts) != 3 {
		return Token{}, errNotServiceAccountToken
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return Token{}, fmt.Errorf("%w: %w", errNotServiceAccountToken, err)
	}
	var claims struct {
		Subject   string `json:"sub"`
		IssuedAt  int64  `json:"iat"`
		ExpiresAt int64  `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return Token{}, fmt.Errorf("%w: %w", errNotServiceAccountToken, err)
	}
	ns, name, ok := strings.Cut(strings.TrimPrefix(claims.Subject, serviceAccountSubject), ":")
	if !strings.HasPrefix(claims.Subject, serviceAccountSubject) || !ok || ns == "" || name == "" ||
		claims.ExpiresAt == 0 || claims.IssuedAt == 0 || claims.IssuedAt >= claims.ExpiresAt {
		return Token{}, errNotServiceAccountToken
	}
	return Token{Value: value, Namespace: ns, ServiceAccount: name, IssuedAt: time.Unix(claims.IssuedAt, 0), Expiry: time.Unix(claims.ExpiresAt, 0)}, nil
}

// kubeconfigUser returns the user of a kubeconfig's current context (or its only user).
func kubeconfigUser(kc *clientcmdapi.Config) (*clientcmdapi.AuthInfo, error) {
	if c, ok := kc.Contexts[kc.CurrentContext]; ok {
		if u, ok := kc.AuthInfos[c.AuthInfo]; ok {
			return u, nil
		}
		return nil, fmt.Errorf("the current context's user %q is not in the kubeconfig", c.AuthInfo)
	}
	if len(kc.AuthInfos) == 1 {
		for _, u := range kc.AuthInfos {
			return u, nil
		}
	}
	return nil, errors.New("the kubeconfig has no current context")
}

// KubeconfigToken returns the token of a kubeconfig's current user.
func KubeconfigToken(data []byte) (string, error) {
	kc, err := clientcmd.Load(data)
	if err != nil {
		return "", err
	}
	u, err := kubeconfigUser(kc)
	if err != nil {
		return "", err
	}
	if u.Token == "" {
		return "", errors.New("the kubeconfig's user has no token")
	}
	return u.Token, nil
}

// WithToken returns the kubeconfig with its current user's token replaced (and a token file, if
// it named one, dropped); everything else is kept.
func WithToken(data []byte, token string) ([]byte, error) {
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, err
	}
	u, err := kubeconfigUser(kc)
	if err != nil {
		return nil, err
	}
	u.Token, u.TokenFile = token, ""
	return clientcmd.Write(*kc)
}

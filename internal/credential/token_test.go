package credential

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// jwt is an unsigned token with the claims (the agent reads claims, the API server verifies).
func jwt(t *testing.T, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc(payload) + "." + enc([]byte("signature"))
}

func TestParse(t *testing.T) {
	iat, exp := time.Unix(1_700_000_000, 0), time.Unix(1_700_000_000+3600, 0)
	valid := jwt(t, map[string]any{"sub": "system:serviceaccount:regionsync-system:region-us-east-1", "iat": iat.Unix(), "exp": exp.Unix()})
	tok, err := Parse(valid)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Namespace != "regionsync-system" || tok.ServiceAccount != "region-us-east-1" || !tok.IssuedAt.Equal(iat) ||
		!tok.Expiry.Equal(exp) || tok.Lifetime() != time.Hour || tok.Value != valid {
		t.Fatalf("parsed %+v", tok)
	}
	if s := tok.String(); strings.Contains(s, valid) || !strings.Contains(s, "regionsync-system/region-us-east-1") {
		t.Fatalf("String() = %q: must name the identity, never the token", s)
	}
	for name, value := range map[string]string{
		"empty":       "",
		"opaque":      "abcdef0123456789",
		"not base64":  "a.%%%.c",
		"not JSON":    "a." + base64.RawURLEncoding.EncodeToString([]byte("nope")) + ".c",
		"a user":      jwt(t, map[string]any{"sub": "alice", "iat": iat.Unix(), "exp": exp.Unix()}),
		"no name":     jwt(t, map[string]any{"sub": "system:serviceaccount:regionsync-system", "iat": iat.Unix(), "exp": exp.Unix()}),
		"no expiry":   jwt(t, map[string]any{"sub": "system:serviceaccount:ns:sa", "iat": iat.Unix()}),
		"no issuance": jwt(t, map[string]any{"sub": "system:serviceaccount:ns:sa", "exp": exp.Unix()}),
	} {
		if _, err := Parse(value); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// The renewal margin: a third of the lifetime by default, the configured margin when it leaves
// the token some life.
func TestDue(t *testing.T) {
	iat := time.Unix(1_700_000_000, 0)
	tok := Token{IssuedAt: iat, Expiry: iat.Add(720 * time.Hour)}
	for name, tc := range map[string]struct {
		before time.Duration
		want   time.Time
	}{
		"default: at two thirds":   {0, iat.Add(480 * time.Hour)},
		"configured":               {24 * time.Hour, iat.Add(696 * time.Hour)},
		"longer than the lifetime": {1000 * time.Hour, iat.Add(480 * time.Hour)},
	} {
		c := &Credential{renew: &Renewal{RenewBefore: tc.before}}
		if got := c.due(tok); !got.Equal(tc.want) {
			t.Errorf("%s: due %s, want %s", name, got, tc.want)
		}
	}
}

// A kubeconfig's token is replaced and everything else of it kept.
func TestWithToken(t *testing.T) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["management"] = &clientcmdapi.Cluster{Server: "https://management:6443", CertificateAuthorityData: []byte("CA"), TLSServerName: "mgmt"}
	kc.AuthInfos["region-us-east-1"] = &clientcmdapi.AuthInfo{Token: "old"}
	kc.AuthInfos["other"] = &clientcmdapi.AuthInfo{Token: "other"}
	kc.Contexts["region-us-east-1@management"] = &clientcmdapi.Context{Cluster: "management", AuthInfo: "region-us-east-1"}
	kc.CurrentContext = "region-us-east-1@management"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := KubeconfigToken(data); err != nil || tok != "old" {
		t.Fatalf("KubeconfigToken = %q, %v", tok, err)
	}
	updated, err := WithToken(data, "new")
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := KubeconfigToken(updated); err != nil || tok != "new" {
		t.Fatalf("after WithToken: %q, %v", tok, err)
	}
	got, err := clientcmd.Load(updated)
	if err != nil {
		t.Fatal(err)
	}
	c := got.Clusters["management"]
	if c.Server != "https://management:6443" || string(c.CertificateAuthorityData) != "CA" || c.TLSServerName != "mgmt" ||
		got.AuthInfos["other"].Token != "other" || got.CurrentContext != kc.CurrentContext {
		t.Fatalf("WithToken changed more than the token: %+v", got)
	}

	noContext := clientcmdapi.NewConfig()
	noContext.AuthInfos["a"], noContext.AuthInfos["b"] = &clientcmdapi.AuthInfo{Token: "a"}, &clientcmdapi.AuthInfo{Token: "b"}
	data, err = clientcmd.Write(*noContext)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WithToken(data, "new"); err == nil {
		t.Fatal("WithToken chose a user without a current context")
	}
}

package syncer

import (
	"context"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// An identity check's connection is closed when the check is done, whatever client-go wraps the
// transport in (impersonation, a bearer token, a user agent): each check would otherwise leave
// an idle TLS connection on management until its idle timeout, several per region at once.
func TestFreshClientLeavesNoConnection(t *testing.T) {
	var open atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprint(w, `{"kind":"NamespaceList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[]}`)
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	for name, cfg := range map[string]*rest.Config{
		"plain":           {Host: srv.URL},
		"impersonating":   {Host: srv.URL, Impersonate: rest.ImpersonationConfig{UserName: "system:serviceaccount:regionsync-system:region-a"}},
		"bearer token":    {Host: srv.URL, BearerToken: "token"},
		"user agent":      {Host: srv.URL, UserAgent: "regionsync-agent"},
		"own wrapper too": {Host: srv.URL, BearerToken: "token", WrapTransport: func(rt http.RoundTripper) http.RoundTripper { return rt }},
	} {
		t.Run(name, func(t *testing.T) {
			cfg.CAData = ca
			for i := range 3 {
				cs, done, err := freshClient(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{}); err != nil {
					t.Fatalf("check %d: %v", i, err)
				}
				done()
			}
			deadline := time.Now().Add(5 * time.Second)
			for open.Load() != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%d connections still open after 3 checks, want 0", open.Load())
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

//go:build integration && nightly

package main_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/credential"
)

// The soak of the credential's renewal runs past a real token's expiry (the API server issues
// nothing shorter than 10 minutes), so it runs in make test-nightly, not in make test.

// A 10-minute token is renewed by the agent (as its shipped identities) and stored in the
// Secret; syncing goes on past the first token's expiry (management refuses that token by then,
// and the agent's claim is still renewed), the Region shows the renewed expiry, and an agent
// restarted after that expiry, whose kubeconfig file still holds the expired token, starts with
// the Secret's renewed token and syncs.
func TestCredentialRenewedPastExpiry(t *testing.T) {
	t.Parallel()
	e := newCredentialEnv(t, "us-east-1", credential.MinLifetime, 20*time.Second)
	a := startAgentWith(t, "cred-a", e.localKC, e.cfg)
	e.tenant("t0")
	e.waitLocal(e.local, "tenant-a", "t0", 60*time.Second)

	renewed := e.waitRenewed(a, e.original.Expiry, 2*time.Minute)
	t.Logf("first token expires %s; renewed token expires %s", e.original.Expiry.Format(time.TimeOnly), renewed.Expiry.Format(time.TimeOnly))
	e.eventually("the Region shows the renewed credential's expiry", 60*time.Second, func() error {
		r := &regionsyncv1alpha1.Region{}
		if err := e.management.Client.Get(e.ctx, client.ObjectKey{Name: e.region}, r); err != nil {
			return err
		}
		if exp := r.Status.CredentialExpiryTime; exp == nil || !exp.After(e.original.Expiry) {
			return fmt.Errorf("status.credentialExpiryTime %v, want after %s", exp, e.original.Expiry)
		}
		return nil
	})

	// Past the first token's expiry: management refuses it (checked every 5 s, not slept on).
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Second, time.Until(e.original.Expiry)+2*time.Minute, true,
		func(context.Context) (bool, error) {
			return apierrors.IsUnauthorized(e.authenticated(e.original.Value)), nil
		})
	if err != nil {
		t.Fatalf("management still accepts the first token %s after its expiry %s", time.Now().Format(time.TimeOnly), e.original.Expiry.Format(time.TimeOnly))
	}
	expired := time.Now()
	t.Logf("first token refused by management at %s", expired.Format(time.TimeOnly))
	e.tenant("t1")
	e.waitLocal(e.local, "tenant-a", "t1", 60*time.Second)
	e.eventually("the shard claim renewed after the first token expired", 60*time.Second, func() error {
		renew, err := e.claimRenewed()
		if err != nil {
			return err
		}
		if !renew.After(expired) {
			return fmt.Errorf("Lease last renewed %s", renew.Format(time.TimeOnly))
		}
		return nil
	})
	if v, err := a.metric("regionsync_management_connected"); err != nil || v != 1 {
		t.Fatalf("regionsync_management_connected = %v (%v) after the first token expired", v, err)
	}

	// A restart after the expiry: the kubeconfig file (a mounted Secret's file may lag the
	// Secret) still holds the expired token; the agent takes the Secret's.
	a.signal(t, syscall.SIGTERM)
	b := startAgentWith(t, "cred-b", e.localKC, e.cfg)
	e.tenant("t2")
	e.waitLocal(e.local, "tenant-a", "t2", 90*time.Second)
	if n, err := b.counter("regionsync_management_credential_renewals_total", `result="loaded"`); err != nil || n < 1 {
		t.Fatalf("the restarted agent did not take the Secret's token: renewals_total{result=loaded} = %v (%v)", n, err)
	}
	if v, err := b.metric("regionsync_management_credential_expiry_timestamp_seconds"); err != nil || int64(v) <= e.original.Expiry.Unix() {
		t.Fatalf("the restarted agent's credential expiry %v (%v), want after %d", int64(v), err, e.original.Expiry.Unix())
	}
	for _, p := range []*proc{a, b} {
		for _, secret := range []string{e.original.Value, renewed.Value} {
			if strings.Contains(p.logs(), secret) {
				t.Fatalf("%s logged a token", p.name)
			}
		}
	}
}

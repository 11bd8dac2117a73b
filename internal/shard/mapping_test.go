package shard

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/regionsync/regionsync/internal/fleetspec"
)

func nn(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

func TestToLocal(t *testing.T) {
	full := fleetspec.Shard{NamespacePrefix: "team-", RemoteResourceSuffix: "-us-east-1", RemoteNamespaceSuffix: "-mgmt", LocalNamespaceSuffix: "-local"}
	cases := map[string]struct {
		shard   fleetspec.Shard
		remote  types.NamespacedName
		want    types.NamespacedName
		wantErr string // "" = success, "shard" = ErrNotInShard, else a substring
	}{
		"no constraints is identity":       {fleetspec.Shard{}, nn("a", "b"), nn("a", "b"), ""},
		"resource suffix removed":          {fleetspec.Shard{RemoteResourceSuffix: "-us"}, nn("ns", "acme-us"), nn("ns", "acme"), ""},
		"all rules":                        {full, nn("team-a-mgmt", "acme-us-east-1"), nn("team-a-local", "acme"), ""},
		"prefix only namespace":            {full, nn("team--mgmt", "x-us-east-1"), nn("team--local", "x"), ""},
		"other suffix ignored":             {fleetspec.Shard{RemoteResourceSuffix: "-us"}, nn("ns", "acme-eu"), nn("", ""), "shard"},
		"no suffix ignored":                {fleetspec.Shard{RemoteResourceSuffix: "-us"}, nn("ns", "acme"), nn("", ""), "shard"},
		"suffix of a longer region":        {fleetspec.Shard{RemoteResourceSuffix: "-east"}, nn("ns", "acme-us-east"), nn("ns", "acme-us"), ""},
		"other prefix ignored":             {full, nn("crew-a-mgmt", "acme-us-east-1"), nn("", ""), "shard"},
		"missing namespace suffix ignored": {full, nn("team-a", "acme-us-east-1"), nn("", ""), "shard"},
		"prefix and suffix overlap":        {fleetspec.Shard{NamespacePrefix: "team-", RemoteNamespaceSuffix: "-mgmt"}, nn("team-mgmt", "x"), nn("", ""), "shard"},
		"name equal to suffix":             {fleetspec.Shard{RemoteResourceSuffix: "-us"}, nn("ns", "-us"), nn("", ""), "invalid local"},
		"local name starts with dash":      {fleetspec.Shard{RemoteResourceSuffix: "x-us"}, nn("ns", "-x-us"), nn("", ""), "invalid local"},
		"local namespace too long": {fleetspec.Shard{RemoteNamespaceSuffix: "-m", LocalNamespaceSuffix: "-local-suffix"},
			nn(strings.Repeat("n", 55)+"-m", "acme"), nn("", ""), "must be no more than 63"},
		"local namespace ends with dash": {fleetspec.Shard{RemoteNamespaceSuffix: "x"}, nn("a-x", "acme"), nn("", ""), "invalid local"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := NewMapper(tc.shard)
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.ToLocal(tc.remote)
			switch tc.wantErr {
			case "":
				if err != nil || got != tc.want {
					t.Fatalf("ToLocal(%s) = %s, %v; want %s", tc.remote, got, err, tc.want)
				}
				back, err := m.ToRemote(got)
				if err != nil || back != tc.remote {
					t.Fatalf("ToRemote(%s) = %s, %v; want %s", got, back, err, tc.remote)
				}
			case "shard":
				if !errors.Is(err, ErrNotInShard) {
					t.Fatalf("ToLocal(%s) = %s, %v; want ErrNotInShard", tc.remote, got, err)
				}
			default:
				if err == nil || errors.Is(err, ErrNotInShard) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ToLocal(%s) error = %v; want one containing %q", tc.remote, err, tc.wantErr)
				}
			}
		})
	}
}

func TestToRemoteOutsideShard(t *testing.T) {
	m, _ := NewMapper(fleetspec.Shard{NamespacePrefix: "team-", LocalNamespaceSuffix: "-local", RemoteResourceSuffix: "-us"})
	for _, local := range []types.NamespacedName{nn("kube-system", "x"), nn("team-a", "x"), nn("other-local", "x"), nn("team-a-local", "")} {
		if _, err := m.ToRemote(local); !errors.Is(err, ErrNotInShard) {
			t.Errorf("ToRemote(%s) = %v, want ErrNotInShard", local, err)
		}
	}
	if got, err := m.ToRemote(nn("team-a-local", "acme")); err != nil || got != nn("team-a", "acme-us") {
		t.Errorf("ToRemote = %s, %v", got, err)
	}
}

func TestSelector(t *testing.T) {
	m, err := NewMapper(fleetspec.Shard{LabelSelector: "region=us,tier!=test"})
	if err != nil {
		t.Fatal(err)
	}
	if !m.MatchesLabels(map[string]string{"region": "us"}) || m.MatchesLabels(map[string]string{"region": "eu"}) ||
		m.MatchesLabels(map[string]string{"region": "us", "tier": "test"}) {
		t.Fatal("selector matched wrongly")
	}
	if _, err := NewMapper(fleetspec.Shard{LabelSelector: "a in ("}); err == nil {
		t.Fatal("bad selector accepted")
	}
}

func TestKeys(t *testing.T) {
	k := NewKeys("cloud.teleport.dev")
	// gravitational/sync-controller's exact keys and finalizer.
	want := map[string]string{
		k.RemoteGeneration: "cloud.teleport.dev/sync-remote-generation",
		k.LocalGeneration:  "cloud.teleport.dev/sync-local-generation",
		k.Owner:            "cloud.teleport.dev/sync-owner",
		k.Finalizer:        "cloud.teleport.dev/sync-local",
	}
	for got, w := range want {
		if got != w {
			t.Errorf("key %q, want %q", got, w)
		}
	}
	if !k.IsPaused(map[string]string{"cloud.teleport.dev/paused": "true"}) || k.IsPaused(map[string]string{"cloud.teleport.dev/paused": "no"}) {
		t.Error("IsPaused wrong")
	}
	if !k.IsAgentKey(k.RemoteGeneration) || k.IsAgentKey("example.com/x") {
		t.Error("IsAgentKey wrong")
	}
}

// FuzzMapping: the mapping never panics, never maps an object outside the shard, and round trips.
func FuzzMapping(f *testing.F) {
	f.Add("team-", "-us", "-m", "-l", "team-a-m", "acme-us")
	f.Add("", "", "", "", "ns", "name")
	f.Add("p", "x", "", "", "p", "x")
	f.Fuzz(func(t *testing.T, prefix, rsuffix, rnsSuffix, lnsSuffix, ns, name string) {
		m, err := NewMapper(fleetspec.Shard{NamespacePrefix: prefix, RemoteResourceSuffix: rsuffix, RemoteNamespaceSuffix: rnsSuffix, LocalNamespaceSuffix: lnsSuffix})
		if err != nil {
			t.Fatal(err)
		}
		remote := nn(ns, name)
		local, err := m.ToLocal(remote)
		if err == nil {
			if !strings.HasPrefix(ns, prefix) || !strings.HasSuffix(ns, rnsSuffix) || !strings.HasSuffix(name, rsuffix) {
				t.Fatalf("mapped %s, which is outside the shard", remote)
			}
			if !strings.HasPrefix(local.Namespace, prefix) || !strings.HasSuffix(local.Namespace, lnsSuffix) {
				t.Fatalf("local %s outside the local shard", local)
			}
			back, err := m.ToRemote(local)
			if err != nil || back != remote {
				t.Fatalf("round trip %s -> %s -> %s, %v", remote, local, back, err)
			}
		}
		// The reverse direction round trips too.
		if r, err := m.ToRemote(remote); err == nil {
			if l, err := m.ToLocal(r); err == nil && l != remote {
				t.Fatalf("reverse round trip %s -> %s -> %s", remote, r, l)
			}
		}
	})
}

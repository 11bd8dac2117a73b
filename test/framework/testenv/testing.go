package testenv

import (
	"testing"
)

// StartT starts a fleet for a test and stops it in t.Cleanup (which also runs when the test
// fails or panics). Kubeconfigs and control-plane logs live in the test's temporary directory.
func StartT(t testing.TB, names ...string) *Fleet {
	t.Helper()
	f, err := Start(names, Options{Dir: t.TempDir(), Log: t.Logf})
	if err != nil {
		t.Fatalf("starting clusters %v: %v", names, err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Errorf("stopping clusters: %v", err)
		}
	})
	return f
}

package deploy

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNewRegionSuffixes: scripts/new-region.sh refuses a suffix that another region's names can
// also end with (the same suffix, one that ends it, one it ends), naming that region, and writes
// nothing; a suffix that collides with none is written.
func TestNewRegionSuffixes(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-R", "../../../deploy", dir).CombinedOutput(); err != nil {
		t.Fatalf("copying deploy/: %v: %s", err, out)
	}
	if err := os.MkdirAll(filepath.Join(dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "../../../scripts/new-region.sh", filepath.Join(dir, "scripts")).CombinedOutput(); err != nil {
		t.Fatalf("copying new-region.sh: %v: %s", err, out)
	}
	script := filepath.Join(dir, "scripts", "new-region.sh")
	regions := func() []string {
		entries, err := os.ReadDir(filepath.Join(dir, "deploy", "regions"))
		if err != nil {
			t.Fatal(err)
		}
		names := make([]string, 0, len(entries))
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	before := strings.Join(regions(), ",")
	for name, tc := range map[string]struct {
		args  []string
		other string
	}{
		"the same suffix":          {[]string{"x-same", "--suffix", "-eu-west-1"}, "eu-west-1"},
		"a suffix of another's":    {[]string{"x-shorter", "--suffix", "-west-1"}, "eu-west-1"},
		"ending in another's":      {[]string{"x-longer", "--suffix", "-x-us-east-1"}, "us-east-1"},
		"a default suffix (-NAME)": {[]string{"southeast-1"}, "ap-southeast-1"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := exec.Command(script, tc.args...).CombinedOutput()
			var exit *exec.ExitError
			if err == nil || !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("new-region.sh %v: %v, want exit 1; output:\n%s", tc.args, err, out)
			}
			if !strings.Contains(string(out), "region '"+tc.other+"'") || !strings.Contains(string(out), "nothing written") {
				t.Errorf("the refusal does not name region %s or say nothing was written:\n%s", tc.other, out)
			}
			if got := strings.Join(regions(), ","); got != before {
				t.Errorf("regions after a refusal: %s, want %s", got, before)
			}
		})
	}
	if out, err := exec.Command(script, "eu-central-1").CombinedOutput(); err != nil {
		t.Fatalf("new-region.sh eu-central-1: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "deploy", "regions", "eu-central-1", "agent", "config.yaml")); err != nil {
		t.Fatalf("the new region's overlay: %v", err)
	}
}

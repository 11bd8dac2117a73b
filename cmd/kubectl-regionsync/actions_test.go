package main

import (
	"strings"
	"testing"
)

func TestReleaseArgs(t *testing.T) {
	cases := []struct {
		args           []string
		region, before string
		err            string
	}{
		{args: []string{"tenant/web"}},
		{region: "use", before: "now"},
		{args: []string{"tenant/web"}, region: "use", err: "not both"},
		{err: "name a copy"},
		{before: "now", err: "--before needs --region"},
		{region: "use", err: "--region needs --before"},
	}
	for _, tc := range cases {
		err := releaseArgs(tc.args, tc.region, tc.before)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("releaseArgs(%v, %q, %q): %v", tc.args, tc.region, tc.before, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("releaseArgs(%v, %q, %q) = %v, want an error with %q", tc.args, tc.region, tc.before, err, tc.err)
		}
	}
}

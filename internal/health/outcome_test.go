package health

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/telemetry"
)

// The reporter's log is one line per change of outcome, never one per tick: a missing Region
// kind is one warning saying what to do, an outage one info line, a refusal one error per
// distinct message, recovery one line; the gauge follows every outcome.
func TestReporterOutcome(t *testing.T) {
	noKind := &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "regionsync.dev", Kind: "Region"}, SearchedVersions: []string{"v1alpha1"}}
	refused := apierrors.NewForbidden(schema.GroupResource{Group: "regionsync.dev", Resource: "regions"}, "us", errors.New("denied"))
	outage := fmt.Errorf("updating Region us status: %w", errors.New("dial tcp 10.0.0.1:6443: connect: connection refused"))
	outage = &netOpError{outage}
	steps := []struct {
		err       error
		published float64
		lines     []string // the lines at V(0) this outcome adds: "E msg" for errors, "I msg" for info
	}{
		{nil, 1, nil},
		{noKind, 0, []string{"I WARNING: the Region kind (regions.regionsync.dev) is not installed"}},
		{noKind, 0, nil},
		{noKind, 0, nil},
		{nil, 1, []string{"I publishing the Region status again"}},
		{outage, 0, []string{"I publishing the Region status failed: management unreachable or busy"}},
		{outage, 0, nil},
		{refused, 0, []string{"E publishing the Region status; retrying"}},
		{refused, 0, nil},
		{apierrors.NewForbidden(schema.GroupResource{Group: "regionsync.dev", Resource: "regions"}, "us", errors.New("other")), 0, []string{"E publishing the Region status; retrying"}},
		{nil, 1, []string{"I publishing the Region status again"}},
		{nil, 1, nil},
	}
	var lines []string
	log := funcr.New(func(_, args string) {
		kind := "I"
		if !strings.Contains(args, `"level"=`) {
			kind = "E"
		}
		lines = append(lines, kind+" "+args)
	}, funcr.Options{Verbosity: 0})
	r := &Reporter{Region: "us", Recheck: 30 * time.Second, Log: log}
	now := time.Now()
	for i, s := range steps {
		before := len(lines)
		r.outcome(s.err, now)
		got := lines[before:]
		if len(got) != len(s.lines) {
			t.Fatalf("step %d (%v): lines %q, want %d", i, s.err, got, len(s.lines))
		}
		for j, want := range s.lines {
			kind, msg, _ := strings.Cut(want, " ")
			if !strings.HasPrefix(got[j], kind+" ") || !strings.Contains(got[j], msg) {
				t.Errorf("step %d: line %q, want %s %q", i, got[j], kind, msg)
			}
		}
		m := &dto.Metric{}
		if err := telemetry.RegionStatusPublished.Write(m); err != nil {
			t.Fatal(err)
		}
		if v := m.GetGauge().GetValue(); v != s.published {
			t.Errorf("step %d: regionsync_region_status_published %v, want %v", i, v, s.published)
		}
		if s.err == noKind && !r.notBefore.Equal(now.Add(r.Recheck)) {
			t.Errorf("step %d: the missing kind is looked for again at %v, want one Recheck later", i, r.notBefore)
		}
	}
}

// netOpError makes an error a net.Error, as a refused dial is.
type netOpError struct{ error }

func (netOpError) Timeout() bool   { return false }
func (netOpError) Temporary() bool { return false }

// TestBeatDue: by default (Refresh 0) an unchanged status is never rewritten for its heartbeat
// (the shard Lease's renewal is the heartbeat); with Refresh set, once the heartbeat is that old.
func TestBeatDue(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		refresh time.Duration
		age     time.Duration
		want    bool
	}{
		"default, fresh":          {0, time.Second, false},
		"default, an hour old":    {0, time.Hour, false},
		"default, a year old":     {0, 365 * 24 * time.Hour, false},
		"30s, younger":            {30 * time.Second, 29 * time.Second, false},
		"30s, exactly that old":   {30 * time.Second, 30 * time.Second, true},
		"30s, older":              {30 * time.Second, time.Minute, true},
		"1s, from the future (0)": {time.Second, -time.Second, false},
	} {
		t.Run(name, func(t *testing.T) {
			r := &Reporter{Refresh: tc.refresh}
			if got := r.beatDue(now.Add(-tc.age), now); got != tc.want {
				t.Errorf("beatDue(refresh %s, age %s) = %v, want %v", tc.refresh, tc.age, got, tc.want)
			}
		})
	}
}

// TestAwaitingFirstPass: the first report waits for the first pass while the claim syncs or is
// being taken, within the grace; a refused claim, a finished pass or the grace's end report.
func TestAwaitingFirstPass(t *testing.T) {
	begun := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	syncing := Claim{Syncing: true, Reason: regionsyncv1alpha1.ReasonClaimed}
	waiting := Claim{Reason: regionsyncv1alpha1.ReasonWaiting}
	overlap := Claim{Reason: regionsyncv1alpha1.ReasonShardOverlap}
	for name, tc := range map[string]struct {
		claim    Claim
		done     bool
		noSource bool
		after    time.Duration
		want     bool
	}{
		"syncing, pass not done":         {claim: syncing, after: time.Second, want: true},
		"claim being taken":              {claim: waiting, after: time.Second, want: true},
		"pass done":                      {claim: syncing, done: true, after: time.Second, want: false},
		"grace over":                     {claim: syncing, after: 30 * time.Second, want: false},
		"refused claim reported at once": {claim: overlap, after: time.Second, want: false},
		"no first-pass source":           {claim: syncing, noSource: true, after: time.Second, want: false},
	} {
		t.Run(name, func(t *testing.T) {
			r := &Reporter{FirstPassGrace: 30 * time.Second, begun: begun, Sources: Sources{
				Claim:         func() Claim { return tc.claim },
				FirstPassDone: func() bool { return tc.done },
			}}
			if tc.noSource {
				r.Sources.FirstPassDone = nil
			}
			if got := r.awaitingFirstPass(begun.Add(tc.after)); got != tc.want {
				t.Errorf("awaitingFirstPass = %v, want %v", got, tc.want)
			}
		})
	}
	// Once the pass was seen done, later reports never wait again in this claim period.
	done := true
	r := &Reporter{FirstPassGrace: time.Minute, begun: begun, Sources: Sources{
		Claim: func() Claim { return syncing }, FirstPassDone: func() bool { return done },
	}}
	if r.awaitingFirstPass(begun) {
		t.Fatal("waits although the pass is done")
	}
	done = false
	if r.awaitingFirstPass(begun.Add(time.Second)) {
		t.Error("waits again after the pass was seen done")
	}
}

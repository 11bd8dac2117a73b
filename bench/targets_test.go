package bench

import (
	"encoding/csv"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// These tests start nothing: they run in make test and make test-unit, the figures themselves only
// in make bench.

var updateDocs = flag.Bool("update", false, "rewrite docs/performance.md's table of figures from targets.yaml")

const (
	performanceDoc = "../docs/performance.md"
	tableBegin     = "<!-- targets:begin -->\n"
	tableEnd       = "<!-- targets:end -->"
	historyFile    = "history.tsv"
)

// TestTargetsTable fails when docs/performance.md's table of figures is not what targets.yaml
// renders; -update rewrites it.
func TestTargetsTable(t *testing.T) {
	ts, err := Targets()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(performanceDoc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	begin, end := strings.Index(text, tableBegin), strings.Index(text, tableEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s: no %q … %q markers", performanceDoc, strings.TrimSpace(tableBegin), tableEnd)
	}
	want := TargetsTable(ts)
	got := text[begin+len(tableBegin) : end]
	if got == want {
		return
	}
	if *updateDocs {
		if err := os.WriteFile(performanceDoc, []byte(text[:begin+len(tableBegin)]+want+text[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: table of figures rewritten from targets.yaml", performanceDoc)
		return
	}
	t.Errorf("%s: the table of figures differs from what targets.yaml renders; run go test ./bench -run TestTargetsTable -update\n--- doc\n%s--- targets.yaml\n%s", performanceDoc, got, want)
}

// TestTargetsUsed: every figure the suite names is in targets.yaml, and every figure of
// targets.yaml is named by the suite (a figure the suite no longer makes is removed from both).
func TestTargetsUsed(t *testing.T) {
	ts, err := Targets()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	call := regexp.MustCompile(`\btarget\("([^"]+)"\)`)
	used := map[string]bool{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			used[m[1]] = true
		}
	}
	known := map[string]bool{}
	for _, tg := range ts {
		known[tg.ID] = true
		if !used[tg.ID] {
			t.Errorf("targets.yaml: figure %q is named by no target(%q) in the suite", tg.ID, tg.ID)
		}
	}
	for id := range used {
		if !known[id] {
			t.Errorf("the suite names target(%q), which targets.yaml does not hold", id)
		}
	}
}

func TestParseTargetsRefuses(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown field":      "figures: [{id: a, figure: f, measures: m, nope: 1}]",
		"duplicate id":       "figures: [{id: a, figure: f, measures: m}, {id: a, figure: g, measures: m}]",
		"bad id":             "figures: [{id: A_b, figure: f, measures: m}]",
		"bound without op":   "figures: [{id: a, figure: f, measures: m, bound: 1}]",
		"op without bound":   `figures: [{id: a, figure: f, measures: m, compare: "<=", unit: s}]`,
		"unknown compare":    `figures: [{id: a, figure: f, measures: m, compare: "<", bound: 1, unit: s}]`,
		"within upside down": `figures: [{id: a, figure: f, measures: m, compare: within, bound: 2, upper: 1, unit: "×", against: b}]`,
		"ratio against none": `figures: [{id: a, figure: f, measures: m, compare: "<=", bound: 1, unit: "×"}]`,
		"unknown unit":       `figures: [{id: a, figure: f, measures: m, compare: "<=", bound: 1, unit: parsecs}]`,
		"no measures":        "figures: [{id: a, figure: f}]",
	} {
		if _, err := parseTargets([]byte(doc)); err == nil {
			t.Errorf("%s: accepted %s", name, doc)
		}
	}
}

func TestTargetVerdicts(t *testing.T) {
	one, half, two := 1.0, 0.5, 2.0
	for _, c := range []struct {
		t    Target
		x    float64
		want bool
	}{
		{Target{Compare: "<=", Bound: &one}, 1, true},
		{Target{Compare: "<=", Bound: &one}, 1.01, false},
		{Target{Compare: ">=", Bound: &one}, 0.99, false},
		{Target{Compare: "==", Bound: &one}, 1, true},
		{Target{Compare: "within", Bound: &half, Upper: &two}, 2, true},
		{Target{Compare: "within", Bound: &half, Upper: &two}, 0.4, false},
		{Target{}, 0, false}, // reported: nothing to meet
	} {
		if got := c.t.Met(c.x); got != c.want {
			t.Errorf("%s, %v: Met %v, want %v", c.t.Text(), c.x, got, c.want)
		}
	}
	ms15 := 15.0
	p99 := Target{Compare: "<=", Bound: &ms15, Unit: "ms"}
	if !p99.MetDuration(15*time.Millisecond) || p99.MetDuration(15*time.Millisecond+1) {
		t.Errorf("MetDuration: 15 ms against %s", p99.Text())
	}
	crash := Target{Compare: "<=", Bound: &two, Unit: "s", Over: "the lease"}
	if got := crash.Limit(15 * time.Second); got != 17*time.Second {
		t.Errorf("Limit over 15 s: %s, want 17s", got)
	}
	if got := crash.Text(); got != "≤ 2 s over the lease" {
		t.Errorf("Text: %q", got)
	}
	zero := 0.0
	atRest := Target{Compare: "<=", Bound: &one, Unit: "×", Against: "x"}
	if !atRest.MetAgainst(0, 0) || atRest.MetAgainst(1, 0) || !atRest.MetAgainst(2, 2) {
		t.Errorf("MetAgainst with a baseline of 0")
	}
	if (Target{Compare: "==", Bound: &zero, Unit: "writes"}).Text() != "= 0 writes" {
		t.Errorf("Text of == 0")
	}
}

// TestHistoryRows: history.tsv, the figures of earlier runs, one row per run, keeps its columns.
func TestHistoryRows(t *testing.T) {
	f, err := os.Open(historyFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.Comma = '\t'
	r.LazyQuotes = true
	header, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(header) < 3 || header[0] != "date" || header[1] != "commit" {
		t.Fatalf("%s: header %q: want date, commit, …", historyFile, header)
	}
	commit := regexp.MustCompile(`^([0-9a-f]{7,40}\+?|-)$`)
	rows := 0
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err) // a row with another number of fields than the header is an error here
		}
		rows++
		if _, err := time.Parse("2006-01-02 15:04", rec[0]); err != nil {
			if _, err := time.Parse("2006-01-02", rec[0]); err != nil {
				t.Errorf("%s row %d: date %q: want YYYY-MM-DD[ HH:MM] (UTC)", historyFile, rows, rec[0])
			}
		}
		if !commit.MatchString(rec[1]) {
			t.Errorf("%s row %d: commit %q: want a hash (+: with uncommitted changes) or -", historyFile, rows, rec[1])
		}
		for i, v := range rec {
			if v == "" {
				t.Errorf("%s row %d: column %s is empty (write - for no figure)", historyFile, rows, header[i])
			}
		}
	}
	if rows == 0 {
		t.Errorf("%s: no run", historyFile)
	}
}

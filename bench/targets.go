package bench

import (
	_ "embed"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/yaml"
)

// compareWithin is the comparison of a target with a lower and an upper bound.
const compareWithin = "within"

// The benchmark's figures and their targets are data: targets.yaml lists every figure of the
// table, what it measures, what it is measured against and, where it has one, its target. The
// suite (build tag "bench") takes every verdict from it, and docs/performance.md's table of
// figures is rendered from it (TestTargetsTable; go test ./bench -run TestTargetsTable -update
// rewrites the table).

//go:embed targets.yaml
var targetsYAML []byte

// Target is one figure of the table and its target.
type Target struct {
	// ID names the figure in the suite (target("id")) and in the docs.
	ID string `json:"id"`
	// Figure is the row's name in the table (N, rates and counts are filled in by the run).
	Figure string `json:"figure"`
	// Measures says how the figure is measured.
	Measures string `json:"measures"`
	// Against is the baseline measured in the same run, or the reference, that the figure is
	// set against; empty when the target is an absolute bound.
	Against string `json:"against,omitempty"`
	// Label prefixes the target in a table row where a row checks more than one target
	// ("takeover", "first sync").
	Label string `json:"label,omitempty"`
	// Compare is "<=", ">=", "==" or "within" (Bound ≤ x ≤ Upper); empty: the figure is reported,
	// with no target.
	Compare string `json:"compare,omitempty"`
	// Bound (and Upper, for "within") in Unit.
	Bound *float64 `json:"bound,omitempty"`
	Upper *float64 `json:"upper,omitempty"`
	// Unit of the bound: "×" (a ratio: the figure ÷ what it is against), "ms", "s", "KB",
	// "writes", "writes/s", "regions".
	Unit string `json:"unit,omitempty"`
	// Over names what the bound is added to ("the local lease duration"): the figure minus it
	// is compared with the bound.
	Over string `json:"over,omitempty"`
	// Reference is a fixed baseline the suite does not measure (sync-controller's heap).
	Reference *Reference `json:"reference,omitempty"`
}

// Reference is a baseline quoted, not measured in the run.
type Reference struct {
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
}

type targetsFile struct {
	Figures []Target `json:"figures"`
}

var (
	targetsOnce sync.Once
	targetsList []Target
	targetsErr  error
)

// Targets returns the figures of targets.yaml, in order, validated.
func Targets() ([]Target, error) {
	targetsOnce.Do(func() { targetsList, targetsErr = parseTargets(targetsYAML) })
	return targetsList, targetsErr
}

var targetID = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

func parseTargets(data []byte) ([]Target, error) {
	var f targetsFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("targets.yaml: %w", err)
	}
	seen := map[string]bool{}
	for i, t := range f.Figures {
		where := fmt.Sprintf("targets.yaml: figures[%d] (%s)", i, t.ID)
		switch {
		case !targetID.MatchString(t.ID):
			return nil, fmt.Errorf("%s: id must be lower-case words joined by '-'", where)
		case seen[t.ID]:
			return nil, fmt.Errorf("%s: id used twice", where)
		case t.Figure == "" || t.Measures == "":
			return nil, fmt.Errorf("%s: figure and measures are required", where)
		}
		seen[t.ID] = true
		switch t.Compare {
		case "":
			if t.Bound != nil || t.Upper != nil || t.Over != "" {
				return nil, fmt.Errorf("%s: a reported figure (no compare) has no bound", where)
			}
		case "<=", ">=", "==":
			if t.Bound == nil || t.Upper != nil {
				return nil, fmt.Errorf("%s: compare %s needs bound and no upper", where, t.Compare)
			}
		case compareWithin:
			if t.Bound == nil || t.Upper == nil || *t.Upper < *t.Bound {
				return nil, fmt.Errorf("%s: within needs bound ≤ upper", where)
			}
		default:
			return nil, fmt.Errorf("%s: compare %q: want <=, >=, ==, within or none", where, t.Compare)
		}
		if t.Compare != "" {
			if _, ok := durationUnits[t.Unit]; !ok && t.Unit != "×" && t.Unit != "KB" && t.Unit != "writes" && t.Unit != "writes/s" && t.Unit != "regions" {
				return nil, fmt.Errorf("%s: unit %q: want ×, ms, s, KB, writes, writes/s or regions", where, t.Unit)
			}
			if t.Unit == "×" && t.Against == "" && t.Reference == nil {
				return nil, fmt.Errorf("%s: a ratio needs what it is against", where)
			}
		}
	}
	return f.Figures, nil
}

var durationUnits = map[string]time.Duration{"ms": time.Millisecond, "s": time.Second}

// target is the figure id of targets.yaml; an id it does not hold is a bug of the suite
// (TestTargetsUsed checks every id the suite names).
func target(id string) Target {
	all, err := Targets()
	if err != nil {
		panic(err)
	}
	for _, t := range all {
		if t.ID == id {
			return t
		}
	}
	panic(fmt.Sprintf("bench: no figure %q in targets.yaml", id))
}

// Met says whether x, in the target's unit (a ratio for "×"; the figure minus what it is over
// for Over), meets the target. A reported figure has none to meet.
func (t Target) Met(x float64) bool {
	if t.Compare == "" || t.Bound == nil || math.IsNaN(x) {
		return false
	}
	b := *t.Bound
	switch t.Compare {
	case "<=":
		return x <= b
	case ">=":
		return x >= b
	case "==":
		return x == b
	case compareWithin:
		return x >= b && x <= *t.Upper
	}
	return false
}

// MetAgainst says whether x meets a ratio target against base without dividing (x ≤ bound ×
// base), so that a baseline of 0 is judged too.
func (t Target) MetAgainst(x, base float64) bool {
	if t.Compare == "" || t.Bound == nil {
		return false
	}
	lo, hi := *t.Bound*base, *t.Bound*base
	if t.Upper != nil {
		hi = *t.Upper * base
	}
	switch t.Compare {
	case "<=":
		return x <= hi
	case ">=":
		return x >= lo
	case "==":
		return x == lo
	case compareWithin:
		return x >= lo && x <= hi
	}
	return false
}

// MetDuration says whether d meets a target whose unit is a duration ("ms", "s").
func (t Target) MetDuration(d time.Duration) bool {
	u, ok := durationUnits[t.Unit]
	if !ok || t.Bound == nil {
		return false
	}
	limit := time.Duration(*t.Bound * float64(u))
	switch t.Compare {
	case "<=":
		return d <= limit
	case ">=":
		return d >= limit
	case "==":
		return d == limit
	case compareWithin:
		return d >= limit && d <= time.Duration(*t.Upper*float64(u))
	}
	return false
}

// Limit is the bound as a duration (for a duration unit), plus over: what the figure may reach.
func (t Target) Limit(over time.Duration) time.Duration {
	u, ok := durationUnits[t.Unit]
	if !ok || t.Bound == nil {
		return 0
	}
	return over + time.Duration(*t.Bound*float64(u))
}

// Text is the target as a table shows it: "≤ 15 ms", "≥ 0.9 ×", "0.8–1.2 ×", "= 0 writes",
// "≤ 2 s over the local lease duration"; "reported" without a target.
func (t Target) Text() string {
	if t.Compare == "" {
		return "reported"
	}
	unit := t.Unit
	if unit != "" {
		unit = " " + unit
	}
	var s string
	switch t.Compare {
	case "<=":
		s = "≤ " + num(*t.Bound) + unit
	case ">=":
		s = "≥ " + num(*t.Bound) + unit
	case "==":
		s = "= " + num(*t.Bound) + unit
	case compareWithin:
		s = num(*t.Bound) + "–" + num(*t.Upper) + unit
	}
	if t.Over != "" {
		s += " over " + t.Over
	}
	return s
}

// RowText is the target as a row of the suite's table gives it: the label, then Text.
func (t Target) RowText() string {
	if t.Label == "" {
		return t.Text()
	}
	return t.Label + " " + t.Text()
}

// rowTargets joins the targets a row checks: "takeover ≤ 2 s; first sync ≤ 1 s".
func rowTargets(ts ...Target) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.RowText()
	}
	return strings.Join(parts, "; ")
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// TargetsTable renders the figures as docs/performance.md holds them, between its
// <!-- targets:begin --> and <!-- targets:end --> markers.
func TargetsTable(ts []Target) string {
	var b strings.Builder
	b.WriteString("| id | figure | how it is measured | against | target |\n|---|---|---|---|---|\n")
	for _, t := range ts {
		against := t.Against
		if against == "" {
			against = "—"
		}
		target := t.Text()
		if t.Label != "" {
			target = t.Label + ": " + target
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", t.ID, cell(t.Figure), cell(t.Measures), cell(against), cell(target))
	}
	return b.String()
}

// cell keeps a table cell on one line and its pipes escaped.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

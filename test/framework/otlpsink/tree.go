package otlpsink

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Node is one span of a trace tree. A node whose Span is nil stands for a span that did not
// arrive but that received spans name as their parent (Missing is its ID).
type Node struct {
	Span     *Span
	Missing  trace.SpanID
	Children []*Node
}

// Tree arranges the spans of one trace by their parent span IDs. Roots are the spans without a
// parent and, for every parent that did not arrive, a missing node holding its children. Siblings
// are ordered by start time.
//
// The input is untrusted (anything may send spans): a span ID sent twice (an exporter's retry of a
// batch that did arrive) is kept once, and a span naming itself as its parent is shown under a
// missing parent, so no input makes the tree loop.
func Tree(spans []Span) []*Node {
	byID := map[trace.SpanID]*Node{}
	var unique []*Node
	for i := range spans {
		if _, dup := byID[spans[i].SpanID]; dup {
			continue
		}
		n := &Node{Span: &spans[i]}
		byID[spans[i].SpanID] = n
		unique = append(unique, n)
	}
	missing := map[trace.SpanID]*Node{}
	var roots []*Node
	for _, n := range unique {
		parent := n.Span.ParentID
		switch {
		case parent.IsValid() && (byID[parent] == nil || parent == n.Span.SpanID):
			m := missing[parent]
			if m == nil {
				m = &Node{Missing: parent}
				missing[parent] = m
				roots = append(roots, m)
			}
			m.Children = append(m.Children, n)
		case !parent.IsValid():
			roots = append(roots, n)
		default:
			byID[parent].Children = append(byID[parent].Children, n)
		}
	}
	var order func([]*Node)
	order = func(ns []*Node) {
		sort.SliceStable(ns, func(i, j int) bool { return ns[i].start().Before(ns[j].start()) })
		for _, n := range ns {
			order(n.Children)
		}
	}
	order(roots)
	return roots
}

// start is the span's start, or its earliest child's for a missing span.
func (n *Node) start() time.Time {
	if n.Span != nil {
		return n.Span.Start
	}
	var t time.Time
	for _, c := range n.Children {
		if s := c.start(); t.IsZero() || s.Before(t) {
			t = s
		}
	}
	return t
}

// Processes returns the distinct processes (service, instance, cluster) that spans came from, in
// order of their first span.
func Processes(spans []Span) []string {
	sorted := append([]Span(nil), spans...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Start.Before(sorted[j].Start) })
	seen := map[string]bool{}
	var out []string
	for _, s := range sorted {
		p := s.Process() + " @ " + s.Cluster()
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// PrintTrace writes one trace as a tree: a header (trace ID, span count, processes), then one line
// per span with its duration, its start relative to the trace's first span, the process and
// cluster it ran in, and its error if its status is Error. A span that did not arrive but is named as a parent is printed as missing.
func PrintTrace(w io.Writer, indent string, spans []Span) error {
	if len(spans) == 0 {
		_, err := fmt.Fprintf(w, "%s(no spans received)\n", indent)
		return err
	}
	roots := Tree(spans)
	first := roots[0].start()
	for _, r := range roots {
		if s := r.start(); s.Before(first) {
			first = s
		}
	}
	procs := Processes(spans)
	fmt.Fprintf(w, "%strace %s: %d spans from %d processes\n", indent, spans[0].TraceID, len(spans), len(procs))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\n", indent, "SPAN", "DURATION", "START", "PROCESS @ CLUSTER")
	var walk func(n *Node, prefix, branch string)
	walk = func(n *Node, prefix, branch string) {
		if n.Span == nil {
			fmt.Fprintf(tw, "%s%s%s%s\t%s\t%s\t%s\n", indent, prefix, branch, "<missing: span "+n.Missing.String()+" was not received>", "?", "?", "?")
		} else {
			s := n.Span
			var errText string
			if s.Error != "" {
				// At the end of the line, so that a long message does not widen the columns.
				errText = "  error: " + truncate(s.Error, 120)
			}
			fmt.Fprintf(tw, "%s%s%s%s\t%s\t+%s\t%s @ %s%s\n", indent, prefix, branch, s.Name,
				fmtDuration(s.Duration()), fmtDuration(s.Start.Sub(first)), s.Process(), s.Cluster(), errText)
		}
		childPrefix := prefix
		switch branch {
		case "├─ ":
			childPrefix += "│  "
		case "└─ ":
			childPrefix += "   "
		}
		for i, c := range n.Children {
			b := "├─ "
			if i == len(n.Children)-1 {
				b = "└─ "
			}
			walk(c, childPrefix, b)
		}
	}
	for _, r := range roots {
		walk(r, "", "")
	}
	return tw.Flush()
}

// fmtDuration prints milliseconds with one decimal below 10 ms, whole milliseconds up to 10 s.
func fmtDuration(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 10:
		return fmt.Sprintf("%.1fms", ms)
	case ms < 10000:
		return fmt.Sprintf("%.0fms", ms)
	default:
		return d.Round(100 * time.Millisecond).String()
	}
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

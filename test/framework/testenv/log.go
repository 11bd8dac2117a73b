package testenv

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// logKeep bounds what a TestLog keeps: the last lines of a long test are the ones that explain
// its failure.
const logKeep = 20000

// TestLog is the log of the agents a test runs in-process: every line they write (at the
// verbosity of REGIONSYNC_TEST_LOG_V, default 2: every pass, its writes and its outcome),
// timestamped, kept in memory and printed with the test's output when the test fails. A flaky failure is then read
// from the run that failed, not reproduced by guesswork.
type TestLog struct {
	verbosity int
	mu        sync.Mutex
	lines     []string
	dropped   int
}

// NewTestLog returns a log that is printed (its last lines) when tb fails. A
// REGIONSYNC_TEST_LOG_V that is not a number fails tb.
func NewTestLog(tb testing.TB) *TestLog {
	tb.Helper()
	l := &TestLog{verbosity: 2}
	if s := os.Getenv("REGIONSYNC_TEST_LOG_V"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			tb.Fatalf("REGIONSYNC_TEST_LOG_V=%q: want a verbosity, a whole number from 0", s)
		}
		l.verbosity = v
	}
	tb.Cleanup(func() {
		if tb.Failed() || os.Getenv("REGIONSYNC_TEST_LOG") != "" {
			tb.Log(l.String())
		}
	})
	return l
}

// Logger returns a logger writing to l under name.
func (l *TestLog) Logger(name string) logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.add(time.Now().Format("15:04:05.000") + " " + prefix + " " + args)
	}, funcr.Options{Verbosity: l.verbosity, LogCaller: funcr.None}).WithName(name)
}

func (l *TestLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) >= logKeep {
		n := copy(l.lines, l.lines[logKeep/2:])
		l.lines = l.lines[:n]
		l.dropped += logKeep / 2
	}
	l.lines = append(l.lines, line)
}

// ErrorLines returns the kept lines logged at error level (funcr writes an info line with its
// "level" and an error line without one).
func (l *TestLog) ErrorLines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.lines {
		if !strings.Contains(s, `"level"=`) {
			out = append(out, s)
		}
	}
	return out
}

// Count returns how many kept lines contain every one of substrings.
func (l *TestLog) Count(substrings ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		all := true
		for _, sub := range substrings {
			all = all && strings.Contains(s, sub)
		}
		if all {
			n++
		}
	}
	return n
}

// String is the kept log, one line per entry.
func (l *TestLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "agent log (%d lines", len(l.lines))
	if l.dropped > 0 {
		fmt.Fprintf(&b, ", the first %d dropped", l.dropped)
	}
	b.WriteString("):\n")
	for _, s := range l.lines {
		b.WriteString(s)
		b.WriteByte('\n')
	}
	return b.String()
}

// SetProcessLoggers sets the process-wide loggers of a test binary (controller-runtime's and
// klog's): discarded, or development logging to stderr with REGIONSYNC_TEST_LOG set. A test's own
// agents log to a TestLog instead.
func SetProcessLoggers() {
	if os.Getenv("REGIONSYNC_TEST_LOG") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
		return
	}
	ctrl.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
}

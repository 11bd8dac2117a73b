//go:build linux

package bench

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// placement says on which CPUs the processes run during the initial-sync figures.
//
// In a fleet the agents do not share CPUs with the API servers: they run on the region's nodes,
// and management's and the region's API servers on their control planes. On one machine they
// do unless told otherwise, and then every CPU second an agent process spends (its warm standby's
// included) is a second the API servers do not get: the initial sync would measure the
// machine's CPU per object, not the API servers' pace. With the split placement (the default
// on a machine of two CPUs or more) the control planes (kube-apiserver, etcd,
// kube-controller-manager) run on the first half of the CPUs and the clients (this process, with
// the suite's watches and the plain client, and the agent processes) on the other half, the
// plain client's runs and the agent's alike. The shared placement (BENCH_PLACEMENT=shared) lets
// every process run on every CPU, as the figures after the initial sync always do.
type placement struct {
	split bool
	// servers and clients are the two halves; all is the CPUs the suite started with, which
	// every process gets back after the initial sync.
	servers, clients, all unix.CPUSet
}

// serverCommands are the control planes' processes, by the name the kernel gives them
// (/proc/<pid>/comm: at most 15 bytes).
var serverCommands = map[string]bool{"kube-apiserver": true, "etcd": true, "kube-controller": true}

// newPlacement reads BENCH_PLACEMENT ("split" or "shared"; empty: split where there are at least
// two CPUs) for this process's CPUs.
func newPlacement(mode string) (placement, error) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return placement{}, fmt.Errorf("reading this process's CPUs: %w", err)
	}
	return placeOn(all, mode)
}

// placeOn is the placement of mode on the CPUs all.
func placeOn(all unix.CPUSet, mode string) (placement, error) {
	p := placement{all: all}
	cpus := cpuIDs(all)
	switch mode {
	case "", "split":
		if len(cpus) < 2 {
			if mode == "split" {
				return p, fmt.Errorf("BENCH_PLACEMENT=split: this process may run on %d CPU, the split needs 2", len(cpus))
			}
			return p, nil
		}
		half := (len(cpus) + 1) / 2 // the control planes get the odd CPU
		for i, c := range cpus {
			if i < half {
				p.servers.Set(c)
			} else {
				p.clients.Set(c)
			}
		}
		p.split = true
		return p, nil
	case "shared":
		return p, nil
	default:
		return p, fmt.Errorf("BENCH_PLACEMENT=%q: want split or shared", mode)
	}
}

// String describes the placement for the report.
func (p placement) String() string {
	if !p.split {
		return fmt.Sprintf("shared: every process on every CPU (%s)", cpuList(p.all))
	}
	return fmt.Sprintf("split: the control planes (kube-apiserver, etcd, kube-controller-manager) on CPU %s, the clients (the suite, the plain client, the agent processes) on CPU %s",
		cpuList(p.servers), cpuList(p.clients))
}

// apply puts this process and every process it started on their half (a no-op when shared).
// Threads and processes started later inherit the CPUs of the thread that starts them: the agent
// processes the suite starts run on the clients' half. It fails when no control plane's process
// is found: the split would then hold only the clients.
func (p placement) apply() error {
	if !p.split {
		return nil
	}
	servers, err := p.each(func(comm string) unix.CPUSet {
		if serverCommands[comm] {
			return p.servers
		}
		return p.clients
	})
	if err == nil && servers == 0 {
		err = fmt.Errorf("no control plane's process (%s) among this process's descendants", strings.Join(slices.Sorted(maps.Keys(serverCommands)), ", "))
	}
	return err
}

// release gives every process the CPUs the suite started with back (a no-op when shared).
func (p placement) release() error {
	if !p.split {
		return nil
	}
	_, err := p.each(func(string) unix.CPUSet { return p.all })
	return err
}

// placeRounds bounds each's passes: a thread started during a pass, by a thread the pass had not
// reached yet, has that thread's CPUs, and the next pass finds it.
const placeRounds = 10

// each sets, on every thread of this process and of its descendants, the CPUs cpus returns for
// the process's command, pass after pass until one finds every thread on its CPUs; it returns
// how many control planes' processes it found.
func (p placement) each(cpus func(comm string) unix.CPUSet) (servers int, _ error) {
	for range placeRounds {
		pids, err := descendants(os.Getpid())
		if err != nil {
			return 0, err
		}
		servers = 0
		moved := 0
		for _, pid := range append([]int{os.Getpid()}, pids...) {
			data, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			if err != nil {
				continue // exited meanwhile
			}
			comm := strings.TrimSpace(string(data))
			if serverCommands[comm] {
				servers++
			}
			set := cpus(comm)
			tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
			if err != nil {
				continue
			}
			for _, task := range tasks {
				tid, err := strconv.Atoi(task.Name())
				if err != nil {
					continue
				}
				var now unix.CPUSet
				if err := unix.SchedGetaffinity(tid, &now); err == nil && now == set {
					continue
				}
				if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
					return 0, fmt.Errorf("placing thread %d of %s (pid %d) on CPU %s: %w", tid, comm, pid, cpuList(set), err)
				}
				moved++
			}
		}
		if moved == 0 {
			return servers, nil
		}
	}
	return 0, fmt.Errorf("threads still moving to their CPUs after %d passes", placeRounds)
}

// descendants lists the processes below pid, from /proc.
func descendants(pid int) ([]int, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // exited meanwhile
		}
		child, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if parent, ok := parentPID(string(data)); ok && err == nil {
			children[parent] = append(children[parent], child)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		next := queue[0]
		queue = queue[1:]
		out = append(out, children[next]...)
		queue = append(queue, children[next]...)
	}
	return out, nil
}

// parentPID reads the parent's pid from a /proc/<pid>/stat line, "pid (comm) state ppid ...":
// comm may hold spaces and parentheses, the last ')' ends it.
func parentPID(stat string) (int, bool) {
	fields := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])
	if len(fields) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(fields[1])
	return ppid, err == nil
}

// cpuIDs lists the CPUs of set in order.
func cpuIDs(set unix.CPUSet) []int {
	n := set.Count()
	ids := make([]int, 0, n)
	for i := 0; len(ids) < n; i++ {
		if set.IsSet(i) {
			ids = append(ids, i)
		}
	}
	return ids
}

// cpuList is a CPU set as a list ("0", "2,3").
func cpuList(set unix.CPUSet) string {
	ids := cpuIDs(set)
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = strconv.Itoa(id)
	}
	return strings.Join(names, ",")
}

// cpusBusy reads the busy and total time of the CPUs in set from /proc/stat.
func cpusBusy(set unix.CPUSet) (busy, total uint64) {
	return procStat(func(cpu string) bool {
		id, err := strconv.Atoi(strings.TrimPrefix(cpu, "cpu"))
		return cpu != "cpu" && err == nil && set.IsSet(id)
	})
}

// procStat sums the busy and total time of /proc/stat's CPU lines ("cpu" for the whole
// machine, "cpu<N>" for one CPU) that want takes.
func procStat(want func(cpu string) bool) (busy, total uint64) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || !strings.HasPrefix(f[0], "cpu") || !want(f[0]) {
			continue
		}
		// user nice system idle iowait irq softirq steal; guest and guest_nice follow, already
		// counted in user and nice.
		for i, v := range f[1:min(len(f), 9)] {
			n, _ := strconv.ParseUint(v, 10, 64)
			total += n
			if i != 3 && i != 4 { // idle, iowait
				busy += n
			}
		}
	}
	return busy, total
}

// cpuReading is how busy the CPUs were up to one moment: all the suite's CPUs (the machine's),
// then (split) the control planes' half and the clients'.
type cpuReading struct{ busy, total [3]uint64 }

// read takes a cpuReading now.
func (p placement) read() cpuReading {
	var r cpuReading
	r.busy[0], r.total[0] = cpusBusy(p.all)
	if p.split {
		r.busy[1], r.total[1] = cpusBusy(p.servers)
		r.busy[2], r.total[2] = cpusBusy(p.clients)
	}
	return r
}

// busySince says how busy the CPUs were since r: the machine's share, and with the split
// placement each half's ("100 % (the control planes' CPU 100 %, the clients' 31 %)").
func (p placement) busySince(r cpuReading) string {
	now := p.read()
	share := func(i int) string {
		if now.total[i] <= r.total[i] {
			return "?"
		}
		return fmt.Sprintf("%.0f %%", 100*float64(now.busy[i]-r.busy[i])/float64(now.total[i]-r.total[i]))
	}
	if !p.split {
		return share(0)
	}
	return fmt.Sprintf("%s (the control planes' CPU %s, the clients' %s)", share(0), share(1), share(2))
}

// cpuSet is the set of the CPUs ids.
func cpuSet(ids ...int) unix.CPUSet {
	var s unix.CPUSet
	for _, id := range ids {
		s.Set(id)
	}
	return s
}

func TestPlaceOn(t *testing.T) {
	for _, tc := range []struct {
		name             string
		all              []int
		mode             string
		split            bool
		servers, clients []int
		err              string
	}{
		{name: "two CPUs, default", all: []int{0, 1}, split: true, servers: []int{0}, clients: []int{1}},
		{name: "two CPUs, split", all: []int{0, 1}, mode: "split", split: true, servers: []int{0}, clients: []int{1}},
		{name: "three CPUs: the odd one to the control planes", all: []int{0, 1, 2}, split: true, servers: []int{0, 1}, clients: []int{2}},
		{name: "four CPUs, not from 0", all: []int{2, 3, 5, 7}, split: true, servers: []int{2, 3}, clients: []int{5, 7}},
		{name: "shared", all: []int{0, 1}, mode: "shared"},
		{name: "one CPU, default: shared", all: []int{3}},
		{name: "one CPU, split asked", all: []int{3}, mode: "split", err: "BENCH_PLACEMENT=split: this process may run on 1 CPU, the split needs 2"},
		{name: "unknown", all: []int{0, 1}, mode: "pinned", err: `BENCH_PLACEMENT="pinned": want split or shared`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := placeOn(cpuSet(tc.all...), tc.mode)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.split != tc.split || !slices.Equal(cpuIDs(p.servers), tc.servers) || !slices.Equal(cpuIDs(p.clients), tc.clients) || !slices.Equal(cpuIDs(p.all), tc.all) {
				t.Fatalf("split %v, servers %v, clients %v, all %v; want %v, %v, %v, %v",
					p.split, cpuIDs(p.servers), cpuIDs(p.clients), cpuIDs(p.all), tc.split, tc.servers, tc.clients, tc.all)
			}
		})
	}
}

// TestPlacementOnProcesses places real processes: a child started before (and its own child),
// one whose command's name holds spaces and parentheses, a control plane's, and one started
// after, the way the agents are started during a timed run; every thread of this process.
func TestPlacementOnProcesses(t *testing.T) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	ids := cpuIDs(all)
	// The first CPU for the control planes, the last for the clients (the same on one CPU).
	p := placement{split: true, all: all, servers: cpuSet(ids[0]), clients: cpuSet(ids[len(ids)-1])}
	start := func(args ...string) *exec.Cmd {
		cmd := exec.Command(args[0], args[1:]...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	// sleep under other names: the kernel names a process after its file (/proc/<pid>/comm).
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	named := func(name string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	odd := start(named("a) b (c"), "60")
	parent := start("sh", "-c", "sleep 60 & wait")
	var grandchild int
	for deadline := time.Now().Add(10 * time.Second); grandchild == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		pids, err := descendants(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		for _, pid := range pids {
			if pid != parent.Process.Pid && parentOf(t, pid) == parent.Process.Pid {
				grandchild = pid
			}
		}
	}
	if grandchild == 0 {
		t.Fatal("descendants did not find the child's own child")
	}
	pids, err := descendants(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pids, odd.Process.Pid) {
		t.Fatalf("descendants %v miss the child named %q (pid %d)", pids, "a) b (c", odd.Process.Pid)
	}
	// Without a control plane's process there is nothing to split from.
	if err := p.apply(); err == nil || !strings.Contains(err.Error(), "no control plane's process") {
		t.Fatalf("apply without a control plane's process: %v, want an error saying so", err)
	}
	server := start(named("etcd"), "60")
	cpusOf := func(tid int) []int {
		var s unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &s); err != nil {
			t.Fatal(err)
		}
		return cpuIDs(s)
	}
	t.Cleanup(func() { _ = p.release() })
	if err := p.apply(); err != nil {
		t.Fatal(err)
	}
	later := start("sleep", "60")
	if got := cpusOf(server.Process.Pid); !slices.Equal(got, cpuIDs(p.servers)) {
		t.Errorf("a control plane's process on CPU %v, want the control planes' %v", got, cpuIDs(p.servers))
	}
	processes := map[string]int{"a child": parent.Process.Pid, "its child": grandchild, "a child started after": later.Process.Pid, "a child named a) b (c": odd.Process.Pid}
	for name, pid := range processes {
		if got := cpusOf(pid); !slices.Equal(got, cpuIDs(p.clients)) {
			t.Errorf("%s on CPU %v, want the clients' %v", name, got, cpuIDs(p.clients))
		}
	}
	for _, tid := range threads(t) {
		if got := cpusOf(tid); !slices.Equal(got, cpuIDs(p.clients)) {
			t.Errorf("thread %d of this process on CPU %v, want the clients' %v", tid, got, cpuIDs(p.clients))
		}
	}
	if err := p.release(); err != nil {
		t.Fatal(err)
	}
	processes["a control plane's process"] = server.Process.Pid
	for name, pid := range processes {
		if got := cpusOf(pid); !slices.Equal(got, ids) {
			t.Errorf("%s on CPU %v after the release, want every CPU %v", name, got, ids)
		}
	}
	for _, tid := range threads(t) {
		if got := cpusOf(tid); !slices.Equal(got, ids) {
			t.Errorf("thread %d of this process on CPU %v after the release, want every CPU %v", tid, got, ids)
		}
	}
	// Every CPU's time is at least one CPU's.
	if r := p.read(); r.total[0] == 0 || r.busy[0] > r.total[0] || r.total[2] == 0 || r.busy[2] > r.total[2] || r.total[0] < r.total[2] {
		t.Errorf("CPU times read from /proc/stat: %+v", r)
	}
}

// threads lists this process's threads, from /proc.
func threads(t *testing.T) []int {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var tids []int
	for _, task := range tasks {
		if tid, err := strconv.Atoi(task.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	if len(tids) < 2 {
		t.Fatalf("this process has %d thread(s): a Go test binary runs several", len(tids))
	}
	return tids
}

// parentOf is a process's parent, from /proc (0 when it has exited).
func parentOf(t *testing.T, pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	ppid, ok := parentPID(string(data))
	if !ok {
		t.Fatalf("/proc/%d/stat: %q", pid, data)
	}
	return ppid
}

func TestParentPID(t *testing.T) {
	for _, tc := range []struct {
		stat string
		ppid int
		ok   bool
	}{
		{"1234 (sleep) S 42 1234 1234 0 -1", 42, true},
		{"1234 (a) b (c) S 7 1234", 7, true},
		{"1234 (x) y) R 9", 9, true},
		{"1234 (cut", 0, false},
		{"", 0, false},
		{"1234 (sleep) S notanumber", 0, false},
	} {
		ppid, ok := parentPID(tc.stat)
		if ppid != tc.ppid || ok != tc.ok {
			t.Errorf("parentPID(%q) = %d, %v; want %d, %v", tc.stat, ppid, ok, tc.ppid, tc.ok)
		}
	}
}

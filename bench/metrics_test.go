//go:build bench

package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// reqKey is one series of apiserver_request_total, summed over code, scope, version, component
// and dry_run.
type reqKey struct{ Verb, Group, Resource, Subresource string }

func (k reqKey) String() string {
	r := k.Resource
	if k.Group != "" {
		r += "." + k.Group
	}
	if k.Subresource != "" {
		r += "/" + k.Subresource
	}
	return k.Verb + " " + r
}

// writeVerbs are the verbs of apiserver_request_total that change state.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "DELETECOLLECTION": true, "APPLY": true}

// scrape is one read of an API server's /metrics.
type scrape struct {
	at       time.Time
	requests map[reqKey]float64
	// codes sums apiserver_request_total by response code, over every request.
	codes map[string]float64
	cpu   float64 // process_cpu_seconds_total of the API server
	// gcCPU is the Go runtime's count of the CPU its garbage collector used
	// (go_cpu_classes_gc_total_cpu_seconds_total), gcCycles its collections, allocs the bytes
	// allocated on the heap (go_gc_heap_allocs_bytes_total), all since the API server started.
	gcCPU, gcCycles, allocs float64
	// rss and heap are the API server's resident memory and Go heap in use (bytes); db is the
	// size of its etcd database as the API server reports it (apiserver_storage_size_bytes).
	rss, heap, db float64
}

// requestsSince summarises the requests an API server answered between two scrapes: all of
// them, the writes, and the 409 Conflicts.
func requestsSince(before, after scrape) string {
	var all, writes float64
	for k, v := range after.requests {
		d := v - before.requests[k]
		all += d
		if writeVerbs[k.Verb] {
			writes += d
		}
	}
	return fmt.Sprintf("%.0f requests (%.0f writes, %.0f conflicts) with %.2f s of API-server CPU", all, writes, after.codes["409"]-before.codes["409"], after.cpu-before.cpu)
}

// apiMetrics reads an API server's /metrics with an admin config.
type apiMetrics struct{ rest rest.Interface }

func newAPIMetrics(cfg *rest.Config) (*apiMetrics, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &apiMetrics{rest: cs.CoreV1().RESTClient()}, nil
}

func (m *apiMetrics) read(ctx context.Context) (scrape, error) {
	data, err := m.rest.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return scrape{}, fmt.Errorf("reading /metrics: %w", err)
	}
	s := scrape{at: time.Now(), requests: map[reqKey]float64{}, codes: map[string]float64{}}
	// The samples without labels read, by metric name.
	plain := map[string]*float64{
		"process_cpu_seconds_total":                 &s.cpu,
		"go_cpu_classes_gc_total_cpu_seconds_total": &s.gcCPU,
		"go_gc_cycles_total_gc_cycles_total":        &s.gcCycles,
		"go_gc_heap_allocs_bytes_total":             &s.allocs,
		"process_resident_memory_bytes":             &s.rss,
		"go_memstats_heap_inuse_bytes":              &s.heap,
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if name, value, ok := strings.Cut(line, " "); ok && plain[name] != nil {
			*plain[name], _ = strconv.ParseFloat(strings.TrimSpace(value), 64)
			continue
		}
		switch {
		case strings.HasPrefix(line, "apiserver_request_total{"):
			labels, value, ok := parseSample(line)
			if !ok {
				continue
			}
			k := reqKey{Verb: labels["verb"], Group: labels["group"], Resource: labels["resource"], Subresource: labels["subresource"]}
			s.requests[k] += value
			s.codes[labels["code"]] += value
		case strings.HasPrefix(line, "apiserver_storage_size_bytes{"):
			if _, v, ok := parseSample(line); ok {
				s.db += v
			}
		}
	}
	return s, sc.Err()
}

// parseSample parses `name{a="x",b="y"} 12` (label values without escaped quotes, as these are).
func parseSample(line string) (map[string]string, float64, bool) {
	open, end := strings.IndexByte(line, '{'), strings.LastIndexByte(line, '}')
	if open < 0 || end < open {
		return nil, 0, false
	}
	labels := map[string]string{}
	for _, kv := range splitLabels(line[open+1 : end]) {
		k, v, ok := strings.Cut(kv, "=")
		if ok {
			labels[k] = strings.Trim(v, `"`)
		}
	}
	v, err := strconv.ParseFloat(strings.Fields(line[end+1:])[0], 64)
	return labels, v, err == nil
}

func splitLabels(s string) []string {
	var out []string
	inQuote, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			inQuote = !inQuote
		case ',':
			if !inQuote {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// delta is what happened between two scrapes.
type delta struct {
	seconds  float64
	requests map[reqKey]float64
	cpu      float64
	// gcCPU, gcCycles and allocs are the window's garbage collection CPU, collections and heap
	// bytes allocated (see scrape).
	gcCPU, gcCycles, allocs float64
	// end is the later scrape (its memory and database size).
	end scrape
}

func diff(a, b scrape) delta {
	d := delta{seconds: b.at.Sub(a.at).Seconds(), requests: map[reqKey]float64{}, cpu: b.cpu - a.cpu, end: b,
		gcCPU: b.gcCPU - a.gcCPU, gcCycles: b.gcCycles - a.gcCycles, allocs: b.allocs - a.allocs}
	for k, v := range b.requests {
		if n := v - a.requests[k]; n > 0 {
			d.requests[k] = n
		}
	}
	return d
}

// steadyCPU is the window's CPU with its garbage collection counted by what the window allocated
// rather than by the collections that happened to run in it: the CPU outside the collector, plus
// the window's heap allocations at the API server's mean collection cost per allocated byte since
// it started. With a heap of a few hundred MB an API server at rest collects every 20-40 s, each
// collection a fraction of a CPU-second, so one collection more or less in a window of a minute
// moves its CPU by several ms/s: more than 50 idle regions differ by. Without the runtime's
// figures (an API server that does not export them) it is the window's CPU.
func (d delta) steadyCPU() float64 {
	if d.end.allocs <= 0 || d.end.gcCPU <= 0 {
		return d.cpu
	}
	return d.cpu - d.gcCPU + d.allocs*d.end.gcCPU/d.end.allocs
}

// count sums the requests that match.
func (d delta) count(match func(reqKey) bool) float64 {
	var n float64
	for k, v := range d.requests {
		if match(k) {
			n += v
		}
	}
	return n
}

func isWrite(k reqKey) bool { return writeVerbs[k.Verb] }

// tenantWrites matches writes to Tenants (subresource "" or "status").
func tenantWrites(sub string) func(reqKey) bool {
	return func(k reqKey) bool {
		return isWrite(k) && k.Resource == "tenants" && k.Subresource == sub
	}
}

// writesSummary lists the writes of a delta by series, most first ("PUT leases.coordination.k8s.io 12, ...").
func (d delta) writesSummary() string { return d.summary(isWrite) }

// readsSummary is writesSummary for every other request (gets, lists, watches).
func (d delta) readsSummary() string {
	return d.summary(func(k reqKey) bool { return !isWrite(k) })
}

func (d delta) summary(which func(reqKey) bool) string {
	type kv struct {
		k reqKey
		v float64
	}
	var list []kv
	for k, v := range d.requests {
		if v > 0 && which(k) {
			list = append(list, kv{k, v})
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].v > list[j].v })
	parts := make([]string, 0, len(list))
	for _, e := range list {
		parts = append(parts, fmt.Sprintf("%s %.0f", e.k, e.v))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// liveHeap forces a GC in the agent (pprof's heap?gc=1) and returns HeapAlloc after it: the live
// heap.
func liveHeap(ctx context.Context, pprofAddr string) (uint64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+pprofAddr+"/debug/pprof/heap?gc=1&debug=1", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "# HeapAlloc = "); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no HeapAlloc in the heap profile of %s", pprofAddr)
}

// rss is a process's resident set size in bytes.
func rss(pid int) uint64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				kb, _ := strconv.ParseUint(f[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// saveHeapProfile writes the agent's heap profile (after GC) to path, for go tool pprof.
func saveHeapProfile(ctx context.Context, pprofAddr, path string) error {
	return saveProfile(ctx, pprofAddr, "heap?gc=1", path)
}

// saveProfile writes the agent's pprof profile (the path under /debug/pprof/, with its query) to
// path; a CPU profile (profile?seconds=N) returns after N seconds.
func saveProfile(ctx context.Context, pprofAddr, profile, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+pprofAddr+"/debug/pprof/"+profile, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

// machineCPU returns the machine's busy and total CPU time (jiffies) from /proc/stat.
func machineCPU() (busy, total uint64) {
	return procStat(func(cpu string) bool { return cpu == "cpu" })
}

// busySince is the machine's busy share of CPU time since the machineCPU reading b0, t0.
func busySince(b0, t0 uint64) string {
	b1, t1 := machineCPU()
	if t1 <= t0 {
		return "?"
	}
	return fmt.Sprintf("%.0f %%", 100*float64(b1-b0)/float64(t1-t0))
}

// saveAPIServerProfile saves an API server's CPU profile over seconds (kube-apiserver serves
// /debug/pprof to an admin while --profiling is on, its default), for go tool pprof.
func saveAPIServerProfile(ctx context.Context, cfg *rest.Config, seconds int, path string) error {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/debug/pprof/profile?seconds="+strconv.Itoa(seconds), nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", req.URL.Path, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

// saveOwnProfile writes a CPU profile of this process over d to path (nothing when another
// profile is running: go test -cpuprofile).
func saveOwnProfile(ctx context.Context, d time.Duration, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	pprof.StopCPUProfile()
	return nil
}

//go:build bench

package bench

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// managementNice is the scheduling priority (nice value) the restart storm gives management's
// API server and etcd over the simulated fleet (nice 0): on this machine they share two cores
// with 500 regions' agents, which in a real fleet run on the regions' own machines.
const managementNice = -10

// controlPlanePIDs returns the process IDs of the kube-apiserver serving host (https URL) and of
// the etcd it stores in, found by their command lines in /proc.
func controlPlanePIDs(host string) ([]int, error) {
	u, err := url.Parse(host)
	if err != nil {
		return nil, err
	}
	procs, err := processCommandLines()
	if err != nil {
		return nil, err
	}
	var apiserver int
	var etcdURL string
	for pid, args := range procs {
		if filepath.Base(args[0]) != "kube-apiserver" || !slices.Contains(args, "--secure-port="+u.Port()) {
			continue
		}
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--etcd-servers="); ok {
				apiserver, etcdURL = pid, strings.Split(v, ",")[0]
			}
		}
	}
	if apiserver == 0 {
		return nil, fmt.Errorf("no kube-apiserver process with --secure-port=%s", u.Port())
	}
	for pid, args := range procs {
		if slices.Contains(args, "--listen-client-urls="+etcdURL) || slices.Contains(args, "--advertise-client-urls="+etcdURL) {
			return []int{apiserver, pid}, nil
		}
	}
	return nil, fmt.Errorf("no etcd process serving %s", etcdURL)
}

// processCommandLines reads the command line of every process in /proc.
func processCommandLines() (map[int][]string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[int][]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue // gone, or a kernel thread
		}
		out[pid] = strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	}
	return out, nil
}

// setNice sets the nice value of every thread of the processes pids (threads they start later
// inherit it). Lowering a nice value below 0 needs root or CAP_SYS_NICE.
func setNice(pids []int, nice int) error {
	for _, pid := range pids {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return err
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil && err != syscall.ESRCH {
				return fmt.Errorf("setting the nice value of process %d (thread %d) to %d: %w", pid, tid, nice, err)
			}
		}
	}
	return nil
}

// prioritizeManagement gives the API server serving host and its etcd the nice value
// managementNice. It returns how to describe their priority and the function that puts them back
// at 0 (a failure reported through note); when they cannot be prioritized, note says why and
// undo does nothing.
func prioritizeManagement(host string, note func(string, ...any)) (priority string, undo func()) {
	pids, err := controlPlanePIDs(host)
	if err == nil {
		err = setNice(pids, managementNice)
	}
	if err != nil {
		_ = setNice(pids, 0) // whatever was set before the failure
		note("restart storm: management's API server and etcd could not be given priority over the simulated fleet (the figures are with the cores shared): %v", err)
		return "at the fleet's priority", func() {}
	}
	return fmt.Sprintf("at nice %d", managementNice), func() {
		if err := setNice(pids, 0); err != nil {
			note("restart storm: %v", err)
		}
	}
}

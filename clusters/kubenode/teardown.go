package kubenode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Close removes the node (see Down) after stopping its processes: the kubelet first, so that it starts
// nothing more, then the pods' processes, containerd and CoreDNS, then the control plane. It is safe to
// call more than once; the error says what could not be removed.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() {
		var errs []error
		// Newest first: the kubelet, CoreDNS, containerd.
		for i := len(n.procs) - 1; i >= 0; i-- {
			p := n.procs[i]
			if p.name == "containerd" {
				// The containers go before their runtime, so that its shims end cleanly.
				errs = append(errs, n.stopContainers(ctx))
			}
			stopProc(p)
		}
		if n.cp != nil {
			n.cp.Close(ctx)
		}
		n.spawner.Close()
		errs = append(errs, Down(n.opts.Dir))
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

// stopProc stops one process: SIGTERM, SIGKILL after ten seconds.
func stopProc(p *proc) {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// stopContainers kills every process of the node's pods and deletes their tasks, so that containerd's
// shims exit on their own and remove their sockets.
func (n *Node) stopContainers(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	killCgroup(n.st.CgroupRoot)
	out, err := n.ctr(ctx, "tasks", "ls", "-q")
	if err != nil {
		return fmt.Errorf("stop the node's containers: %w", err)
	}
	var errs []error
	for _, id := range strings.Fields(out) {
		if _, err := n.ctr(ctx, "tasks", "delete", "--force", id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killCgroup SIGKILLs every process in the cgroup tree root (in any hierarchy) and returns how many it
// found.
func killCgroup(root string) int {
	mounts, err := cgroupMounts()
	if err != nil {
		return 0
	}
	killed := 0
	for _, m := range mounts {
		filepath.WalkDir(filepath.Join(m.dir, root), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
					if syscall.Kill(pid, syscall.SIGKILL) == nil {
						killed++
					}
				}
			}
			return nil
		})
	}
	return killed
}

// Down removes what a node left in dir and on the host: it kills the processes that name dir (the
// node's containerd, its shims, the kubelet, CoreDNS) and the processes of its cgroups, unmounts
// everything under dir, puts back the kernel settings the kubelet changed, deletes its bridge and
// cgroups, and removes dir. A directory without a node
// (no state.json) is an error; Down of a node already gone removes what is left of it.
func Down(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return fmt.Errorf("%s holds no local node: %w", dir, err)
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("%s/state.json: %w", dir, err)
	}
	var errs []error
	// Processes: those of the node's cgroups (containers), and those naming its directory (containerd,
	// shims, kubelet, CoreDNS, the control plane), until none is left.
	for attempt := 0; ; attempt++ {
		pids := processesUnder(dir)
		n := killCgroup(st.CgroupRoot)
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if len(pids)+n == 0 {
			break
		}
		if attempt == 50 {
			errs = append(errs, fmt.Errorf("processes still running: %v", pids))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := unmountUnder(dir); err != nil {
		errs = append(errs, err)
	}
	if st.Network != "" {
		// libcni's cache of the pods' attachments (a sandbox removed by the kubelet takes its own along).
		cached, _ := filepath.Glob(filepath.Join(cniCacheDir, "results", st.Network+"-*"))
		for _, f := range cached {
			// <network>-<sandbox>-eth0, and the loopback plugin's cni-loopback-<sandbox>-lo beside it.
			id := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), st.Network+"-"), "-eth0")
			os.Remove(filepath.Join(cniCacheDir, "results", "cni-loopback-"+id+"-lo"))
			if err := os.Remove(f); err != nil {
				errs = append(errs, err)
			}
		}
		// And its directories, when nothing else uses them (Remove fails on a directory that is not empty).
		os.Remove(filepath.Join(cniCacheDir, "results"))
		os.Remove(cniCacheDir)
	}
	for k, v := range st.Sysctls {
		if cur, err := os.ReadFile("/proc/sys/" + k); err == nil && strings.TrimSpace(string(cur)) != v {
			if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("restore %s=%s: %w", k, v, err))
			}
		}
	}
	if st.DockerUser {
		for _, rule := range dockerUserRules(st.Bridge) {
			for iptables(append([]string{"-C", "DOCKER-USER"}, rule...)...) == nil {
				if err := iptables(append([]string{"-D", "DOCKER-USER"}, rule...)...); err != nil {
					errs = append(errs, err)
					break
				}
			}
		}
	}
	if st.Bridge != "" && linkExists(st.Bridge) {
		if err := ip("link", "delete", st.Bridge); err != nil {
			errs = append(errs, err)
		}
	}
	if st.CgroupRoot != "" {
		// A killed process leaves its cgroup a moment later.
		var err error
		for range 50 {
			if err = removeCgroupRoot(st.CgroupRoot); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove the local node in %s: %w", dir, errors.Join(errs...))
	}
	return nil
}

// Leftovers lists what of a node in dir is still on the host: processes naming dir, mounts under it,
// its bridge, its cgroups, kernel settings not put back, dir itself. Empty after Down; tests check it.
func Leftovers(dir string, st Snapshot) []string {
	var out []string
	if pids := processesUnder(dir); len(pids) > 0 {
		out = append(out, fmt.Sprintf("processes %v", pids))
	}
	if m, _ := mountsUnder(dir); len(m) > 0 {
		out = append(out, "mounts "+strings.Join(m, ", "))
	}
	if st.Bridge != "" && linkExists(st.Bridge) {
		out = append(out, "bridge "+st.Bridge)
	}
	if st.Bridge != "" && dockerUserChain() {
		for _, rule := range dockerUserRules(st.Bridge) {
			if iptables(append([]string{"-C", "DOCKER-USER"}, rule...)...) == nil {
				out = append(out, "iptables DOCKER-USER "+strings.Join(rule, " "))
			}
		}
	}
	if st.Network != "" {
		if cached, _ := filepath.Glob(filepath.Join(cniCacheDir, "results", st.Network+"-*")); len(cached) > 0 {
			out = append(out, "CNI cache "+strings.Join(cached, ", "))
		}
	}
	if mounts, err := cgroupMounts(); err == nil && st.CgroupRoot != "" {
		for _, m := range mounts {
			if _, err := os.Stat(filepath.Join(m.dir, st.CgroupRoot)); err == nil {
				out = append(out, "cgroup "+filepath.Join(m.dir, st.CgroupRoot))
			}
		}
	}
	for k, v := range st.Sysctls {
		if cur, err := os.ReadFile("/proc/sys/" + k); err == nil && strings.TrimSpace(string(cur)) != v {
			out = append(out, fmt.Sprintf("sysctl %s=%s (was %s)", k, strings.TrimSpace(string(cur)), v))
		}
	}
	if _, err := os.Stat(dir); err == nil {
		out = append(out, "directory "+dir)
	}
	return out
}

// Snapshot names a node's host objects (read from its directory before it goes).
type Snapshot struct {
	Bridge, Network, CgroupRoot string
	Sysctls                     map[string]string
}

// ReadSnapshot reads the names of a node's host objects from its directory.
func ReadSnapshot(dir string) (Snapshot, error) {
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return Snapshot{}, err
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return Snapshot{}, err
	}
	return Snapshot{Bridge: st.Bridge, Network: st.Network, CgroupRoot: st.CgroupRoot, Sysctls: st.Sysctls}, nil
}

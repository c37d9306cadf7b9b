package clusters

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Labels on every Docker object chaosbench creates. Containers and networks cannot die with the chaosbench
// process that created them, so each carries its owner's identity: `chaosbench clean` and the next docker
// run remove the objects of owners that are gone, and leave those of live runs alone.
const (
	// LabelOwned marks every container, network and image of chaosbench.
	LabelOwned = "io.chaosbench"
	// LabelCluster is the cluster id shared by a cluster's containers and network.
	LabelCluster = "io.chaosbench.cluster"
	// LabelOwner identifies the chaosbench process that created the object (see owner).
	LabelOwner = "io.chaosbench.owner"
	// LabelRun is the run directory the cluster writes into.
	LabelRun = "io.chaosbench.run"
	// LabelMember is a container's member name (m1, m2, ...).
	LabelMember = "io.chaosbench.member"
	// LabelEtcdVersion is the etcd release an image or container runs.
	LabelEtcdVersion = "io.chaosbench.etcd-version"
	// LabelImageKind is "etcd" for a release built from the module proxy, "builtin" for chaosbench's own.
	LabelImageKind = "io.chaosbench.image"
	// LabelBinaryDigest is the SHA-256 of the binary inside an image.
	LabelBinaryDigest = "io.chaosbench.binary-sha256"
)

// owner identifies a process across PID reuse and reboots: host name, boot id, PID and the process's start
// time in clock ticks since boot.
type owner struct {
	Host   string
	BootID string
	PID    int
	Start  uint64
}

// String is the label value: host/boot-id/pid/start.
func (o owner) String() string {
	return fmt.Sprintf("%s/%s/%d/%d", o.Host, o.BootID, o.PID, o.Start)
}

func parseOwner(s string) (owner, bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 4 {
		return owner{}, false
	}
	pid, err1 := strconv.Atoi(parts[2])
	start, err2 := strconv.ParseUint(parts[3], 10, 64)
	if err1 != nil || err2 != nil {
		return owner{}, false
	}
	return owner{Host: parts[0], BootID: parts[1], PID: pid, Start: start}, true
}

// selfOwner describes the current process.
func selfOwner() owner {
	o := owner{PID: os.Getpid(), BootID: bootID()}
	o.Host, _ = os.Hostname()
	o.Start, _ = processStart(o.PID)
	return o
}

// ownerState says whether the process that created an object still runs. Objects created on another host
// (a remote Docker engine shared by several machines) cannot be judged: known is false.
func ownerState(label string) (alive, known bool) {
	o, ok := parseOwner(label)
	if !ok {
		return false, false
	}
	self := selfOwner()
	if o.Host != self.Host {
		return false, false
	}
	if o.BootID != self.BootID {
		return false, true // created before a reboot
	}
	start, ok := processStart(o.PID)
	if !ok || start != o.Start {
		return false, true // gone, or its PID now belongs to another process
	}
	if err := syscall.Kill(o.PID, 0); err != nil && err != syscall.EPERM {
		return false, true
	}
	return true, true
}

func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// processStart returns field 22 of /proc/<pid>/stat (start time in clock ticks after boot); ok is false
// when the process is gone or a zombie.
func processStart(pid int) (uint64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(string(b[i+1:]))
	// fields[0] is the state (field 3); the start time is field 22.
	if len(fields) < 20 || fields[0] == "Z" || fields[0] == "X" {
		return 0, false
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, false
	}
	return start, true
}

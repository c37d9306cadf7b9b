// Package slowfs is a FUSE loopback filesystem that makes a disk slow on demand, and can forget what was
// written but not yet fsynced, as a power failure does.
//
// An embedded member's data directory is a mount of slowfs over a backing directory. The filesystem is
// served by a helper process of its own (`chaosbench slowfs`, see Main): the FUSE server must not live in
// a process that forks (go-fuse deadlocks when the serving process forks while requests are in flight), and
// a member must be able to die without taking its filesystem along. The parent controls the helper through
// its standard input and output, one JSON message per line (see Mount and FS): set the fsync and write
// delays, "crash" (drop unsynced writes), read counters. Closing the helper's standard input unmounts and
// ends it; so does the death of its parent.
//
// Delays apply to fsync and fdatasync (FUSE sends both as FSYNC), the calls etcd's WAL and bbolt wait on,
// and optionally to every write. With TrackUnsynced the filesystem keeps, per file, the previous contents
// of every range written since the file's last fsync (an undo log); Crash restores them and the file's
// synced size, so that the member restarts on what a disk would hold after losing power. Metadata
// operations (create, rename, unlink) are kept, as on a filesystem that journals metadata in order.
package slowfs

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"time"
)

// Command is the hidden subcommand under which chaosbench (or a test binary) serves one slowfs mount.
const Command = "slowfs"

// Delays are the disk faults in force: every fsync waits Fsync plus a uniform random jitter in
// [0, FsyncJitter) before it reaches the backing disk; every write waits Write plus [0, WriteJitter).
type Delays struct {
	Fsync       time.Duration `json:"fsync_ns,omitempty"`
	FsyncJitter time.Duration `json:"fsync_jitter_ns,omitempty"`
	Write       time.Duration `json:"write_ns,omitempty"`
	WriteJitter time.Duration `json:"write_jitter_ns,omitempty"`
}

// Stats are the helper's counters since it started.
type Stats struct {
	Fsyncs        int64 `json:"fsyncs"`
	DelayedFsyncs int64 `json:"delayed_fsyncs"`
	Writes        int64 `json:"writes"`
	// UnsyncedBytes is how much written data is not fsynced yet (only counted with TrackUnsynced).
	UnsyncedBytes int64 `json:"unsynced_bytes"`
	Crashes       int64 `json:"crashes"`
}

// CrashReport says what a Crash undid.
type CrashReport struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

// request and response are the control protocol's messages, one JSON object per line.
type request struct {
	Op     string  `json:"op"` // set, crash, stats
	Delays *Delays `json:"delays,omitempty"`
}

type response struct {
	Ready bool         `json:"ready,omitempty"`
	Error string       `json:"error,omitempty"`
	Stats *Stats       `json:"stats,omitempty"`
	Crash *CrashReport `json:"crash,omitempty"`
}

// Available reports whether FUSE mounts can work here: /dev/fuse opens, and a mount helper or root
// privileges are present. The error says what is missing.
func Available() error {
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("FUSE unavailable: %w", err)
	}
	f.Close()
	if os.Geteuid() == 0 {
		return nil
	}
	for _, dir := range strings.Split(os.Getenv("PATH"), ":") {
		for _, bin := range []string{"fusermount3", "fusermount"} {
			if st, err := os.Stat(dir + "/" + bin); err == nil && !st.IsDir() {
				return nil
			}
		}
	}
	return fmt.Errorf("FUSE unavailable: not root and no fusermount in PATH")
}

// Mounted reports whether dir is a mount point, according to /proc/self/mountinfo.
func Mounted(dir string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescapeMount(fields[4]) == dir {
			return true
		}
	}
	return false
}

// MountsUnder returns the mount points at or below dir; an error when the mount table cannot be read (so
// that a check for leftover mounts never passes by reading nothing).
func MountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	prefix := strings.TrimSuffix(dir, "/") + "/"
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 {
			if mp := unescapeMount(fields[4]); mp == dir || strings.HasPrefix(mp, prefix) {
				out = append(out, mp)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read mounts: %w", err)
	}
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%3o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// RunIfRequested serves a mount and exits when this process was started as a slowfs helper
// (os.Args[1] == "slowfs"). Test binaries call it first thing in TestMain so that they can serve as their
// own helper, as chaosbench does.
func RunIfRequested() {
	if len(os.Args) > 1 && os.Args[1] == Command {
		os.Exit(Main(os.Args[2:], os.Stdin, os.Stdout))
	}
}

package clusters

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/etcdmain"

	"github.com/etcd-chaosbench/chaosbench/clusters/slowfs"
)

// MemberCommand is the hidden subcommand under which the chaosbench binary (or a test binary, see
// RunMemberIfRequested) runs one etcd member.
const MemberCommand = "member"

// RunMember runs one etcd member in this process with the given etcd command-line flags and returns only
// if etcd does; it is the body of `chaosbench member`.
//
// The flags go to etcd's own command-line front end (etcdmain), which parses them exactly as the etcd
// binary does and starts the server through go.etcd.io/etcd/server/v3/embed. Writing our own flag parsing
// on top of embed would drift from etcd's (experimental-flag aliases, feature gates, URL validation), and
// --etcd-flag must mean what it means to etcd. SIGTERM and SIGINT stop the member gracefully, as they
// stop etcd.
//
// The member also exits when its parent does. The parent starts members with Pdeathsig, which the kernel
// ties to the thread that forked; the watchdog covers the case of that thread going away first.
func RunMember(args []string) {
	go exitWithParent(os.Getppid())
	etcdmain.Main(append([]string{"etcd"}, args...))
}

// RunMemberIfRequested runs member mode and exits when this process was started as a member
// (os.Args[1] == "member"), or runs a docker cluster's watchdog (os.Args[1] == ReaperCommand). Test
// binaries call it first thing in TestMain, so that a test can start member processes by re-executing its
// own binary, exactly as chaosbench re-executes itself.
//
// It also serves a slowfs mount when the process was started as a slowfs helper (see package slowfs).
func RunMemberIfRequested() {
	slowfs.RunIfRequested()
	if len(os.Args) > 1 && os.Args[1] == MemberCommand {
		RunMember(os.Args[2:])
		os.Exit(0)
	}
	if len(os.Args) > 1 && os.Args[1] == ReaperCommand {
		os.Exit(RunReaper(os.Args[2:]))
	}
}

func exitWithParent(parent int) {
	for {
		time.Sleep(200 * time.Millisecond)
		if os.Getppid() != parent {
			os.Exit(1)
		}
	}
}

// childAttrs puts a child in its own process group (a Ctrl-C on the terminal reaches chaosbench, which
// then shuts members down in order, and not the members directly) and has the kernel send it deathSig
// when its parent dies: SIGKILL for members, so that not even `kill -9 chaosbench` leaves a member
// behind; SIGTERM for slowfs helpers, which must unmount before they go.
func childAttrs(deathSig syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: deathSig}
}

// spawner starts child processes from one goroutine locked to one OS thread for its whole life. Pdeathsig
// fires when the thread that forked the child exits; Go may retire idle threads, so forking from arbitrary
// goroutines could kill members mid-run. When the spawner is closed its thread exits, which also kills any
// child still alive: a last line of defence against leaks.
type spawner struct {
	reqs chan spawnReq
	done chan struct{}

	mu     sync.Mutex
	closed bool // a start after close fails instead of sending on a closed channel
}

type spawnReq struct {
	cmd *exec.Cmd
	err chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq), done: make(chan struct{})}
	go func() {
		runtime.LockOSThread()
		// Never unlocked: returning while locked makes the runtime terminate this thread.
		defer close(s.done)
		for r := range s.reqs {
			r.err <- r.cmd.Start()
		}
	}()
	return s
}

// start starts cmd from the spawner's thread; the kernel SIGKILLs it when chaosbench dies.
func (s *spawner) start(cmd *exec.Cmd) error {
	return s.startWith(cmd, syscall.SIGKILL)
}

// startWith starts cmd from the spawner's thread; the kernel sends it deathSig when chaosbench dies.
func (s *spawner) startWith(cmd *exec.Cmd, deathSig syscall.Signal) error {
	cmd.SysProcAttr = childAttrs(deathSig)
	errc := make(chan error, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errors.New("the cluster is closed")
	}
	s.reqs <- spawnReq{cmd: cmd, err: errc}
	s.mu.Unlock()
	return <-errc
}

// close ends the spawner's thread; children still running are killed by the kernel.
func (s *spawner) close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.reqs)
	}
	s.mu.Unlock()
	<-s.done
}

// Spawner starts child processes that die with chaosbench, as members do: in a process group of their
// own, SIGKILLed by the kernel when chaosbench dies (even by kill -9), forked from one locked thread.
// Helpers outside this package (a Kubernetes control plane in front of the cluster) start theirs with it.
type Spawner struct{ s *spawner }

// NewSpawner starts a spawner's thread; Close ends it.
func NewSpawner() *Spawner { return &Spawner{s: newSpawner()} }

// Start starts cmd (its SysProcAttr is replaced).
func (s *Spawner) Start(cmd *exec.Cmd) error { return s.s.start(cmd) }

// Close ends the spawner's thread, which kills any child still running.
func (s *Spawner) Close() { s.s.close() }

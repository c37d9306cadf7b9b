package clusters

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters/slowfs"
)

// stopGrace bounds how long Stop waits for a graceful exit before it kills the member.
const stopGrace = 10 * time.Second

// ExitEvent records a member process ending. Expected is false when nobody asked it to stop: a crash.
type ExitEvent struct {
	Member   string
	PID      int
	Time     time.Time
	Status   string
	Expected bool
	// Log is the member's log file (its last lines say why a crash happened).
	Log string
}

// procMember is a member running as a child process: the embed backend's members (the chaosbench binary in
// member mode, or a given etcd binary).
type procMember struct {
	name       string
	clientURL  string
	peerURL    string // advertised: the member's proxy
	metricsURL string
	dataDir    string
	logPath    string
	argv       []string // full command line
	env        []string
	// failpointURL is the member's gofail endpoint ("" without failpoints).
	failpointURL string
	spawner      *spawner
	onExit       func(ExitEvent)
	id           atomic.Uint64

	mu       sync.Mutex
	disk     *slowfs.FS // the slowfs mount on dataDir, if any
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the current process has been reaped
	paused   bool
	stopping bool // an exit was asked for (a kill, a stop): not a crash; never withdrawn
	// mayPanic: a failpoint armed to panic may end the process (not a crash either); withdrawn when it is
	// disarmed, which leaves an exit asked for by another fault meanwhile (stopping) expected.
	mayPanic bool
}

func (m *procMember) Name() string       { return m.name }
func (m *procMember) ID() uint64         { return m.id.Load() }
func (m *procMember) ClientURL() string  { return m.clientURL }
func (m *procMember) PeerURL() string    { return m.peerURL }
func (m *procMember) DataDir() string    { return m.dataDir }
func (m *procMember) MetricsURL() string { return m.metricsURL }

func (m *procMember) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

func (m *procMember) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmd != nil
}

func (m *procMember) Paused() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmd != nil && m.paused
}

func (m *procMember) String() string { return m.name }

// stoppedByFault reports whether the member is down because an exit was asked for (a kill, a stop), not
// by a crash or a failpoint's panic.
func (m *procMember) stoppedByFault() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmd == nil && m.stopping
}

// expectCrash marks the running process's coming exit as requested (a failpoint set to panic may end it),
// or withdraws that. A process started afterwards is watched as usual.
func (m *procMember) expectCrash(expect bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		m.mayPanic = expect
	}
}

// Start starts the member process. Its output is appended to the member's log file.
func (m *procMember) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return fmt.Errorf("start %s: already running (pid %d)", m.name, m.cmd.Process.Pid)
	}
	log, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start %s: open log: %w", m.name, err)
	}
	cmd := exec.Command(m.argv[0], m.argv[1:]...)
	cmd.Env = m.env
	cmd.Stdout, cmd.Stderr = log, log
	fmt.Fprintf(log, "=== chaosbench: starting %s at %s: %q\n", m.name, time.Now().Format(time.RFC3339Nano), m.argv)
	if err := m.spawner.start(cmd); err != nil {
		log.Close()
		return fmt.Errorf("start %s: %w", m.name, err)
	}
	exited := make(chan struct{})
	m.cmd, m.exited, m.paused, m.stopping, m.mayPanic = cmd, exited, false, false, false
	go m.reap(cmd, log, exited)
	return nil
}

func (m *procMember) reap(cmd *exec.Cmd, log *os.File, exited chan struct{}) {
	err := cmd.Wait()
	status := "exit status 0"
	if err != nil {
		status = err.Error()
	}
	m.mu.Lock()
	ev := ExitEvent{Member: m.name, PID: cmd.Process.Pid, Time: time.Now(), Status: status, Expected: m.stopping || m.mayPanic, Log: m.logPath}
	m.cmd, m.paused = nil, false
	m.mu.Unlock()
	fmt.Fprintf(log, "=== chaosbench: %s (pid %d) ended at %s: %s\n", m.name, ev.PID, ev.Time.Format(time.RFC3339Nano), status)
	log.Close()
	close(exited)
	if m.onExit != nil {
		m.onExit(ev)
	}
}

// signal sends sig to the running process; expectExit marks a coming exit as requested.
func (m *procMember) signal(sig syscall.Signal, expectExit bool) (<-chan struct{}, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return nil, fmt.Errorf("%s is not running", m.name)
	}
	if expectExit {
		m.stopping = true
	}
	if err := m.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return nil, fmt.Errorf("signal %s: %w", m.name, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		m.paused = true
	case syscall.SIGCONT:
		m.paused = false
	}
	return m.exited, nil
}

func (m *procMember) Kill(ctx context.Context) error {
	exited, err := m.signal(syscall.SIGKILL, true)
	if err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	select {
	case <-exited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("kill %s: waiting for exit: %w", m.name, ctx.Err())
	}
}

func (m *procMember) Stop(ctx context.Context) error {
	if m.Paused() {
		if _, err := m.signal(syscall.SIGCONT, false); err != nil {
			return fmt.Errorf("stop: %w", err)
		}
	}
	exited, err := m.signal(syscall.SIGTERM, true)
	if err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	grace := time.NewTimer(stopGrace)
	defer grace.Stop()
	select {
	case <-exited:
		return nil
	case <-grace.C:
	case <-ctx.Done():
	}
	// Too slow to stop: kill it, and wait without the (possibly ended) ctx, SIGKILL is prompt.
	if _, err := m.signal(syscall.SIGKILL, true); err != nil {
		return nil // exited meanwhile
	}
	<-exited
	return nil
}

func (m *procMember) Restart(ctx context.Context) error {
	if m.Running() {
		if err := m.Stop(ctx); err != nil {
			return fmt.Errorf("restart: %w", err)
		}
	}
	return m.Start(ctx)
}

// Pause sends SIGSTOP and returns once the kernel reports the process stopped, so that a fault's
// recorded start is when the member really stopped.
func (m *procMember) Pause(ctx context.Context) error {
	pid := m.PID()
	if _, err := m.signal(syscall.SIGSTOP, false); err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	return waitState(ctx, pid, true)
}

// Resume sends SIGCONT and returns once the process runs again.
func (m *procMember) Resume(ctx context.Context) error {
	pid := m.PID()
	if _, err := m.signal(syscall.SIGCONT, false); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	return waitState(ctx, pid, false)
}

// waitState polls /proc until the process is stopped (or no longer stopped), or is gone.
func waitState(ctx context.Context, pid int, stopped bool) error {
	for {
		state, ok := procState(pid)
		if !ok || (state == "T") == stopped {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for pid %d to %s: %w", pid, map[bool]string{true: "stop", false: "continue"}[stopped], ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// procState returns a process's state letter from /proc/<pid>/stat (R, S, D, T, ...); ok is false when
// the process is gone or a zombie.
func procState(pid int) (state string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return "", false
	}
	state = s[i+2 : i+3]
	return state, state != "Z" && state != "X"
}

func (m *procMember) setID(id uint64) { m.id.Store(id) }

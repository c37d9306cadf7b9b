package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/slowfs"
)

// SlowDisk delays its targets' fsyncs (and optionally writes) for the window. Where the members' data
// directories are slowfs mounts (see clusters.EmbedOptions.SlowFS) the filesystem delays FSYNC requests,
// with jitter; otherwise strace attaches to the member and delays its fdatasync and fsync system calls by
// a fixed time (ptrace stops the member at every system call, which costs it more than the delay alone).
type SlowDisk struct {
	base
	disks  []*slowfs.FS
	traces []*straceProc
}

// straceProc is a running strace and its exit status, once it has one.
type straceProc struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// StraceAvailable reports whether the strace fallback for disk faults can run here.
func StraceAvailable() error {
	if _, err := exec.LookPath("strace"); err != nil {
		return errors.New("no FUSE and no strace in PATH")
	}
	return nil
}

// Available needs process control and either slowfs mounts or strace.
func (f *SlowDisk) Available(c clusters.Cluster) error {
	if _, err := processes(c); err != nil {
		return err
	}
	if d, ok := c.(disked); ok && d.Disk(c.Members()[0].Name()) != nil {
		return nil
	}
	if err := StraceAvailable(); err != nil {
		return err
	}
	if f.p.jitter > 0 || f.p.writeDelay+f.p.writeJitter > 0 {
		return errors.New("without slowfs, disk faults use strace, which delays fdatasync by a fixed time only (no jitter, no write delay)")
	}
	return nil
}

// Inject slows the targets' disks.
func (f *SlowDisk) Inject(ctx context.Context) error {
	if err := f.resolve(ctx, running(f.env.Cluster)); err != nil {
		return err
	}
	delays := slowfs.Delays{Fsync: f.p.delay, FsyncJitter: f.p.jitter, Write: f.p.writeDelay, WriteJitter: f.p.writeJitter}
	d, _ := f.env.Cluster.(disked)
	var errs []error
	for _, m := range f.targets {
		if d != nil {
			if fs := d.Disk(m.Name()); fs != nil {
				f.disks = append(f.disks, fs)
				errs = append(errs, fs.Set(ctx, delays))
				continue
			}
		}
		tr, err := straceDelay(ctx, m.(clusters.Process), f.p.delay)
		if tr != nil {
			f.traces = append(f.traces, tr)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Recover restores the disks' speed.
func (f *SlowDisk) Recover(ctx context.Context) error {
	var errs []error
	for _, fs := range f.disks {
		errs = append(errs, fs.Set(ctx, slowfs.Delays{}))
	}
	for _, tr := range f.traces {
		tr.stop()
	}
	return errors.Join(errs...)
}

// straceDelay attaches strace to p's process to delay every fdatasync and fsync by delay, and returns once
// it is attached (the process reports a tracer).
func straceDelay(ctx context.Context, p clusters.Process, delay time.Duration) (*straceProc, error) {
	pid := p.PID()
	if pid == 0 {
		return nil, fmt.Errorf("slow disk of %s: not running", p.Name())
	}
	us := strconv.FormatInt(delay.Microseconds(), 10)
	cmd := exec.Command("strace", "-f", "-qq", "-o", "/dev/null", "-p", strconv.Itoa(pid),
		"-e", "trace=fdatasync,fsync",
		"-e", "inject=fdatasync:delay_enter="+us, "-e", "inject=fsync:delay_enter="+us)
	// strace dies with chaosbench; the kernel then detaches it from the member, which runs on.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("slow disk of %s: strace: %w", p.Name(), err)
	}
	tr := &straceProc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(tr.exited)
	}()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for tracer(pid) == 0 {
		select {
		case <-tr.exited:
			return nil, fmt.Errorf("slow disk of %s: strace exited before attaching", p.Name())
		case <-deadline.C:
			tr.stop()
			return nil, fmt.Errorf("slow disk of %s: strace did not attach within 10s", p.Name())
		case <-ctx.Done():
			tr.stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return tr, nil
}

// tracer returns the pid tracing pid (0: none).
func tracer(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "TracerPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// stop detaches strace (SIGINT makes it detach cleanly) and waits for it to exit.
func (tr *straceProc) stop() {
	tr.cmd.Process.Signal(os.Interrupt)
	select {
	case <-tr.exited:
	case <-time.After(5 * time.Second):
		tr.cmd.Process.Kill()
		<-tr.exited
	}
}

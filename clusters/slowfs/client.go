package slowfs

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Options configures a mount.
type Options struct {
	// Command starts the helper; the mount's flags are appended (default: this executable, "slowfs").
	Command []string
	// Lower is the backing directory (created if missing), Mountpoint where it is mounted (created too).
	Lower, Mountpoint string
	// Seed seeds the jitter of delays.
	Seed uint64
	// TrackUnsynced keeps undo logs of unsynced writes, so that Crash works (it costs a read per write).
	TrackUnsynced bool
	// Log receives the helper's standard error (nil discards it).
	Log io.Writer
	// Start starts the helper process (default cmd.Start). Embedded clusters start it from their spawner
	// thread, so that the helper is told when they die.
	Start func(*exec.Cmd) error
}

// FS is a mounted slowfs and the control channel to its helper.
type FS struct {
	opts    Options
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	replies *bufio.Scanner
	exited  chan struct{}

	mu        sync.Mutex // one request at a time
	broken    bool       // a request was abandoned: answers can no longer be matched to requests
	delays    Delays
	closeOnce sync.Once
	closeErr  error
}

// Mount starts a helper serving opts.Lower at opts.Mountpoint and returns once the mount is up.
func Mount(ctx context.Context, opts Options) (*FS, error) {
	if len(opts.Command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("slowfs: find own executable: %w", err)
		}
		opts.Command = []string{exe, Command}
	}
	if opts.Start == nil {
		opts.Start = func(c *exec.Cmd) error { return c.Start() }
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	for _, dir := range []string{opts.Lower, opts.Mountpoint} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("slowfs: %w", err)
		}
	}
	args := append(append([]string{}, opts.Command[1:]...), "--lower", opts.Lower, "--mount", opts.Mountpoint,
		"--seed", strconv.FormatUint(opts.Seed, 10))
	if opts.TrackUnsynced {
		args = append(args, "--track-unsynced")
	}
	cmd := exec.Command(opts.Command[0], args...)
	cmd.Stderr = opts.Log
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("slowfs: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("slowfs: %w", err)
	}
	if err := opts.Start(cmd); err != nil {
		return nil, fmt.Errorf("slowfs: start helper: %w", err)
	}
	f := &FS{opts: opts, cmd: cmd, stdin: stdin, replies: bufio.NewScanner(stdout), exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(f.exited)
	}()
	ready := make(chan error, 1)
	go func() {
		var r response
		if err := f.read(&r); err != nil {
			ready <- err
			return
		}
		if r.Error != "" {
			ready <- errors.New(r.Error)
			return
		}
		ready <- nil
	}()
	timeout := time.NewTimer(15 * time.Second)
	defer timeout.Stop()
	select {
	case err = <-ready:
	case <-timeout.C:
		err = errors.New("no answer within 15s")
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		f.Close(context.Background())
		return nil, fmt.Errorf("slowfs: mount %s: %w", opts.Mountpoint, err)
	}
	return f, nil
}

// Mountpoint returns where the filesystem is mounted.
func (f *FS) Mountpoint() string { return f.opts.Mountpoint }

// Lower returns the backing directory.
func (f *FS) Lower() string { return f.opts.Lower }

// PID returns the helper's process id.
func (f *FS) PID() int { return f.cmd.Process.Pid }

// Tracking reports whether the filesystem keeps undo logs of unsynced writes (Crash works).
func (f *FS) Tracking() bool { return f.opts.TrackUnsynced }

// Delays returns the delays last set.
func (f *FS) Delays() Delays {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delays
}

// Set puts delays in force; the zero Delays heals the disk.
func (f *FS) Set(ctx context.Context, d Delays) error {
	var r response
	if err := f.call(ctx, request{Op: "set", Delays: &d}, &r); err != nil {
		return err
	}
	f.mu.Lock()
	f.delays = d
	f.mu.Unlock()
	return nil
}

// Crash drops every write not yet fsynced. Call it only while nothing uses the filesystem (the member is
// dead): it is what the disk holds after a power failure.
func (f *FS) Crash(ctx context.Context) (CrashReport, error) {
	var r response
	if err := f.call(ctx, request{Op: "crash"}, &r); err != nil {
		return CrashReport{}, err
	}
	if r.Crash == nil {
		return CrashReport{}, errors.New("slowfs: crash: empty answer")
	}
	return *r.Crash, nil
}

// Stats returns the helper's counters.
func (f *FS) Stats(ctx context.Context) (Stats, error) {
	var r response
	if err := f.call(ctx, request{Op: "stats"}, &r); err != nil {
		return Stats{}, err
	}
	if r.Stats == nil {
		return Stats{}, errors.New("slowfs: stats: empty answer")
	}
	return *r.Stats, nil
}

func (f *FS) call(ctx context.Context, req request, r *response) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.broken {
		return fmt.Errorf("slowfs %s: %s: the control channel was abandoned", f.opts.Mountpoint, req.Op)
	}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		if _, err := f.stdin.Write(append(b, '\n')); err != nil {
			done <- err
			return
		}
		done <- f.read(r)
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		// The helper answers in order: a late answer would be read by the next request, so the channel
		// is unusable now. Ending the helper unmounts the filesystem, which the caller sees as an error.
		f.broken = true
		f.cmd.Process.Signal(syscall.SIGTERM)
		return fmt.Errorf("slowfs %s: %s: %w", f.opts.Mountpoint, req.Op, ctx.Err())
	case <-f.exited:
		return fmt.Errorf("slowfs %s: %s: the helper has exited", f.opts.Mountpoint, req.Op)
	}
	if err != nil {
		return fmt.Errorf("slowfs %s: %s: %w", f.opts.Mountpoint, req.Op, err)
	}
	if r.Error != "" {
		return fmt.Errorf("slowfs %s: %s: %s", f.opts.Mountpoint, req.Op, r.Error)
	}
	return nil
}

func (f *FS) read(r *response) error {
	if !f.replies.Scan() {
		if err := f.replies.Err(); err != nil {
			return err
		}
		return io.ErrUnexpectedEOF
	}
	return json.Unmarshal(f.replies.Bytes(), r)
}

// Close unmounts: it closes the helper's input, which makes it unmount (waiting a few seconds for open
// files to close, then detaching lazily) and exit. If the helper does not manage, Close kills it and
// detaches the mount itself. Whatever users of the mount still run must have been stopped first. Close
// is safe to call more than once.
func (f *FS) Close(ctx context.Context) error {
	f.closeOnce.Do(func() {
		f.stdin.Close()
		wait := time.NewTimer(8 * time.Second)
		defer wait.Stop()
		select {
		case <-f.exited:
		case <-wait.C:
			f.cmd.Process.Kill()
			<-f.exited
		case <-ctx.Done():
			f.cmd.Process.Kill()
			<-f.exited
		}
		if Mounted(f.opts.Mountpoint) {
			if err := syscall.Unmount(f.opts.Mountpoint, syscall.MNT_DETACH); err != nil {
				if out, ferr := exec.Command("fusermount", "-u", "-z", f.opts.Mountpoint).CombinedOutput(); ferr != nil {
					f.closeErr = fmt.Errorf("slowfs: unmount %s: %v; fusermount: %v: %s", f.opts.Mountpoint, err, ferr, out)
				}
			}
		}
	})
	return f.closeErr
}

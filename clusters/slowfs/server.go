package slowfs

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Main serves one slowfs mount until its standard input closes, it receives SIGTERM or SIGINT, or its
// parent dies; then it unmounts and returns the exit code. It is the body of `chaosbench slowfs`:
//
//	slowfs --lower DIR --mount DIR [--seed N] [--track-unsynced]
//
// Requests arrive on stdin and answers leave on stdout, one JSON object per line; the first line out is
// {"ready":true} once the mount is up, or {"error":...}.
func Main(args []string, stdin io.Reader, stdout io.Writer) int {
	flags := flag.NewFlagSet(Command, flag.ContinueOnError)
	lower := flags.String("lower", "", "backing directory")
	mnt := flags.String("mount", "", "mount point")
	seed := flags.Uint64("seed", 0, "seed of the delay jitter")
	track := flags.Bool("track-unsynced", false, "keep undo logs of unsynced writes, so that crash can drop them")
	out := json.NewEncoder(stdout)
	fail := func(err error) int {
		out.Encode(response{Error: err.Error()})
		return 1
	}
	if err := flags.Parse(args); err != nil {
		return fail(err)
	}
	if *lower == "" || *mnt == "" {
		return fail(errors.New("slowfs: --lower and --mount are required"))
	}
	st := &state{track: *track, changed: make(chan struct{}), rng: rand.New(rand.NewPCG(*seed, 0x736c6f77)), logs: map[uint64]*undoLog{}} // "slow"
	server, err := st.mount(*lower, *mnt)
	if err != nil {
		return fail(err)
	}
	parent := os.Getppid()
	if err := out.Encode(response{Ready: true}); err != nil {
		unmount(server, *mnt)
		return 1
	}

	done := make(chan struct{})
	var once sync.Once
	stop := func() { once.Do(func() { close(done) }) }
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		select {
		case <-sigs:
			stop()
		case <-done:
		}
	}()
	go func() { // the parent's death, even if the pipe stays open somewhere
		for {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if os.Getppid() != parent {
				stop()
				return
			}
		}
	}()
	go func() {
		defer stop()
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			var req request
			if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
				out.Encode(response{Error: fmt.Sprintf("bad request: %v", err)})
				continue
			}
			out.Encode(st.handle(req))
		}
	}()
	<-done
	st.setDelays(&Delays{}) // release the requests still waiting, so that the member can let go of its files
	if err := unmount(server, *mnt); err != nil {
		fmt.Fprintln(os.Stderr, "slowfs:", err)
		return 1
	}
	return 0
}

// unmount unmounts, waiting for the member to let go of its files for a few seconds, then detaches the
// mount lazily so that it disappears as soon as the last file on it is closed.
func unmount(server *fuse.Server, mnt string) error {
	deadline := time.Now().Add(5 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = server.Unmount(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	if derr := syscall.Unmount(mnt, syscall.MNT_DETACH); derr != nil {
		return fmt.Errorf("unmount %s: %v; lazy unmount: %w", mnt, err, derr)
	}
	return nil
}

// state is the filesystem's shared state: the delays in force and the undo logs of unsynced writes.
type state struct {
	fsyncDelay, fsyncJitter atomic.Int64
	writeDelay, writeJitter atomic.Int64

	changeMu sync.Mutex
	changed  chan struct{} // closed when the delays change

	rngMu sync.Mutex
	rng   *rand.Rand

	track bool
	root  *fs.LoopbackRoot

	mu   sync.Mutex
	logs map[uint64]*undoLog // by backing inode number

	fsyncs, delayedFsyncs, writes, crashes atomic.Int64
}

func (st *state) mount(lower, mnt string) (*fuse.Server, error) {
	var s syscall.Stat_t
	if err := syscall.Stat(lower, &s); err != nil {
		return nil, fmt.Errorf("slowfs: backing directory: %w", err)
	}
	st.root = &fs.LoopbackRoot{Path: lower, Dev: uint64(s.Dev)}
	st.root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, st: st}
	}
	rootNode := st.root.NewNode(st.root, nil, "", &s)
	st.root.RootNode = rootNode
	second := time.Second
	opts := &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName:      "chaosbench-slowfs",
			Name:        "slowfs",
			DirectMount: true,
			MaxWrite:    1 << 20,
		},
		AttrTimeout:  &second,
		EntryTimeout: &second,
	}
	server, err := fs.Mount(mnt, rootNode, opts)
	if err != nil {
		return nil, fmt.Errorf("slowfs: mount %s: %w", mnt, err)
	}
	return server, nil
}

func (st *state) handle(req request) response {
	switch req.Op {
	case "set":
		if req.Delays == nil {
			return response{Error: "set: no delays"}
		}
		d := req.Delays
		if d.Fsync < 0 || d.FsyncJitter < 0 || d.Write < 0 || d.WriteJitter < 0 {
			return response{Error: "set: negative delay"}
		}
		st.setDelays(d)
		return response{}
	case "stats":
		return response{Stats: st.stats()}
	case "crash":
		if !st.track {
			return response{Error: "crash: the filesystem does not track unsynced writes (--track-unsynced)"}
		}
		rep, err := st.crash()
		if err != nil {
			return response{Error: err.Error()}
		}
		return response{Crash: &rep}
	}
	return response{Error: fmt.Sprintf("unknown op %q", req.Op)}
}

func (st *state) stats() *Stats {
	s := &Stats{Fsyncs: st.fsyncs.Load(), DelayedFsyncs: st.delayedFsyncs.Load(), Writes: st.writes.Load(),
		Crashes: st.crashes.Load()}
	st.mu.Lock()
	for _, lg := range st.logs {
		lg.mu.Lock()
		for _, e := range lg.entries {
			s.UnsyncedBytes += int64(len(e.old))
		}
		lg.mu.Unlock()
	}
	st.mu.Unlock()
	return s
}

// wait holds a request for the delay in force plus a random share of the jitter in force, and reports
// whether it held it at all. The request's interruption does not end the wait: the kernel sends FUSE an
// interrupt whenever the blocked thread gets any signal (Go's runtime sends SIGURG to preempt), and a slow
// disk does not get faster for a signal; a fatal signal ends the system call in the kernel anyway. A change
// of delays does: the wait then runs against the new ones, so a heal releases what is waiting.
func (st *state) wait(delay, jitter *atomic.Int64) bool {
	if delay.Load() == 0 && jitter.Load() == 0 {
		return false // a healthy disk: no lock on the way
	}
	st.rngMu.Lock()
	share := st.rng.Float64()
	st.rngMu.Unlock()
	start := time.Now()
	held := false
	for {
		st.changeMu.Lock()
		changed := st.changed
		st.changeMu.Unlock()
		d := time.Duration(delay.Load()) + time.Duration(share*float64(jitter.Load()))
		left := d - time.Since(start)
		if left <= 0 {
			return held
		}
		held = true
		t := time.NewTimer(left)
		select {
		case <-t.C:
			return true
		case <-changed:
			t.Stop()
		}
	}
}

// setDelays puts delays in force and wakes the requests waiting under the old ones.
func (st *state) setDelays(d *Delays) {
	st.fsyncDelay.Store(int64(d.Fsync))
	st.fsyncJitter.Store(int64(d.FsyncJitter))
	st.writeDelay.Store(int64(d.Write))
	st.writeJitter.Store(int64(d.WriteJitter))
	st.changeMu.Lock()
	close(st.changed)
	st.changed = make(chan struct{})
	st.changeMu.Unlock()
}

// undoLog holds what a file contained before the writes made since its last fsync, to restore on a crash.
// Logs are keyed by the backing file's inode number and hold a descriptor of their own on it (reopened
// through /proc/self/fd from the writer's), never a path: a file may be written after it was unlinked or
// renamed over (etcd swaps in a received snapshot database that way), and go-fuse may keep more than one
// node for an inode.
type undoLog struct {
	mu       sync.Mutex
	fd       int   // the backing file, opened read-write for the log's whole life
	syncSize int64 // the file's size at its last fsync
	entries  []undoEntry
	node     *node // to tell the kernel to drop its cache after a crash
}

type undoEntry struct {
	off int64
	old []byte // previous contents; shorter than the write where the write extended the file
}

// log returns the undo log of the file open as fd, opening one (and noting the synced size) on the first
// change since a sync.
func (st *state) log(n *node, fd int) (*undoLog, error) {
	var s syscall.Stat_t
	if err := syscall.Fstat(fd, &s); err != nil {
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if lg, ok := st.logs[s.Ino]; ok {
		return lg, nil
	}
	own, err := syscall.Open(fmt.Sprintf("/proc/self/fd/%d", fd), syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	lg := &undoLog{fd: own, syncSize: s.Size, node: n}
	st.logs[s.Ino] = lg
	return lg, nil
}

// remember saves the current contents of [off, off+size) of the file open as fd before they are
// overwritten. It returns the log locked: the caller writes, then unlocks.
func (st *state) remember(n *node, fd int, off int64, size int) (*undoLog, error) {
	lg, err := st.log(n, fd)
	if err != nil {
		return nil, err
	}
	lg.mu.Lock()
	old := make([]byte, size)
	k, err := syscall.Pread(lg.fd, old, off)
	if err != nil {
		lg.mu.Unlock()
		return nil, err
	}
	lg.entries = append(lg.entries, undoEntry{off: off, old: old[:k]})
	return lg, nil
}

// rememberTruncate saves the tail that truncating the file open as fd to size would discard.
func (st *state) rememberTruncate(n *node, fd int, size int64) error {
	var s syscall.Stat_t
	if err := syscall.Fstat(fd, &s); err != nil {
		return err
	}
	if s.Size <= size {
		_, err := st.log(n, fd) // notes the synced size, which a crash restores
		return err
	}
	lg, err := st.remember(n, fd, size, int(s.Size-size))
	if err != nil {
		return err
	}
	lg.mu.Unlock()
	return nil
}

// pending returns how many entries the log of the file open as fd has, and the file's current size.
func (st *state) pending(fd int) (ino uint64, upto int, size int64, ok bool) {
	var s syscall.Stat_t
	if err := syscall.Fstat(fd, &s); err != nil {
		return 0, 0, 0, false
	}
	st.mu.Lock()
	lg, ok := st.logs[s.Ino]
	st.mu.Unlock()
	if !ok {
		return 0, 0, 0, false
	}
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return s.Ino, len(lg.entries), s.Size, true
}

// synced drops the part of an undo log that an fsync which started after entries [0, upto) made durable.
func (st *state) synced(ino uint64, upto int, size int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	lg, ok := st.logs[ino]
	if !ok {
		return
	}
	lg.mu.Lock()
	defer lg.mu.Unlock()
	upto = min(upto, len(lg.entries))
	lg.entries = append(lg.entries[:0], lg.entries[upto:]...)
	lg.syncSize = size
	if len(lg.entries) == 0 {
		syscall.Close(lg.fd)
		delete(st.logs, ino)
	}
}

// crash restores every file to its contents and size at its last fsync, newest change first, and tells
// the kernel to forget what it cached of them.
func (st *state) crash() (CrashReport, error) {
	st.mu.Lock()
	logs := st.logs
	st.logs = map[uint64]*undoLog{}
	st.mu.Unlock()
	var rep CrashReport
	var errs []error
	for _, lg := range logs {
		lg.mu.Lock()
		for i := len(lg.entries) - 1; i >= 0; i-- {
			e := lg.entries[i]
			if _, err := syscall.Pwrite(lg.fd, e.old, e.off); err != nil {
				errs = append(errs, err)
			}
			rep.Bytes += int64(len(e.old))
		}
		if err := syscall.Ftruncate(lg.fd, lg.syncSize); err != nil {
			errs = append(errs, err)
		}
		syscall.Close(lg.fd)
		lg.entries = nil
		lg.mu.Unlock()
		rep.Files++
		lg.node.NotifyContent(0, 0)
	}
	st.crashes.Add(1)
	return rep, errors.Join(errs...)
}

// node is a loopback node whose files are slowfs files.
type node struct {
	fs.LoopbackNode
	st *state
}

var (
	_ fs.NodeOpener    = (*node)(nil)
	_ fs.NodeCreater   = (*node)(nil)
	_ fs.NodeSetattrer = (*node)(nil)
)

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &file{lf: fh.(*fs.LoopbackFile), n: n}, fl, 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ino, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	child, ok := ino.Operations().(*node)
	if !ok {
		return ino, fh, fl, 0
	}
	return ino, &file{lf: fh.(*fs.LoopbackFile), n: child}, fl, 0
}

// Setattr catches truncate(2) by path: a shrink loses data that a crash must bring back.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sf, ok := f.(*file); ok {
		return sf.Setattr(ctx, in, out)
	}
	if size, ok := in.GetSize(); ok && n.st.track && !n.IsDir() {
		path := n.EmbeddedInode().Path(nil)
		if path == "" {
			return syscall.ENOENT
		}
		fd, err := syscall.Open(filepath.Join(n.st.root.Path, path), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return fs.ToErrno(err)
		}
		err = n.st.rememberTruncate(n, fd, int64(size))
		syscall.Close(fd)
		if err != nil {
			return fs.ToErrno(err)
		}
	}
	return n.LoopbackNode.Setattr(ctx, f, in, out)
}

// file is a loopback file with delays and undo logging. It deliberately does not offer FUSE passthrough
// (PassthroughFd): with passthrough the kernel would write to the backing file directly, past the delays.
type file struct {
	lf *fs.LoopbackFile
	n  *node
}

var (
	_ fs.FileReader    = (*file)(nil)
	_ fs.FileWriter    = (*file)(nil)
	_ fs.FileFsyncer   = (*file)(nil)
	_ fs.FileReleaser  = (*file)(nil)
	_ fs.FileGetattrer = (*file)(nil)
	_ fs.FileSetattrer = (*file)(nil)
	_ fs.FileFlusher   = (*file)(nil)
	_ fs.FileAllocater = (*file)(nil)
	_ fs.FileLseeker   = (*file)(nil)
)

// fd returns the backing file's descriptor (LoopbackFile hands it out for passthrough, which slowfs does
// not use).
func (f *file) fd() int {
	fd, _ := f.lf.PassthroughFd()
	return fd
}

func (f *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return f.lf.Read(ctx, buf, off)
}

func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	st := f.n.st
	st.writes.Add(1)
	st.wait(&st.writeDelay, &st.writeJitter)
	if !st.track {
		return f.lf.Write(ctx, data, off)
	}
	lg, err := st.remember(f.n, f.fd(), off, len(data))
	if err != nil {
		return 0, fs.ToErrno(err)
	}
	defer lg.mu.Unlock()
	return f.lf.Write(ctx, data, off)
}

func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	st := f.n.st
	st.fsyncs.Add(1)
	if st.wait(&st.fsyncDelay, &st.fsyncJitter) {
		st.delayedFsyncs.Add(1)
	}
	var ino uint64
	var upto int
	var size int64
	var tracked bool
	if st.track {
		ino, upto, size, tracked = st.pending(f.fd())
	}
	if errno := f.lf.Fsync(ctx, flags); errno != 0 {
		return errno
	}
	if tracked {
		st.synced(ino, upto, size)
	}
	return 0
}

func (f *file) Release(ctx context.Context) syscall.Errno { return f.lf.Release(ctx) }

func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.lf.Getattr(ctx, out)
}

func (f *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if size, ok := in.GetSize(); ok && f.n.st.track {
		if err := f.n.st.rememberTruncate(f.n, f.fd(), int64(size)); err != nil {
			return fs.ToErrno(err)
		}
	}
	return f.lf.Setattr(ctx, in, out)
}

func (f *file) Flush(ctx context.Context) syscall.Errno { return f.lf.Flush(ctx) }

func (f *file) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	if f.n.st.track {
		// Opening the log notes the synced size, which a crash restores if the allocation grew the file.
		if _, err := f.n.st.log(f.n, f.fd()); err != nil {
			return fs.ToErrno(err)
		}
	}
	return f.lf.Allocate(ctx, off, size, mode)
}

func (f *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.lf.Lseek(ctx, off, whence)
}
